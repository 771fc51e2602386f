/*
 * The revision cache (see revcache.h). Each shard is a hash table of
 * entries chained by seq plus a ring of the same entries for CLOCK: a hit
 * sets the entry's reference bit; to make room the hand walks the ring,
 * clearing set bits and evicting the first entry whose bit was clear. An
 * evicted entry that readers still pin leaves the table and the byte
 * count at once and is freed by its last unpin.
 */
#include "revcache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	struct entry *chain;          /* next in the bucket */
	struct entry *prev, *next;    /* the ring */
	int64_t seq;
	size_t len;
	unsigned pins;                /* readers holding data */
	bool referenced;
	bool evicted;                 /* out of the table, freed by the last unpin */
	char data[];
};

struct shard {
	pthread_mutex_t mu;
	struct entry **buckets;
	size_t nbuckets;              /* a power of two, or 0 */
	size_t entries;
	size_t bytes;
	struct entry *hand;           /* in the ring, or NULL when empty */
};

struct revcache {
	size_t max_bytes;
	size_t shard_bytes;
	atomic_ulong hits, misses, evictions;
	struct shard shards[REVCACHE_SHARDS];
};

static size_t cost(size_t len)
{
	return len + REVCACHE_ENTRY_COST;
}

static size_t bucket_of(int64_t seq, size_t nbuckets)
{
	uint64_t h = (uint64_t)seq * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (nbuckets - 1);
}

static struct shard *shard_of(struct revcache *rc, int64_t seq)
{
	return &rc->shards[(uint64_t)seq % REVCACHE_SHARDS];
}

struct revcache *revcache_new(size_t max_bytes)
{
	struct revcache *rc = calloc(1, sizeof(*rc));
	size_t i;

	if (!rc)
		return NULL;
	rc->max_bytes = max_bytes;
	rc->shard_bytes = max_bytes / REVCACHE_SHARDS;
	for (i = 0; i < REVCACHE_SHARDS; i++)
		pthread_mutex_init(&rc->shards[i].mu, NULL);
	return rc;
}

void revcache_free(struct revcache *rc)
{
	struct entry *e, *next;
	size_t i, b;

	if (!rc)
		return;
	for (i = 0; i < REVCACHE_SHARDS; i++) {
		struct shard *sh = &rc->shards[i];

		for (b = 0; b < sh->nbuckets; b++) {
			for (e = sh->buckets[b]; e; e = next) {
				next = e->chain;
				free(e);
			}
		}
		free(sh->buckets);
		pthread_mutex_destroy(&sh->mu);
	}
	free(rc);
}

static struct entry *find_locked(struct shard *sh, int64_t seq)
{
	struct entry *e;

	if (!sh->nbuckets)
		return NULL;
	for (e = sh->buckets[bucket_of(seq, sh->nbuckets)]; e; e = e->chain)
		if (e->seq == seq)
			return e;
	return NULL;
}

const char *revcache_pin(struct revcache *rc, int64_t seq, size_t *len)
{
	struct shard *sh = shard_of(rc, seq);
	struct entry *e;

	if (!rc->shard_bytes) {
		atomic_fetch_add(&rc->misses, 1);
		return NULL;
	}
	pthread_mutex_lock(&sh->mu);
	e = find_locked(sh, seq);
	if (e) {
		e->referenced = true;
		e->pins++;
		*len = e->len;
	}
	pthread_mutex_unlock(&sh->mu);
	atomic_fetch_add(e ? &rc->hits : &rc->misses, 1);
	return e ? e->data : NULL;
}

void revcache_unpin(struct revcache *rc, const char *bytes)
{
	struct entry *e = (struct entry *)(void *)(bytes - offsetof(struct entry, data));
	struct shard *sh = shard_of(rc, e->seq);
	bool last;

	pthread_mutex_lock(&sh->mu);
	last = --e->pins == 0 && e->evicted;
	pthread_mutex_unlock(&sh->mu);
	if (last)
		free(e);
}

/* Unlinks e from its bucket and the ring and frees it, or leaves it to
 * its last unpin when it is pinned. */
static void evict_locked(struct shard *sh, struct entry *e)
{
	struct entry **p = &sh->buckets[bucket_of(e->seq, sh->nbuckets)];

	while (*p != e)
		p = &(*p)->chain;
	*p = e->chain;
	if (e->next == e) {
		sh->hand = NULL;
	} else {
		e->prev->next = e->next;
		e->next->prev = e->prev;
		if (sh->hand == e)
			sh->hand = e->next;
	}
	sh->entries--;
	sh->bytes -= cost(e->len);
	if (e->pins)
		e->evicted = true;
	else
		free(e);
}

/* Evicts until need more bytes fit; returns how many were evicted. */
static unsigned long make_room_locked(struct shard *sh, size_t limit, size_t need)
{
	unsigned long evicted = 0;
	struct entry *e;

	while (sh->hand && sh->bytes + need > limit) {
		e = sh->hand;
		if (e->referenced) {
			e->referenced = false;
			sh->hand = e->next;
			continue;
		}
		evict_locked(sh, e);
		evicted++;
	}
	return evicted;
}

/* Doubles the buckets once entries outnumber them; false when out of
 * memory (the table keeps working, only with longer chains). */
static bool grow_locked(struct shard *sh)
{
	size_t n = sh->nbuckets ? sh->nbuckets * 2 : 64, b;
	struct entry **buckets = calloc(n, sizeof(*buckets)), *e, *next;

	if (!buckets)
		return false;
	for (b = 0; b < sh->nbuckets; b++) {
		for (e = sh->buckets[b]; e; e = next) {
			next = e->chain;
			e->chain = buckets[bucket_of(e->seq, n)];
			buckets[bucket_of(e->seq, n)] = e;
		}
	}
	free(sh->buckets);
	sh->buckets = buckets;
	sh->nbuckets = n;
	return true;
}

bool revcache_put(struct revcache *rc, int64_t seq, const char *data, size_t len)
{
	struct shard *sh = shard_of(rc, seq);
	unsigned long evicted;
	struct entry *e;
	size_t b;

	if (!rc->shard_bytes || cost(len) > rc->shard_bytes / 8)
		return false;
	e = malloc(sizeof(*e) + len);
	if (!e)
		return false;
	e->seq = seq;
	e->len = len;
	e->pins = 0;
	e->referenced = false;
	e->evicted = false;
	memcpy(e->data, data, len);
	pthread_mutex_lock(&sh->mu);
	if (find_locked(sh, seq) ||
	    (sh->entries >= sh->nbuckets && !grow_locked(sh) && !sh->nbuckets)) {
		pthread_mutex_unlock(&sh->mu);
		free(e);
		return false;
	}
	evicted = make_room_locked(sh, rc->shard_bytes, cost(len));
	b = bucket_of(seq, sh->nbuckets);
	e->chain = sh->buckets[b];
	sh->buckets[b] = e;
	if (sh->hand) {
		/* Just behind the hand: the last the hand reaches. */
		e->next = sh->hand;
		e->prev = sh->hand->prev;
		e->prev->next = e;
		sh->hand->prev = e;
	} else {
		e->next = e->prev = e;
		sh->hand = e;
	}
	sh->entries++;
	sh->bytes += cost(len);
	pthread_mutex_unlock(&sh->mu);
	if (evicted)
		atomic_fetch_add(&rc->evictions, evicted);
	return true;
}

void revcache_get_stats(struct revcache *rc, struct revcache_stats *out)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	out->hits = atomic_load(&rc->hits);
	out->misses = atomic_load(&rc->misses);
	out->evictions = atomic_load(&rc->evictions);
	out->max_bytes = rc->max_bytes;
	for (i = 0; i < REVCACHE_SHARDS; i++) {
		pthread_mutex_lock(&rc->shards[i].mu);
		out->bytes += rc->shards[i].bytes;
		out->entries += rc->shards[i].entries;
		pthread_mutex_unlock(&rc->shards[i].mu);
	}
}
