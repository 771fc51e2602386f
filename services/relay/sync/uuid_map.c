/*
 * The uuid map of artifact sync (see sync_int.h): open addressing with
 * linear probing over binary uuids, removal by backward shift so that no
 * tombstones accumulate, and a hard maximum of entries. uuids are random,
 * so their first bytes are the hash.
 */
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/uuid.h"
#include "sync_int.h"

void dmap_init(struct dmap *m, size_t max)
{
	memset(m, 0, sizeof(*m));
	m->max = max;
}

void dmap_budget(struct dmap *m, struct ws_session *s)
{
	m->budget = s;
}

void dmap_release(struct dmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = 0;
	m->count = 0;
	if (m->budget)
		ws_session_unhold(m->budget, m->held);
	m->held = 0;
}

static size_t home_of(const struct dmap *m, const uint8_t d[16])
{
	uint64_t h;

	memcpy(&h, d, sizeof(h));
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return (size_t)h & (m->cap - 1);
}

struct dmap_entry *dmap_get(const struct dmap *m, const uint8_t d[16])
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = home_of(m, d); m->slots[i].used; i = (i + 1) & (m->cap - 1)) {
		if (!memcmp(m->slots[i].d, d, 16))
			return &m->slots[i];
	}
	return NULL;
}

/* Places d without checking for it or for room. */
static struct dmap_entry *place(struct dmap *m, const uint8_t d[16])
{
	size_t i = home_of(m, d);

	while (m->slots[i].used)
		i = (i + 1) & (m->cap - 1);
	memcpy(m->slots[i].d, d, 16);
	m->slots[i].used = true;
	m->count++;
	return &m->slots[i];
}

static int grow(struct dmap *m)
{
	struct dmap old = *m;
	size_t cap = m->cap ? 2 * m->cap : 16, i;
	size_t extra = (cap - m->cap) * sizeof(*m->slots);

	if (m->budget && !ws_session_hold(m->budget, extra))
		return COMB_EDENIED;
	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots) {
		m->slots = old.slots;
		if (m->budget)
			ws_session_unhold(m->budget, extra);
		return COMB_ENOMEM;
	}
	m->held += extra;
	m->cap = cap;
	m->count = 0;
	for (i = 0; i < old.cap; i++) {
		if (old.slots[i].used)
			place(m, old.slots[i].d)->seq = old.slots[i].seq;
	}
	free(old.slots);
	return 0;
}

int dmap_put(struct dmap *m, const uint8_t d[16], int64_t seq)
{
	struct dmap_entry *e = dmap_get(m, d);
	int rc;

	if (e) {
		e->seq = seq;
		return 0;
	}
	if (m->count >= m->max)
		return COMB_ETOOBIG;
	/* at most half full */
	if (2 * (m->count + 1) > m->cap && (rc = grow(m)))
		return rc;
	place(m, d)->seq = seq;
	return 0;
}

void dmap_del(struct dmap *m, const uint8_t d[16])
{
	struct dmap_entry *e = dmap_get(m, d);
	size_t hole, i, home;

	if (!e)
		return;
	hole = (size_t)(e - m->slots);
	m->slots[hole].used = false;
	m->count--;
	/* Move back every later entry of the run that may now be unreachable. */
	for (i = (hole + 1) & (m->cap - 1); m->slots[i].used; i = (i + 1) & (m->cap - 1)) {
		home = home_of(m, m->slots[i].d);
		/* The entry stays when its home lies cyclically in (hole, i]. */
		if (hole <= i ? (home > hole && home <= i) : (home > hole || home <= i))
			continue;
		m->slots[hole] = m->slots[i];
		m->slots[i].used = false;
		hole = i;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int sync_uuid_parse(const char *text, uint8_t out[16])
{
	size_t i, k = 0;
	int hi, lo;

	if (!text || !comb_uuid_is_canonical(text))
		return COMB_EINVAL;
	for (i = 0; text[i] && k < 16; i++) {
		if (text[i] == '-')
			continue;
		hi = hexval(text[i]);
		lo = hexval(text[i + 1]);
		if (hi < 0 || lo < 0)
			return COMB_EINVAL;
		out[k++] = (uint8_t)(hi << 4 | lo);
		i++;
	}
	return k == 16 ? 0 : COMB_EINVAL;
}

void sync_uuid_format(const uint8_t d[16], char out[37])
{
	static const char hex[] = "0123456789abcdef";
	size_t i, k = 0;

	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[k++] = '-';
		out[k++] = hex[d[i] >> 4];
		out[k++] = hex[d[i] & 15];
	}
	out[k] = '\0';
}
