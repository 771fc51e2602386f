/*
 * The per-community table of the current epoch: each community's last
 * sequence number, when it last had a signal (for marks) and whether a
 * subscriber asked for it. An open-addressing hash table keyed by
 * community id, grown by doubling up to CAPTURE_MAX_COMMUNITIES entries.
 */
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "comb/error.h"
#include "comb/log.h"

#define INITIAL_CAP 64

static size_t slot_of(int64_t id, size_t cap)
{
	uint64_t x = (uint64_t)id;

	/* splitmix64 finalizer */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return (size_t)(x & (cap - 1));
}

int communities_init(struct communities *t)
{
	memset(t, 0, sizeof(*t));
	t->slots = calloc(INITIAL_CAP, sizeof(*t->slots));
	if (!t->slots)
		return COMB_ENOMEM;
	t->cap = INITIAL_CAP;
	return 0;
}

void communities_release(struct communities *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

static struct community *probe(struct community *slots, size_t cap, int64_t id)
{
	size_t i = slot_of(id, cap);

	while (slots[i].id != 0 && slots[i].id != id)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow(struct communities *t)
{
	size_t cap = t->cap * 2, i;
	struct community *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return COMB_ENOMEM;
	for (i = 0; i < t->cap; i++)
		if (t->slots[i].id != 0)
			*probe(slots, cap, t->slots[i].id) = t->slots[i];
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

struct community *communities_get(struct communities *t, int64_t id,
				  bool create)
{
	struct community *c;

	if (id <= 0)
		return NULL;
	c = probe(t->slots, t->cap, id);
	if (c->id == id || !create)
		return c->id == id ? c : NULL;
	if (t->count >= CAPTURE_MAX_COMMUNITIES) {
		if (!t->full_warned)
			comb_warn("communities: table full at %d entries, "
				  "community %lld gets no marks",
				  CAPTURE_MAX_COMMUNITIES, (long long)id);
		t->full_warned = true;
		return NULL;
	}
	if (2 * (t->count + 1) > t->cap) {
		if (grow(t))
			return NULL;
		c = probe(t->slots, t->cap, id);
	}
	memset(c, 0, sizeof(*c));
	c->id = id;
	t->count++;
	return c;
}

void communities_reset(struct communities *t)
{
	size_t i;

	for (i = 0; i < t->cap; i++) {
		t->slots[i].seq = 0;
		t->slots[i].last_tick = 0;
	}
}
