/*
 * The revision cache: serialized bytes of stored events (artifact
 * revisions, messages), keyed by events.seq. A stored event never changes
 * once written (redaction and deletion only flag the row), so whatever
 * the cache holds for a seq is what PostgreSQL holds; which seq to send is
 * always decided by a query in the reader's own snapshot, the cache only
 * supplies the bytes.
 *
 * Bounded in bytes (COMB_REVISION_CACHE_MB; each entry costs its length
 * plus REVCACHE_ENTRY_COST), evicted by CLOCK (second chance), split into
 * REVCACHE_SHARDS shards by seq with one mutex each. Thread-safe. Readers
 * borrow an entry's bytes in place (revcache_pin) instead of copying them.
 */
#ifndef COMB_REVCACHE_H
#define COMB_REVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REVCACHE_SHARDS 16
/* What an entry costs beyond its bytes (its bookkeeping). */
#define REVCACHE_ENTRY_COST 64

struct revcache;

struct revcache_stats {
	unsigned long hits;
	unsigned long misses;      /* lookups that found nothing, also when off */
	unsigned long evictions;
	size_t bytes;              /* held now, entry costs included */
	size_t entries;
	size_t max_bytes;
};

/*
 * Creates a cache holding at most max_bytes (0: a cache that holds
 * nothing and only counts misses). Returns NULL when out of memory.
 */
struct revcache *revcache_new(size_t max_bytes);

/* Frees the cache and everything it holds; nobody may use it afterwards. */
void revcache_free(struct revcache *rc);

/*
 * The bytes cached for seq, pinned: they stay where they are, even when
 * the entry is evicted meanwhile, until revcache_unpin() gives them back
 * (an evicted entry's bytes no longer count against the bound and are
 * freed by the last unpin). *len gets their length. NULL on a miss.
 */
const char *revcache_pin(struct revcache *rc, int64_t seq, size_t *len);

/* Gives back one pin of bytes that revcache_pin() returned. */
void revcache_unpin(struct revcache *rc, const char *bytes);

/*
 * Keeps a copy of the len bytes of data (borrowed) as the revision seq,
 * evicting what the bound needs, and returns true. Does nothing and
 * returns false when seq is cached already, when the cache is off, when
 * one entry would take more than an eighth of a shard or when out of
 * memory.
 */
bool revcache_put(struct revcache *rc, int64_t seq, const char *data, size_t len);

/* Copies the counters into out. */
void revcache_get_stats(struct revcache *rc, struct revcache_stats *out);

/*
 * The warm (revcache_warm.c): a node that starts with an empty cache reads
 * the newest stored events into it, so that the first reads after a
 * start find their bytes there, and their rows in PostgreSQL's shared
 * buffers, instead of reading both from the disk or the kernel's cache.
 */
struct relay;

/* What /metrics shows of the warm. */
struct revcache_warm_stats {
	unsigned long events;      /* the warm put in the cache */
	size_t bytes;              /* their cost, entry costs included */
	long ms;                   /* how long it ran, or has run so far */
	bool running;
};

/*
 * Starts the warm of relay->revisions (borrowed; relay->reads set up, and
 * both kept until revcache_warm_stop) in a thread of its own, and returns
 * at once: it delays neither readiness nor any client. The warm reads
 * stored events that are neither deleted nor redacted, newest (highest
 * seq) first, a bounded batch per statement on a connection lent by
 * relay->reads (where reads go: a standby in rotation, else the primary)
 * and given back after each batch, and keeps them in the cache until the
 * next would take it past its budget: COMB_REVISION_CACHE_WARM_MB, at most
 * half of COMB_REVISION_CACHE_MB, counting entries as the cache does. It
 * logs one line when it ends. A budget of 0 starts nothing. Returns 0, or
 * COMB_ENOMEM when the thread could not be started (errbuf says so).
 */
int revcache_warm_start(struct relay *relay, char *errbuf, size_t errlen);

/* Stops the warm after its batch in progress and waits for its thread;
 * a no-op when none was started. Call before the pools are freed. */
void revcache_warm_stop(void);

/* Copies the warm's figures into out (all 0 when none was started). */
void revcache_warm_get_stats(struct revcache_warm_stats *out);

#endif
