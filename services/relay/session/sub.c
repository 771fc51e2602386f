/*
 * What every kind of subscription is to its connection and the hub (see
 * session.h, "sub.c"): registering it, the trust wait, who sends its
 * CLOSED (the opener while it opens, anyone once it is live).
 */
#include "session.h"

#include <stdio.h>
#include <string.h>

void ws_sub_init(struct ws_sub *sub, struct ws_session *s, const char *id,
		 const struct hub_kind *kind, const char (*channels)[37], size_t n,
		 void (*release)(struct ws_session *s, struct ws_sub *sub))
{
	snprintf(sub->id, sizeof(sub->id), "%s", id);
	sub->release = release;
	sub->session = s;
	sub->hub = (struct hub_sub){
		.kind = kind,
		.community = s->community.id,
		.channels = channels,
		.nchannels = n,
		.reader = s->pubkey,
		.access = &s->access,
		.turn.owner = &s->turns,
	};
}

struct ws_sub *ws_sub_of(const struct hub_sub *hs)
{
	return (struct ws_sub *)(void *)((char *)hs - offsetof(struct ws_sub, hub));
}

void ws_sub_close_locked(struct ws_sub *sub, const char *reason)
{
	if (sub->dead)
		return;
	sub->dead = true;
	if (sub->live)
		ws_send_closed(sub->session, sub->id, reason, WS_PUSH_RESERVED);
	else
		snprintf(sub->dead_reason, sizeof(sub->dead_reason), "%s", reason);
}

void ws_sub_close(struct ws_sub *sub, const char *reason)
{
	pthread_mutex_lock(&sub->session->mu);
	ws_sub_close_locked(sub, reason);
	pthread_mutex_unlock(&sub->session->mu);
}

void ws_sub_interrupt(struct hub_sub *hs, const char *reason)
{
	struct ws_sub *sub = ws_sub_of(hs);

	pthread_mutex_lock(&sub->session->mu);
	if (sub->started)
		ws_sub_close_locked(sub, reason);
	pthread_mutex_unlock(&sub->session->mu);
}

void ws_sub_refuse(struct ws_sub *sub, const char *message)
{
	struct ws_session *s = sub->session;
	char text[sizeof(sub->dead_reason)], id[WS_SUB_ID_MAX + 1];

	snprintf(text, sizeof(text), "%s", message);
	snprintf(id, sizeof(id), "%s", sub->id);
	ws_session_drop_sub(s, sub);
	ws_send_closed(s, id, text, WS_PUSH_WAIT);
}

bool ws_sub_open_begin(struct ws_sub *sub, uint64_t *generation)
{
	struct ws_session *s = sub->session;

	ws_session_add_sub(s, sub);
	if (hub_sub_add(&sub->hub)) {
		ws_sub_refuse(sub, "error: out of memory");
		return false;
	}
	/* registered first: from here every change of the scope reaches it */
	if (feed_wait_trusted(sub->hub.community, feed_trust_wait_ms(&s->relay->cfg),
			      generation)) {
		ws_sub_refuse(sub, "error: change feed unavailable");
		return false;
	}
	pthread_mutex_lock(&s->mu);
	sub->started = true;
	pthread_mutex_unlock(&s->mu);
	return true;
}

bool ws_sub_go_live_locked(struct ws_sub *sub)
{
	sub->live = true;
	if (sub->dead) {
		/* Closed while EOSE was on its way: what was sent up to EOSE
		 * was exact, what would follow is not. */
		ws_send_closed(sub->session, sub->id, sub->dead_reason, WS_PUSH_RESERVED);
		return false;
	}
	return true;
}

bool ws_sub_open_end(struct ws_sub *sub, uint64_t generation)
{
	struct ws_session *s = sub->session;
	char reason[sizeof(sub->dead_reason)];
	bool dead, live;

	if (!feed_still_trusted(sub->hub.community, generation))
		ws_sub_close(sub, FEED_INTERRUPTED);
	pthread_mutex_lock(&s->mu);
	dead = sub->dead;
	memcpy(reason, sub->dead_reason, sizeof(reason));
	pthread_mutex_unlock(&s->mu);
	if (dead) {
		ws_sub_refuse(sub, reason);
		return false;
	}
	if (ws_send_eose(s, sub->id, WS_PUSH_WAIT)) {
		ws_session_drop_sub(s, sub);  /* the connection is closing */
		return false;
	}
	pthread_mutex_lock(&s->mu);
	live = ws_sub_go_live_locked(sub);
	pthread_mutex_unlock(&s->mu);
	return live;
}

struct ws_sub *ws_session_find_sub(struct ws_session *s, const char *id)
{
	struct ws_sub *sub;

	for (sub = s->subs; sub; sub = sub->next) {
		if (!strcmp(sub->id, id))
			return sub;
	}
	return NULL;
}

void ws_session_add_sub(struct ws_session *s, struct ws_sub *sub)
{
	sub->next = s->subs;
	s->subs = sub;
}

void ws_session_drop_sub(struct ws_session *s, struct ws_sub *sub)
{
	struct ws_sub **p;

	for (p = &s->subs; *p; p = &(*p)->next) {
		if (*p == sub) {
			*p = sub->next;
			break;
		}
	}
	sub->release(s, sub);
}

int ws_session_prune(struct ws_session *s)
{
	struct ws_sub *sub, *next;
	int open = 0;
	bool dead;

	for (sub = s->subs; sub; sub = next) {
		next = sub->next;
		pthread_mutex_lock(&s->mu);
		dead = sub->dead;
		pthread_mutex_unlock(&s->mu);
		if (dead)
			ws_session_drop_sub(s, sub);
		else
			open++;
	}
	return open;
}
