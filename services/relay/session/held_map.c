/*
 * A connection's held maps (session.h, "held_map.c"): open addressing
 * with linear probing, at most half full, removal by backward shift so
 * that no tombstones accumulate. Each slot is an int64 value followed by
 * the key; a value of HELD_EMPTY marks a free slot. Keys are uuids or
 * event ids, random already, so their first bytes are the hash.
 */
#include "session.h"

#include <stdlib.h>
#include <string.h>

#include "comb/error.h"

#define HELD_EMPTY INT64_MIN

void ws_held_map_init(struct ws_held_map *m, size_t key_len, size_t max,
		      struct ws_session *budget)
{
	*m = (struct ws_held_map){
		.key_len = key_len,
		.stride = sizeof(int64_t) + (key_len + 7) / 8 * 8,
		.max = max,
		.budget = budget,
	};
}

void ws_held_map_release(struct ws_held_map *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->count = 0;
	if (m->budget)
		ws_session_unhold(m->budget, m->held);
	m->held = 0;
}

static int64_t *value_at(const struct ws_held_map *m, size_t i)
{
	return (int64_t *)(void *)(m->slots + i * m->stride);
}

void ws_held_map_clear(struct ws_held_map *m, size_t keep_cap)
{
	size_t i;

	if (m->cap > keep_cap) {
		ws_held_map_release(m);
		return;
	}
	if (!m->count)
		return;
	for (i = 0; i < m->cap; i++)
		*value_at(m, i) = HELD_EMPTY;
	m->count = 0;
}

/* The key in slot i, or NULL when the slot is free. */
static const unsigned char *key_at(const struct ws_held_map *m, size_t i)
{
	return *value_at(m, i) == HELD_EMPTY ? NULL : m->slots + i * m->stride + sizeof(int64_t);
}

const unsigned char *ws_held_map_next(const struct ws_held_map *m,
				      struct ws_held_visit *v)
{
	const unsigned char *k;

	/* past the count-th entry, every slot left is free */
	while (v->seen < m->count && v->slot < m->cap) {
		if ((k = key_at(m, v->slot++))) {
			v->seen++;
			return k;
		}
	}
	return NULL;
}

static size_t home_of(const struct ws_held_map *m, const unsigned char *key)
{
	uint64_t h;

	memcpy(&h, key, sizeof(h));
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return (size_t)h & (m->cap - 1);
}

/* The slot of key, or of the free slot where it would go. */
static size_t slot_of(const struct ws_held_map *m, const unsigned char *key)
{
	const unsigned char *k;
	size_t i = home_of(m, key);

	while ((k = key_at(m, i)) && memcmp(k, key, m->key_len))
		i = (i + 1) & (m->cap - 1);
	return i;
}

int64_t *ws_held_map_get(const struct ws_held_map *m, const unsigned char *key)
{
	size_t i;

	if (!m->cap)
		return NULL;
	i = slot_of(m, key);
	return key_at(m, i) ? value_at(m, i) : NULL;
}

/* Puts key (absent) with value in slot i (free). */
static void place(struct ws_held_map *m, size_t i, const unsigned char *key, int64_t value)
{
	*value_at(m, i) = value;
	memcpy(m->slots + i * m->stride + sizeof(int64_t), key, m->key_len);
	m->count++;
}

/* Doubles m's slots (16 at first), counting the new ones against its
 * budget. Returns 0, COMB_EDENIED or COMB_ENOMEM. */
static int grow(struct ws_held_map *m)
{
	struct ws_held_map old = *m;
	size_t cap = m->cap ? 2 * m->cap : 16, extra = (cap - m->cap) * m->stride, i;

	if (m->budget && !ws_session_hold(m->budget, extra))
		return COMB_EDENIED;
	m->slots = malloc(cap * m->stride);
	if (!m->slots) {
		m->slots = old.slots;
		if (m->budget)
			ws_session_unhold(m->budget, extra);
		return COMB_ENOMEM;
	}
	m->held += extra;
	m->cap = cap;
	m->count = 0;
	for (i = 0; i < cap; i++)
		*value_at(m, i) = HELD_EMPTY;
	for (i = 0; i < old.cap; i++) {
		const unsigned char *k = key_at(&old, i);

		if (k)
			place(m, slot_of(m, k), k, *value_at(&old, i));
	}
	free(old.slots);
	return 0;
}

int ws_held_map_put(struct ws_held_map *m, const unsigned char *key, int64_t value)
{
	size_t i = m->cap ? slot_of(m, key) : 0;
	int rc;

	if (m->cap && key_at(m, i)) {
		*value_at(m, i) = value;
		return 0;
	}
	if (m->count >= m->max)
		return COMB_ETOOBIG;
	if (2 * (m->count + 1) > m->cap) {
		if ((rc = grow(m)))
			return rc;
		i = slot_of(m, key);  /* the slots moved */
	}
	place(m, i, key, value);
	return 0;
}

void ws_held_map_del(struct ws_held_map *m, const unsigned char *key)
{
	const unsigned char *k;
	size_t hole, i, home;

	if (!m->cap)
		return;
	hole = slot_of(m, key);
	if (!key_at(m, hole))
		return;
	*value_at(m, hole) = HELD_EMPTY;
	m->count--;
	/* Move back every later entry of the run that may now be unreachable. */
	for (i = (hole + 1) & (m->cap - 1); (k = key_at(m, i));
	     i = (i + 1) & (m->cap - 1)) {
		home = home_of(m, k);
		/* The entry stays when its home lies cyclically in (hole, i]. */
		if (hole <= i ? (home > hole && home <= i) : (home > hole || home <= i))
			continue;
		memcpy(m->slots + hole * m->stride, m->slots + i * m->stride, m->stride);
		*value_at(m, i) = HELD_EMPTY;
		hole = i;
	}
}
