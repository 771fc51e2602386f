/*
 * What the opener (ws_sync.c) and the workers (ws_sync_apply.c) both ask
 * of one sync (see ws_sync_int.h): whether a channel or type is its own,
 * and closing it from the relay's side. Below both, it calls neither.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/session.h"
#include "ws_sync_int.h"

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

void sync_kill_locked(struct sync_sub *sub, const char *reason)
{
	if (sub->base.dead)
		return;
	sub->base.dead = true;
	if (sub->live)
		ws_send_closed(sub->session, sub->base.id, reason, WS_PUSH_RESERVED);
	else
		snprintf(sub->dead_reason, sizeof(sub->dead_reason), "%s", reason);
}

void sync_kill(struct sync_sub *sub, const char *reason)
{
	pthread_mutex_lock(&sub->session->mu);
	sync_kill_locked(sub, reason);
	pthread_mutex_unlock(&sub->session->mu);
}
