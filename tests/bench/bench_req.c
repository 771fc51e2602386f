/*
 * The plain REQ scenarios (PROTOCOL.md section 7.1), as the reader, over
 * the l.chats kind-9 messages the loader put in the chat channel
 * (bench_chat_fixture; their ids are computed again here, not read back):
 *
 * `req-read`: per run, a fresh authenticated connection sends one
 * ["REQ","all",{"kinds":[9],"#h":[chat],"limit":l.chats}] and the clock
 * runs from the REQ to the first EVENT and to EOSE; medians of --runs.
 * Afterwards every message of the fixture must have come exactly once,
 * and nothing else. A CLOSED or a NOTICE is a failure with its text.
 *
 * `req-burst`: --conns connections spread over the nodes of --addrs, all
 * authenticated before anything is timed; then each sends
 * ["REQ","burst",{"kinds":[9],"#h":[chat],"limit":10}] in one tight loop,
 * and the clock runs from the first REQ to the last EOSE. Each answer
 * must be the ten newest messages, newest first, then EOSE. A CLOSED, a
 * NOTICE, or a connection that could not be opened, was refused or
 * closed counts as a refusal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "comb/error.h"

#define BURST_LIMIT 10
/* The receive room faulted in per burst connection before the clock: the
 * ten answers (about 5 KB each) and their EOSE. */
#define BURST_ROOM (BURST_LIMIT * 8192)

/* The ids of the fixture's chat messages, by index (oldest first). */
static int chat_ids(const struct bench_layout *l, char (**ids)[65])
{
	struct comb_event ev = {0};
	int i, rc = 0;

	*ids = calloc((size_t)l->chats, sizeof(**ids));
	if (!*ids)
		return COMB_ENOMEM;
	for (i = 0; i < l->chats && rc == 0; i++) {
		rc = bench_chat_fixture(l, i, &ev);
		memcpy((*ids)[i], ev.id, 65);
	}
	comb_event_release(&ev);
	return rc;
}

static int by_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* ---- req-read ---- */

struct read_run {
	char (*got)[65];     /* the ids of the EVENTs, in arrival order */
	size_t ngot, cap;
	double t_first, t_eose;
	bool eose, failed;
	char refusal[200];   /* a CLOSED or NOTICE */
};

static void read_message(struct bench_loop *loop, struct bench_ws *ws,
			 const char *msg, size_t len, double t)
{
	struct read_run *r = loop->ctx;

	(void)ws;
	if (bench_msg_is(msg, len, "[\"EVENT\",\"all\",")) {
		if (r->ngot == r->cap) {
			size_t ncap = r->cap ? 2 * r->cap : 16384;
			char(*p)[65] = realloc(r->got, ncap * sizeof(*p));

			if (!p) {
				r->failed = true;
				return;
			}
			r->got = p;
			r->cap = ncap;
		}
		if (!bench_event_id_of(msg, len, r->got[r->ngot]))
			snprintf(r->got[r->ngot], 65, "(no id)");
		if (r->ngot++ == 0)
			r->t_first = t;
	} else if (bench_msg_is(msg, len, "[\"EOSE\",\"all\"")) {
		r->eose = true;
		r->t_eose = t;
	} else if (bench_msg_is(msg, len, "[\"CLOSED\",") ||
		   bench_msg_is(msg, len, "[\"NOTICE\",")) {
		snprintf(r->refusal, sizeof(r->refusal), "%.*s", (int)(len < 190 ? len : 190), msg);
	}
}

static bool read_done(void *ctx)
{
	struct read_run *r = ctx;

	return r->eose || r->refusal[0] || r->failed;
}

struct one_auth {
	struct bench_loop *loop;
};

static bool one_authed(void *ctx)
{
	struct one_auth *a = ctx;

	return a->loop->authed + a->loop->closed >= 1;
}

/*
 * Checks the ids of one read against sorted (the fixture's ids, sorted):
 * each exactly once, nothing else. Returns the number of errors, the
 * first ones described in errors.
 */
static int check_read(struct read_run *r, char (*sorted)[65], int n, json_t *errors)
{
	char *seen = calloc((size_t)n, 1);
	int bad = 0, missing = 0, i;
	size_t k;

	if (!seen)
		return 1;
	for (k = 0; k < r->ngot; k++) {
		char(*hit)[65] = bsearch(r->got[k], sorted, (size_t)n, sizeof(*sorted), by_id);

		if (!hit || seen[hit - sorted]) {
			if (bad++ < 10)
				json_array_append_new(errors, json_sprintf("%s event %s",
					hit ? "repeated" : "unexpected", r->got[k]));
			continue;
		}
		seen[hit - sorted] = 1;
	}
	for (i = 0; i < n; i++)
		missing += !seen[i];
	if (missing) {
		json_array_append_new(errors, json_sprintf("%d of %d messages missing",
							   missing, n));
		bad++;
	}
	free(seen);
	return bad;
}

int bench_cmd_req_read(int argc, char **argv)
{
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	int runs = (int)bench_opt_long(argc, argv, "--runs", 3), r, rc, bad = 0;
	struct bench_layout l;
	char(*ids)[65] = NULL, req[256], chat[37];
	double first_ms[16], eose_ms[16];
	json_t *errors = json_array(), *all_first = json_array(), *all_eose = json_array();
	size_t events = 0;

	if (!addr || !host) {
		bench_log("req-read: --addr and --host are required");
		return 2;
	}
	if (runs < 1 || runs > 16)
		runs = 3;
	rc = bench_layout_from_opts(&l, argc, argv);
	rc = rc ? rc : chat_ids(&l, &ids);
	if (rc)
		goto out;
	qsort(ids, (size_t)l.chats, sizeof(*ids), by_id);
	bench_channel_id(&l, l.chat_channel, chat);
	snprintf(req, sizeof(req), "[\"REQ\",\"all\",{\"kinds\":[9],\"#h\":[\"%s\"],\"limit\":%d}]",
		 chat, l.chats);
	for (r = 0; r < runs && !bad; r++) {
		struct read_run run = {0};
		struct bench_loop loop;
		struct one_auth a = {&loop};
		struct bench_ws *ws;
		double t0;

		bench_loop_init(&loop, read_message, &a);
		ws = bench_ws_connect(&loop, addr, host, l.reader_sk, 0);
		if (!ws || bench_loop_run(&loop, one_authed, 10) || !ws->authed) {
			json_array_append_new(errors, json_sprintf("cannot authenticate: %s",
								   loop.first_error));
			bad++;
		} else {
			loop.ctx = &run;
			t0 = bench_now();
			bench_ws_send(&loop, ws, req, strlen(req));
			if (bench_loop_run(&loop, read_done, 60) || !run.eose) {
				json_array_append_new(errors, json_sprintf(
					"no EOSE (%zu events): %s%s", run.ngot, run.refusal,
					run.failed ? "out of memory" : loop.first_error));
				bad++;
			} else {
				first_ms[r] = run.ngot ? (run.t_first - t0) * 1e3 : -1;
				eose_ms[r] = (run.t_eose - t0) * 1e3;
				json_array_append_new(all_first, json_real(first_ms[r]));
				json_array_append_new(all_eose, json_real(eose_ms[r]));
				events = run.ngot;
				bad += check_read(&run, ids, l.chats, errors);
			}
		}
		bench_loop_release(&loop);
		free(run.got);
	}
	bench_print(json_pack("{s:s,s:i,s:I,s:o,s:o,s:o,s:o,s:b,s:o}",
		"command", "req-read", "expected_events", l.chats,
		"events", (json_int_t)events,
		"first_event_ms", bad ? json_null() : json_real(bench_quantile(first_ms, (size_t)r, 0.5)),
		"eose_ms", bad ? json_null() : json_real(bench_quantile(eose_ms, (size_t)r, 0.5)),
		"runs_first_event_ms", all_first, "runs_eose_ms", all_eose,
		"ok", !bad, "errors", json_incref(errors)));
out:
	if (rc)
		bench_log("req-read failed: %s", comb_strerror(rc));
	json_decref(errors);
	free(ids);
	return rc || bad ? 1 : 0;
}

/* ---- req-burst ---- */

struct burst_conn {
	int got;             /* EVENTs so far */
	bool wrong;          /* an EVENT other than the expected one */
	bool eose;
	double t_eose;
	char refusal[160];
};

struct burst {
	struct bench_loop loop;
	struct burst_conn *conns;
	int eosed, refused;
	int finished;        /* connections with their EOSE or a refusal */
	char newest[BURST_LIMIT][65];   /* the expected answer, in order */
	char first_refusal[200];
	char first_wrong[200];
};

/* Counts c's first refusal, msg (len bytes) saying what it was. */
static void burst_refuse(struct burst *b, struct burst_conn *c, const char *msg, size_t len)
{
	if (c->refusal[0])
		return;
	if (len == 0) {
		msg = "no answer";
		len = strlen(msg);
	}
	snprintf(c->refusal, sizeof(c->refusal), "%.*s", (int)(len < 150 ? len : 150), msg);
	if (!c->eose)
		b->finished++;
	if (!b->refused++)
		snprintf(b->first_refusal, sizeof(b->first_refusal), "%s", c->refusal);
}

static void burst_message(struct bench_loop *loop, struct bench_ws *ws,
			  const char *msg, size_t len, double t)
{
	struct burst *b = loop->ctx;
	struct burst_conn *c = &b->conns[ws->index];
	char id[65];

	if (bench_msg_is(msg, len, "[\"EVENT\",\"burst\",")) {
		if (c->eose || c->got >= BURST_LIMIT || !bench_event_id_of(msg, len, id) ||
		    strcmp(id, b->newest[c->got])) {
			if (!c->wrong && !b->first_wrong[0])
				snprintf(b->first_wrong, sizeof(b->first_wrong),
					 "connection %d, event %d: %.120s", ws->index, c->got, msg);
			c->wrong = true;
		}
		c->got++;
	} else if (bench_msg_is(msg, len, "[\"EOSE\",\"burst\"")) {
		if (!c->eose) {
			c->eose = true;
			c->t_eose = t;
			b->eosed++;
			if (!c->refusal[0])
				b->finished++;
		}
	} else if (bench_msg_is(msg, len, "[\"CLOSED\",") ||
		   bench_msg_is(msg, len, "[\"NOTICE\",")) {
		burst_refuse(b, c, msg, len);
	}
}

static bool burst_authed(void *ctx)
{
	struct burst *b = ctx;

	return b->loop.authed + b->loop.closed >= b->loop.n;
}

/* True when every connection has its EOSE, was refused or closed; only
 * a closed connection makes it look at each one. */
static bool burst_done(void *ctx)
{
	struct burst *b = ctx;
	int i;

	if (b->finished >= b->loop.n)
		return true;
	if (b->loop.closed == 0)
		return false;
	for (i = 0; i < b->loop.n; i++)
		if (!b->conns[i].eose && !b->conns[i].refusal[0] &&
		    b->loop.conns[i]->state != BENCH_WS_CLOSED)
			return false;
	return true;
}

int bench_cmd_req_burst(int argc, char **argv)
{
	char req[256], chat[37];
	struct bench_nodes nodes;
	int conns = (int)bench_opt_long(argc, argv, "--conns", 1000);
	struct burst b = {0};
	struct bench_layout l;
	char(*ids)[65] = NULL;
	double t0, t_last, *lat = NULL;
	json_t *errors = json_array();
	int i, k, rc, wrong = 0, nlat = 0;

	if (!bench_nodes_from_opts(&nodes, argc, argv) || conns < 1) {
		bench_log("req-burst: --addrs and --hosts (as many) are required");
		return 2;
	}
	rc = bench_layout_from_opts(&l, argc, argv);
	rc = rc ? rc : chat_ids(&l, &ids);
	b.conns = calloc((size_t)conns, sizeof(*b.conns));
	lat = calloc((size_t)conns, sizeof(*lat));
	if (rc == 0 && (!b.conns || !lat))
		rc = COMB_ENOMEM;
	if (rc == 0 && l.chats < BURST_LIMIT)
		rc = COMB_EINVAL;
	if (rc)
		goto out;
	for (k = 0; k < BURST_LIMIT; k++)
		memcpy(b.newest[k], ids[l.chats - 1 - k], 65);
	bench_channel_id(&l, l.chat_channel, chat);
	snprintf(req, sizeof(req), "[\"REQ\",\"burst\",{\"kinds\":[9],\"#h\":[\"%s\"],\"limit\":%d}]",
		 chat, BURST_LIMIT);

	/* Every connection authenticated first, handshakes kept bounded. */
	bench_loop_init(&b.loop, burst_message, &b);
	for (i = 0; i < conns; i++) {
		if (!bench_ws_connect(&b.loop, nodes.addr[i % nodes.n],
				      nodes.host[i % nodes.n], l.reader_sk, i % nodes.n)) {
			b.refused += conns - i;
			json_array_append_new(errors, json_sprintf("connection %d: %s", i,
								   b.loop.first_error));
			break;
		}
		if (i % 100 == 99)
			bench_loop_run(&b.loop, NULL, 0.05);
	}
	if (bench_loop_run(&b.loop, burst_authed, 60))
		json_array_append_new(errors, json_sprintf("only %d of %d authenticated",
							   b.loop.authed, b.loop.n));
	for (i = 0; i < b.loop.n; i++) {
		if (!b.loop.conns[i]->authed)
			burst_refuse(&b, &b.conns[i], b.loop.conns[i]->close_reason,
				     strlen(b.loop.conns[i]->close_reason));
		else if (bench_ws_prefault(b.loop.conns[i], BURST_ROOM))
			rc = COMB_ENOMEM;
	}
	if (rc) {
		bench_loop_release(&b.loop);
		goto out;
	}

	/* The burst: every REQ in one loop, then every answer. */
	t0 = t_last = bench_now();
	for (i = 0; i < b.loop.n; i++)
		if (b.loop.conns[i]->authed && b.loop.conns[i]->state == BENCH_WS_OPEN)
			bench_ws_send(&b.loop, b.loop.conns[i], req, strlen(req));
	if (bench_loop_run(&b.loop, burst_done, 60))
		json_array_append_new(errors, json_sprintf("%d of %d reached EOSE within 60 s",
							   b.eosed, conns));
	for (i = 0; i < b.loop.n; i++) {
		struct burst_conn *c = &b.conns[i];

		if (!c->eose && !c->refusal[0] && b.loop.conns[i]->close_reason[0])
			burst_refuse(&b, c, b.loop.conns[i]->close_reason,
				     strlen(b.loop.conns[i]->close_reason));
		if (c->eose) {
			lat[nlat++] = (c->t_eose - t0) * 1e3;
			if (c->t_eose > t_last)
				t_last = c->t_eose;
		}
		if (c->wrong || (c->eose && c->got != BURST_LIMIT))
			wrong++;
	}
	if (b.first_wrong[0])
		json_array_append_new(errors, json_sprintf("wrong answer: %s", b.first_wrong));
	if (wrong)
		json_array_append_new(errors, json_sprintf("%d wrong answers", wrong));
	bench_print(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:o,s:o,s:o,s:s,s:b,s:o}",
		"command", "req-burst", "connections", conns, "nodes", nodes.n,
		"authenticated", b.loop.authed, "eose", b.eosed, "refused", b.refused,
		"wrong_answers", wrong,
		"all_eose_ms", b.eosed == conns ? json_real((t_last - t0) * 1e3) : json_null(),
		"eose_p50_ms", nlat ? json_real(bench_quantile(lat, (size_t)nlat, 0.5)) : json_null(),
		"eose_p99_ms", nlat ? json_real(bench_quantile(lat, (size_t)nlat, 0.99)) : json_null(),
		"first_refusal", b.first_refusal,
		"ok", b.eosed == conns && b.refused == 0 && wrong == 0 && json_array_size(errors) == 0,
		"errors", json_incref(errors)));
	if (b.eosed != conns || b.refused || wrong || json_array_size(errors))
		rc = COMB_EINVAL;
	bench_loop_release(&b.loop);
out:
	if (rc && rc != COMB_EINVAL)
		bench_log("req-burst failed: %s", comb_strerror(rc));
	json_decref(errors);
	free(ids);
	free(b.conns);
	free(lat);
	return rc ? 1 : 0;
}
