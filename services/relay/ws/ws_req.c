/*
 * Plain REQ subscriptions (see ws_int.h).
 *
 * Order of a REQ (session.h, "sub.c"): the subscription registers for
 * live events first and holds what arrives until it is live; it waits
 * until its community's feed is trusted; then the stored events are read
 * (one query per filter, the same SQL shape and access rule as POST
 * /query) and sent; then EOSE; then, under the session's mu, the held
 * events that were not already sent as stored ones, and the subscription
 * turns live. So nothing committed after the REQ arrived is missed, and
 * nothing is sent twice. Closed by the relay before it is live, it still
 * sends its stored events and EOSE, then CLOSED.
 *
 * Live events are pushed without waiting; a full outbox closes the
 * subscription with `resync: slow consumer`.
 */
#include "ws_int.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/access.h"
#include "comb/error.h"
#include "comb/hex.h"
#include "comb/log.h"
#include "comb/uuid.h"
#include "feed/feed.h"
#include "hub/hub.h"
#include "protocol_limits.h"
#include "readpos/readpos.h"
#include "read/read.h"
#include "session/session.h"
#include "sync/sync.h"

/* An event that arrived while the stored events were being sent. */
struct held {
	struct held *next;
	char id[65];
	comb_lsn at;                     /* as the hub_event's */
	size_t len;
	char frame[];
};

struct plain_sub {
	struct ws_sub head;              /* first */
	json_t *filters_json;            /* owned; the filters borrow from it */
	struct plain_filter *filters;
	size_t nfilters;
	char (*channels)[37];            /* live interest; none: community */
	size_t nchannels;
	/* guarded by the session's mu: what arrived before it was live */
	struct held *held_head, *held_tail;
	bool held_overflow;
	/* bytes counted against the connection's budget (ws_session_hold):
	 * the sub itself, its filters and the held events */
	atomic_size_t held_bytes;
	/* the ids of the events sent as stored ones (32 bytes each): a live
	 * copy of one of them (its signal may come after EOSE) is not sent
	 * again */
	struct ws_held_map stored;
	/* the primary's WAL position once registered: the stored events are
	 * read at it or later (ws_session_access_now); set under the
	 * session's lock */
	comb_lsn read_at;
};


static struct plain_sub *sub_of(const struct hub_sub *hs)
{
	return (struct plain_sub *)ws_sub_of(hs);
}

/* ------------------------------------------------------------------ */
/* the kind of subscription a plain REQ is to the hub: live events from
 * the live delivery thread (feed/), interruptions */

/* The kind's match (hub.h): some filter matches the event. */
static bool live_match(struct hub_sub *hs, const struct hub_event *ev, bool *named)
{
	struct plain_sub *sub = sub_of(hs);
	bool any = false;
	size_t i;

	for (i = 0; i < sub->nfilters; i++) {
		if (filter_matches(&sub->filters[i], ev->ev)) {
			any = true;
			/* A filter naming channels matched, so it names this one. */
			if (sub->filters[i].tags[2])
				*named = true;
		}
	}
	return any;
}

/* True when id (64 hex digits) is one of sent, the ids of events sent. */
static bool sent_before(const struct ws_held_map *sent, const char *id)
{
	unsigned char key[32];

	return !comb_hex_decode(id, key, sizeof(key)) && ws_held_map_get(sent, key);
}

/* Adds id to sent. Returns 1 when it was not there yet, 0 when it was,
 * or what ws_held_map_put returned. An id that is not 64 hex digits
 * (none is stored) is not remembered. */
static int mark_sent(struct ws_held_map *sent, const char *id)
{
	unsigned char key[32];
	size_t before = sent->count;
	int rc;

	if (comb_hex_decode(id, key, sizeof(key)))
		return 1;
	rc = ws_held_map_put(sent, key, 0);
	return rc ? rc : sent->count > before;
}

/*
 * True when an event whose signal names position at (0: unknown) is the
 * stored events' to answer for: at lies below the primary's position
 * at sub's registration, so the event was visible before it (capture
 * reads the position once PostgreSQL delivered the change, which it does
 * once the change is visible) and the stored events, read later, hold it
 * or left it out (withheld, deleted or past the limit by then). Sent live
 * it could come from a standby behind that read. The caller holds the
 * session's lock.
 */
static bool stored_answers(const struct plain_sub *sub, comb_lsn at)
{
	return at && at < sub->read_at;
}

/* Counts bytes as held by sub against its connection's budget; false
 * when that would pass it (nothing counted then). */
static bool sub_hold(struct plain_sub *sub, size_t bytes)
{
	if (!ws_session_hold(sub->head.session, bytes))
		return false;
	atomic_fetch_add(&sub->held_bytes, bytes);
	return true;
}

/* Gives back bytes sub held. */
static void sub_unhold(struct plain_sub *sub, size_t bytes)
{
	atomic_fetch_sub(&sub->held_bytes, bytes);
	ws_session_unhold(sub->head.session, bytes);
}

/* The kind's deliver (hub.h): held while the stored events are sent,
 * else pushed without waiting; an event sent as a stored one is not sent
 * again. */
static void live_deliver(struct hub_sub *hs, const struct hub_event *ev)
{
	struct plain_sub *sub = sub_of(hs);
	struct ws_session *s = sub->head.session;
	struct comb_buf frame;
	struct held *h;
	int rc;

	comb_buf_init(&frame, ev->json_len + 256);
	if (ws_format_event(&frame, sub->head.id, ev->json, ev->json_len)) {
		comb_buf_release(&frame);
		return;
	}
	pthread_mutex_lock(&s->mu);
	if (sub->head.dead || sent_before(&sub->stored, ev->ev->id) ||
	    stored_answers(sub, ev->at)) {
		/* closed already, or the stored events' */
	} else if (!sub->head.live) {
		size_t cost = sizeof(*h) + frame.len;

		h = NULL;
		if (!sub->held_overflow && sub_hold(sub, cost)) {
			h = malloc(cost);
			if (!h)
				sub_unhold(sub, cost);
		}
		if (!h) {
			sub->held_overflow = true;
		} else {
			h->next = NULL;
			memcpy(h->id, ev->ev->id, sizeof(h->id));
			h->at = ev->at;
			h->len = frame.len;
			memcpy(h->frame, frame.data, frame.len);
			if (sub->held_tail)
				sub->held_tail->next = h;
			else
				sub->held_head = h;
			sub->held_tail = h;
		}
	} else {
		rc = ws_outbox_push(s->outbox, WS_OP_TEXT, frame.data, frame.len, 0);
		if (rc == COMB_ETOOBIG || rc == COMB_ENOMEM)
			ws_sub_close_locked(&sub->head, "resync: slow consumer");
		else if (rc)
			sub->head.dead = true;  /* the connection is closing */
	}
	pthread_mutex_unlock(&s->mu);
	comb_buf_release(&frame);
}

static const struct hub_kind plain_kind = {
	.interrupt = ws_sub_interrupt,
	.match = live_match,
	.deliver = live_deliver,
};

/* ------------------------------------------------------------------ */
/* lifecycle */

static void free_held(struct plain_sub *sub)
{
	struct held *h = sub->held_head, *next;

	for (; h; h = next) {
		next = h->next;
		sub_unhold(sub, sizeof(*h) + h->len);
		free(h);
	}
	sub->held_head = sub->held_tail = NULL;
}

static void sub_release(struct ws_session *s, struct ws_sub *base)
{
	struct plain_sub *sub = (struct plain_sub *)base;

	hub_sub_remove(&sub->head.hub);
	free_held(sub);
	ws_session_unhold(s, atomic_load(&sub->held_bytes));
	ws_held_map_release(&sub->stored);
	free(sub->channels);
	free(sub->filters);
	json_decref(sub->filters_json);
	free(sub);
}

/*
 * Sets the live interest of sub: the #h channels when every filter names
 * some (only canonical ids can match a channel; the hub registers a
 * repeated one once), else the whole community. Returns false when no
 * event can match live (every filter names only impossible channels).
 */
static bool set_channels(struct plain_sub *sub)
{
	size_t i, j, n = 0;

	for (i = 0; i < sub->nfilters; i++) {
		if (!sub->filters[i].tags[2])
			return true;
		n += json_array_size(sub->filters[i].tags[2]);
	}
	sub->channels = calloc(n ? n : 1, sizeof(*sub->channels));
	if (!sub->channels)
		return true;  /* fall back to the community: matching still filters */
	for (i = 0; i < sub->nfilters; i++) {
		const json_t *h = sub->filters[i].tags[2];

		for (j = 0; j < json_array_size(h); j++) {
			const char *v = json_string_value(json_array_get(h, j));

			if (comb_uuid_is_canonical(v))
				snprintf(sub->channels[sub->nchannels++], 37, "%s", v);
		}
	}
	return sub->nchannels > 0;
}

/* ------------------------------------------------------------------ */
/* the stored events */

/* Runs the stored query of filter f into *result (each event's id and
 * seq, in the filter's order) on a server at WAL position `at` or later
 * (a standby or the primary, readpos_borrow), borrowing its connection
 * for the statement only; *bytes says where the events' bytes the
 * revision cache lacks are read (a server that has them all). Returns 0,
 * or a negative COMB_E* with the CLOSED message in why. */
static int query_stored(struct ws_session *s, const struct plain_filter *f,
			comb_lsn at, PGresult **result, struct event_source *bytes,
			char *why, size_t whylen)
{
	char keys[ACCESS_KEYS_LITERAL];
	struct comb_read_lease lease;
	int rc = 0;

	if (readpos_borrow(s->relay, &s->community, s->pubkey, at, 2000, &lease)) {
		*result = NULL;
		snprintf(why, whylen, "error: database unavailable");
		return COMB_EUNAVAIL;
	}
	reader_access_literal(&s->access, keys);
	*result = query_plain_run(lease.pool, lease.conn, f, QUERY_ID_SEQ,
				  s->community.id_text, s->pubkey, keys);
	if (!*result) {
		snprintf(why, whylen, "error: out of memory");
		rc = COMB_ENOMEM;
	} else if (PQresultStatus(*result) != PGRES_TUPLES_OK) {
		if (comb_db_is_error(*result, "57014")) {
			snprintf(why, whylen, "error: query budget exceeded");
		} else {
			comb_warn("websocket stored query failed: %s",
				  PQresultErrorMessage(*result));
			snprintf(why, whylen, "error: database unavailable");
		}
		rc = COMB_EUNAVAIL;
	}
	if (rc == 0)
		read_misses_source_of(s->relay, &lease, bytes);
	else
		*bytes = (struct event_source){.pool = s->relay->db};
	comb_read_release(s->relay->reads, &lease, comb_db_conn_lost(lease.conn));
	return rc;
}

/* True when filter i repeats an earlier filter of the REQ: its events
 * are the same, so it is not queried again. */
static bool repeated_filter(const struct plain_sub *sub, size_t i)
{
	const json_t *f = json_array_get(sub->filters_json, i);
	size_t j;

	for (j = 0; j < i; j++)
		if (json_equal(f, json_array_get(sub->filters_json, j)))
			return true;
	return false;
}

/* The CLOSED reason for a mark_sent that failed with rc; returns rc. */
static int budget_failure(int rc, char *why, size_t whylen)
{
	snprintf(why, whylen, "%s", rc == COMB_EDENIED ? WS_BUDGET_EXCEEDED
						       : "error: out of memory");
	return rc;
}

/* The newest events of a large filter sent before it is listed. */
#define FIRST_EVENTS 16

/*
 * Sends the newest FIRST_EVENTS events of filter f (each not sent yet),
 * listed by one small query, so that the client has them while the rest
 * is listed; their ids go to first[0..*nfirst).
 */
static int send_first(struct plain_sub *sub, struct ws_event_batch *out,
		      const struct plain_filter *f, struct ws_held_map *sent,
		      char first[FIRST_EVENTS][65], int *nfirst, char *why,
		      size_t whylen)
{
	struct ws_session *s = sub->head.session;
	struct plain_filter head = *f;
	int64_t seqs[FIRST_EVENTS];
	struct event_source bytes;
	PGresult *result;
	int rc, row, added;
	size_t n = 0;

	head.limit = FIRST_EVENTS;
	rc = query_stored(s, &head, sub->read_at, &result, &bytes, why, whylen);
	for (row = 0; rc == 0 && row < PQntuples(result) && row < FIRST_EVENTS; row++) {
		snprintf(first[(*nfirst)++], 65, "%s", PQgetvalue(result, row, 0));
		added = mark_sent(sent, PQgetvalue(result, row, 0));
		if (added < 0)
			rc = budget_failure(added, why, whylen);
		else if (added)
			seqs[n++] = strtoll(PQgetvalue(result, row, 1), NULL, 10);
	}
	PQclear(result);
	if (rc == 0 && n > 0)
		rc = read_events_from(s->relay, &bytes, seqs, n, ws_event_batch_add, out,
				      why, whylen);
	return rc ? rc : ws_event_batch_flush(out, why, whylen);
}

/* True when id is one of first[0..n). */
static bool among(char first[FIRST_EVENTS][65], int n, const char *id)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(first[i], id))
			return true;
	return false;
}

/*
 * Sends the stored events (each once) and then EOSE with waiting pushes,
 * one filter at a time, their frames pushed together a batch at a time
 * (ws_event_batch), the last batch and EOSE in one write. A filter's
 * query lists its events' ids and seqs, and their bytes come from the
 * revision cache, the misses fetched a batch at a time as the client
 * reads (read_events_from), where the listing's server had them. A filter of more than a few events first
 * sends its newest few (send_first): they go out before the rest is
 * listed. At most one filter's list and one batch are held beside the
 * outbox, and no database connection while the client reads. The listing
 * may see events newer than the first query did; the filter still yields
 * at most its limit.
 */
static int send_stored(struct ws_session *s, struct plain_sub *sub,
		       struct ws_held_map *sent, char *why, size_t whylen)
{
	struct ws_event_batch out;
	struct event_source bytes;
	char first[FIRST_EVENTS][65];
	PGresult *result;
	int64_t *seqs;
	size_t i, n, want, taken;
	int rc = 0, row, nfirst, added;

	ws_event_batch_init(&out, s, sub->head.id, WS_PUSH_WAIT | WS_PUSH_STREAM);
	for (i = 0; i < sub->nfilters && rc == 0; i++) {
		const struct plain_filter *f = &sub->filters[i];
		if (repeated_filter(sub, i))
			continue;
		want = (size_t)(f->limit > 0 ? f->limit : s->relay->cfg.max_limit);
		nfirst = 0;
		if (!query_small_filter(f))
			rc = send_first(sub, &out, f, sent, first, &nfirst, why, whylen);
		taken = (size_t)nfirst;
		if (rc == 0)
			rc = query_stored(s, f, sub->read_at, &result, &bytes, why, whylen);
		seqs = rc ? NULL : malloc(((size_t)PQntuples(result) + 1) * sizeof(*seqs));
		if (rc == 0 && !seqs)
			rc = comb_fail(why, whylen, COMB_ENOMEM, "error: out of memory");
		for (row = 0, n = 0; rc == 0 && row < PQntuples(result); row++) {
			const char *id = PQgetvalue(result, row, 0);

			if (among(first, nfirst, id))
				continue;
			if (taken++ == want)
				break;
			added = mark_sent(sent, id);
			if (added < 0)
				rc = budget_failure(added, why, whylen);
			if (added <= 0)
				continue;
			seqs[n++] = strtoll(PQgetvalue(result, row, 1), NULL, 10);
		}
		PQclear(result);
		if (rc == 0 && n > 0)
			rc = read_events_from(s->relay, &bytes, seqs, n, ws_event_batch_add,
					      &out, why, whylen);
		free(seqs);
	}
	if (rc == 0)
		rc = ws_event_batch_eose(&out, why, whylen);
	ws_event_batch_release(&out);
	return rc;
}

/* After EOSE (send_stored): the held events not sent already, then live;
 * the sub takes over sent. One registered checks that its feed stayed
 * trusted since generation. */
static void finish_stored(struct ws_session *s, struct plain_sub *sub,
			  struct ws_held_map *sent, bool registered, uint64_t generation)
{
	struct held *h;
	int rc;

	if (registered && !feed_still_trusted(sub->head.hub.community, generation))
		ws_sub_close(&sub->head, FEED_INTERRUPTED);
	pthread_mutex_lock(&s->mu);
	if (!ws_sub_go_live_locked(&sub->head)) {
		/* closed before: its CLOSED went out after EOSE */
	} else if (sub->held_overflow) {
		ws_sub_close_locked(&sub->head, WS_BUDGET_EXCEEDED);
	} else {
		for (h = sub->held_head; h; h = h->next) {
			if (sent_before(sent, h->id) || stored_answers(sub, h->at))
				continue;
			rc = ws_outbox_push(s->outbox, WS_OP_TEXT, h->frame, h->len, 0);
			if (rc == COMB_ETOOBIG || rc == COMB_ENOMEM) {
				ws_sub_close_locked(&sub->head, "resync: slow consumer");
				break;
			}
			if (rc) {
				sub->head.dead = true;
				break;
			}
		}
	}
	free_held(sub);
	sub->stored = *sent;
	*sent = (struct ws_held_map){0};
	pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------ */
/* REQ and CLOSE */

/* The subscription id of msg, or NULL after a NOTICE. */
static const char *sub_id(struct ws_session *s, const json_t *msg)
{
	const json_t *v = json_array_get(msg, 1);
	const char *id = json_string_value(v);
	size_t len = json_string_length(v);

	if (!id || len == 0 || len > WS_SUB_ID_MAX || strlen(id) != len) {
		ws_send_notice(s, "invalid: a subscription id is a string of 1 to 64 characters",
			       WS_PUSH_WAIT);
		return NULL;
	}
	return id;
}

/* Checks the REQ's shape and limits; sends CLOSED and returns false when
 * it cannot be opened. */
static bool admissible(struct ws_session *s, const char *id, const json_t *msg,
		       int open)
{
	const struct comb_config *cfg = &s->relay->cfg;
	size_t nfilters = json_array_size(msg) - 2, i;
	char text[160];

	if (!ws_session_authenticated(s)) {
		ws_send_closed(s, id, "auth-required: authenticate with NIP-42 before subscribing",
			       WS_PUSH_WAIT);
		return false;
	}
	if (nfilters == 0) {
		ws_send_closed(s, id, "invalid: a REQ needs at least one filter", WS_PUSH_WAIT);
		return false;
	}
	if (nfilters > (size_t)cfg->max_filters) {
		snprintf(text, sizeof(text), "invalid: too many filters (at most %d)",
			 cfg->max_filters);
		ws_send_closed(s, id, text, WS_PUSH_WAIT);
		return false;
	}
	if (open >= cfg->max_subscriptions) {
		snprintf(text, sizeof(text), "invalid: too many subscriptions (at most %d)",
			 cfg->max_subscriptions);
		ws_send_closed(s, id, text, WS_PUSH_WAIT);
		return false;
	}
	for (i = 0; i < nfilters; i++) {
		if (!json_is_object(json_array_get(msg, i + 2))) {
			ws_send_closed(s, id, "invalid: a filter must be an object", WS_PUSH_WAIT);
			return false;
		}
	}
	return true;
}

/* Routes artifact filters; returns true when the REQ was answered. */
static bool artifact_req(struct ws_session *s, const char *id, const json_t *msg)
{
	size_t nfilters = json_array_size(msg) - 2, i;
	const json_t *f = json_array_get(msg, 2);
	bool any = false;

	for (i = 0; i < nfilters; i++)
		any = any || json_object_get(json_array_get(msg, i + 2), "artifact");
	if (!any)
		return false;
	if (nfilters == 1 &&
	    json_is_string(json_object_get(f, "artifact")) &&
	    !strcmp(json_string_value(json_object_get(f, "artifact")), "changes")) {
		ws_resume_open(s, id, f);
		return true;
	}
	if (nfilters == 1 &&
	    json_is_string(json_object_get(f, "artifact")) &&
	    !strcmp(json_string_value(json_object_get(f, "artifact")), "current") &&
	    json_object_get(f, "#h")) {
		ws_sync_open(s, id, f);
		return true;
	}
	ws_send_closed(s, id,
		       "invalid: over websocket an artifact filter must be a sync: "
		       "one \"current\" filter with #h, or one \"changes\" filter",
		       WS_PUSH_WAIT);
	return true;
}

static struct plain_sub *sub_new(struct ws_session *s, const char *id,
				 const json_t *msg, char *why, size_t whylen)
{
	size_t nfilters = json_array_size(msg) - 2, i, cost;
	struct plain_sub *sub = calloc(1, sizeof(*sub));
	char err[200];

	if (!sub || !(sub->filters = calloc(nfilters, sizeof(*sub->filters))) ||
	    !(sub->filters_json = json_array())) {
		snprintf(why, whylen, "error: out of memory");
		goto fail;
	}
	ws_sub_init(&sub->head, s, id, &plain_kind, NULL, 0, sub_release);
	sub->nfilters = nfilters;
	for (i = 0; i < nfilters; i++) {
		json_t *obj = json_array_get(msg, i + 2);

		if (json_array_append(sub->filters_json, obj)) {
			snprintf(why, whylen, "error: out of memory");
			goto fail;
		}
		if (filter_parse(&sub->filters[i], obj, s->relay->cfg.max_limit,
				 err, sizeof(err))) {
			snprintf(why, whylen, "invalid: %s", err);
			goto fail;
		}
	}
	/* The filters as parsed: jansson's tree of them takes about three
	 * times their compact text. */
	cost = sizeof(*sub) + nfilters * sizeof(*sub->filters) +
	       3 * json_dumpb(sub->filters_json, NULL, 0, JSON_COMPACT);
	if (!ws_session_hold(s, cost)) {
		snprintf(why, whylen, "%s", WS_BUDGET_EXCEEDED);
		goto fail;
	}
	atomic_init(&sub->held_bytes, cost);
	return sub;
fail:
	if (sub) {
		free(sub->filters);
		json_decref(sub->filters_json);
		free(sub);
	}
	return NULL;
}

void ws_req_open(struct ws_session *s, const json_t *msg)
{
	struct ws_held_map sent;
	struct plain_sub *sub;
	struct ws_sub *old;
	comb_lsn read_at;
	uint64_t generation = 0;
	bool registered;
	char why[300];
	const char *id;
	int open;

	ws_held_map_init(&sent, 32, SIZE_MAX, s);
	id = sub_id(s, msg);
	if (!id)
		return;
	/* A REQ with the id of an open subscription replaces it. */
	old = ws_session_find_sub(s, id);
	if (old)
		ws_session_drop_sub(s, old);
	open = ws_session_prune(s);
	if (!admissible(s, id, msg, open) || artifact_req(s, id, msg))
		return;
	sub = sub_new(s, id, msg, why, sizeof(why));
	if (!sub) {
		ws_send_closed(s, id, why, WS_PUSH_WAIT);
		return;
	}
	/* Live delivery across nodes is only complete once the community's
	 * feed is trusted, as for a sync; a REQ no event can match live
	 * neither registers nor waits. */
	registered = set_channels(sub);
	sub->head.hub.channels = (const char (*)[37])sub->channels;
	sub->head.hub.nchannels = sub->nchannels;
	if (!registered)
		ws_session_add_sub(s, &sub->head);
	else if (!ws_sub_open_begin(&sub->head, &generation))
		return;
	if (ws_session_access_now(s, &read_at)) {
		ws_sub_refuse(&sub->head, "error: database unavailable");
	} else {
		pthread_mutex_lock(&s->mu);
		sub->read_at = read_at;
		pthread_mutex_unlock(&s->mu);
		if (send_stored(s, sub, &sent, why, sizeof(why)))
			ws_sub_refuse(&sub->head, why);
		else
			finish_stored(s, sub, &sent, registered, generation);
	}
	ws_held_map_release(&sent);
}

void ws_req_close(struct ws_session *s, const json_t *msg)
{
	struct ws_sub *sub;
	const char *id;

	if (json_array_size(msg) != 2) {
		ws_send_notice(s, "invalid: CLOSE takes one subscription id", WS_PUSH_WAIT);
		return;
	}
	id = sub_id(s, msg);
	if (!id)
		return;
	sub = ws_session_find_sub(s, id);
	if (sub)
		ws_session_drop_sub(s, sub);
}
