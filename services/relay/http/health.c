/* Liveness, readiness and metrics: answered on any host. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "comb/db.h"
#include "comb/redis.h"
#include "feed/feed.h"
#include "hub/hub.h"
#include "http_int.h"
#include "metrics/metrics.h"

void handle_healthz(struct request *req)
{
	req->status = 200;
	mg_printf(req->conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
			     "Access-Control-Allow-Origin: *\r\n"
			     "Content-Length: 2\r\n\r\nok");
}

/*
 * Ready when this node can serve HTTP reads and writes: PostgreSQL
 * answers, Redis answers a PING, and the node is not stopping. The
 * capture feed's state is reported ("feed": "up" or "down") but does not
 * count: syncs wait for the feed and resync by themselves, and a capture
 * failover would otherwise take every node out of a load balancer at once.
 */
void handle_readyz(struct request *req)
{
	bool db_ok = false, redis_ok, feed_ok, draining;
	PGconn *db = comb_db_acquire(req->relay->db, 1000);
	const char *error;
	char body[256];

	if (db) {
		PGresult *res = PQexec(db, "SELECT 1");

		db_ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		PQclear(res);
		comb_db_release(req->relay->db, db, !db_ok);
	}
	redis_ok = comb_redis_ping(req->relay->redis);
	feed_ok = feed_alive();
	draining = atomic_load(&req->relay->draining);
	error = draining ? "error: shutting down" :
		!db_ok ? "error: database unavailable" :
		!redis_ok ? "error: redis unavailable" : NULL;
	snprintf(body, sizeof(body),
		 "{\"ready\":%s,%s%s%s\"database\":\"%s\",\"redis\":\"%s\","
		 "\"feed\":\"%s\",\"stopping\":%s}",
		 error ? "false" : "true", error ? "\"error\":\"" : "",
		 error ? error : "", error ? "\"," : "",
		 db_ok ? "ok" : "unavailable", redis_ok ? "ok" : "unavailable",
		 feed_ok ? "up" : "down", draining ? "true" : "false");
	http_send_json(req, error ? 503 : 200, body,
		       error ? "Retry-After: 1\r\n" : "");
}

void handle_metrics(struct request *req)
{
	struct metrics_state state = {
		.feed_alive = feed_alive(),
		.subscriptions = hub_event_subs(),
		.stopping = atomic_load(&req->relay->draining),
	};
	struct comb_buf b;

	comb_buf_init(&b, 1 << 20);
	if (metrics_render(req->relay, &state, &b)) {
		comb_buf_release(&b);
		http_send_error(req, 503, "error: metrics unavailable");
		return;
	}
	req->status = 200;
	mg_printf(req->conn,
		  "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
		  "Access-Control-Allow-Origin: *\r\nContent-Length: %zu\r\n\r\n", b.len);
	mg_write(req->conn, b.data, b.len);
	comb_buf_release(&b);
}
