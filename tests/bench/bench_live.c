/*
 * The live-latency driver shared by sync-live and resume-live: many
 * subscribers over the relay nodes, one writer, edits one at a time, each
 * awaited until its OK and its frame at every subscriber before the next.
 * The scenario supplies how a subscription is opened and what a
 * subscriber's message is (struct bench_live_ops); the driver connects,
 * authenticates, counts, times and reports the per-node figures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "comb/error.h"

/* The writer's OK for the edit in flight, or a subscriber's message. */
static void live_message(struct bench_loop *loop, struct bench_ws *ws,
			 const char *msg, size_t len, double t)
{
	struct bench_live *lv = loop->ctx;
	struct bench_live_sub *st = ws->user;
	char id[65];
	int sub;

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
	sub = (int)(st - lv->subs);
	switch (lv->ops->frame(lv, sub, msg, len, id)) {
	case BENCH_LIVE_REVISION:
		if (st->eose && !strcmp(id, lv->edit_id) && lv->t_frame[sub] < 0) {
			lv->t_frame[sub] = t;
			st->got++;
			lv->received++;
			/* an unmasked server frame: 2 header bytes, 2 more for
			 * a length of 126 to 65535, 8 more beyond */
			lv->frame_bytes += (double)(len + (len < 126 ? 2 : len < 65536 ? 4 : 10));
		} else {
			st->unexpected++;
		}
		break;
	case BENCH_LIVE_UNEXPECTED:
		st->unexpected++;
		break;
	case BENCH_LIVE_EOSE:
		if (!st->eose)
			lv->eosed++;
		st->eose = true;
		break;
	case BENCH_LIVE_CLOSED:
		if (!st->closed[0])
			lv->closed_subs++;
		snprintf(st->closed, sizeof(st->closed), "%.*s",
			 (int)(len < 190 ? len : 190), msg);
		break;
	case BENCH_LIVE_NOTHING:
		break;
	}
}

int bench_live_init(struct bench_live *lv, const struct bench_live_ops *ops,
		    void *ctx, int nsubs, int nnodes, int nedits)
{
	size_t cells = (size_t)nsubs * (size_t)nedits;
	int i, rc;

	memset(lv, 0, sizeof(*lv));
	rc = bench_loop_init(&lv->loop, live_message, lv);
	lv->ops = ops;
	lv->ctx = ctx;
	lv->nsubs = nsubs;
	lv->nnodes = nnodes;
	lv->subs = calloc((size_t)nsubs, sizeof(*lv->subs));
	lv->t_frame = calloc((size_t)nsubs, sizeof(*lv->t_frame));
	lv->from_ok = calloc(cells, sizeof(*lv->from_ok));
	lv->from_send = calloc(cells, sizeof(*lv->from_send));
	lv->edits = calloc((size_t)nedits, sizeof(*lv->edits));
	lv->nedits = nedits;
	if (!lv->subs || !lv->t_frame || !lv->from_ok || !lv->from_send || !lv->edits)
		rc = rc ? rc : COMB_ENOMEM;
	for (i = 0; i < nnodes && i < 8; i++) {
		lv->node_ms[i] = calloc(cells, sizeof(double));
		if (!lv->node_ms[i])
			rc = rc ? rc : COMB_ENOMEM;
	}
	return rc;
}

void bench_live_release(struct bench_live *lv)
{
	int i;

	bench_loop_release(&lv->loop);
	for (i = 0; lv->edits && i < lv->nedits; i++)
		comb_event_release(&lv->edits[i]);
	free(lv->edits);
	for (i = 0; i < 8; i++)
		free(lv->node_ms[i]);
	free(lv->subs);
	free(lv->t_frame);
	free(lv->from_ok);
	free(lv->from_send);
}

struct bench_ws *bench_live_subscriber(struct bench_live *lv, int sub,
				       const char *addr, const char *host,
				       const unsigned char *sk, int node)
{
	struct bench_ws *ws = bench_ws_connect(&lv->loop, addr, host, sk, node);

	if (ws) {
		ws->user = &lv->subs[sub];
		lv->subs[sub].ws = ws;
	}
	return ws;
}

int bench_live_connect(struct bench_live *lv, int from,
		       const struct bench_nodes *nodes, const unsigned char *sk,
		       json_t *errors)
{
	int i;

	for (i = from; i < lv->nsubs; i++) {
		int node = i % lv->nnodes;

		if (!bench_live_subscriber(lv, i, nodes->addr[node],
					   nodes->host[node], sk, node)) {
			json_array_append_new(errors, json_sprintf("subscriber %d: %s", i,
								   lv->loop.first_error));
			return COMB_EIO;
		}
		/* Keep the handshakes in flight bounded. */
		if (i % 100 == 99)
			bench_loop_run(&lv->loop, NULL, 0.05);
	}
	return 0;
}

static bool live_all_authed(void *ctx)
{
	struct bench_live *lv = ctx;

	return lv->loop.authed + lv->loop.closed >= lv->loop.n;
}

bool bench_live_authenticate(struct bench_live *lv, double timeout_s)
{
	return bench_loop_run(&lv->loop, live_all_authed, timeout_s) == 0 &&
	       lv->loop.closed == 0;
}

static bool live_all_opened(void *ctx)
{
	struct bench_live *lv = ctx;

	return lv->eosed + lv->closed_subs + lv->loop.closed >= lv->nsubs;
}

int bench_live_open(struct bench_live *lv, int from, double timeout_s,
		    json_t *errors)
{
	json_t *why;
	int i, rc = 0;

	for (i = from; i < lv->nsubs && rc == 0; i++)
		rc = lv->ops->open(lv, i);
	if (rc)
		return rc;
	if (bench_loop_run(&lv->loop, live_all_opened, timeout_s))
		json_array_append_new(errors, json_sprintf("only %d of %d syncs reached EOSE",
							   lv->eosed, lv->nsubs));
	for (i = 0; i < lv->nsubs; i++) {
		if (lv->subs[i].closed[0]) {
			json_array_append_new(errors, json_sprintf("sync closed: %s",
								   lv->subs[i].closed));
			break;
		}
		why = lv->ops->opening_error(lv, i);
		if (why) {
			json_array_append_new(errors, why);
			break;
		}
	}
	return 0;
}

static bool live_edit_done(void *ctx)
{
	struct bench_live *lv = ctx;

	return (lv->ok_seen && !lv->ok_accepted) || lv->loop.closed > 0 ||
	       lv->closed_subs > 0 || (lv->ok_seen && lv->received >= lv->nsubs);
}

/* Keeps the figures of the edit just completed. */
static void live_record(struct bench_live *lv)
{
	int i;

	for (i = 0; i < lv->nsubs; i++) {
		double ms = (lv->t_frame[i] - lv->t_ok) * 1e3;
		int node = lv->subs[i].ws->node;

		lv->from_send[lv->n] = (lv->t_frame[i] - lv->t_send) * 1e3;
		lv->from_ok[lv->n++] = ms;
		lv->node_ms[node][lv->node_n[node]++] = ms;
		if (ms < 0)
			lv->early++;
	}
}

int bench_live_edits(struct bench_live *lv, double timeout_s, json_t *errors)
{
	const struct comb_event *edits = lv->edits;
	struct comb_buf frame, json;
	int e, i, completed = 0;

	comb_buf_init(&frame, 1 << 20);
	comb_buf_init(&json, 1 << 20);
	for (e = 0; e < lv->nedits; e++) {
		comb_buf_reset(&json);
		comb_buf_reset(&frame);
		comb_event_to_json(&edits[e], &json);
		comb_buf_printf(&frame, "[\"EVENT\",%s]", json.data);
		memcpy(lv->edit_id, edits[e].id, 65);
		lv->ok_seen = false;
		lv->received = 0;
		for (i = 0; i < lv->nsubs; i++)
			lv->t_frame[i] = -1;
		lv->t_send = bench_now();
		bench_ws_send(&lv->loop, lv->writer, frame.data, frame.len);
		if (bench_loop_run(&lv->loop, live_edit_done, timeout_s) || !lv->ok_accepted ||
		    lv->loop.closed || lv->closed_subs) {
			json_array_append_new(errors, json_sprintf(
				"edit %d: ok %s, delivered to %d of %d (%s)", e,
				lv->ok_seen ? lv->ok_message : "missing", lv->received,
				lv->nsubs, lv->loop.first_error));
			break;
		}
		live_record(lv);
		completed++;
	}
	comb_buf_release(&frame);
	comb_buf_release(&json);
	return completed;
}

int bench_live_tally(struct bench_live *lv, int completed, bool every_edit,
		     json_t *errors)
{
	int i, unexpected = 0;

	for (i = 0; i < lv->nsubs; i++) {
		const struct bench_live_sub *st = &lv->subs[i];

		unexpected += st->unexpected;
		if (every_edit && st->got != completed && json_array_size(errors) < 20)
			json_array_append_new(errors, json_sprintf("subscriber %d got %d of %d edits",
								   i, st->got, completed));
		if (st->closed[0] && json_array_size(errors) < 20)
			json_array_append_new(errors, json_sprintf("sync closed: %s", st->closed));
	}
	if (unexpected)
		json_array_append_new(errors, json_sprintf("%d unexpected frames", unexpected));
	return unexpected;
}

json_t *bench_live_ms(struct bench_live *lv, double q)
{
	return lv->n ? json_real(bench_quantile(lv->from_ok, lv->n, q)) : json_null();
}

json_t *bench_live_from_send_ms(struct bench_live *lv, double q)
{
	return lv->n ? json_real(bench_quantile(lv->from_send, lv->n, q)) : json_null();
}

json_t *bench_live_frame_bytes(struct bench_live *lv)
{
	size_t frames = 0;
	int i;

	for (i = 0; i < lv->nsubs; i++)
		frames += (size_t)lv->subs[i].got;
	return frames ? json_integer((json_int_t)(lv->frame_bytes / (double)frames + 0.5)) :
			json_null();
}

json_t *bench_live_per_node(struct bench_live *lv)
{
	json_t *per_node = json_array();
	int i;

	for (i = 0; i < lv->nnodes; i++)
		json_array_append_new(per_node, json_pack("{s:i,s:o,s:o}", "node", i,
			"p50_ms", lv->node_n[i] ?
				json_real(bench_quantile(lv->node_ms[i], lv->node_n[i], 0.5)) :
				json_null(),
			"p99_ms", lv->node_n[i] ?
				json_real(bench_quantile(lv->node_ms[i], lv->node_n[i], 0.99)) :
				json_null()));
	return per_node;
}
