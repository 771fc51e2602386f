/*
 * `comb-bench ingest`: artifact creates by the admin into the ingest
 * channel over --conns authenticated WebSocket connections, each keeping
 * at most --window events unacknowledged. Events are signed before the
 * clock starts; the clock runs from the first EVENT to the last OK. Every
 * OK must accept its event, and afterwards the database must hold exactly
 * one head per event in the ingest channel. --series NAME (default
 * "ingest") names the artifacts, so that the ingest can run again with
 * other ones; what it stored is counted as the heads added meanwhile.
 *
 * `comb-bench chat-ingest`: the same with kind-9 chat messages of the
 * same size by the admin in the ingest channel; afterwards the database
 * must hold exactly one stored kind-9 event per message there.
 *
 * `comb-bench verify-floor`: what every relay must spend on each of the
 * ingest's events before storing it, without a socket or a database: the
 * relay's own parse of the `EVENT` message (comb_event_message_parse) and
 * the check of its id and signature (comb_event_verify), on one thread,
 * over --events creates of the same size. Best of --runs runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "bench.h"
#include "comb/error.h"

/* Builds and signs n chat messages by the admin in the ingest channel,
 * created now. */
static int chat_events(const struct bench_layout *l, struct comb_event *evs, size_t n)
{
	char h[37];
	int64_t now = bench_unix_time();
	size_t i;
	int rc = 0;

	bench_channel_id(l, BENCH_CH_INGEST, h);
	for (i = 0; i < n && rc == 0; i++)
		rc = bench_chat_message(&evs[i], l->admin_pk, h, now, 0xc4a717e5ULL + i);
	return rc ? rc : bench_sign_all(evs, n, l->admin_sk, 2);
}

int bench_ingest_events(const struct bench_layout *l, const char *series,
			struct comb_event *evs, size_t n)
{
	char d[37], h[37];
	int64_t now = bench_unix_time();
	size_t i;
	int rc = 0;

	bench_channel_id(l, BENCH_CH_INGEST, h);
	for (i = 0; i < n && rc == 0; i++) {
		bench_artifact_id(l, series, (int)i, d);
		rc = bench_revision(&evs[i], l->admin_pk, d, h, "create", NULL, now,
				    0x17e50000ULL + i);
	}
	return rc ? rc : bench_sign_all(evs, n, l->admin_sk, 2);
}

/* Appends ev's `EVENT` message to frame; json is scratch. Returns 0 or
 * COMB_ENOMEM. */
static int event_frame(const struct comb_event *ev, struct comb_buf *json,
		       struct comb_buf *frame)
{
	int rc;

	comb_buf_reset(json);
	rc = comb_event_to_json(ev, json);
	return rc ? rc : comb_buf_printf(frame, "[\"EVENT\",%s]", json->data);
}

struct pending {
	char id[65];
	size_t index;
};

static int by_id(const void *a, const void *b)
{
	return strcmp(((const struct pending *)a)->id, ((const struct pending *)b)->id);
}

struct ingest {
	struct bench_loop loop;
	char **frames;
	size_t *frame_len;
	size_t n, done, refused;
	struct pending *ids;       /* sorted by id */
	double *t_send, *t_ok;
	int conns, window;
	size_t *next;              /* per connection: next event index */
	int *inflight;
	char first_refusal[200];
};

static void send_more(struct ingest *in, struct bench_ws *ws)
{
	int c = ws->index;

	while (in->inflight[c] < in->window && in->next[c] < in->n) {
		size_t i = in->next[c];

		in->next[c] += (size_t)in->conns;
		in->inflight[c]++;
		in->t_send[i] = bench_now();
		if (bench_ws_send(&in->loop, ws, in->frames[i], in->frame_len[i]))
			return;
	}
}

static void ingest_message(struct bench_loop *loop, struct bench_ws *ws,
			   const char *msg, size_t len, double t)
{
	struct ingest *in = loop->ctx;
	struct pending key, *p;

	if (len < 72 || memcmp(msg, "[\"OK\",\"", 7))
		return;
	memcpy(key.id, msg + 7, 64);
	key.id[64] = '\0';
	p = bsearch(&key, in->ids, in->n, sizeof(key), by_id);
	if (!p || in->t_ok[p->index] > 0)
		return;
	in->t_ok[p->index] = t;
	in->done++;
	in->inflight[ws->index]--;
	if (memcmp(msg + 71, "\",true,", 7)) {
		if (!in->refused++)
			snprintf(in->first_refusal, sizeof(in->first_refusal), "%.*s",
				 (int)(len < 190 ? len : 190), msg);
	}
	send_more(in, ws);
}

static bool ingest_done(void *ctx)
{
	struct ingest *in = ctx;

	return in->done >= in->n || in->loop.closed > 0;
}

static bool ingest_authed(void *ctx)
{
	struct ingest *in = ctx;

	return in->loop.authed + in->loop.closed >= in->conns;
}

/* What the ingest stored in the ingest channel: live artifact heads, or
 * with chat, kind-9 events; -1 when the database cannot say. */
static long stored_in_ingest(const char *url, const struct bench_layout *l, bool chat)
{
	PGconn *db = PQconnectdb(url);
	const char *params[2];
	char community[24], h[37];
	PGresult *res;
	long n = -1;

	if (PQstatus(db) != CONNECTION_OK) {
		PQfinish(db);
		return -1;
	}
	snprintf(community, sizeof(community), "%ld", l->community);
	bench_channel_id(l, BENCH_CH_INGEST, h);
	params[0] = community;
	params[1] = h;
	res = PQexecParams(db, chat ? "SELECT count(*) FROM events WHERE community_id = $1"
				      " AND channel_id = $2::uuid AND kind = 9 AND NOT deleted"
				    : "SELECT count(*) FROM artifact_heads WHERE community_id = $1"
				      " AND channel_id = $2::uuid AND NOT deleted",
			   2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	PQfinish(db);
	return n;
}

/* Either ingest (chat: the kind-9 one); the command's name is what it
 * prints. */
static int ingest_run(int argc, char **argv, bool chat)
{
	const char *command = chat ? "chat-ingest" : "ingest";
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	const char *url = bench_opt(argc, argv, "--db", NULL);
	const char *series = bench_opt(argc, argv, "--series", "ingest");
	struct ingest in = {0};
	struct bench_layout l;
	struct comb_event *evs = NULL;
	struct comb_buf json;
	double t0 = 0, t_end = 0, *lat = NULL, sign_s;
	size_t i;
	long stored = -1, before;
	int c, rc;

	comb_buf_init(&json, 1 << 20);
	if (!addr || !host || !url) {
		bench_log("%s: --addr, --host and --db are required", command);
		return 2;
	}
	in.conns = (int)bench_opt_long(argc, argv, "--conns", 4);
	in.window = (int)bench_opt_long(argc, argv, "--window", 64);
	rc = bench_layout_from_opts(&l, argc, argv);
	in.n = (size_t)bench_opt_long(argc, argv, "--events", l.artifacts);
	evs = calloc(in.n, sizeof(*evs));
	in.frames = calloc(in.n, sizeof(*in.frames));
	in.frame_len = calloc(in.n, sizeof(*in.frame_len));
	in.ids = calloc(in.n, sizeof(*in.ids));
	in.t_send = calloc(in.n, sizeof(*in.t_send));
	in.t_ok = calloc(in.n, sizeof(*in.t_ok));
	lat = calloc(in.n, sizeof(*lat));
	in.next = calloc((size_t)in.conns, sizeof(*in.next));
	in.inflight = calloc((size_t)in.conns, sizeof(*in.inflight));
	if (rc == 0 && (!evs || !in.frames || !in.frame_len || !in.ids || !in.t_send ||
			!in.t_ok || !lat || !in.next || !in.inflight))
		rc = COMB_ENOMEM;
	if (rc)
		goto out;
	sign_s = bench_now();
	rc = chat ? chat_events(&l, evs, in.n) : bench_ingest_events(&l, series, evs, in.n);
	sign_s = bench_now() - sign_s;
	for (i = 0; i < in.n && rc == 0; i++) {
		struct comb_buf frame;

		comb_buf_init(&frame, 1 << 20);
		rc = event_frame(&evs[i], &json, &frame);
		in.frames[i] = comb_buf_detach(&frame, &in.frame_len[i]);
		memcpy(in.ids[i].id, evs[i].id, 65);
		in.ids[i].index = i;
	}
	if (rc)
		goto out;
	qsort(in.ids, in.n, sizeof(*in.ids), by_id);
	/* what the channel held before (0 on the first run) */
	before = stored_in_ingest(url, &l, chat);

	bench_loop_init(&in.loop, ingest_message, &in);
	for (c = 0; c < in.conns; c++)
		if (!bench_ws_connect(&in.loop, addr, host, l.admin_sk, 0))
			break;
	if (bench_loop_run(&in.loop, ingest_authed, 20) || in.loop.authed != in.conns) {
		bench_log("%s: authentication failed: %s", command, in.loop.first_error);
		rc = COMB_EAUTH;
		bench_loop_release(&in.loop);
		goto out;
	}
	t0 = bench_now();
	for (c = 0; c < in.conns; c++) {
		in.next[c] = (size_t)c;
		send_more(&in, in.loop.conns[c]);
	}
	bench_loop_run(&in.loop, ingest_done, 600);
	{
		double last = t0;
		size_t nl = 0;

		for (i = 0; i < in.n; i++) {
			if (in.t_ok[i] <= 0)
				continue;
			if (in.t_ok[i] > last)
				last = in.t_ok[i];
			lat[nl++] = (in.t_ok[i] - in.t_send[i]) * 1e3;
		}
		t_end = last;
		stored = stored_in_ingest(url, &l, chat);
		if (stored >= 0 && before >= 0)
			stored -= before;
		else
			stored = -1;
		bench_print(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:o,s:o,s:f,s:i,s:s,s:b}",
			"command", command, "events", (int)in.n, "conns", in.conns,
			"window", in.window, "acknowledged", (int)in.done,
			"refused", (int)in.refused, "seconds", t_end - t0,
			"events_per_s", (double)in.done / (t_end - t0),
			"ok_latency_p50_ms", nl ? json_real(bench_quantile(lat, nl, 0.5)) : json_null(),
			"ok_latency_p99_ms", nl ? json_real(bench_quantile(lat, nl, 0.99)) : json_null(),
			"client_sign_s", sign_s, "stored", (int)stored,
			"first_refusal", in.first_refusal,
			"ok", in.done == in.n && in.refused == 0 && stored == (long)in.n));
		if (in.done != in.n || in.refused || stored != (long)in.n)
			rc = COMB_EINVAL;
	}
	bench_loop_release(&in.loop);
out:
	if (rc && rc != COMB_EINVAL)
		bench_log("%s failed: %s", command, comb_strerror(rc));
	for (i = 0; evs && i < in.n; i++) {
		comb_event_release(&evs[i]);
		free(in.frames[i]);
	}
	free(evs);
	free(in.frames);
	free(in.frame_len);
	free(in.ids);
	free(in.t_send);
	free(in.t_ok);
	free(in.next);
	free(in.inflight);
	free(lat);
	comb_buf_release(&json);
	return rc ? 1 : 0;
}

int bench_cmd_ingest(int argc, char **argv)
{
	return ingest_run(argc, argv, false);
}

int bench_cmd_chat_ingest(int argc, char **argv)
{
	return ingest_run(argc, argv, true);
}

int bench_cmd_verify_floor(int argc, char **argv)
{
	struct bench_layout l;
	struct comb_event *evs = NULL;
	struct comb_buf *frames = NULL, json;
	char why[128];
	double best = 0;
	size_t n = 0, i;
	int runs, r, rc = bench_layout_from_opts(&l, argc, argv);

	comb_buf_init(&json, 1 << 16);
	runs = (int)bench_opt_long(argc, argv, "--runs", 3);
	if (rc == 0) {
		n = (size_t)bench_opt_long(argc, argv, "--events", l.artifacts);
		evs = calloc(n, sizeof(*evs));
		frames = calloc(n, sizeof(*frames));
		rc = evs && frames ? bench_ingest_events(&l, "verify", evs, n) : COMB_ENOMEM;
	}
	for (i = 0; i < n && rc == 0; i++) {
		comb_buf_init(&frames[i], 8192);
		rc = event_frame(&evs[i], &json, &frames[i]);
	}
	for (r = 0; r < runs && rc == 0; r++) {
		double t0 = bench_now(), s;

		for (i = 0; i < n && rc == 0; i++) {
			struct comb_event ev;

			rc = comb_event_message_parse(&ev, frames[i].data, frames[i].len);
			rc = rc ? rc : comb_event_verify(&ev, why, sizeof(why));
			comb_event_release(&ev);
		}
		s = bench_now() - t0;
		if (r == 0 || s < best)
			best = s;
	}
	if (rc == 0)
		bench_print(json_pack("{s:s,s:i,s:i,s:f,s:f,s:f}", "command", "verify-floor",
				      "events", (int)n, "runs", runs, "seconds", best,
				      "us_per_event", best * 1e6 / (double)n,
				      "events_per_s", (double)n / best));
	else
		bench_log("verify-floor failed: %s", comb_strerror(rc));
	for (i = 0; frames && i < n; i++)
		comb_buf_release(&frames[i]);
	for (i = 0; evs && i < n; i++)
		comb_event_release(&evs[i]);
	free(frames);
	free(evs);
	comb_buf_release(&json);
	return rc ? 1 : 0;
}
