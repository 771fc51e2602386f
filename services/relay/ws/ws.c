/*
 * civetweb's WebSocket callbacks (see ws.h).
 *
 * Admission happens in begin_request because civetweb's connect handler
 * can only accept or drop an upgrade, not answer it: begin_request runs
 * for every request before civetweb picks a handler, so it can send the
 * 404 JSON answer itself and stop there. The community it resolved is
 * kept in a thread-local for the ready handler, which civetweb calls on
 * the same worker thread once the handshake is done.
 *
 * A connection slot (the node-wide cap and the client address's share of
 * it; the client address of client_addr.h) is claimed under ws.mu in
 * begin_request, so simultaneous upgrades
 * cannot overshoot either cap, and given back in end_request, which
 * civetweb calls on the same thread once the request (for an upgrade: the
 * whole connection) is over.
 *
 * Every frame the relay sends goes through the session's outbox, except
 * the echo of a client's close frame, which is written at once (after any
 * write in progress) because civetweb closes the socket as soon as the
 * data handler returns 0. Message size and arrival time are bounded by
 * civetweb itself (websocket_max_message_size and
 * websocket_message_timeout_ms, comb's patch; main.c sets them), before
 * any payload is buffered.
 */
#include "ws.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_addr/client_addr.h"
#include "comb/error.h"
#include "comb/netaddr.h"
#include "comb/log.h"
#include "feed/feed.h"
#include "metrics/metrics.h"
#include "protocol_limits.h"
#include "request/request.h"
#include "session/session.h"
#include "ws_int.h"

/* How long a closing connection waits for its last frames to leave. */
#define CLOSE_DRAIN_MS 2000

/* One accepted connection: the transport's state around its session. */
struct ws_conn {
	struct ws_conn *next, *prev;   /* every connection, for the reaper */
	struct mg_connection *conn;
	struct ws_session *session;
	struct comb_buf message;       /* a fragmented message so far */
	int message_opcode;
	bool in_message;
	bool timed_out;                /* the auth timeout closed it */
	bool shut;                     /* its socket was shut down */
	bool busy;                     /* a message is being handled */
	bool going_away;               /* ws_drain ends it */
	bool away_queued;              /* its 1001 close is queued */
	char addr[COMB_NETADDR_TEXT];  /* its client address (client_addr.h) */
	struct timespec away_at;       /* when it was queued */
};

/* How many connections one client address holds. */
struct ws_addr_count {
	char addr[COMB_NETADDR_TEXT];
	int n;
};

static struct {
	pthread_mutex_t mu;            /* guards the list, the slots and stop */
	pthread_cond_t cond;
	struct ws_conn *head;
	atomic_int active;             /* slots claimed (changed under mu) */
	int cap;
	int per_addr;                  /* slots one client address may hold */
	struct ws_addr_count *addrs;   /* cap entries; n == 0: free */
	bool stop;
	bool started;
	bool draining;                 /* ws_drain ran: upgrades refused */
	pthread_t reaper;
	struct relay *relay;
} ws = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
};

/* What begin_request resolved for the upgrade this thread is handling. */
static _Thread_local struct {
	bool valid;
	struct community community;
	bool claimed;                  /* holds a slot for addr */
	char addr[COMB_NETADDR_TEXT];
} upgrade;

int ws_connections(void)
{
	return atomic_load(&ws.active);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The Host header lowercased without its port, as http/http.c binds it. */
static void host_of(struct mg_connection *conn, char *out, size_t outlen)
{
	const char *h = mg_get_header(conn, "Host");
	size_t i;

	if (!h)
		h = "";
	for (i = 0; h[i] && h[i] != ':' && i + 1 < outlen; i++)
		out[i] = (char)tolower((unsigned char)h[i]);
	out[i] = '\0';
}

/* Claims a slot for a connection from addr; false when the node or the
 * address is at its cap. */
static bool slot_claim(const char *addr)
{
	struct ws_addr_count *e = NULL;
	bool ok = false;
	int i;

	pthread_mutex_lock(&ws.mu);
	if (atomic_load(&ws.active) >= ws.cap)
		goto out;
	/* Fewer than cap slots are held, so a free entry exists. */
	for (i = 0; i < ws.cap; i++) {
		if (ws.addrs[i].n > 0 && !strcmp(ws.addrs[i].addr, addr)) {
			e = &ws.addrs[i];
			break;
		}
		if (!e && ws.addrs[i].n == 0)
			e = &ws.addrs[i];
	}
	if (e->n >= ws.per_addr)
		goto out;
	if (e->n++ == 0)
		snprintf(e->addr, sizeof(e->addr), "%s", addr);
	atomic_fetch_add(&ws.active, 1);
	ok = true;
out:
	pthread_mutex_unlock(&ws.mu);
	return ok;
}

static void slot_release(const char *addr)
{
	int i;

	pthread_mutex_lock(&ws.mu);
	for (i = 0; i < ws.cap; i++) {
		if (ws.addrs[i].n > 0 && !strcmp(ws.addrs[i].addr, addr)) {
			ws.addrs[i].n--;
			atomic_fetch_sub(&ws.active, 1);
			break;
		}
	}
	pthread_mutex_unlock(&ws.mu);
}

bool ws_is_upgrade(const struct mg_connection *conn)
{
	const char *up = mg_get_header(conn, "Upgrade");

	return up && strcasestr(up, "websocket");
}

int ws_begin_request(struct mg_connection *conn)
{
	struct relay *relay = mg_get_user_data(mg_get_context(conn));
	struct request req = {
		.relay = relay,
		.conn = conn,
		.info = mg_get_request_info(conn),
	};
	char addr[COMB_NETADDR_TEXT];
	struct timespec t0;
	PGconn *db;
	int rc;

	upgrade.valid = false;
	if (!ws_is_upgrade(conn))
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	host_of(conn, req.host, sizeof(req.host));
	if (atomic_load(&relay->draining)) {
		http_send_error(&req, 503, "error: shutting down");
		goto refused;
	}
	if (!req.info->local_uri || strcmp(req.info->local_uri, "/")) {
		http_send_error(&req, 404, "not found");
		goto refused;
	}
	db = comb_db_acquire(relay->db, 2000);
	if (!db) {
		http_send_unavailable(&req, "database");
		goto refused;
	}
	rc = community_lookup(db, req.host, &upgrade.community);
	comb_db_release(relay->db, db, rc == COMB_EUNAVAIL && comb_db_conn_lost(db));
	if (rc == COMB_EUNAVAIL) {
		http_send_unavailable(&req, "database");
		goto refused;
	}
	if (rc) {
		http_send_error(&req, 404, "unknown community");
		goto refused;
	}
	client_addr_of(conn, addr, sizeof(addr));
	if (!slot_claim(addr)) {
		http_send_error(&req, 503, "error: too many connections");
		goto refused;
	}
	snprintf(upgrade.addr, sizeof(upgrade.addr), "%s", addr);
	upgrade.claimed = true;
	upgrade.valid = true;
	return 0;
refused:
	metrics_observe(ROUTE_WEBSOCKET, req.status, seconds_since(&t0));
	return req.status;
}

void ws_end_request(const struct mg_connection *conn, int status)
{
	(void)conn;
	(void)status;
	if (upgrade.claimed)
		slot_release(upgrade.addr);
	upgrade.claimed = false;
}

static void go_away_locked(struct ws_conn *wc);

/* The outbox's transport (session.h): civetweb's write of frames that
 * waits for the client, and its write of frames the socket takes at
 * once. */
static int conn_write(void *conn, int opcode, const struct iovec *payloads,
		      int count)
{
	metrics_add(METRIC_WS_FRAMES_WAITED, count);
	return mg_websocket_write_frames(conn, opcode, payloads, count);
}

static int conn_write_now(void *conn, int opcode, const struct iovec *payloads,
			  int count)
{
	int n = mg_websocket_write_frames_now(conn, opcode, payloads, count);

	if (n > 0)
		metrics_add(METRIC_WS_FRAMES_AT_ONCE, count);
	return n;
}

static int on_connect(const struct mg_connection *conn, void *cbdata)
{
	(void)conn;
	(void)cbdata;
	/* begin_request admitted it (or answered and stopped already). */
	return upgrade.valid ? 0 : 1;
}

static void on_ready(struct mg_connection *conn, void *cbdata)
{
	struct relay *relay = cbdata;
	const char *host = mg_get_header(conn, "Host");
	struct ws_conn *wc = calloc(1, sizeof(*wc));
	struct ws_transport transport = {
		.write = conn_write, .write_now = conn_write_now, .conn = conn,
	};

	if (wc && upgrade.valid)
		wc->session = ws_session_new(relay, &upgrade.community,
					     host ? host : "", &transport);
	upgrade.valid = false;
	if (!wc || !wc->session) {
		comb_error("websocket: cannot set up a connection: out of memory");
		free(wc);
		mg_websocket_write(conn, WS_OP_CLOSE, "\x03\xf3", 2); /* 1011 */
		return;
	}
	wc->conn = conn;
	snprintf(wc->addr, sizeof(wc->addr), "%s", upgrade.addr);
	comb_buf_init(&wc->message, (size_t)relay->cfg.max_message_length);
	mg_set_user_connection_data(conn, wc);
	pthread_mutex_lock(&ws.mu);
	wc->next = ws.head;
	if (ws.head)
		ws.head->prev = wc;
	ws.head = wc;
	pthread_mutex_unlock(&ws.mu);
	metrics_observe(ROUTE_WEBSOCKET, 101, 0);
	metrics_add(METRIC_WS_CONNECTIONS, 1);
	/* Follow the community's signals before its first REQ arrives. */
	feed_watch(wc->session->community.id);
	ws_session_start(wc->session);
	pthread_mutex_lock(&ws.mu);
	if (ws.draining)
		go_away_locked(wc);
	pthread_mutex_unlock(&ws.mu);
}

/* Queues the close 1001 "going away" of a connection that ws_drain ends,
 * unless a message is being handled on it or EVENTs it sent still wait for
 * their OK: handle_message and ws_drain's loop close it once those are
 * answered, so that the OK of a write in progress reaches the client
 * before the close frame. The caller holds ws.mu. */
static void go_away_locked(struct ws_conn *wc)
{
	int writing;

	wc->going_away = true;
	if (wc->busy || wc->away_queued)
		return;
	pthread_mutex_lock(&wc->session->mu);
	writing = wc->session->writes_in_flight;
	pthread_mutex_unlock(&wc->session->mu);
	if (writing > 0)
		return;
	ws_outbox_close(wc->session->outbox, WS_CLOSE_GOING_AWAY, "going away");
	clock_gettime(CLOCK_MONOTONIC, &wc->away_at);
	wc->away_queued = true;
}

/* Ends the connection from the relay's side: NOTICE (when given), a close
 * frame, a short wait for both to leave. Returns 0 for civetweb. */
static int close_with(struct ws_conn *wc, uint16_t code, const char *notice,
		      const char *reason)
{
	struct ws_outbox *ob = wc->session->outbox;

	if (notice)
		ws_send_notice(wc->session, notice, WS_PUSH_RESERVED);
	ws_outbox_close(ob, code, reason);
	ws_outbox_drain(ob, CLOSE_DRAIN_MS);
	return 0;
}

/* Handles one complete message. */
static void message(struct ws_conn *wc, int opcode, const char *data, size_t len)
{
	if (opcode == WS_OP_BINARY) {
		ws_send_notice(wc->session, "invalid: binary messages are not supported",
			       WS_PUSH_WAIT);
		return;
	}
	ws_session_handle(wc->session, wc->addr, data, len);
}

/* Handles one complete message unless the connection is going away (the
 * client then gets the close frame and nothing of the message happens),
 * marked busy for ws_drain meanwhile. */
static void handle_message(struct ws_conn *wc, int opcode, const char *data,
			   size_t len)
{
	bool skip;

	pthread_mutex_lock(&ws.mu);
	skip = wc->going_away;
	wc->busy = !skip;
	pthread_mutex_unlock(&ws.mu);
	if (skip)
		return;
	message(wc, opcode, data, len);
	pthread_mutex_lock(&ws.mu);
	wc->busy = false;
	if (wc->going_away)
		go_away_locked(wc);
	pthread_mutex_unlock(&ws.mu);
}

/* civetweb has checked the message's size against max_message_length
 * already, so a failed append is out of memory. */
static int out_of_memory(struct ws_conn *wc)
{
	comb_buf_release(&wc->message);
	return close_with(wc, WS_CLOSE_INTERNAL, NULL, "out of memory");
}

static int on_data(struct mg_connection *conn, int bits, char *data,
		   size_t len, void *cbdata)
{
	struct ws_conn *wc = mg_get_user_connection_data(conn);
	int opcode = bits & 0x0f;
	bool fin = bits & 0x80;

	(void)cbdata;
	if (!wc)
		return 0;
	switch (opcode) {
	case WS_OP_CLOSE:
		/* Echo the client's status code; then civetweb closes. */
		ws_outbox_close_now(wc->session->outbox, data, len >= 2 ? 2 : 0);
		return 0;
	case WS_OP_PING:
		ws_outbox_push(wc->session->outbox, WS_OP_PONG, data, len, WS_PUSH_WAIT);
		return 1;
	case WS_OP_PONG:
		return 1;
	default:
		break;
	}
	/* After the relay began closing, only the client's close matters. */
	if (ws_outbox_closed(wc->session->outbox))
		return 0;
	if (opcode == WS_OP_TEXT || opcode == WS_OP_BINARY) {
		if (wc->in_message)
			return close_with(wc, WS_CLOSE_PROTOCOL, NULL,
					  "new message inside a fragmented one");
		if (fin) {
			handle_message(wc, opcode, data, len);
			return 1;
		}
		comb_buf_reset(&wc->message);
		if (comb_buf_append(&wc->message, data, len))
			return out_of_memory(wc);
		wc->in_message = true;
		wc->message_opcode = opcode;
		return 1;
	}
	if (opcode != WS_OP_CONTINUATION)
		return close_with(wc, WS_CLOSE_PROTOCOL, NULL, "unknown opcode");
	if (!wc->in_message)
		return close_with(wc, WS_CLOSE_PROTOCOL, NULL,
				  "continuation without a message");
	if (comb_buf_append(&wc->message, data, len))
		return out_of_memory(wc);
	if (fin) {
		wc->in_message = false;
		handle_message(wc, wc->message_opcode, wc->message.data,
			       wc->message.len);
		/* A large message's buffer is not kept for an idle connection. */
		if (wc->message.cap > 65536)
			comb_buf_release(&wc->message);
		else
			comb_buf_reset(&wc->message);
	}
	return 1;
}

static void on_close(const struct mg_connection *conn, void *cbdata)
{
	struct ws_conn *wc = mg_get_user_connection_data(conn);

	(void)cbdata;
	if (!wc)
		return;
	pthread_mutex_lock(&ws.mu);
	if (wc->prev)
		wc->prev->next = wc->next;
	else
		ws.head = wc->next;
	if (wc->next)
		wc->next->prev = wc->prev;
	pthread_mutex_unlock(&ws.mu);
	mg_set_user_connection_data(conn, NULL);
	metrics_add(METRIC_WS_CONNECTIONS, -1);
	ws_session_free(wc->session);
	comb_buf_release(&wc->message);
	free(wc);
}

/* Closes connections that stayed unauthenticated too long, whatever pings
 * they answer or send: the NOTICE and close frame go through the outbox
 * (a polite client's answer ends the connection in on_data), and
 * CLOSE_DRAIN_MS later the socket is shut down, which ends the connection
 * and frees its thread even if the client ignores the close frame. The
 * connection stays on the list until on_close, which runs before civetweb
 * closes the socket, so the shutdown never reaches another connection. */
static void *reaper_main(void *arg)
{
	struct timespec deadline;
	struct ws_conn *wc;

	(void)arg;
	pthread_mutex_lock(&ws.mu);
	while (!ws.stop) {
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += 1;
		pthread_cond_timedwait(&ws.cond, &ws.mu, &deadline);
		for (wc = ws.head; wc && !ws.stop; wc = wc->next) {
			double age = seconds_since(&wc->session->connected_at);

			if (wc->timed_out) {
				if (!wc->shut &&
				    age >= WS_AUTH_TIMEOUT_S + CLOSE_DRAIN_MS / 1000.0) {
					mg_websocket_shutdown(wc->conn);
					wc->shut = true;
				}
				continue;
			}
			if (ws_session_authenticated(wc->session) ||
			    age < WS_AUTH_TIMEOUT_S)
				continue;
			wc->timed_out = true;
			ws_send_notice(wc->session, "auth-required: authentication timeout",
				       WS_PUSH_RESERVED);
			ws_outbox_close(wc->session->outbox, WS_CLOSE_POLICY,
					"authentication timeout");
		}
	}
	pthread_mutex_unlock(&ws.mu);
	return NULL;
}

int ws_start(struct relay *relay, char *errbuf, size_t errlen)
{
	int threads = relay->cfg.num_threads, err, rc;

	ws.cap = comb_max_connections(threads);
	ws.per_addr = relay->cfg.max_connections_per_ip;
	ws.addrs = calloc((size_t)ws.cap, sizeof(*ws.addrs));
	if (!ws.addrs)
		return comb_fail(errbuf, errlen, COMB_ENOMEM,
				 "cannot allocate the connection table");
	ws.relay = relay;
	ws.stop = false;
	pthread_cond_init(&ws.cond, NULL);
	rc = feed_live_start(relay, errbuf, errlen);
	if (rc)
		goto fail;
	err = pthread_create(&ws.reaper, NULL, reaper_main, NULL);
	if (err) {
		feed_live_stop();
		rc = comb_fail(errbuf, errlen, COMB_EIO,
			       "cannot start the websocket reaper: %s", strerror(err));
		goto fail;
	}
	ws.started = true;
	comb_info("websocket: at most %d connections, %d per client address (num_threads %d)",
		  ws.cap, ws.per_addr, threads);
	return 0;
fail:
	free(ws.addrs);
	ws.addrs = NULL;
	return rc;
}

int ws_drain(int timeout_ms)
{
	struct timespec t0, deadline;
	struct ws_conn *wc;
	int left = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_mutex_lock(&ws.mu);
	ws.draining = true;
	for (wc = ws.head; wc; wc = wc->next)
		go_away_locked(wc);
	while (ws.head && seconds_since(&t0) * 1000 < timeout_ms) {
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_nsec += 50 * 1000000L;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&ws.cond, &ws.mu, &deadline);
		/* Writes answered meanwhile: their connections close now. A
		 * client that ignores the close frame loses its socket
		 * CLOSE_DRAIN_MS later, as after the auth timeout. */
		for (wc = ws.head; wc; wc = wc->next) {
			go_away_locked(wc);
			if (wc->away_queued && !wc->busy && !wc->shut &&
			    seconds_since(&wc->away_at) * 1000 >= CLOSE_DRAIN_MS) {
				mg_websocket_shutdown(wc->conn);
				wc->shut = true;
			}
		}
	}
	for (wc = ws.head; wc; wc = wc->next)
		left++;
	pthread_mutex_unlock(&ws.mu);
	return left;
}

void ws_register(struct mg_context *ctx, struct relay *relay)
{
	mg_set_websocket_handler(ctx, "/", on_connect, on_ready, on_data,
				 on_close, relay);
}

void ws_stop(void)
{
	if (!ws.started)
		return;
	pthread_mutex_lock(&ws.mu);
	ws.stop = true;
	pthread_cond_signal(&ws.cond);
	pthread_mutex_unlock(&ws.mu);
	pthread_join(ws.reaper, NULL);
	feed_live_stop();
	pthread_cond_destroy(&ws.cond);
	free(ws.addrs);
	ws.addrs = NULL;
	ws.started = false;
}
