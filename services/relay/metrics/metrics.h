/*
 * Prometheus metrics of the relay (docs/operations.md, "Relay metrics"):
 * HTTP requests by route and status with latency histograms, the
 * database pool and revision cache, and the counters and gauges the
 * relay's parts update where things happen (one call each: WebSocket
 * connections, open syncs, resync closes, capture signals, incremental
 * read outcomes, write outcomes). Every update is a lock-free atomic.
 */
#ifndef COMB_METRICS_H
#define COMB_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "comb/buf.h"
#include "request/request.h"

/* Records one answered request (101 for an accepted WebSocket upgrade). */
void metrics_observe(enum route route, int status, double seconds);

/* The counters and gauges metrics_add() changes. */
enum metric {
	METRIC_WS_CONNECTIONS,       /* gauge: WebSocket connections open */
	METRIC_SYNCS,                /* gauge: syncs open ("current") */
	METRIC_RESUMABLE_SYNCS,      /* gauge: resumable syncs open */
	METRIC_RESUMABLE_READS,      /* counter: live reads for resumable syncs
				      * that found changes */
	METRIC_RESUMABLE_READS_EMPTY, /* counter: those that found none (the
				      * horizon behind a signalled change, a
				      * quiet interval, a failure) */
	METRIC_FEED_SIGNALS,         /* counter: capture messages received */
	METRIC_FEED_GAPS,            /* counter: a community's gap or mark ahead */
	METRIC_FEED_LOSSES,          /* counter: heartbeats lost (three intervals) */
	METRIC_WS_FRAMES_AT_ONCE,    /* counter: frames the pushing thread wrote */
	METRIC_WS_FRAMES_WAITED,     /* counter: frames written after waiting for the client */
	METRIC_WS_HELD_BYTES,        /* gauge: bytes WebSocket subscriptions hold */
	METRIC_WS_BUDGET_CLOSES,     /* counter: subscriptions closed over a
				      * connection's (or the node's) budget */
	METRIC_COUNT_,
};

/* Adds delta to m. Any thread. */
void metrics_add(enum metric m, long delta);

/* Counts a CLOSED sent for a subscription or sync; messages starting with
 * "resync: " are counted by their reason, the connection budget's
 * (session.h) in METRIC_WS_BUDGET_CLOSES. */
void metrics_closed(const char *message);

/* Counts one write by the prefix of its result message ("" accepted). */
void metrics_write(const char *message);

/* Counts one incremental read by outcome: "changes" (a cursor read that
 * ran the change query), "short_circuit" (one answered without it),
 * "initial" (a page of a first read), "known_ids", or the error code sent
 * ("incremental_busy", "incremental_reset", ...). */
void metrics_incremental(const char *outcome);

/* Records the capture epoch now followed (and counts it). */
void metrics_feed_epoch(uint64_t epoch);

/* Records that a liveness heartbeat arrived now. */
void metrics_feed_beat(void);

/* What the metrics need from parts above this layer, gathered by the
 * /metrics handler. */
struct metrics_state {
	bool feed_alive;             /* a heartbeat within three intervals */
	long subscriptions;          /* plain live REQs registered */
	bool stopping;               /* draining for a stop */
};

/* Appends the Prometheus text exposition of every metric. */
int metrics_render(struct relay *relay, const struct metrics_state *state,
		   struct comb_buf *out);

#endif
