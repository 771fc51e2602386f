/* Prometheus metrics of the relay: requests by route and status, latency
 * histograms and database pool use. Counters are lock-free. */
#ifndef COMB_METRICS_H
#define COMB_METRICS_H

#include "comb/buf.h"
#include "request.h"

/* Records one answered request. */
void metrics_observe(enum route route, int status, double seconds);

/* How an incremental read (read/incremental.c) ended. */
enum inc_outcome {
	INC_OUTCOME_SHORT_CIRCUIT, /* a cursor read answered without the change query */
	INC_OUTCOME_CHANGES,       /* a cursor read that ran the change query */
	INC_OUTCOME_INITIAL,       /* a page of a first read's listing */
	INC_OUTCOME_KNOWN_IDS,     /* a known-ID read */
	INC_OUTCOME_BUSY,          /* 503 incremental_busy: admission or budget */
	INC_OUTCOME_RESET,         /* 409 incremental_reset */
	INC_OUTCOME_COUNT_
};

/* Records one incremental read's outcome. */
void metrics_incremental(enum inc_outcome outcome);

/* Appends the Prometheus text exposition of every metric. */
int metrics_render(struct relay *relay, struct comb_buf *out);

#endif
