/*
 * What a sync of either kind (current.c and apply.c's `current` syncs,
 * resume.c's resumable ones) is to its connection and the hub (see
 * sync_int.h): opening it, closing it and who sends its CLOSED (while it
 * opens, at the end of its opening, once live); and what the opener and
 * the turns of a `current` sync both ask of it: whether a channel or type
 * is its own. Below the kinds, it calls none of them but through the
 * table of kinds.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "feed/feed.h"
#include "session/session.h"
#include "sync.h"
#include "sync_int.h"

int sync_cmp_channel(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

int sync_cmp_type(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct comb_db_stmt sync_epochs_stmt = COMB_DB_STMT(
	"SELECT id, access_epoch FROM communities WHERE id = ANY ($1::bigint[])", 1);

const char *sync_find_channel(const struct sync_sub *sub, const char *channel)
{
	return bsearch(channel, sub->channels, sub->nchannels,
		       sizeof(sub->channels[0]), sync_cmp_channel);
}

bool sync_has_channel(const struct sync_sub *sub, const char *channel)
{
	return sync_find_channel(sub, channel) != NULL;
}

bool sync_has_type(const struct sync_sub *sub, const char *type)
{
	return !sub->types ||
	       bsearch(&type, sub->types, sub->ntypes, sizeof(*sub->types), sync_cmp_type);
}

int sync_check_keys(const json_t *filter, const char *const *keys, const char *what,
		    const char *allowed, char *why, size_t whylen)
{
	const char *key;
	json_t *value;
	size_t i;

	json_object_foreach((json_t *)filter, key, value) {
		(void)value;
		for (i = 0; keys[i] && strcmp(keys[i], key); i++)
			;
		if (keys[i])
			continue;
		if (!strcmp(key, "limit") || !strcmp(key, "offset"))
			return comb_fail(why, whylen, COMB_EINVAL,
					 "invalid: %s takes no %s", what, key);
		return comb_fail(why, whylen, COMB_EINVAL,
				 "invalid: %s filter may hold only %s", what, allowed);
	}
	return 0;
}

const struct hub_kind *const sync_kinds[SYNC_KINDS] = {
	&sync_current_kind, &sync_changes_kind,
};

struct sync_head *sync_head_of(const struct hub_sub *hs)
{
	return (struct sync_head *)(void *)((char *)hs - offsetof(struct sync_head, hub));
}

void sync_head_init(struct sync_head *h, struct ws_session *s, const char *id,
		    const struct hub_kind *kind, const char (*channels)[37], size_t n,
		    void (*release)(struct ws_session *s, struct ws_sub *base))
{
	snprintf(h->base.id, sizeof(h->base.id), "%s", id);
	h->base.release = release;
	h->session = s;
	h->hub.kind = kind;
	h->hub.community = s->community.id;
	h->hub.channels = channels;
	h->hub.nchannels = n;
	h->hub.reader = s->pubkey;
	h->hub.access = &s->access;
	h->hub.turn.owner = &s->turns;
}

void sync_close_locked(struct sync_head *h, const char *reason)
{
	if (h->base.dead)
		return;
	h->base.dead = true;
	if (h->closing.live)
		ws_send_closed(h->session, h->base.id, reason, WS_PUSH_RESERVED);
	else
		snprintf(h->closing.dead_reason, sizeof(h->closing.dead_reason), "%s", reason);
}

void sync_close(struct sync_head *h, const char *reason)
{
	pthread_mutex_lock(&h->session->mu);
	sync_close_locked(h, reason);
	pthread_mutex_unlock(&h->session->mu);
}

void sync_interrupt(struct hub_sub *hs, const char *reason)
{
	struct sync_head *h = sync_head_of(hs);

	pthread_mutex_lock(&h->session->mu);
	if (h->started)
		sync_close_locked(h, reason);
	pthread_mutex_unlock(&h->session->mu);
}

void sync_refuse(struct sync_head *h, const char *message)
{
	struct ws_session *s = h->session;
	char text[300], id[WS_SUB_ID_MAX + 1];

	snprintf(text, sizeof(text), "%s", message);
	snprintf(id, sizeof(id), "%s", h->base.id);
	ws_session_drop_sub(s, &h->base);
	ws_send_closed(s, id, text, WS_PUSH_WAIT);
}

bool sync_open_begin(struct sync_head *h, uint64_t *generation)
{
	struct ws_session *s = h->session;

	ws_session_add_sub(s, &h->base);
	if (hub_sub_add(&h->hub)) {
		sync_refuse(h, "error: out of memory");
		return false;
	}
	/* registered first: from here every change of the scope reaches it */
	if (feed_wait_trusted(h->hub.community, feed_trust_wait_ms(&s->relay->cfg),
			      generation)) {
		sync_refuse(h, "error: change feed unavailable");
		return false;
	}
	pthread_mutex_lock(&s->mu);
	h->started = true;
	pthread_mutex_unlock(&s->mu);
	return true;
}

bool sync_open_end(struct sync_head *h, uint64_t generation)
{
	struct ws_session *s = h->session;
	char reason[sizeof(h->closing.dead_reason)];
	bool dead;

	if (!feed_still_trusted(h->hub.community, generation))
		sync_close(h, FEED_INTERRUPTED);
	pthread_mutex_lock(&s->mu);
	dead = h->base.dead;
	memcpy(reason, h->closing.dead_reason, sizeof(reason));
	pthread_mutex_unlock(&s->mu);
	if (dead) {
		sync_refuse(h, reason);
		return false;
	}
	if (ws_send_eose(s, h->base.id, WS_PUSH_WAIT)) {
		ws_session_drop_sub(s, &h->base);  /* the connection is closing */
		return false;
	}
	pthread_mutex_lock(&s->mu);
	h->closing.live = true;
	dead = h->base.dead;
	memcpy(reason, h->closing.dead_reason, sizeof(reason));
	pthread_mutex_unlock(&s->mu);
	if (dead) {
		/* Closed while EOSE was on its way: what was sent up to EOSE
		 * was exact, what would follow is not. */
		ws_send_closed(s, h->base.id, reason, WS_PUSH_WAIT);
		return false;
	}
	return true;
}
