/*
 * Request counters and latency histograms, kept in fixed arrays of atomics
 * indexed by route and status class, rendered in the Prometheus text format
 * together with the database pool's gauges.
 */
#include <stdatomic.h>

#include "metrics.h"

static const char *const route_names[ROUTE_COUNT_] = {
	[ROUTE_NIP11] = "nip11",     [ROUTE_EVENTS] = "events",
	[ROUTE_QUERY] = "query",     [ROUTE_COUNT] = "count",
	[ROUTE_HEALTHZ] = "healthz", [ROUTE_READYZ] = "readyz",
	[ROUTE_METRICS] = "metrics", [ROUTE_WEBSOCKET] = "websocket",
	[ROUTE_OTHER] = "other",
};

static const int statuses[] = {200, 400, 401, 403, 404, 409, 413, 429, 500, 503};
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]))

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
				 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

static const char *const inc_outcome_names[INC_OUTCOME_COUNT_] = {
	[INC_OUTCOME_SHORT_CIRCUIT] = "short_circuit",
	[INC_OUTCOME_CHANGES] = "changes",
	[INC_OUTCOME_INITIAL] = "initial",
	[INC_OUTCOME_KNOWN_IDS] = "known_ids",
	[INC_OUTCOME_BUSY] = "busy",
	[INC_OUTCOME_RESET] = "reset",
};

static atomic_ulong requests[ROUTE_COUNT_][NSTATUS + 1];
static atomic_ulong inc_outcomes[INC_OUTCOME_COUNT_];
static atomic_ulong latency[ROUTE_COUNT_][NBUCKETS + 1];
static atomic_ulong latency_sum_us[ROUTE_COUNT_];

void metrics_observe(enum route route, int status, double seconds)
{
	size_t s, b;

	for (s = 0; s < NSTATUS && statuses[s] != status; s++)
		;
	atomic_fetch_add(&requests[route][s], 1);
	for (b = 0; b < NBUCKETS && seconds > buckets[b]; b++)
		;
	atomic_fetch_add(&latency[route][b], 1);
	atomic_fetch_add(&latency_sum_us[route], (unsigned long)(seconds * 1e6));
}

void metrics_incremental(enum inc_outcome outcome)
{
	atomic_fetch_add(&inc_outcomes[outcome], 1);
}

int metrics_render(struct relay *relay, struct comb_buf *out)
{
	struct comb_db_stats db;
	int r, rc = 0;
	size_t s, b;

	rc |= comb_buf_puts(out, "# HELP comb_http_requests_total HTTP requests answered, by route and status.\n"
				 "# TYPE comb_http_requests_total counter\n");
	for (r = 0; r < ROUTE_COUNT_; r++) {
		for (s = 0; s <= NSTATUS; s++) {
			unsigned long n = atomic_load(&requests[r][s]);

			if (!n)
				continue;
			if (s < NSTATUS)
				rc |= comb_buf_printf(out, "comb_http_requests_total{route=\"%s\",status=\"%d\"} %lu\n",
						      route_names[r], statuses[s], n);
			else
				rc |= comb_buf_printf(out, "comb_http_requests_total{route=\"%s\",status=\"other\"} %lu\n",
						      route_names[r], n);
		}
	}
	rc |= comb_buf_puts(out, "# HELP comb_http_request_duration_seconds Time to answer a request.\n"
				 "# TYPE comb_http_request_duration_seconds histogram\n");
	for (r = 0; r < ROUTE_COUNT_; r++) {
		unsigned long cumulative = 0;

		for (b = 0; b <= NBUCKETS; b++) {
			cumulative += atomic_load(&latency[r][b]);
			if (b < NBUCKETS)
				rc |= comb_buf_printf(out, "comb_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %lu\n",
						      route_names[r], buckets[b], cumulative);
			else
				rc |= comb_buf_printf(out, "comb_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %lu\n",
						      route_names[r], cumulative);
		}
		rc |= comb_buf_printf(out, "comb_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
					   "comb_http_request_duration_seconds_count{route=\"%s\"} %lu\n",
				      route_names[r],
				      (double)atomic_load(&latency_sum_us[r]) / 1e6,
				      route_names[r], cumulative);
	}
	rc |= comb_buf_puts(out, "# HELP comb_incremental_reads_total Incremental reads, by outcome.\n"
				 "# TYPE comb_incremental_reads_total counter\n");
	for (r = 0; r < INC_OUTCOME_COUNT_; r++)
		rc |= comb_buf_printf(out, "comb_incremental_reads_total{outcome=\"%s\"} %lu\n",
				      inc_outcome_names[r], atomic_load(&inc_outcomes[r]));
	comb_db_stats(relay->db, &db);
	rc |= comb_buf_printf(out,
			      "# HELP comb_db_pool_size PostgreSQL connections allowed.\n"
			      "# TYPE comb_db_pool_size gauge\ncomb_db_pool_size %d\n"
			      "# HELP comb_db_pool_open PostgreSQL connections established.\n"
			      "# TYPE comb_db_pool_open gauge\ncomb_db_pool_open %d\n"
			      "# HELP comb_db_pool_in_use PostgreSQL connections lent out.\n"
			      "# TYPE comb_db_pool_in_use gauge\ncomb_db_pool_in_use %d\n"
			      "# HELP comb_db_pool_waits_total Acquisitions that waited for a free connection.\n"
			      "# TYPE comb_db_pool_waits_total counter\ncomb_db_pool_waits_total %ld\n"
			      "# HELP comb_db_pool_failures_total Failed connection attempts.\n"
			      "# TYPE comb_db_pool_failures_total counter\ncomb_db_pool_failures_total %ld\n",
			      db.size, db.open, db.in_use, db.waits, db.failures);
	return rc ? -1 : 0;
}
