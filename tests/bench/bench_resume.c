/*
 * The resumable-sync scenarios (PROTOCOL.md section 7.3: a REQ whose only
 * filter is {"artifact":"changes"} with an incremental cursor, answered
 * by CHANGES frames, EOSE, then live CHANGES frames), as the reader:
 *
 * `resume-catchup`: a client that missed the writes of incr-delta
 * reconnects with the cursor it held before them (--cursor-file). Per
 * run, the same catch-up over HTTP (POST /query, limit 1000, the first
 * token signed before the clock; the floor) and over a fresh
 * authenticated WebSocket, clock from the REQ to EOSE; medians of
 * --runs. Both must hold exactly the same items: the upserts (by
 * revision id) and removals (by reason and channel), the latest per
 * artifact.
 *
 * `resume-live`: --subs resumable syncs of the live channel spread over
 * the nodes of --addrs, opened from a current cursor, then --edits
 * updates by the admin over another connection, one at a time as in
 * sync-live: each sent, its OK awaited, and its CHANGES frame awaited at
 * every subscriber before the next. The figure is, per subscriber and
 * edit, the frame's arrival minus the writer's OK. Every subscriber must
 * get every edit exactly once, each in a frame of its own.
 *
 * `resume-reconnect`: --clients clients, each holding the current cursor
 * of one of --scopes channels (read over HTTP beforehand), connect,
 * authenticate and open their resumable sync all at once, each REQ sent
 * the moment its connection is authenticated; the clock runs from the
 * first connection to the last EOSE. Every catch-up must be empty (no
 * item: nothing changed) and end in EOSE. With --db, pg_stat_statements
 * is reset just before the reconnect and its total afterwards is the
 * database time the reconnect used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "bench.h"
#include "comb/error.h"

#define CURSOR_CAP 1024
#define MAX_PAGES 64
/* Room faulted in before a catch-up is timed: more than the reference
 * delta's 3.3 MB answer. */
#define CATCHUP_PREFAULT (16u << 20)

/*
 * Reads over HTTP from cursor (NULL: the first read) with scope h (NULL:
 * none) and limit until `more` is false, the first token signed before
 * the clock: *seconds from the first request to the last answer. The
 * answers go to pages (at most MAX_PAGES, each initialized by the caller),
 * their number to *npages, the last cursor to final.
 */
static int http_catchup(struct bench_http *c, const struct bench_layout *l,
			const char *cursor, const char *h, int limit,
			struct comb_buf *pages, int *npages, double *seconds,
			char final[CURSOR_CAP], json_t *errors)
{
	struct comb_buf body;
	char url[256], *auth;
	bool more = true;
	double t0;
	int status = 0, rc = 0;

	comb_buf_init(&body, 65536);
	snprintf(url, sizeof(url), "http://%s/query", c->host);
	snprintf(final, CURSOR_CAP, "%s", cursor ? cursor : "");
	*npages = 0;
	rc = bench_incremental_body(&body, cursor, h, limit);
	auth = rc ? NULL : bench_nip98(l->reader_sk, url, "POST", body.data, body.len);
	rc = rc ? rc : bench_buf_prefault(&pages[0], CATCHUP_PREFAULT);
	t0 = bench_now();
	while (rc == 0 && more && *npages < MAX_PAGES) {
		if (!auth)
			auth = bench_nip98(l->reader_sk, url, "POST", body.data, body.len);
		rc = auth ? bench_http_request(c, "POST", "/query", body.data, body.len, auth,
					       &status, &pages[*npages]) : COMB_ENOMEM;
		free(auth);
		auth = NULL;
		if (rc)
			break;
		(*npages)++;
		if (status != 200 ||
		    !bench_incremental_tail(pages[*npages - 1].data, pages[*npages - 1].len,
					    final, CURSOR_CAP, &more)) {
			json_array_append_new(errors, json_sprintf(
				"incremental read answered %d: %.200s", status,
				pages[*npages - 1].data));
			rc = COMB_EINVAL;
			break;
		}
		rc = bench_incremental_body(&body, final, h, limit);
	}
	*seconds = bench_now() - t0;
	if (rc == 0 && more) {
		json_array_append_new(errors, json_sprintf("more than %d pages", MAX_PAGES));
		rc = COMB_EINVAL;
	}
	free(auth);
	comb_buf_release(&body);
	return rc;
}

/* ---- items: what an incremental answer says about each artifact ---- */

struct item {
	char d[37];
	char id[65];         /* an upsert's revision; "" for a removal */
	char what[160];      /* "upsert <id>" or "remove <reason> <h>" */
	size_t order;        /* position in the answers, for "the latest" */
};

struct items {
	struct item *v;
	size_t n, cap;
	size_t raw;          /* items before keeping the latest per artifact */
};

/* Appends the changes of one answer object; false on a malformed one. */
static bool items_add(struct items *it, json_t *answer)
{
	json_t *changes = json_object_get(answer, "changes");
	size_t i;

	if (!json_is_array(changes) || !json_is_string(json_object_get(answer, "cursor")))
		return false;
	for (i = 0; i < json_array_size(changes); i++) {
		json_t *ch = json_array_get(changes, i), *ev = json_object_get(ch, "event");
		const char *op = json_string_value(json_object_get(ch, "op"));
		const char *d = bench_change_d(ch);
		struct item *e;

		if (!op || !d)
			return false;
		if (it->n == it->cap) {
			size_t ncap = it->cap ? 2 * it->cap : 1024;
			struct item *p = realloc(it->v, ncap * sizeof(*p));

			if (!p)
				return false;
			it->v = p;
			it->cap = ncap;
		}
		e = &it->v[it->n];
		snprintf(e->d, sizeof(e->d), "%s", d);
		e->id[0] = '\0';
		if (!strcmp(op, "upsert")) {
			const char *id = json_string_value(json_object_get(ev, "id"));

			if (!id || strlen(id) != 64)
				return false;
			memcpy(e->id, id, 65);
			snprintf(e->what, sizeof(e->what), "upsert %s", id);
		} else {
			snprintf(e->what, sizeof(e->what), "%s %s %s", op,
				 json_string_value(json_object_get(ch, "reason")) ?
				 json_string_value(json_object_get(ch, "reason")) : "(no reason)",
				 json_string_value(json_object_get(ch, "h")) ?
				 json_string_value(json_object_get(ch, "h")) : "(no h)");
		}
		e->order = it->raw++;
		it->n++;
	}
	return true;
}

static int by_d_then_order(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	int c = strcmp(x->d, y->d);

	return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* Keeps the latest item per artifact, sorted by d. */
static void items_latest(struct items *it)
{
	size_t i, out = 0;

	qsort(it->v, it->n, sizeof(*it->v), by_d_then_order);
	for (i = 0; i < it->n; i++) {
		if (i + 1 < it->n && !strcmp(it->v[i].d, it->v[i + 1].d))
			continue;
		it->v[out++] = it->v[i];
	}
	it->n = out;
}

/* Compares the latest items of the WebSocket and the HTTP catch-up;
 * returns the number of differences, the first ones described in
 * errors. */
static int items_compare(const struct items *ws, const struct items *http, json_t *errors)
{
	size_t i = 0, j = 0;
	int diff = 0;

	while (i < ws->n || j < http->n) {
		int c = i == ws->n ? 1 : j == http->n ? -1 : strcmp(ws->v[i].d, http->v[j].d);

		if (c == 0 && !strcmp(ws->v[i].what, http->v[j].what)) {
			i++;
			j++;
			continue;
		}
		if (diff++ < 10)
			json_array_append_new(errors, c < 0 ?
				json_sprintf("WebSocket only: %s %s", ws->v[i].d, ws->v[i].what) :
				c > 0 ? json_sprintf("HTTP only: %s %s", http->v[j].d, http->v[j].what) :
				json_sprintf("%s: WebSocket %s, HTTP %s", ws->v[i].d, ws->v[i].what,
					     http->v[j].what));
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
	return diff;
}

/* ---- resume-catchup ---- */

struct catchup {
	struct bench_loop loop;
	struct items items;
	struct comb_buf saved[MAX_PAGES]; /* the CHANGES frames, read after EOSE */
	int frames;
	bool last_more;      /* `more` of the last frame */
	bool eose, malformed;
	double t_eose;
	char refusal[200];
};

static void catchup_message(struct bench_loop *loop, struct bench_ws *ws,
			    const char *msg, size_t len, double t)
{
	struct catchup *cu = loop->ctx;

	(void)ws;
	if (bench_msg_is(msg, len, "[\"CHANGES\",\"catchup\",")) {
		/* kept as it came: parsing it here would time this client's JSON
		 * parser, which the HTTP floor's timing leaves out too */
		if (cu->frames == MAX_PAGES) {
			cu->malformed = true;
			return;
		}
		if (!cu->saved[cu->frames].data)
			comb_buf_init(&cu->saved[cu->frames], len + 1);
		if (comb_buf_append(&cu->saved[cu->frames], msg, len))
			cu->malformed = true;
		cu->frames++;
	} else if (bench_msg_is(msg, len, "[\"EOSE\",\"catchup\"")) {
		cu->eose = true;
		cu->t_eose = t;
	} else if (bench_msg_is(msg, len, "[\"CLOSED\",") ||
		   bench_msg_is(msg, len, "[\"NOTICE\",")) {
		snprintf(cu->refusal, sizeof(cu->refusal), "%.*s", (int)(len < 190 ? len : 190), msg);
	}
}

/* Reads the frames kept by catchup_message into cu->items (after the
 * timing) and frees them. */
static void catchup_parse(struct catchup *cu)
{
	int f;

	for (f = 0; f < cu->frames; f++) {
		json_t *arr = json_loadb(cu->saved[f].data, cu->saved[f].len, 0, NULL);
		json_t *answer = json_array_get(arr, 2);

		cu->last_more = json_is_true(json_object_get(answer, "more"));
		if (!items_add(&cu->items, answer))
			cu->malformed = true;
		json_decref(arr);
		comb_buf_release(&cu->saved[f]);
	}
	comb_buf_release(&cu->saved[0]); /* faulted in, perhaps unused */
}

static bool catchup_done(void *ctx)
{
	struct catchup *cu = ctx;

	return cu->eose || cu->refusal[0] || cu->loop.closed;
}

static bool catchup_authed(void *ctx)
{
	struct catchup *cu = ctx;

	return cu->loop.authed + cu->loop.closed >= 1;
}

/* One catch-up over WebSocket from cursor; *seconds from the REQ to EOSE.
 * Returns the number of errors. */
static int ws_catchup(const char *addr, const char *host, const struct bench_layout *l,
		      const char *cursor, struct catchup *cu, double *seconds, json_t *errors)
{
	char req[CURSOR_CAP + 128];
	struct bench_ws *ws;
	double t0;
	int bad = 0;

	snprintf(req, sizeof(req),
		 "[\"REQ\",\"catchup\",{\"artifact\":\"changes\",\"cursor\":\"%s\"}]", cursor);
	bench_loop_init(&cu->loop, catchup_message, cu);
	ws = bench_ws_connect(&cu->loop, addr, host, l->reader_sk, 0);
	if (!ws || bench_loop_run(&cu->loop, catchup_authed, 10) || !ws->authed) {
		json_array_append_new(errors, json_sprintf("cannot authenticate: %s",
							   cu->loop.first_error));
		return 1;
	}
	/* The answer's room is faulted in before the clock, as the HTTP
	 * floor's (http_catchup's first page) is. */
	comb_buf_init(&cu->saved[0], 256u << 20);
	if (bench_buf_prefault(&cu->saved[0], CATCHUP_PREFAULT) ||
	    bench_ws_prefault(ws, CATCHUP_PREFAULT)) {
		comb_buf_release(&cu->saved[0]);
		json_array_append_new(errors, json_string("out of memory"));
		return 1;
	}
	t0 = bench_now();
	bench_ws_send(&cu->loop, ws, req, strlen(req));
	if (bench_loop_run(&cu->loop, catchup_done, 60) || !cu->eose) {
		json_array_append_new(errors, json_sprintf("no EOSE (%d frames): %s%s", cu->frames,
							   cu->refusal, cu->loop.first_error));
		catchup_parse(cu);
		return 1;
	}
	*seconds = cu->t_eose - t0;
	catchup_parse(cu);
	if (cu->malformed) {
		json_array_append_new(errors, json_string("a malformed CHANGES frame"));
		bad++;
	}
	if (cu->frames == 0 || cu->last_more) {
		json_array_append_new(errors, json_sprintf(
			"EOSE after %d frames, the last with more %s", cu->frames,
			cu->last_more ? "true" : "false"));
		bad++;
	}
	return bad;
}

int bench_cmd_resume_catchup(int argc, char **argv)
{
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	const char *cursor_file = bench_opt(argc, argv, "--cursor-file", NULL);
	int runs = (int)bench_opt_long(argc, argv, "--runs", 3), r, p, rc, bad = 0;
	struct bench_layout l;
	struct bench_http c = {.fd = -1};
	struct comb_buf pages[MAX_PAGES];
	char *cursor = NULL, final[CURSOR_CAP];
	double ws_s[16], http_s[16];
	json_t *errors = json_array(), *ws_runs = json_array(), *http_runs = json_array();
	long ws_items = 0, http_items = 0, latest = 0;
	int frames = 0, http_pages = 0;

	for (p = 0; p < MAX_PAGES; p++)
		comb_buf_init(&pages[p], 256u << 20);
	if (!addr || !host || !cursor_file) {
		bench_log("resume-catchup: --addr, --host and --cursor-file are required");
		return 2;
	}
	if (runs < 1 || runs > 16)
		runs = 3;
	rc = bench_layout_from_opts(&l, argc, argv);
	cursor = bench_read_file(cursor_file, NULL);
	if (rc == 0 && !cursor)
		rc = COMB_EIO;
	rc = rc ? rc : bench_http_open(&c, addr, host);
	if (rc)
		goto out;
	for (r = 0; r < runs && !bad; r++) {
		struct catchup cu = {0};
		struct items http = {0};

		if (http_catchup(&c, &l, cursor, NULL, 1000, pages, &http_pages, &http_s[r],
				 final, errors)) {
			bad++;
			break;
		}
		for (p = 0; p < http_pages; p++) {
			json_t *answer = json_loadb(pages[p].data, pages[p].len, 0, NULL);

			if (!items_add(&http, answer)) {
				json_array_append_new(errors, json_string("a malformed HTTP answer"));
				bad++;
			}
			json_decref(answer);
		}
		bad += ws_catchup(addr, host, &l, cursor, &cu, &ws_s[r], errors);
		bench_loop_release(&cu.loop);
		if (!bad) {
			json_array_append_new(ws_runs, json_real(ws_s[r]));
			json_array_append_new(http_runs, json_real(http_s[r]));
			ws_items = (long)cu.items.raw;
			http_items = (long)http.raw;
			frames = cu.frames;
			items_latest(&cu.items);
			items_latest(&http);
			latest = (long)http.n;
			bad += items_compare(&cu.items, &http, errors);
			if (http.n == 0) {
				json_array_append_new(errors, json_string("the catch-up holds no item"));
				bad++;
			}
		}
		free(cu.items.v);
		free(http.v);
	}
	bench_print(json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:i,s:i,s:b,s:o}",
		"command", "resume-catchup",
		"seconds", bad ? json_null() : json_real(bench_quantile(ws_s, (size_t)r, 0.5)),
		"floor_http_s", bad ? json_null() : json_real(bench_quantile(http_s, (size_t)r, 0.5)),
		"ratio", bad ? json_null() : json_real(bench_quantile(ws_s, (size_t)r, 0.5) /
						       bench_quantile(http_s, (size_t)r, 0.5)),
		"runs", ws_runs, "floor_runs", http_runs,
		"items", (json_int_t)ws_items, "http_items", (json_int_t)http_items,
		"artifacts", (json_int_t)latest, "frames", frames, "http_pages", http_pages,
		"ok", !bad, "errors", json_incref(errors)));
out:
	if (rc)
		bench_log("resume-catchup failed: %s", comb_strerror(rc));
	json_decref(errors);
	free(cursor);
	for (p = 0; p < MAX_PAGES; p++)
		comb_buf_release(&pages[p]);
	bench_http_close(&c);
	return rc || bad ? 1 : 0;
}

/* ---- resume-live ---- */

/*
 * The id of the one upsert a live CHANGES frame carries, or false (no
 * item, several, or not an upsert). *empty tells a frame with no item (a
 * quiet one) apart. Scans the bytes instead of parsing: a thousand
 * subscribers receive every frame.
 */
static bool single_upsert_id(const char *msg, size_t len, char id[65], bool *empty)
{
	static const char head[] = "{\"changes\":[";
	static const char upsert[] = "{\"op\":\"upsert\",\"event\":{\"id\":\"";
	const char *p = memmem(msg, len < 128 ? len : 128, head, sizeof(head) - 1);
	const char *end = msg + len;

	*empty = false;
	if (!p)
		return false;
	p += sizeof(head) - 1;
	if (p < end && *p == ']') {
		*empty = true;
		return false;
	}
	if ((size_t)(end - p) < sizeof(upsert) - 1 + 64 ||
	    memcmp(p, upsert, sizeof(upsert) - 1))
		return false;
	p += sizeof(upsert) - 1;
	memcpy(id, p, 64);
	id[64] = '\0';
	/* A second item would begin with another {"op": */
	return !memmem(p, (size_t)(end - p), "{\"op\":\"", 7);
}

struct resume_live {
	char h[37];          /* the live channel */
	bool opening;        /* the first subscriber's catch-up, parsed */
	struct items first;  /* its items */
	char cursor[CURSOR_CAP];
};

/* Sends the resumable REQ of the live channel to subscriber sub, with the
 * cursor when there is one. */
static int resume_live_open(struct bench_live *lv, int sub)
{
	struct resume_live *rl = lv->ctx;
	char req[CURSOR_CAP + 160];

	if (rl->cursor[0])
		snprintf(req, sizeof(req), "[\"REQ\",\"live\",{\"artifact\":\"changes\","
			 "\"#h\":[\"%s\"],\"cursor\":\"%s\"}]", rl->h, rl->cursor);
	else
		snprintf(req, sizeof(req), "[\"REQ\",\"live\",{\"artifact\":\"changes\","
			 "\"#h\":[\"%s\"]}]", rl->h);
	return bench_ws_send(&lv->loop, lv->subs[sub].ws, req, strlen(req));
}

/* While the first subscriber opens, its catch-up is parsed into rl->first
 * and its cursor kept; afterwards a CHANGES frame must carry exactly one
 * upsert, the edit in flight, or nothing (a quiet frame). */
static enum bench_live_frame resume_live_frame(struct bench_live *lv, int sub,
					       const char *msg, size_t len, char id[65])
{
	struct resume_live *rl = lv->ctx;
	bool empty;

	(void)sub;
	if (bench_msg_is(msg, len, "[\"CHANGES\",\"live\",")) {
		if (rl->opening) {
			json_t *arr = json_loadb(msg, len, 0, NULL);
			json_t *answer = json_array_get(arr, 2);
			const char *cursor = json_string_value(json_object_get(answer, "cursor"));
			bool ok = items_add(&rl->first, answer) && cursor;

			if (ok)
				snprintf(rl->cursor, sizeof(rl->cursor), "%s", cursor);
			json_decref(arr);
			return ok ? BENCH_LIVE_NOTHING : BENCH_LIVE_UNEXPECTED;
		}
		if (single_upsert_id(msg, len, id, &empty))
			return BENCH_LIVE_REVISION;
		return empty ? BENCH_LIVE_NOTHING : BENCH_LIVE_UNEXPECTED;
	}
	if (bench_msg_is(msg, len, "[\"EOSE\",\"live\""))
		return BENCH_LIVE_EOSE;
	if (bench_msg_is(msg, len, "[\"CLOSED\",") || bench_msg_is(msg, len, "[\"NOTICE\","))
		return BENCH_LIVE_CLOSED;
	return BENCH_LIVE_NOTHING;
}

/* A catch-up from a current cursor holds no item. */
static json_t *resume_live_opening_error(struct bench_live *lv, int sub)
{
	if (sub == 0 || !lv->subs[sub].unexpected)
		return NULL;
	return json_sprintf("a catch-up from a current cursor held %d frames with items",
			    lv->subs[sub].unexpected);
}

static const struct bench_live_ops resume_live_ops = {
	.open = resume_live_open,
	.frame = resume_live_frame,
	.opening_error = resume_live_opening_error,
};

static bool live_first_opened(void *ctx)
{
	struct bench_live *lv = ctx;

	return lv->eosed + lv->closed_subs + lv->loop.closed >= 1;
}

/* Signs nedits updates of the artifacts of the first subscriber's
 * catch-up, round robin, each naming the revision the previous one of its
 * artifact made. */
static int sign_edits(const struct resume_live *rl, const struct bench_layout *l,
		      struct comb_event *edits, int nedits)
{
	size_t na = rl->first.n, a;
	char (*prev)[65] = calloc(na, sizeof(*prev));
	int e, rc = 0;

	if (!prev)
		return COMB_ENOMEM;
	for (a = 0; a < na; a++)
		memcpy(prev[a], rl->first.v[a].id, 65);
	for (e = 0; e < nedits && rc == 0; e++) {
		a = (size_t)e % na;
		rc = bench_revision(&edits[e], l->admin_pk, rl->first.v[a].d, rl->h, "update",
				    prev[a], bench_unix_time(), 0x2e5e0000ULL + (uint64_t)e);
		rc = rc ? rc : comb_event_sign(&edits[e], l->admin_sk);
		memcpy(prev[a], edits[e].id, 65);
	}
	free(prev);
	return rc;
}

int bench_cmd_resume_live(int argc, char **argv)
{
	struct bench_nodes nodes;
	int nsubs = (int)bench_opt_long(argc, argv, "--subs", 1000);
	int nedits = (int)bench_opt_long(argc, argv, "--edits", 200);
	struct bench_live lv;
	struct resume_live rl = {0};
	struct bench_layout l;
	struct bench_ws *first;
	double setup_s = 0, t0;
	json_t *errors = json_array();
	int i, rc, unexpected = 0, completed = 0, catchup_items = 0;

	if (!bench_nodes_from_opts(&nodes, argc, argv) || nsubs < 1 || nedits < 1) {
		bench_log("resume-live: --addrs and --hosts (as many) are required");
		return 2;
	}
	rc = bench_live_init(&lv, &resume_live_ops, &rl, nsubs, nodes.n, nedits);
	rc = rc ? rc : bench_layout_from_opts(&l, argc, argv);
	if (rc)
		goto out;
	bench_channel_id(&l, l.live_channel, rl.h);

	/* The first subscriber reads the channel without a cursor: its
	 * items name the revisions to edit, its cursor is everyone's. */
	t0 = bench_now();
	first = bench_live_subscriber(&lv, 0, nodes.addr[0], nodes.host[0], l.reader_sk, 0);
	lv.writer = bench_ws_connect(&lv.loop, nodes.addr[0], nodes.host[0], l.admin_sk, 0);
	if (!first || !lv.writer || !bench_live_authenticate(&lv, 20)) {
		json_array_append_new(errors, json_sprintf("authentication: %s", lv.loop.first_error));
		goto report;
	}
	rl.opening = true;
	resume_live_open(&lv, 0);
	bench_loop_run(&lv.loop, live_first_opened, 30);
	rl.opening = false;
	catchup_items = (int)rl.first.raw;
	items_latest(&rl.first);
	if (!lv.subs[0].eose || !rl.cursor[0] || rl.first.n == 0 || lv.subs[0].unexpected) {
		json_array_append_new(errors, json_sprintf("the first catch-up: %d items, %s%s",
			catchup_items, lv.subs[0].closed, lv.loop.first_error));
		goto report;
	}
	for (i = 0; i < (int)rl.first.n; i++)
		if (!rl.first.v[i].id[0]) {
			json_array_append_new(errors, json_sprintf("the first catch-up holds %s",
								   rl.first.v[i].what));
			goto report;
		}
	rc = sign_edits(&rl, &l, lv.edits, nedits);
	if (rc)
		goto report;

	/* The others, over the nodes, open from that cursor. */
	if (bench_live_connect(&lv, 1, &nodes, l.reader_sk, errors))
		goto report;
	if (!bench_live_authenticate(&lv, 60)) {
		json_array_append_new(errors, json_sprintf("authentication: %d of %d, %s",
			lv.loop.authed, lv.loop.n, lv.loop.first_error));
		goto report;
	}
	rc = bench_live_open(&lv, 1, 120, errors);
	setup_s = bench_now() - t0;
	if (json_array_size(errors) || rc)
		goto report;

	/* The edits, one at a time. */
	completed = bench_live_edits(&lv, 30, errors);
	/* Late duplicates of the last edit arrive within this grace. */
	bench_loop_run(&lv.loop, NULL, 0.2);
	unexpected = bench_live_tally(&lv, completed, true, errors);
report:
	bench_print(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:f,s:o,s:o,s:b,s:o}",
		"command", "resume-live", "subscribers", nsubs, "nodes", nodes.n,
		"edits", nedits, "edits_completed", completed,
		"first_catchup_items", catchup_items, "unexpected_frames", unexpected,
		"p50_ms", bench_live_ms(&lv, 0.5), "p99_ms", bench_live_ms(&lv, 0.99),
		"max_ms", bench_live_ms(&lv, 1.0), "min_ms", bench_live_ms(&lv, 0.0),
		"setup_s", setup_s, "per_node", bench_live_per_node(&lv),
		"frame_bytes", bench_live_frame_bytes(&lv),
		"ok", rc == 0 && json_array_size(errors) == 0 && completed == nedits,
		"errors", json_incref(errors)));
	if (json_array_size(errors) || completed != nedits)
		rc = rc ? rc : COMB_EINVAL;
out:
	if (rc && rc != COMB_EINVAL)
		bench_log("resume-live failed: %s", comb_strerror(rc));
	json_decref(errors);
	free(rl.first.v);
	bench_live_release(&lv);
	return rc ? 1 : 0;
}

/* ---- resume-reconnect ---- */

struct client {
	int scope;
	bool sent, eose;
	int frames, items;
	bool last_more;
	double t_req, t_eose;
	char refusal[160];
};

struct reconnect {
	struct bench_loop loop;
	struct client *clients;
	int n, eosed;
	char (*cursors)[CURSOR_CAP];
	char (*scopes)[37];
	char first_refusal[200];
};

static void reconnect_message(struct bench_loop *loop, struct bench_ws *ws,
			      const char *msg, size_t len, double t)
{
	struct reconnect *r = loop->ctx;
	struct client *c = &r->clients[ws->index];
	const char *more;

	if (bench_msg_is(msg, len, "[\"CHANGES\",\"again\",")) {
		c->frames++;
		if (!bench_msg_is(msg, len, "[\"CHANGES\",\"again\",{\"changes\":[]"))
			c->items++;
		more = memmem(msg, len, "\"more\":", 7);
		c->last_more = more && (size_t)(msg + len - more) > 11 &&
			       !memcmp(more + 7, "true", 4);
	} else if (bench_msg_is(msg, len, "[\"EOSE\",\"again\"")) {
		if (!c->eose)
			r->eosed++;
		c->eose = true;
		c->t_eose = t;
	} else if ((bench_msg_is(msg, len, "[\"CLOSED\",") ||
		    bench_msg_is(msg, len, "[\"NOTICE\",")) && !c->refusal[0]) {
		snprintf(c->refusal, sizeof(c->refusal), "%.*s", (int)(len < 150 ? len : 150), msg);
		if (!r->first_refusal[0])
			snprintf(r->first_refusal, sizeof(r->first_refusal), "%s", c->refusal);
	}
}

/*
 * Sends the REQ of every client authenticated since the last call (the
 * loop calls it on every turn), then says whether every client has its
 * EOSE, was refused or closed.
 */
static bool reconnect_pump(void *ctx)
{
	struct reconnect *r = ctx;
	char req[CURSOR_CAP + 160];
	bool all = r->loop.n == r->n;
	int i;

	for (i = 0; i < r->loop.n; i++) {
		struct bench_ws *ws = r->loop.conns[i];
		struct client *c = &r->clients[i];

		if (ws->authed && !c->sent && ws->state == BENCH_WS_OPEN) {
			snprintf(req, sizeof(req), "[\"REQ\",\"again\",{\"artifact\":\"changes\","
				 "\"#h\":[\"%s\"],\"cursor\":\"%s\"}]", r->scopes[c->scope],
				 r->cursors[c->scope]);
			c->sent = true;
			c->t_req = bench_now();
			bench_ws_send(&r->loop, ws, req, strlen(req));
		}
		if (!c->eose && !c->refusal[0] && ws->state != BENCH_WS_CLOSED)
			all = false;
	}
	return all;
}

/* Sums pg_stat_statements of the database at url: its total execution
 * time in ms and its calls; with reset, resets it instead. */
static int pg_statements(const char *url, bool reset, double *ms, long *calls)
{
	PGconn *db = PQconnectdb(url);
	PGresult *res;
	int rc = COMB_EUNAVAIL;

	if (PQstatus(db) != CONNECTION_OK) {
		bench_log("resume-reconnect: %s", PQerrorMessage(db));
		PQfinish(db);
		return rc;
	}
	res = PQexec(db, reset ? "SELECT pg_stat_statements_reset()" :
		     "SELECT coalesce(sum(total_exec_time), 0), coalesce(sum(calls), 0)"
		     " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
		     " WHERE datname = current_database())"
		     " AND query NOT ILIKE '%pg_stat_statements%'");
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		if (!reset) {
			*ms = strtod(PQgetvalue(res, 0, 0), NULL);
			*calls = strtol(PQgetvalue(res, 0, 1), NULL, 10);
		}
		rc = 0;
	} else {
		bench_log("resume-reconnect: %s", PQresultErrorMessage(res));
	}
	PQclear(res);
	PQfinish(db);
	return rc;
}

int bench_cmd_resume_reconnect(int argc, char **argv)
{
	struct bench_nodes nodes;
	const char *url = bench_opt(argc, argv, "--db", NULL);
	int nclients = (int)bench_opt_long(argc, argv, "--clients", 1000);
	int nscopes = (int)bench_opt_long(argc, argv, "--scopes", 64);
	struct reconnect r = {0};
	struct bench_layout l;
	struct bench_http c = {.fd = -1};
	struct comb_buf pages[MAX_PAGES];
	double t0 = 0, t_last = 0, *lat = NULL, db_ms = 0, secs;
	long db_calls = 0;
	json_t *errors = json_array();
	int i, k, p, rc, npages, nlat = 0, with_items = 0, refused = 0;

	for (p = 0; p < MAX_PAGES; p++)
		comb_buf_init(&pages[p], 64u << 20);
	if (!bench_nodes_from_opts(&nodes, argc, argv) || nclients < 1) {
		bench_log("resume-reconnect: --addrs and --hosts (as many) are required");
		return 2;
	}
	rc = bench_layout_from_opts(&l, argc, argv);
	if (nscopes > l.art_channels)
		nscopes = l.art_channels;
	if (nscopes < 1)
		nscopes = 1;
	r.n = nclients;
	r.clients = calloc((size_t)nclients, sizeof(*r.clients));
	r.cursors = calloc((size_t)nscopes, sizeof(*r.cursors));
	r.scopes = calloc((size_t)nscopes, sizeof(*r.scopes));
	lat = calloc((size_t)nclients, sizeof(*lat));
	if (rc == 0 && (!r.clients || !r.cursors || !r.scopes || !lat))
		rc = COMB_ENOMEM;
	rc = rc ? rc : bench_http_open(&c, nodes.addr[0], nodes.host[0]);
	if (rc)
		goto out;
	bench_loop_init(&r.loop, reconnect_message, &r);

	/* The current cursor of each scope, one channel each. */
	for (k = 0; k < nscopes && rc == 0; k++) {
		bench_channel_id(&l, k, r.scopes[k]);
		rc = http_catchup(&c, &l, NULL, r.scopes[k], 1000, pages, &npages, &secs,
				  r.cursors[k], errors);
	}
	bench_http_close(&c);
	if (rc)
		goto report;
	if (url && pg_statements(url, true, NULL, NULL))
		json_array_append_new(errors, json_string("cannot reset pg_stat_statements"));

	/* The reconnect: every client at once, each REQ when it may. */
	t0 = t_last = bench_now();
	for (i = 0; i < nclients; i++) {
		r.clients[i].scope = i % nscopes;
		if (!bench_ws_connect(&r.loop, nodes.addr[i % nodes.n],
				      nodes.host[i % nodes.n], l.reader_sk, i % nodes.n)) {
			json_array_append_new(errors, json_sprintf("client %d: %s", i,
								   r.loop.first_error));
			refused += nclients - i;
			r.n = r.loop.n;
			break;
		}
		if (i % 50 == 49)
			bench_loop_run(&r.loop, reconnect_pump, 0.001);
	}
	if (bench_loop_run(&r.loop, reconnect_pump, 60))
		json_array_append_new(errors, json_sprintf("%d of %d reached EOSE within 60 s",
							   r.eosed, nclients));
	if (url && pg_statements(url, false, &db_ms, &db_calls))
		json_array_append_new(errors, json_string("cannot read pg_stat_statements"));
	for (i = 0; i < r.loop.n; i++) {
		struct client *cl = &r.clients[i];

		if (cl->eose) {
			lat[nlat++] = (cl->t_eose - cl->t_req) * 1e3;
			if (cl->t_eose > t_last)
				t_last = cl->t_eose;
		}
		if (!cl->eose || cl->refusal[0])
			refused++;
		if (!cl->eose && !cl->refusal[0] && json_array_size(errors) < 20)
			json_array_append_new(errors, json_sprintf("client %d: no EOSE (%s)", i,
				r.loop.conns[i]->close_reason[0] ? r.loop.conns[i]->close_reason
								 : "no answer"));
		if (cl->eose && (cl->items || cl->frames == 0 || cl->last_more))
			with_items++;
	}
	if (r.first_refusal[0])
		json_array_append_new(errors, json_sprintf("refused: %s", r.first_refusal));
	if (with_items)
		json_array_append_new(errors, json_sprintf(
			"%d catch-ups from a current cursor were not one empty, final frame",
			with_items));
report:
	bench_print(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:o,s:b,s:o}",
		"command", "resume-reconnect", "clients", nclients, "nodes", nodes.n,
		"scopes", nscopes, "eose", r.eosed, "refused", refused, "wrong", with_items,
		"all_eose_s", r.eosed == nclients ? json_real(t_last - t0) : json_null(),
		"req_to_eose_p50_ms", nlat ? json_real(bench_quantile(lat, (size_t)nlat, 0.5)) : json_null(),
		"req_to_eose_p99_ms", nlat ? json_real(bench_quantile(lat, (size_t)nlat, 0.99)) : json_null(),
		"db_ms", url ? json_real(db_ms) : json_null(),
		"db_calls", url ? json_integer(db_calls) : json_null(),
		"ok", r.eosed == nclients && refused == 0 && with_items == 0 &&
		      json_array_size(errors) == 0,
		"errors", json_incref(errors)));
	if (r.eosed != nclients || refused || with_items || json_array_size(errors))
		rc = rc ? rc : COMB_EINVAL;
	bench_loop_release(&r.loop);
out:
	if (rc && rc != COMB_EINVAL)
		bench_log("resume-reconnect failed: %s", comb_strerror(rc));
	json_decref(errors);
	for (p = 0; p < MAX_PAGES; p++)
		comb_buf_release(&pages[p]);
	free(r.clients);
	free(r.cursors);
	free(r.scopes);
	free(lat);
	return rc ? 1 : 0;
}
