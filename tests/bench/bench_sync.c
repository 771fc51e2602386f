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

/* Room for one EVENT frame of the fixture (about 5.1 KB), faulted in for
 * all the expected frames before the clock. */
#define SNAP_FRAME_ROOM 6144

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
		} else if (bench_buf_prefault(&s.frames, (size_t)expected * SNAP_FRAME_ROOM)) {
			snprintf(reason, sizeof(reason), "out of memory");
			bad++;
		} else {
			/* the frames' room faulted in before the clock */
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

/* ---- sync-live and req-live ---- */

struct sync_live {
	struct comb_buf req;  /* the REQ of the live channel */
	int *snapshot;        /* [nsubs] events before EOSE */
	int expected;         /* events the snapshot holds; -1: any */
};

/* Sends the sync REQ of the live channel to subscriber sub. */
static int sync_live_open(struct bench_live *lv, int sub)
{
	struct sync_live *sl = lv->ctx;

	return bench_ws_send(&lv->loop, lv->subs[sub].ws, sl->req.data, sl->req.len);
}

/* An EVENT before EOSE is part of the snapshot, counted; after it, each
 * must be the edit in flight. */
static enum bench_live_frame sync_live_frame(struct bench_live *lv, int sub,
					     const char *msg, size_t len, char id[65])
{
	struct sync_live *sl = lv->ctx;

	if (bench_msg_is(msg, len, "[\"EVENT\",\"live\",")) {
		if (!lv->subs[sub].eose) {
			sl->snapshot[sub]++;
			return BENCH_LIVE_NOTHING;
		}
		return bench_event_id_of(msg, len, id) ? BENCH_LIVE_REVISION
						       : BENCH_LIVE_UNEXPECTED;
	}
	if (bench_msg_is(msg, len, "[\"EOSE\",\"live\""))
		return BENCH_LIVE_EOSE;
	if (bench_msg_is(msg, len, "[\"CLOSED\",\"live\""))
		return BENCH_LIVE_CLOSED;
	return BENCH_LIVE_NOTHING;
}

/* Every snapshot holds the live channel's artifacts. */
static json_t *sync_live_opening_error(struct bench_live *lv, int sub)
{
	struct sync_live *sl = lv->ctx;

	if (!lv->subs[sub].eose || sl->expected < 0 || sl->snapshot[sub] == sl->expected)
		return NULL;
	return json_sprintf("a snapshot held %d events, %d expected", sl->snapshot[sub],
			    sl->expected);
}

static const struct bench_live_ops sync_live_ops = {
	.open = sync_live_open,
	.frame = sync_live_frame,
	.opening_error = sync_live_opening_error,
};

/* The plain REQ of the live channel's revisions from since on (the first
 * write's created_at): at most one stored event, then every revision
 * live. Without since, its stored part would walk the channel's newer
 * chat messages (chat_ingest's) to find one revision. */
static int plain_req(struct comb_buf *b, const struct bench_layout *l, int channel,
		     int64_t since)
{
	char id[37];

	bench_channel_id(l, channel, id);
	comb_buf_reset(b);
	return comb_buf_printf(b, "[\"REQ\",\"live\",{\"kinds\":[45010],\"#h\":[\"%s\"],"
			       "\"since\":%lld,\"limit\":1}]", id, (long long)since);
}

/*
 * sync-live (plain false): subscribers hold a `current` sync of the live
 * channel; req-live (plain true): a plain REQ of its revisions. Both
 * time each edit from the writer's OK to its frame at every subscriber.
 */
static int live_latency(int argc, char **argv, bool plain)
{
	const char *name = plain ? "req-live" : "sync-live";
	const char *manifest = bench_opt(argc, argv, "--manifest", NULL);
	struct bench_nodes nodes;
	int nsubs = (int)bench_opt_long(argc, argv, "--subs", 1000);
	int nedits = (int)bench_opt_long(argc, argv, "--edits", 200);
	struct bench_live lv;
	struct sync_live sl = {0};
	struct bench_manifest m = {0};
	struct bench_layout l;
	const struct bench_item *arts[BENCH_PER_CHANNEL];
	char prev[BENCH_PER_CHANNEL][65], series[40], d[37], h[37];
	double setup_s = 0, t0;
	json_t *errors = json_array();
	int na = 0, e, rc, completed = 0;
	int live_channel;
	size_t k;

	comb_buf_init(&sl.req, 65536);
	if (!manifest || !bench_nodes_from_opts(&nodes, argc, argv) || nsubs < 1 ||
	    nedits < 1) {
		bench_log("%s: --addrs, --hosts (as many) and --manifest are required", name);
		return 2;
	}
	rc = bench_live_init(&lv, &sync_live_ops, &sl, nsubs, nodes.n, nedits);
	rc = rc ? rc : bench_layout_from_opts(&l, argc, argv);
	rc = rc ? rc : bench_manifest_read(manifest, &m);
	if (rc)
		goto out;
	/* plain REQs follow the ingest channel, where their writes add
	 * artifacts no other scenario counts, as its owner (the reader is no
	 * member there) */
	live_channel = plain ? BENCH_CH_INGEST : l.live_channel;
	bench_channel_id(&l, live_channel, h);
	for (k = 0; k < m.readable && na < BENCH_PER_CHANNEL; k++)
		if (m.items[k].channel == l.live_channel)
			arts[na++] = &m.items[k];
	sl.expected = plain ? -1 : na;
	sl.snapshot = calloc((size_t)nsubs, sizeof(*sl.snapshot));
	if (!sl.snapshot || na == 0) {
		rc = na == 0 ? COMB_EINVAL : COMB_ENOMEM;
		goto out;
	}

	/* The edits, signed before anything is timed: for syncs each names
	 * the revision the previous edit of its artifact made (the loaded
	 * ones first); for plain REQs each creates an artifact of its own. */
	for (e = 0; e < na; e++)
		memcpy(prev[e], arts[e]->id, 65);
	snprintf(series, sizeof(series), "req-live-%lld", (long long)bench_unix_time());
	for (e = 0; e < nedits && rc == 0; e++) {
		int a = e % na;

		if (plain) {
			bench_artifact_id(&l, series, e, d);
			rc = bench_revision(&lv.edits[e], l.admin_pk, d, h, "create",
					    NULL, bench_unix_time(), 0x12fe0000ULL + (uint64_t)e);
		} else {
			rc = bench_revision(&lv.edits[e], l.admin_pk, arts[a]->d, arts[a]->h,
					    "update", prev[a], bench_unix_time(),
					    0x11fe0000ULL + (uint64_t)e);
		}
		rc = rc ? rc : comb_event_sign(&lv.edits[e], l.admin_sk);
		memcpy(prev[a], lv.edits[e].id, 65);
	}
	if (rc)
		goto out;

	/* Subscribers over the nodes, then the writer on the first node. */
	t0 = bench_now();
	rc = bench_live_connect(&lv, 0, &nodes, plain ? l.admin_sk : l.reader_sk, errors);
	if (rc)
		goto report;
	lv.writer = bench_ws_connect(&lv.loop, nodes.addr[0], nodes.host[0], l.admin_sk, 0);
	if (!lv.writer || !bench_live_authenticate(&lv, 60)) {
		rc = COMB_EIO;
		json_array_append_new(errors, json_sprintf("authentication: %d of %d, %s",
							   lv.loop.authed, nsubs + 1,
							   lv.loop.first_error));
		goto report;
	}
	rc = plain ? plain_req(&sl.req, &l, live_channel, lv.edits[0].created_at)
		   : sync_req(&sl.req, "live", &l, &live_channel, 1);
	rc = rc ? rc : bench_live_open(&lv, 0, 120, errors);
	setup_s = bench_now() - t0;
	if (json_array_size(errors) || rc)
		goto report;

	/* The edits, one at a time. */
	completed = bench_live_edits(&lv, 10, errors);
	bench_live_tally(&lv, completed, false, errors);
report:
	bench_print(json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:i,s:f,s:o,s:o,s:o,s:o,s:b,s:o}",
		"command", name, "subscribers", nsubs, "nodes", nodes.n,
		"edits", nedits, "edits_completed", completed,
		"snapshot_events", na,
		"p50_ms", bench_live_ms(&lv, 0.5), "p99_ms", bench_live_ms(&lv, 0.99),
		"max_ms", bench_live_ms(&lv, 1.0), "min_ms", bench_live_ms(&lv, 0.0),
		"frames_before_ok", lv.early, "setup_s", setup_s,
		"per_node", bench_live_per_node(&lv),
		"from_send_p50_ms", bench_live_from_send_ms(&lv, 0.5),
		"from_send_p99_ms", bench_live_from_send_ms(&lv, 0.99),
		"frame_bytes", bench_live_frame_bytes(&lv),
		"ok", rc == 0 && json_array_size(errors) == 0 && completed == nedits,
		"errors", json_incref(errors)));
	if (json_array_size(errors) || completed != nedits)
		rc = rc ? rc : COMB_EINVAL;
out:
	if (rc && rc != COMB_EINVAL)
		bench_log("%s failed: %s", name, comb_strerror(rc));
	json_decref(errors);
	free(sl.snapshot);
	bench_live_release(&lv);
	comb_buf_release(&sl.req);
	bench_manifest_release(&m);
	return rc ? 1 : 0;
}

int bench_cmd_sync_live(int argc, char **argv)
{
	return live_latency(argc, argv, false);
}

int bench_cmd_req_live(int argc, char **argv)
{
	return live_latency(argc, argv, true);
}
