/*
 * The WebSocket sync scenarios (PROTOCOL.md section 7), as the reader:
 *
 * `sync-snapshot`: one authenticated connection per run sends a sync REQ
 * for the first --channels channels and the clock runs from the REQ to
 * EOSE. Afterwards every EVENT is checked: exactly the loaded current
 * revision of every artifact of those channels, ordered by d. A CLOSED
 * (for instance while the relay has no sync) is a failure with its
 * reason, never a figure.
 *
 * `sync-live`: --subs syncs on the live channel spread over the relay
 * nodes of --addrs, then --edits updates by the admin over another
 * connection, one at a time: each is sent, its OK awaited, and every
 * subscriber must receive exactly that revision before the next edit is
 * sent. The figure is, per subscriber and edit, the time from the
 * writer's OK to the subscriber's frame.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "comb/error.h"

static int sync_req(struct comb_buf *b, const char *sub, const struct bench_layout *l,
		    const int *channels, int n)
{
	char id[37];
	int i, rc;

	comb_buf_reset(b);
	rc = comb_buf_printf(b, "[\"REQ\",\"%s\",{\"artifact\":\"current\",\"#h\":[", sub);
	for (i = 0; i < n && rc == 0; i++) {
		bench_channel_id(l, channels[i], id);
		rc = comb_buf_printf(b, "%s\"%s\"", i ? "," : "", id);
	}
	return rc ? rc : comb_buf_puts(b, "]}]");
}

/* ---- sync-snapshot ---- */

struct snap {
	struct comb_buf frames;      /* the EVENT messages, back to back */
	size_t *ends;                /* where each one ends */
	size_t nframes, cap;
	bool eose, closed;
	char reason[200];
	double t_eose;
	bool failed;
};

static void snap_message(struct bench_loop *loop, struct bench_ws *ws,
			 const char *msg, size_t len, double t)
{
	struct snap *s = loop->ctx;

	(void)ws;
	if (bench_msg_is(msg, len, "[\"EVENT\",\"snap\",")) {
		if (s->nframes == s->cap) {
			size_t ncap = s->cap ? 2 * s->cap : 16384;
			size_t *p = realloc(s->ends, ncap * sizeof(*p));

			if (!p) {
				s->failed = true;
				return;
			}
			s->ends = p;
			s->cap = ncap;
		}
		if (comb_buf_append(&s->frames, msg, len)) {
			s->failed = true;
			return;
		}
		s->ends[s->nframes++] = s->frames.len;
	} else if (bench_msg_is(msg, len, "[\"EOSE\",\"snap\"")) {
		s->eose = true;
		s->t_eose = t;
	} else if (bench_msg_is(msg, len, "[\"CLOSED\",\"snap\"")) {
		s->closed = true;
		snprintf(s->reason, sizeof(s->reason), "%.*s", (int)(len < 190 ? len : 190), msg);
	}
}

static bool snap_done(void *ctx)
{
	struct snap *s = ctx;

	return s->eose || s->closed || s->failed;
}

static bool authed_all(void *ctx);

struct authwait {
	struct bench_loop *loop;
	int want;
};

static bool authed_all(void *ctx)
{
	struct authwait *w = ctx;

	return w->loop->authed + w->loop->closed >= w->want;
}

/* Checks the frames of one snapshot; returns the number of errors. */
static int check_snapshot(const struct bench_manifest *m, int nchannels,
			  struct snap *s, json_t *errors, long *bytes)
{
	char last_d[37] = "";
	size_t i, from = 0;
	int bad = 0;

	*bytes = 0;
	for (i = 0; i < s->nframes; i++) {
		size_t len = s->ends[i] - from;
		json_t *arr = json_loadb(s->frames.data + from, len, 0, NULL);
		json_t *ev = json_array_get(arr, 2), *tags = json_object_get(ev, "tags");
		const char *id = json_string_value(json_object_get(ev, "id"));
		const char *d = NULL;
		const struct bench_item *it;
		size_t k;

		*bytes += (long)len;
		from = s->ends[i];
		for (k = 0; k < json_array_size(tags); k++) {
			json_t *t = json_array_get(tags, k);

			if (!strcmp(json_string_value(json_array_get(t, 0)) ?
				    json_string_value(json_array_get(t, 0)) : "", "d"))
				d = json_string_value(json_array_get(t, 1));
		}
		it = d ? bench_manifest_find(m, d) : NULL;
		if (!it || !id || strcmp(it->id, id) || it->channel < 0 ||
		    it->channel >= nchannels) {
			if (bad++ < 10)
				json_array_append_new(errors, json_sprintf(
					"unexpected event for d %s", d ? d : "(none)"));
		} else if (strcmp(d, last_d) <= 0) {
			if (bad++ < 10)
				json_array_append_new(errors, json_sprintf(
					"event for d %s out of order or repeated", d));
		}
		if (d)
			snprintf(last_d, sizeof(last_d), "%s", d);
		json_decref(arr);
	}
	return bad;
}

int bench_cmd_sync_snapshot(int argc, char **argv)
{
	const char *addr = bench_opt(argc, argv, "--addr", NULL);
	const char *host = bench_opt(argc, argv, "--host", NULL);
	const char *manifest = bench_opt(argc, argv, "--manifest", NULL);
	int nchannels = (int)bench_opt_long(argc, argv, "--channels", 0);
	int runs = (int)bench_opt_long(argc, argv, "--runs", 3), r, i, expected;
	struct bench_manifest m = {0};
	struct bench_layout l;
	struct comb_buf req;
	double secs[16];
	json_t *errors = json_array(), *all = json_array();
	char reason[256] = "";
	long bytes = 0, events = 0;
	int *channels = NULL, rc, bad = 0;

	comb_buf_init(&req, 1 << 20);
	if (!addr || !host || !manifest || nchannels < 1) {
		bench_log("sync-snapshot: --addr, --host, --manifest and --channels are required");
		return 2;
	}
	if (runs < 1 || runs > 16)
		runs = 3;
	rc = bench_layout_from_opts(&l, argc, argv);
	rc = rc ? rc : bench_manifest_read(manifest, &m);
	channels = calloc((size_t)nchannels, sizeof(*channels));
	if (rc == 0 && !channels)
		rc = COMB_ENOMEM;
	if (rc)
		goto out;
	for (i = 0; i < nchannels; i++)
		channels[i] = i;
	expected = bench_artifacts_in(&l, nchannels);
	rc = sync_req(&req, "snap", &l, channels, nchannels);
	for (r = 0; r < runs && rc == 0; r++) {
		struct snap s = {0};
		struct bench_loop loop;
		struct authwait w = {&loop, 1};
		struct bench_ws *ws;
		double t0;

		comb_buf_init(&s.frames, 1u << 30);
		bench_loop_init(&loop, snap_message, &w);
		ws = bench_ws_connect(&loop, addr, host, l.reader_sk, 0);
		if (!ws || bench_loop_run(&loop, authed_all, 10) || !ws->authed) {
			snprintf(reason, sizeof(reason), "cannot authenticate: %.200s",
				 loop.first_error);
			bad++;
		} else {
			loop.ctx = &s;
			t0 = bench_now();
			bench_ws_send(&loop, ws, req.data, req.len);
			if (bench_loop_run(&loop, snap_done, 30)) {
				snprintf(reason, sizeof(reason), "no EOSE within 30 s (%zu events)",
					 s.nframes);
				bad++;
			} else if (s.closed) {
				snprintf(reason, sizeof(reason), "%.200s", s.reason);
				bad++;
			} else if (s.failed) {
				snprintf(reason, sizeof(reason), "out of memory");
				bad++;
			} else {
				secs[r] = s.t_eose - t0;
				json_array_append_new(all, json_real(secs[r]));
				events = (long)s.nframes;
				if ((int)s.nframes != expected) {
					json_array_append_new(errors, json_sprintf(
						"%zu events before EOSE, %d expected",
						s.nframes, expected));
					bad++;
				}
				bad += check_snapshot(&m, nchannels, &s, errors, &bytes);
			}
		}
		bench_loop_release(&loop);
		comb_buf_release(&s.frames);
		free(s.ends);
		if (bad)
			break;
	}
	if (reason[0])
		json_array_append_new(errors, json_string(reason));
	bench_print(json_pack("{s:s,s:i,s:o,s:o,s:i,s:I,s:I,s:b,s:o}",
		"command", "sync-snapshot", "channels", nchannels,
		"seconds", bad || r == 0 ? json_null() : json_real(bench_quantile(secs, (size_t)r, 0.5)),
		"runs", all, "expected_events", expected, "events", (json_int_t)events,
		"bytes", (json_int_t)bytes, "ok", !bad && rc == 0, "errors", errors));
out:
	if (rc)
		bench_log("sync-snapshot failed: %s", comb_strerror(rc));
	comb_buf_release(&req);
	free(channels);
	bench_manifest_release(&m);
	return rc || bad ? 1 : 0;
}

/* ---- sync-live ---- */

struct sub_state {
	int snapshot;        /* events before EOSE */
	bool eose;
	int got;             /* edits received so far */
	int unexpected;
	char closed[200];
};

struct live {
	struct bench_loop loop;
	struct bench_ws *writer;
	struct sub_state *subs;
	int nsubs;
	int phase;           /* 0 auth, 1 snapshot, 2 edits */
	int eosed, closed_subs;
	/* the edit in flight */
	int edit;
	char edit_id[65];
	bool ok_seen, ok_accepted;
	char ok_message[200];
	double t_ok, t_send;
	int received;        /* subscribers that got it */
	double *t_frame;     /* [nsubs] arrival of the edit in flight */
	int nodes;
};

static void live_message(struct bench_loop *loop, struct bench_ws *ws,
			 const char *msg, size_t len, double t)
{
	struct live *lv = loop->ctx;
	struct sub_state *st = ws->user;
	char id[65];

	if (ws == lv->writer) {
		if (bench_msg_is(msg, len, "[\"OK\",\"") && len > 72 &&
		    !memcmp(msg + 7, lv->edit_id, 64)) {
			lv->ok_seen = true;
			lv->t_ok = t;
			lv->ok_accepted = memmem(msg + 71, len - 71, "true", 4) != NULL;
			snprintf(lv->ok_message, sizeof(lv->ok_message), "%.*s",
				 (int)(len < 190 ? len : 190), msg);
		}
		return;
	}
	if (!st)
		return;
	if (bench_msg_is(msg, len, "[\"EVENT\",\"live\",")) {
		if (!st->eose) {
			st->snapshot++;
		} else if (lv->phase == 2 && bench_event_id_of(msg, len, id) &&
			   !strcmp(id, lv->edit_id) && lv->t_frame[ws->index] < 0) {
			lv->t_frame[ws->index] = t;
			st->got++;
			lv->received++;
		} else {
			st->unexpected++;
		}
	} else if (bench_msg_is(msg, len, "[\"EOSE\",\"live\"")) {
		if (!st->eose)
			lv->eosed++;
		st->eose = true;
	} else if (bench_msg_is(msg, len, "[\"CLOSED\",\"live\"")) {
		if (!st->closed[0])
			lv->closed_subs++;
		snprintf(st->closed, sizeof(st->closed), "%.*s",
			 (int)(len < 190 ? len : 190), msg);
	}
}

static bool live_snapshots_done(void *ctx)
{
	struct live *lv = ctx;

	return lv->eosed + lv->closed_subs + lv->loop.closed >= lv->nsubs;
}

static bool live_edit_done(void *ctx)
{
	struct live *lv = ctx;

	return (lv->ok_seen && !lv->ok_accepted) || lv->loop.closed > 0 ||
	       lv->closed_subs > 0 ||
	       (lv->ok_seen && lv->received >= lv->nsubs);
}

static bool live_authed(void *ctx)
{
	struct live *lv = ctx;

	return lv->loop.authed + lv->loop.closed >= lv->nsubs + 1;
}

int bench_cmd_sync_live(int argc, char **argv)
{
	const char *manifest = bench_opt(argc, argv, "--manifest", NULL);
	char addrs_buf[512], hosts_buf[512], *addrs[8], *hosts[8];
	int nsubs = (int)bench_opt_long(argc, argv, "--subs", 1000);
	int nedits = (int)bench_opt_long(argc, argv, "--edits", 200);
	struct live lv = {0};
	struct bench_manifest m = {0};
	struct bench_layout l;
	struct comb_event *edits = NULL;
	struct comb_buf req, frame, json;
	const struct bench_item *arts[BENCH_PER_CHANNEL];
	char prev[BENCH_PER_CHANNEL][65];
	double *lat = NULL, *sent_lat = NULL, *node_lat[8] = {0}, setup_s = 0, t0;
	size_t nlat = 0, node_n[8] = {0};
	json_t *errors = json_array(), *per_node = json_array();
	int nnodes, nhosts, na = 0, i, e, rc, early = 0, unexpected = 0, completed = 0;
	int live_channel;
	size_t k;

	comb_buf_init(&req, 65536);
	comb_buf_init(&frame, 1 << 20);
	comb_buf_init(&json, 1 << 20);
	snprintf(addrs_buf, sizeof(addrs_buf), "%s", bench_opt(argc, argv, "--addrs", ""));
	snprintf(hosts_buf, sizeof(hosts_buf), "%s", bench_opt(argc, argv, "--hosts", ""));
	nnodes = bench_split(addrs_buf, addrs, 8);
	nhosts = bench_split(hosts_buf, hosts, 8);
	if (!manifest || nnodes < 1 || nhosts != nnodes || nsubs < 1 || nedits < 1) {
		bench_log("sync-live: --addrs, --hosts (as many) and --manifest are required");
		return 2;
	}
	rc = bench_layout_from_opts(&l, argc, argv);
	rc = rc ? rc : bench_manifest_read(manifest, &m);
	if (rc)
		goto out;
	live_channel = l.live_channel;
	for (k = 0; k < m.readable && na < BENCH_PER_CHANNEL; k++)
		if (m.items[k].channel == live_channel)
			arts[na++] = &m.items[k];
	lv.nsubs = nsubs;
	lv.nodes = nnodes;
	lv.subs = calloc((size_t)nsubs, sizeof(*lv.subs));
	lv.t_frame = calloc((size_t)nsubs + 1, sizeof(*lv.t_frame));
	lat = calloc((size_t)nsubs * (size_t)nedits, sizeof(*lat));
	sent_lat = calloc((size_t)nsubs * (size_t)nedits, sizeof(*sent_lat));
	edits = calloc((size_t)nedits, sizeof(*edits));
	for (i = 0; i < nnodes; i++)
		node_lat[i] = calloc((size_t)nsubs * (size_t)nedits, sizeof(double));
	if (!lv.subs || !lv.t_frame || !lat || !sent_lat || !edits || na == 0) {
		rc = na == 0 ? COMB_EINVAL : COMB_ENOMEM;
		goto out;
	}

	/* The edits, signed before anything is timed: each names the
	 * revision the previous edit of its artifact made. */
	for (i = 0; i < na; i++)
		memcpy(prev[i], arts[i]->id, 65);
	for (e = 0; e < nedits && rc == 0; e++) {
		int a = e % na;

		rc = bench_revision(&edits[e], l.admin_pk, arts[a]->d, arts[a]->h, "update",
				    prev[a], bench_unix_time(), 0x11fe0000ULL + (uint64_t)e);
		rc = rc ? rc : comb_event_sign(&edits[e], l.admin_sk);
		memcpy(prev[a], edits[e].id, 65);
	}
	if (rc)
		goto out;

	/* Subscribers over the nodes, then the writer on the first node. */
	t0 = bench_now();
	bench_loop_init(&lv.loop, live_message, &lv);
	for (i = 0; i < nsubs; i++) {
		struct bench_ws *ws = bench_ws_connect(&lv.loop, addrs[i % nnodes],
						       hosts[i % nnodes], l.reader_sk,
						       i % nnodes);

		if (!ws) {
			rc = COMB_EIO;
			json_array_append_new(errors, json_sprintf("subscriber %d: %s", i,
								   lv.loop.first_error));
			goto report;
		}
		ws->user = &lv.subs[i];
		/* Keep the handshakes in flight bounded. */
		if (i % 100 == 99)
			bench_loop_run(&lv.loop, NULL, 0.05);
	}
	lv.writer = bench_ws_connect(&lv.loop, addrs[0], hosts[0], l.admin_sk, 0);
	if (!lv.writer || bench_loop_run(&lv.loop, live_authed, 60) || lv.loop.closed) {
		rc = COMB_EIO;
		json_array_append_new(errors, json_sprintf("authentication: %d of %d, %s",
							   lv.loop.authed, nsubs + 1,
							   lv.loop.first_error));
		goto report;
	}
	lv.phase = 1;
	{
		int ch = live_channel;

		rc = sync_req(&req, "live", &l, &ch, 1);
	}
	for (i = 0; i < nsubs && rc == 0; i++)
		rc = bench_ws_send(&lv.loop, lv.loop.conns[i], req.data, req.len);
	if (rc == 0 && bench_loop_run(&lv.loop, live_snapshots_done, 120))
		json_array_append_new(errors, json_sprintf("only %d of %d syncs reached EOSE",
							   lv.eosed, nsubs));
	for (i = 0; i < nsubs; i++) {
		if (lv.subs[i].closed[0]) {
			json_array_append_new(errors, json_sprintf("sync closed: %s",
								   lv.subs[i].closed));
			break;
		}
		if (lv.subs[i].eose && lv.subs[i].snapshot != na) {
			json_array_append_new(errors, json_sprintf(
				"a snapshot held %d events, %d expected", lv.subs[i].snapshot, na));
			break;
		}
	}
	setup_s = bench_now() - t0;
	if (json_array_size(errors) || rc)
		goto report;

	/* The edits, one at a time. */
	lv.phase = 2;
	for (e = 0; e < nedits; e++) {
		comb_buf_reset(&json);
		comb_buf_reset(&frame);
		comb_event_to_json(&edits[e], &json);
		comb_buf_printf(&frame, "[\"EVENT\",%s]", json.data);
		memcpy(lv.edit_id, edits[e].id, 65);
		lv.ok_seen = false;
		lv.received = 0;
		for (i = 0; i < nsubs; i++)
			lv.t_frame[i] = -1;
		lv.t_send = bench_now();
		bench_ws_send(&lv.loop, lv.writer, frame.data, frame.len);
		if (bench_loop_run(&lv.loop, live_edit_done, 10) || !lv.ok_accepted ||
		    lv.loop.closed || lv.closed_subs) {
			json_array_append_new(errors, json_sprintf(
				"edit %d: ok %s, delivered to %d of %d (%s)", e,
				lv.ok_seen ? lv.ok_message : "missing", lv.received, nsubs,
				lv.loop.first_error));
			break;
		}
		for (i = 0; i < nsubs; i++) {
			double ms = (lv.t_frame[i] - lv.t_ok) * 1e3;
			int node = lv.loop.conns[i]->node;

			sent_lat[nlat] = (lv.t_frame[i] - lv.t_send) * 1e3;
			lat[nlat++] = ms;
			node_lat[node][node_n[node]++] = ms;
			if (ms < 0)
				early++;
		}
		completed++;
	}
	for (i = 0; i < nsubs; i++) {
		unexpected += lv.subs[i].unexpected;
		if (lv.subs[i].closed[0] && json_array_size(errors) < 20)
			json_array_append_new(errors, json_sprintf("sync closed: %s",
								   lv.subs[i].closed));
	}
	if (unexpected)
		json_array_append_new(errors, json_sprintf("%d unexpected frames", unexpected));
report:
	for (i = 0; i < nnodes; i++)
		json_array_append_new(per_node, json_pack("{s:i,s:o,s:o}", "node", i,
			"p50_ms", node_n[i] ? json_real(bench_quantile(node_lat[i], node_n[i], 0.5)) : json_null(),
			"p99_ms", node_n[i] ? json_real(bench_quantile(node_lat[i], node_n[i], 0.99)) : json_null()));
	bench_print(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:i,s:f,s:o,s:o,s:o,s:b,s:o}",
		"command", "sync-live", "subscribers", nsubs, "nodes", nnodes,
		"edits", nedits, "edits_completed", completed,
		"snapshot_events", na,
		"p50_ms", nlat ? json_real(bench_quantile(lat, nlat, 0.5)) : json_null(),
		"p99_ms", nlat ? json_real(bench_quantile(lat, nlat, 0.99)) : json_null(),
		"max_ms", nlat ? json_real(bench_quantile(lat, nlat, 1.0)) : json_null(),
		"min_ms", nlat ? json_real(bench_quantile(lat, nlat, 0.0)) : json_null(),
		"frames_before_ok", early, "setup_s", setup_s, "per_node", per_node,
		"from_send_p50_ms", nlat ? json_real(bench_quantile(sent_lat, nlat, 0.5)) : json_null(),
		"from_send_p99_ms", nlat ? json_real(bench_quantile(sent_lat, nlat, 0.99)) : json_null(),
		"ok", rc == 0 && json_array_size(errors) == 0 && completed == nedits,
		"errors", json_incref(errors)));
	per_node = NULL;
	if (json_array_size(errors) || completed != nedits)
		rc = rc ? rc : COMB_EINVAL;
	bench_loop_release(&lv.loop);
out:
	if (rc && rc != COMB_EINVAL)
		bench_log("sync-live failed: %s", comb_strerror(rc));
	json_decref(errors);
	json_decref(per_node);
	for (e = 0; edits && e < nedits; e++)
		comb_event_release(&edits[e]);
	for (i = 0; i < nnodes && i < 8; i++)
		free(node_lat[i]);
	free(edits);
	free(lat);
	free(sent_lat);
	free(lv.subs);
	free(lv.t_frame);
	comb_buf_release(&req);
	comb_buf_release(&frame);
	comb_buf_release(&json);
	bench_manifest_release(&m);
	return rc ? 1 : 0;
}
