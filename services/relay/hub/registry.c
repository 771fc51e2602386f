/*
 * The registry of subscriptions by community and channel (hub.h,
 * "Registry").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "hub.h"

static unsigned bucket_of(int64_t community, const char *channel)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)community;

	for (; *channel; channel++) {
		h ^= (unsigned char)*channel;
		h *= 1099511628211ULL;
	}
	return (unsigned)(h % HUB_BUCKETS);
}

struct hub_slot *hub_registry_find(const struct hub_registry *r,
				   int64_t community, const char *channel)
{
	struct hub_slot *s;

	for (s = r->buckets[bucket_of(community, channel)]; s; s = s->next) {
		if (s->community == community && !strcmp(s->channel, channel))
			return s;
	}
	return NULL;
}

/* The slot of (community, channel), made when there is none; NULL when
 * out of memory. */
static struct hub_slot *slot_get(struct hub_registry *r, int64_t community,
				 const char *channel)
{
	unsigned b = bucket_of(community, channel);
	struct hub_slot *s = hub_registry_find(r, community, channel);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->community = community;
	snprintf(s->channel, sizeof(s->channel), "%s", channel);
	s->next = r->buckets[b];
	r->buckets[b] = s;
	return s;
}

/* Frees s when nothing is registered in it any more. */
static void slot_drop_if_empty(struct hub_registry *r, struct hub_slot *s)
{
	struct hub_slot **p;

	if (s->n)
		return;
	for (p = &r->buckets[bucket_of(s->community, s->channel)]; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			free(s->members);
			free(s);
			return;
		}
	}
}

/* Adds member to (community, channel). Returns 0 or COMB_ENOMEM. */
static int slot_add(struct hub_registry *r, int64_t community,
		    const char *channel, void *member)
{
	struct hub_slot *s = slot_get(r, community, channel);
	void **grown;
	size_t cap;

	if (!s)
		return COMB_ENOMEM;
	if (s->n == s->cap) {
		cap = s->cap ? 2 * s->cap : 8;
		grown = realloc(s->members, cap * sizeof(*grown));
		if (!grown) {
			slot_drop_if_empty(r, s);
			return COMB_ENOMEM;
		}
		s->members = grown;
		s->cap = cap;
	}
	s->members[s->n++] = member;
	return 0;
}

static void slot_remove(struct hub_registry *r, int64_t community,
			const char *channel, const void *member)
{
	struct hub_slot *s = hub_registry_find(r, community, channel);
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n; i++) {
		if (s->members[i] == member) {
			s->members[i] = s->members[--s->n];
			break;
		}
	}
	slot_drop_if_empty(r, s);
}

/* Channel i of a registration: "" when it names none. */
static const char *channel_at(const char (*channels)[37], size_t nchannels,
			      size_t i)
{
	return nchannels ? channels[i] : "";
}

/* True when channel i repeats an earlier one of the registration. */
static bool repeated(const char (*channels)[37], size_t i)
{
	size_t j;

	for (j = 0; j < i; j++)
		if (!strcmp(channels[j], channels[i]))
			return true;
	return false;
}

int hub_registry_add(struct hub_registry *r, int64_t community,
		     const char (*channels)[37], size_t nchannels, void *member)
{
	size_t i, n = nchannels ? nchannels : 1;
	int rc = 0;

	for (i = 0; i < n && rc == 0; i++) {
		if (nchannels && repeated(channels, i))
			continue;
		rc = slot_add(r, community, channel_at(channels, nchannels, i), member);
	}
	if (rc) {
		while (i-- > 0)
			if (!nchannels || !repeated(channels, i))
				slot_remove(r, community, channel_at(channels, nchannels, i), member);
	}
	return rc;
}

void hub_registry_remove(struct hub_registry *r, int64_t community,
			 const char (*channels)[37], size_t nchannels,
			 const void *member)
{
	size_t i, n = nchannels ? nchannels : 1;

	for (i = 0; i < n; i++)
		if (!nchannels || !repeated(channels, i))
			slot_remove(r, community, channel_at(channels, nchannels, i), member);
}

void hub_registry_each(const struct hub_registry *r, int64_t community,
		       void (*fn)(void *member, void *ctx), void *ctx)
{
	struct hub_slot *s;
	size_t b, i;

	for (b = 0; b < HUB_BUCKETS; b++)
		for (s = r->buckets[b]; s; s = s->next)
			for (i = 0; (community == 0 || s->community == community) && i < s->n; i++)
				fn(s->members[i], ctx);
}
