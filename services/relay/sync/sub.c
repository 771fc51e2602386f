/*
 * What the opener (current.c) and the workers (apply.c) both ask
 * of one sync (see sync_int.h): whether a channel or type is its own,
 * and closing it from the relay's side; and who sends the CLOSED of a sync
 * of either kind (this folder's and resume.c's resumable ones): while
 * it opens, at the end of its opening, once live. Below both, it calls
 * neither.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/session.h"
#include "sync_int.h"

int sync_cmp_channel(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

int sync_cmp_type(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

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

void sync_close_locked(struct ws_session *s, struct ws_sub *base,
		       struct sync_closing *c, const char *reason)
{
	if (base->dead)
		return;
	base->dead = true;
	if (c->live)
		ws_send_closed(s, base->id, reason, WS_PUSH_RESERVED);
	else
		snprintf(c->dead_reason, sizeof(c->dead_reason), "%s", reason);
}

void sync_refuse(struct ws_session *s, struct ws_sub *base, const char *message)
{
	char text[300], id[WS_SUB_ID_MAX + 1];

	snprintf(text, sizeof(text), "%s", message);
	snprintf(id, sizeof(id), "%s", base->id);
	ws_session_drop_sub(s, base);
	ws_send_closed(s, id, text, WS_PUSH_WAIT);
}

bool sync_open_end(struct ws_session *s, struct ws_sub *base, struct sync_closing *c)
{
	char reason[sizeof(c->dead_reason)];
	bool dead;

	pthread_mutex_lock(&s->mu);
	dead = base->dead;
	memcpy(reason, c->dead_reason, sizeof(reason));
	pthread_mutex_unlock(&s->mu);
	if (dead) {
		sync_refuse(s, base, reason);
		return false;
	}
	if (ws_send_eose(s, base->id, WS_PUSH_WAIT)) {
		ws_session_drop_sub(s, base);  /* the connection is closing */
		return false;
	}
	pthread_mutex_lock(&s->mu);
	c->live = true;
	dead = base->dead;
	memcpy(reason, c->dead_reason, sizeof(reason));
	pthread_mutex_unlock(&s->mu);
	if (dead) {
		/* Closed while EOSE was on its way: what was sent up to EOSE
		 * was exact, what would follow is not. */
		ws_send_closed(s, base->id, reason, WS_PUSH_WAIT);
		return false;
	}
	return true;
}

void sync_kill_locked(struct sync_sub *sub, const char *reason)
{
	sync_close_locked(sub->session, &sub->base, &sub->closing, reason);
}

void sync_kill(struct sync_sub *sub, const char *reason)
{
	pthread_mutex_lock(&sub->session->mu);
	sync_kill_locked(sub, reason);
	pthread_mutex_unlock(&sub->session->mu);
}
