/* Prometheus metrics of the relay: requests by route and status, latency
 * histograms and database pool use. Counters are lock-free. */
#ifndef COMB_METRICS_H
#define COMB_METRICS_H

#include "comb/buf.h"
#include "request.h"

/* Records one answered request. */
void metrics_observe(enum route route, int status, double seconds);

/* Appends the Prometheus text exposition of every metric. */
int metrics_render(struct relay *relay, struct comb_buf *out);

#endif
