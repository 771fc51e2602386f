/*
 * comb-capture's HTTP endpoint, on COMB_CAPTURE_METRICS_LISTEN (off when
 * empty): GET /metrics in the Prometheus text format (comb_capture_*), and
 * GET /healthz, 200 while the loop turns and both the database and the
 * Redis subscription are connected, 503 with what is wrong otherwise. It
 * runs in civetweb's threads and reads only struct capture_stats, which
 * the loop and the Redis thread keep up to date.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <civetweb.h>
#include <libpq-fe.h>

#include "capture.h"
#include "comb/buf.h"
#include "comb/error.h"
#include "comb/log.h"

/* A scrape is a few kilobytes; this bounds it. */
#define METRICS_MAX_BYTES (64 * 1024)

struct capture_metrics {
	struct mg_context *http;
	struct capture *cap; /* borrowed; outlives the endpoint */
};

void capture_metrics_sample(struct capture *cap, int64_t now)
{
	struct capture_stats *st = &cap->stats;

	atomic_store(&st->loop_ms, now);
	atomic_store(&st->leader, cap->leader);
	atomic_store(&st->reconnecting, cap->reconnecting);
	atomic_store(&st->db_connected,
		     cap->pg != NULL && PQstatus(cap->pg) == CONNECTION_OK);
}

/* The metrics read straight from one field of struct capture_stats. */
struct plain_metric {
	const char *name;
	const char *help;
	size_t offset; /* of an atomic_bool (a gauge) or atomic_ullong */
	bool gauge;
};

#define GAUGE(field, name, help) {name, help, offsetof(struct capture_stats, field), true}
#define COUNTER(field, name, help) {name, help, offsetof(struct capture_stats, field), false}

static const struct plain_metric plain[] = {
	GAUGE(leader, "comb_capture_leader",
	      "1 while this instance holds the capture lock"),
	GAUGE(reconnecting, "comb_capture_reconnecting",
	      "1 while a leader reconnects within its grace period"),
	GAUGE(db_connected, "comb_capture_database_connected",
	      "1 while capture has a database connection"),
	GAUGE(redis_connected, "comb_capture_redis_connected",
	      "1 while the Redis subscription for ephemeral events is live"),
	COUNTER(notifications, "comb_capture_notifications_total",
		"change notifications received from PostgreSQL"),
	COUNTER(caught_up, "comb_capture_catch_up_signals_total",
		"signals published by catch-ups after a reconnect"),
	COUNTER(rejected, "comb_capture_inputs_rejected_total",
		"notifications or ephemeral messages refused"),
	COUNTER(db_lost, "comb_capture_database_reconnects_total",
		"database connections lost (each is followed by a reconnect)"),
	COUNTER(redis_lost, "comb_capture_redis_reconnects_total",
		"Redis subscriptions lost (each is followed by a reconnect)"),
	COUNTER(epochs, "comb_capture_epochs_total",
		"epochs this instance started"),
};

static uint64_t plain_value(const struct capture_stats *st,
			    const struct plain_metric *m)
{
	const char *field = (const char *)st + m->offset;

	if (m->gauge)
		return atomic_load((const atomic_bool *)field);
	return atomic_load((const atomic_ullong *)field);
}

static int render(const struct capture *cap, struct comb_buf *b)
{
	const struct capture_stats *st = &cap->stats;
	int64_t beat = atomic_load(&st->heartbeat_unix_ms);
	unsigned int t;
	size_t i;
	int rc = 0;

	for (i = 0; !rc && i < sizeof(plain) / sizeof(plain[0]); i++)
		rc = comb_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n",
				     plain[i].name, plain[i].help, plain[i].name,
				     plain[i].gauge ? "gauge" : "counter",
				     plain[i].name, plain_value(st, &plain[i]));
	rc = rc ? rc : comb_buf_printf(b,
		"# HELP comb_capture_signals_published_total signals sent on the feed, by type (mark: a heartbeat of one community)\n"
		"# TYPE comb_capture_signals_published_total counter\n");
	for (t = 0; !rc && t < CAPTURE_STAT_TYPES; t++)
		rc = comb_buf_printf(b, "comb_capture_signals_published_total{type=\"%s\"} %llu\n",
				     t == CAPTURE_STAT_MARK ? "mark" : comb_signal_type_name(t),
				     (unsigned long long)atomic_load(&st->signals[t]));
	rc = rc ? rc : comb_buf_printf(b,
		"# HELP comb_capture_epoch_info the current epoch of this instance (1), as hex\n"
		"# TYPE comb_capture_epoch_info gauge\n"
		"comb_capture_epoch_info{epoch=\"%016llx\"} 1\n",
		(unsigned long long)atomic_load(&st->epoch));
	rc = rc ? rc : comb_buf_printf(b,
		"# HELP comb_capture_last_heartbeat_timestamp_seconds when the last heartbeat was sent (0: none yet)\n"
		"# TYPE comb_capture_last_heartbeat_timestamp_seconds gauge\n"
		"comb_capture_last_heartbeat_timestamp_seconds %lld.%03lld\n",
		(long long)(beat / 1000), (long long)(beat % 1000));
	return rc;
}

static void send_text(struct mg_connection *conn, int status,
		      const char *type, const char *body, size_t len)
{
	mg_printf(conn, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		  "Content-Length: %zu\r\nCache-Control: no-store\r\n"
		  "Connection: close\r\n\r\n", status,
		  mg_get_response_code_text(conn, status), type, len);
	mg_write(conn, body, len);
}

static int on_metrics(struct mg_connection *conn, void *arg)
{
	struct capture_metrics *m = arg;
	struct comb_buf b;

	comb_buf_init(&b, METRICS_MAX_BYTES);
	if (render(m->cap, &b))
		send_text(conn, 500, "text/plain", "out of memory\n", 14);
	else
		send_text(conn, 200, "text/plain; version=0.0.4; charset=utf-8",
			  (const char *)b.data, b.len);
	comb_buf_release(&b);
	return 200;
}

static int on_healthz(struct mg_connection *conn, void *arg)
{
	struct capture_metrics *m = arg;
	const struct capture_stats *st = &m->cap->stats;
	int beat = m->cap->cfg.capture_heartbeat_ms;
	/* The loop turns at least every heartbeat or lock retry. */
	int64_t stale = 2 * (int64_t)(beat > CAPTURE_LOCK_RETRY_MS ? beat :
				      CAPTURE_LOCK_RETRY_MS) + 1000;
	bool loop = comb_monotonic_ms() - atomic_load(&st->loop_ms) < stale;
	bool db = atomic_load(&st->db_connected);
	bool redis = atomic_load(&st->redis_connected);
	char body[160];
	int n;

	n = snprintf(body, sizeof(body), "loop %s\ndatabase %s\nredis %s\nrole %s\n",
		     loop ? "ok" : "stalled", db ? "ok" : "disconnected",
		     redis ? "ok" : "disconnected",
		     atomic_load(&st->leader) ? "leader" : "standby");
	send_text(conn, loop && db && redis ? 200 : 503, "text/plain", body,
		  (size_t)n);
	return loop && db && redis ? 200 : 503;
}

int capture_metrics_start(struct capture *cap, char *errbuf, size_t errlen)
{
	const char *options[] = {
		"listening_ports", cap->cfg.capture_metrics_listen,
		"num_threads", "2",
		"request_timeout_ms", "5000",
		NULL,
	};
	struct mg_callbacks callbacks;
	struct capture_metrics *m;
	struct mg_server_port port;
	sigset_t block, old;

	if (!*cap->cfg.capture_metrics_listen)
		return 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	m->cap = cap;
	memset(&callbacks, 0, sizeof(callbacks));
	mg_init_library(0);
	/* SIGINT and SIGTERM belong to the main loop. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	m->http = mg_start(&callbacks, m, options);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!m->http) {
		free(m);
		mg_exit_library();
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot listen on COMB_CAPTURE_METRICS_LISTEN %s",
				 cap->cfg.capture_metrics_listen);
	}
	mg_set_request_handler(m->http, "/metrics$", on_metrics, m);
	mg_set_request_handler(m->http, "/healthz$", on_healthz, m);
	cap->metrics = m;
	if (mg_get_server_ports(m->http, 1, &port) == 1)
		comb_info("metrics: listening on port %d (GET /metrics, GET /healthz)",
			  port.port);
	return 0;
}

void capture_metrics_stop(struct capture *cap)
{
	if (!cap->metrics)
		return;
	mg_stop(cap->metrics->http);
	mg_exit_library();
	free(cap->metrics);
	cap->metrics = NULL;
}
