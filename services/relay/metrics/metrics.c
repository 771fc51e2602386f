/*
 * Request counters and latency histograms, kept in fixed arrays of atomics
 * indexed by route and status, and the relay's own counters and gauges,
 * kept the same way with a fixed list of label values each (anything else
 * counts as "other"), rendered in the Prometheus text format together with
 * the database pool's and the revision cache's figures.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "comb/clock.h"
#include "metrics.h"
#include "revcache/revcache.h"

static const char *const route_names[ROUTE_COUNT_] = {
	[ROUTE_NIP11] = "nip11",     [ROUTE_EVENTS] = "events",
	[ROUTE_QUERY] = "query",     [ROUTE_COUNT] = "count",
	[ROUTE_HEALTHZ] = "healthz", [ROUTE_READYZ] = "readyz",
	[ROUTE_METRICS] = "metrics", [ROUTE_WEBSOCKET] = "websocket",
	[ROUTE_OTHER] = "other",
};

static const int statuses[] = {101, 200, 400, 401, 403, 404, 408, 409, 413,
			       429, 500, 503};
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]))

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
				 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

static atomic_ulong requests[ROUTE_COUNT_][NSTATUS + 1];
static atomic_ulong latency[ROUTE_COUNT_][NBUCKETS + 1];
static atomic_ulong latency_sum_us[ROUTE_COUNT_];

static atomic_long values[METRIC_COUNT_];

/* Label values of the labelled counters; the last one is "other". */
static const char *const resync_reasons[] = {
	"change feed interrupted", "access changed", "too many held changes",
	"slow consumer", "sync set too large", "artifact left the sync", "other",
};
static const char *const write_outcomes[] = {
	"accepted", "duplicate", "blocked", "rate-limited", "invalid", "pow",
	"restricted", "auth-required", "error", "other",
};
static const char *const incremental_outcomes[] = {
	"changes", "short_circuit", "initial", "known_ids",
	"incremental_busy", "incremental_reset",
	"incremental_bad_cursor", "incremental_bad_request",
	"incremental_unavailable", "other",
};
#define NREASONS (sizeof(resync_reasons) / sizeof(resync_reasons[0]))
#define NWRITES (sizeof(write_outcomes) / sizeof(write_outcomes[0]))
#define NINCREMENTAL (sizeof(incremental_outcomes) / sizeof(incremental_outcomes[0]))

static atomic_ulong resyncs[NREASONS];
static atomic_ulong writes[NWRITES];
static atomic_ulong incrementals[NINCREMENTAL];
static atomic_ullong feed_epoch;
static atomic_llong last_beat_ms;  /* CLOCK_MONOTONIC; 0: none yet */

/* The index of the first of n names that text is (len bytes), else of
 * the last ("other"). */
static size_t label_index(const char *const *names, size_t n,
			  const char *text, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < n; i++) {
		if (strlen(names[i]) == len && !memcmp(names[i], text, len))
			return i;
	}
	return n - 1;
}

void metrics_add(enum metric m, long delta)
{
	atomic_fetch_add(&values[m], delta);
}

void metrics_closed(const char *message)
{
	static const char prefix[] = "resync: ";

	if (!strcmp(message, "error: connection memory budget exceeded"))
		atomic_fetch_add(&values[METRIC_WS_BUDGET_CLOSES], 1);
	if (strncmp(message, prefix, sizeof(prefix) - 1))
		return;
	message += sizeof(prefix) - 1;
	atomic_fetch_add(&resyncs[label_index(resync_reasons, NREASONS, message,
					      strlen(message))], 1);
}

void metrics_write(const char *message)
{
	const char *colon = strchr(message, ':');
	size_t i = *message ? label_index(write_outcomes, NWRITES, message,
					  colon ? (size_t)(colon - message) : strlen(message)) : 0;

	if (*message && i == 0)
		i = NWRITES - 1;  /* "accepted" is never a prefix */
	atomic_fetch_add(&writes[i], 1);
}

void metrics_incremental(const char *outcome)
{
	atomic_fetch_add(&incrementals[label_index(incremental_outcomes, NINCREMENTAL,
						   outcome, strlen(outcome))], 1);
}

static atomic_ulong feed_epochs;

void metrics_feed_epoch(uint64_t epoch)
{
	atomic_store(&feed_epoch, epoch);
	atomic_fetch_add(&feed_epochs, 1);
}

void metrics_feed_beat(void)
{
	atomic_store(&last_beat_ms, comb_monotonic_ms());
}

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

/* Appends one labelled counter family. */
static int render_labelled(struct comb_buf *out, const char *name, const char *help,
			   const char *label, const char *const *names,
			   atomic_ulong *counts, size_t n)
{
	int rc = comb_buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n",
				 name, help, name);
	size_t i;

	for (i = 0; i < n; i++)
		rc |= comb_buf_printf(out, "%s{%s=\"%s\"} %lu\n", name, label,
				      names[i], atomic_load(&counts[i]));
	return rc;
}

/* The WebSocket, sync, feed, write and incremental-read figures. */
static int render_relay(const struct metrics_state *state, struct comb_buf *out)
{
	int64_t beat = atomic_load(&last_beat_ms);
	int rc = 0;

	rc |= comb_buf_printf(out,
			      "# HELP comb_ws_connections WebSocket connections open.\n"
			      "# TYPE comb_ws_connections gauge\ncomb_ws_connections %ld\n"
			      "# HELP comb_ws_subscriptions Plain REQ subscriptions receiving live events.\n"
			      "# TYPE comb_ws_subscriptions gauge\ncomb_ws_subscriptions %ld\n"
			      "# HELP comb_ws_frames_total WebSocket frames written: at once by the thread that produced them (at_once), or after waiting for the client (waited: by the connection's writer thread, for frames the socket could not take at once or that came after others waiting, or by the thread streaming a snapshot or stored events to its own client).\n"
			      "# TYPE comb_ws_frames_total counter\ncomb_ws_frames_total{path=\"at_once\"} %ld\n"
			      "comb_ws_frames_total{path=\"waited\"} %ld\n"
			      "# HELP comb_syncs Syncs open, by mode.\n"
			      "# TYPE comb_syncs gauge\ncomb_syncs{mode=\"current\"} %ld\n"
			      "comb_syncs{mode=\"resumable\"} %ld\n"
			      "# HELP comb_resumable_reads_total Live reads for resumable syncs, by whether they found changes; one read answers every sync waiting with the same cursor.\n"
			      "# TYPE comb_resumable_reads_total counter\ncomb_resumable_reads_total{found=\"changes\"} %ld\n"
			      "comb_resumable_reads_total{found=\"none\"} %ld\n"
			      "# HELP comb_ws_held_bytes Bytes the WebSocket subscriptions of this node hold beside their outboxes (ids sent, held events, pages, filters), counted against each connection's budget and the node's ceiling.\n"
			      "# TYPE comb_ws_held_bytes gauge\ncomb_ws_held_bytes %ld\n"
			      "# HELP comb_ws_budget_closes_total Subscriptions closed with error: connection memory budget exceeded.\n"
			      "# TYPE comb_ws_budget_closes_total counter\ncomb_ws_budget_closes_total %ld\n"
			      "# HELP comb_stopping 1 while the node drains for a stop.\n"
			      "# TYPE comb_stopping gauge\ncomb_stopping %d\n",
			      atomic_load(&values[METRIC_WS_CONNECTIONS]),
			      state->subscriptions,
			      atomic_load(&values[METRIC_WS_FRAMES_AT_ONCE]),
			      atomic_load(&values[METRIC_WS_FRAMES_WAITED]),
			      atomic_load(&values[METRIC_SYNCS]),
			      atomic_load(&values[METRIC_RESUMABLE_SYNCS]),
			      atomic_load(&values[METRIC_RESUMABLE_READS]),
			      atomic_load(&values[METRIC_RESUMABLE_READS_EMPTY]),
			      atomic_load(&values[METRIC_WS_HELD_BYTES]),
			      atomic_load(&values[METRIC_WS_BUDGET_CLOSES]),
			      state->stopping ? 1 : 0);
	rc |= render_labelled(out, "comb_resync_closes_total",
			      "Syncs and subscriptions closed with resync:, by reason.",
			      "reason", resync_reasons, resyncs, NREASONS);
	rc |= comb_buf_printf(out,
			      "# HELP comb_feed_alive 1 while capture heartbeats arrive (within three intervals).\n"
			      "# TYPE comb_feed_alive gauge\ncomb_feed_alive %d\n"
			      "# HELP comb_feed_heartbeat_age_seconds Time since the last capture heartbeat (-1: none yet).\n"
			      "# TYPE comb_feed_heartbeat_age_seconds gauge\ncomb_feed_heartbeat_age_seconds %.3f\n"
			      "# HELP comb_feed_epoch_info The capture epoch followed, in hex (always 1).\n"
			      "# TYPE comb_feed_epoch_info gauge\ncomb_feed_epoch_info{epoch=\"%016" PRIx64 "\"} 1\n"
			      "# HELP comb_feed_epochs_total Capture epochs followed (each change after the first resyncs every sync).\n"
			      "# TYPE comb_feed_epochs_total counter\ncomb_feed_epochs_total %ld\n"
			      "# HELP comb_feed_signals_total Capture messages received (heartbeats and marks included).\n"
			      "# TYPE comb_feed_signals_total counter\ncomb_feed_signals_total %ld\n"
			      "# HELP comb_feed_gaps_total Lost signals detected in a community (a seq gap or a mark ahead).\n"
			      "# TYPE comb_feed_gaps_total counter\ncomb_feed_gaps_total %ld\n"
			      "# HELP comb_feed_heartbeat_losses_total Times no heartbeat arrived for three intervals.\n"
			      "# TYPE comb_feed_heartbeat_losses_total counter\ncomb_feed_heartbeat_losses_total %ld\n",
			      state->feed_alive ? 1 : 0,
			      beat ? (double)(comb_monotonic_ms() - beat) / 1000 : -1.0,
			      (uint64_t)atomic_load(&feed_epoch),
			      (long)atomic_load(&feed_epochs),
			      atomic_load(&values[METRIC_FEED_SIGNALS]),
			      atomic_load(&values[METRIC_FEED_GAPS]),
			      atomic_load(&values[METRIC_FEED_LOSSES]));
	rc |= render_labelled(out, "comb_writes_total",
			      "Events written (POST /events and WebSocket EVENT), by the prefix of the answer.",
			      "outcome", write_outcomes, writes, NWRITES);
	rc |= render_labelled(out, "comb_incremental_reads_total",
			      "Incremental reads, by outcome (the error code when refused).",
			      "outcome", incremental_outcomes, incrementals, NINCREMENTAL);
	return rc;
}

/* The read router's share (comb/readroute.h): reads by server, waits,
 * fallbacks, and each standby's state. Returns 0 or a comb_buf error. */
static int render_reads(struct relay *relay, struct comb_buf *out)
{
	struct comb_read_stats st;
	int rc, i;

	comb_read_stats(relay->reads, &st);
	rc = comb_buf_printf(out,
			     "# HELP comb_read_standbys Streaming standbys configured for reads.\n"
			     "# TYPE comb_read_standbys gauge\ncomb_read_standbys %d\n"
			     "# HELP comb_read_primary_total Reads served by the primary.\n"
			     "# TYPE comb_read_primary_total counter\ncomb_read_primary_total %ld\n"
			     "# HELP comb_read_waits_total Reads that waited for a standby to replay their position.\n"
			     "# TYPE comb_read_waits_total counter\ncomb_read_waits_total %ld\n"
			     "# HELP comb_read_fallbacks_total Reads sent to the primary because no standby had their position in time.\n"
			     "# TYPE comb_read_fallbacks_total counter\ncomb_read_fallbacks_total %ld\n"
			     "# HELP comb_read_standby_reads_total Reads served by a standby.\n"
			     "# TYPE comb_read_standby_reads_total counter\n"
			     "# HELP comb_read_standby_lag_seconds How far a standby's replay was behind the primary at its last sample.\n"
			     "# TYPE comb_read_standby_lag_seconds gauge\n"
			     "# HELP comb_read_standby_in_rotation 1 while a standby serves reads.\n"
			     "# TYPE comb_read_standby_in_rotation gauge\n"
			     "# HELP comb_read_standby_reachable 1 when a standby's last sample succeeded.\n"
			     "# TYPE comb_read_standby_reachable gauge\n",
			     st.standbys, st.primary_served, st.waits, st.fallbacks);
	for (i = 0; i < st.standbys; i++) {
		const struct comb_read_standby_stats *s = &st.standby[i];
		char name[sizeof(s->name)];
		size_t k;

		/* a label value: no quote or backslash */
		for (k = 0; k + 1 < sizeof(name) && s->name[k]; k++)
			name[k] = s->name[k] == '"' || s->name[k] == '\\' ? '_' : s->name[k];
		name[k] = '\0';
		rc |= comb_buf_printf(out,
				      "comb_read_standby_reads_total{standby=\"%s\"} %ld\n"
				      "comb_read_standby_lag_seconds{standby=\"%s\"} %.3f\n"
				      "comb_read_standby_in_rotation{standby=\"%s\"} %d\n"
				      "comb_read_standby_reachable{standby=\"%s\"} %d\n",
				      name, s->served, name, (double)s->lag_ms / 1000.0,
				      name, s->in_rotation, name, s->reachable);
	}
	return rc;
}

int metrics_render(struct relay *relay, const struct metrics_state *state,
		   struct comb_buf *out)
{
	struct comb_db_stats db;
	struct revcache_stats rev;
	struct revcache_warm_stats warm;
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
	rc |= render_reads(relay, out);
	revcache_get_stats(relay->revisions, &rev);
	rc |= comb_buf_printf(out,
			      "# HELP comb_revision_cache_hits_total Stored events whose bytes came from the cache.\n"
			      "# TYPE comb_revision_cache_hits_total counter\ncomb_revision_cache_hits_total %lu\n"
			      "# HELP comb_revision_cache_misses_total Stored events whose bytes were read from PostgreSQL.\n"
			      "# TYPE comb_revision_cache_misses_total counter\ncomb_revision_cache_misses_total %lu\n"
			      "# HELP comb_revision_cache_evictions_total Events evicted to stay within the bound.\n"
			      "# TYPE comb_revision_cache_evictions_total counter\ncomb_revision_cache_evictions_total %lu\n"
			      "# HELP comb_revision_cache_bytes Bytes the cache holds, bookkeeping included.\n"
			      "# TYPE comb_revision_cache_bytes gauge\ncomb_revision_cache_bytes %zu\n"
			      "# HELP comb_revision_cache_entries Events the cache holds.\n"
			      "# TYPE comb_revision_cache_entries gauge\ncomb_revision_cache_entries %zu\n"
			      "# HELP comb_revision_cache_max_bytes The cache's bound (COMB_REVISION_CACHE_MB).\n"
			      "# TYPE comb_revision_cache_max_bytes gauge\ncomb_revision_cache_max_bytes %zu\n",
			      rev.hits, rev.misses, rev.evictions, rev.bytes, rev.entries,
			      rev.max_bytes);
	revcache_warm_get_stats(&warm);
	rc |= comb_buf_printf(out,
			      "# HELP comb_revision_cache_warm_events Stored events the warm at start-up put in the cache (COMB_REVISION_CACHE_WARM_MB).\n"
			      "# TYPE comb_revision_cache_warm_events gauge\ncomb_revision_cache_warm_events %lu\n"
			      "# HELP comb_revision_cache_warm_bytes What those events cost the cache, bookkeeping included.\n"
			      "# TYPE comb_revision_cache_warm_bytes gauge\ncomb_revision_cache_warm_bytes %zu\n"
			      "# HELP comb_revision_cache_warm_seconds How long the warm ran, or has run so far.\n"
			      "# TYPE comb_revision_cache_warm_seconds gauge\ncomb_revision_cache_warm_seconds %.3f\n"
			      "# HELP comb_revision_cache_warm_running 1 while the warm runs.\n"
			      "# TYPE comb_revision_cache_warm_running gauge\ncomb_revision_cache_warm_running %d\n",
			      warm.events, warm.bytes, (double)warm.ms / 1000.0, warm.running ? 1 : 0);
	rc |= render_relay(state, out);
	return rc ? -1 : 0;
}
