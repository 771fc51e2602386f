/*
 * Unit tests for the revision cache (services/relay/revcache/revcache.c): what is
 * put comes back byte for byte, the byte bound holds under pressure with
 * evictions counted, CLOCK keeps a referenced entry over an unreferenced
 * one, a cache of size 0 holds nothing and counts misses, oversized
 * entries are refused (a put says whether it kept the bytes), pinned
 * bytes outlive their entry's eviction, and concurrent users keep the
 * bound. The warm at start-up (revcache_warm.c) needs a relay and
 * PostgreSQL: tests/e2e/revcache_warm.test.mjs.
 */
#include "test_util.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "comb/error.h"
#include "revcache/revcache.h"

/* The bytes of revision seq, len long, recognizably its own. */
static void fill(char *out, size_t len, int64_t seq)
{
	size_t i;

	for (i = 0; i < len; i++)
		out[i] = (char)('a' + (seq * 7 + (int64_t)i) % 26);
}

/* Puts len bytes as revision seq; returns what revcache_put() returned. */
static bool put(struct revcache *rc, int64_t seq, size_t len)
{
	char *data = malloc(len);
	bool kept;

	assert_non_null(data);
	fill(data, len, seq);
	kept = revcache_put(rc, seq, data, len);
	free(data);
	return kept;
}

/* 1 when seq is cached with exactly its bytes, 0 when it is not cached,
 * -1 when what is cached is not its bytes. */
static int lookup(struct revcache *rc, int64_t seq, size_t len)
{
	char *want = malloc(len);
	const char *bytes;
	size_t got;
	int found = 0;

	assert_non_null(want);
	fill(want, len, seq);
	bytes = revcache_pin(rc, seq, &got);
	if (bytes) {
		found = got == len && memcmp(bytes, want, len) == 0 ? 1 : -1;
		revcache_unpin(rc, bytes);
	}
	free(want);
	return found;
}

static bool has(struct revcache *rc, int64_t seq, size_t len)
{
	int found = lookup(rc, seq, len);

	assert_true(found >= 0);
	return found == 1;
}

static void test_round_trip_and_counters(void **state)
{
	struct revcache *rc = revcache_new(16u << 20);
	struct revcache_stats st;

	(void)state;
	assert_non_null(rc);
	assert_true(put(rc, 1, 4923));
	assert_true(put(rc, 2, 100));
	assert_true(has(rc, 1, 4923));
	assert_true(has(rc, 2, 100));
	assert_false(has(rc, 3, 100));
	assert_true(has(rc, 1, 4923));
	/* A second put of the same seq keeps the first, and says so. */
	assert_false(put(rc, 1, 10));
	assert_true(has(rc, 1, 4923));
	revcache_get_stats(rc, &st);
	assert_int_equal(st.hits, 4);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.bytes, 4923 + 100 + 2 * REVCACHE_ENTRY_COST);
	assert_int_equal(st.evictions, 0);
	assert_int_equal(st.max_bytes, 16u << 20);
	revcache_free(rc);
}

static void test_bound_under_pressure(void **state)
{
	const size_t max = 1u << 20, len = 4923;
	struct revcache *rc = revcache_new(max);
	struct revcache_stats st;
	int64_t seq, kept = 0;

	(void)state;
	for (seq = 1; seq <= 2000; seq++) {
		put(rc, seq, len);
		revcache_get_stats(rc, &st);
		assert_true(st.bytes <= max);
	}
	revcache_get_stats(rc, &st);
	/* Each shard holds what fits in its sixteenth, no more. */
	assert_true(st.entries <= max / (len + REVCACHE_ENTRY_COST));
	assert_true(st.entries >= max / (len + REVCACHE_ENTRY_COST) - REVCACHE_SHARDS);
	assert_int_equal(st.evictions, 2000 - st.entries);
	for (seq = 1; seq <= 2000; seq++)
		kept += has(rc, seq, len);
	assert_int_equal(kept, (int64_t)st.entries);
	/* The most recent ones are the ones kept. */
	assert_true(has(rc, 2000, len));
	assert_false(has(rc, 1, len));
	revcache_free(rc);
}

static void test_clock_keeps_what_is_read(void **state)
{
	/* Seqs that are multiples of REVCACHE_SHARDS all land in shard 0,
	 * which holds 8 entries of this size (an eighth of a shard is also
	 * the largest entry taken). */
	const size_t len = 1000, per = len + REVCACHE_ENTRY_COST;
	struct revcache *rc = revcache_new(REVCACHE_SHARDS * per * 8);
	int64_t s = REVCACHE_SHARDS;

	(void)state;
	for (int i = 1; i <= 8; i++)
		put(rc, s * i, len);
	/* Read the first: the next put evicts the second, not the first. */
	assert_true(has(rc, s * 1, len));
	put(rc, s * 9, len);
	assert_true(has(rc, s * 1, len));
	assert_false(has(rc, s * 2, len));
	assert_true(has(rc, s * 9, len));
	revcache_free(rc);
}

static void test_off_and_oversized(void **state)
{
	struct revcache *off = revcache_new(0), *small = revcache_new(REVCACHE_SHARDS * 8000);
	struct revcache_stats st;

	(void)state;
	assert_false(put(off, 1, 100));
	assert_false(has(off, 1, 100));
	revcache_get_stats(off, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.misses, 1);
	/* A shard of 8000 bytes takes entries up to 1000 bytes with costs. */
	assert_true(put(small, 1, 1000 - REVCACHE_ENTRY_COST));
	assert_false(put(small, 2, 1001 - REVCACHE_ENTRY_COST));
	assert_true(has(small, 1, 1000 - REVCACHE_ENTRY_COST));
	assert_false(has(small, 2, 1001 - REVCACHE_ENTRY_COST));
	revcache_free(off);
	revcache_free(small);
}

static void test_pinned_bytes_outlive_eviction(void **state)
{
	/* Shard 0 holds 8 entries of this size, as above. */
	const size_t len = 1000, per = len + REVCACHE_ENTRY_COST;
	struct revcache *rc = revcache_new(REVCACHE_SHARDS * per * 8);
	int64_t s = REVCACHE_SHARDS;
	struct revcache_stats st;
	const char *first, *again;
	char *want = malloc(len);
	size_t got = 0;

	(void)state;
	assert_non_null(want);
	fill(want, len, s);
	put(rc, s, len);
	first = revcache_pin(rc, s, &got);
	assert_non_null(first);
	assert_int_equal(got, len);
	again = revcache_pin(rc, s, &got);
	assert_ptr_equal(again, first);
	/* Sixteen more entries of the shard evict the pinned one... */
	for (int i = 2; i <= 17; i++)
		put(rc, s * i, len);
	assert_false(has(rc, s, len));
	revcache_get_stats(rc, &st);
	assert_int_equal(st.entries, 8);
	/* ...whose bytes no longer count, but stay until the last unpin. */
	assert_true(st.bytes <= REVCACHE_SHARDS * per * 8 / REVCACHE_SHARDS);
	revcache_unpin(rc, again);
	assert_memory_equal(first, want, len);
	revcache_unpin(rc, first);
	/* An entry unpinned while still cached stays cached. */
	first = revcache_pin(rc, s * 17, &got);
	assert_non_null(first);
	revcache_unpin(rc, first);
	assert_true(has(rc, s * 17, len));
	free(want);
	revcache_free(rc);
}

struct worker {
	struct revcache *rc;
	int64_t first;
	bool ok;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	int64_t seq;

	/* Whatever is found is exactly its own bytes. */
	w->ok = true;
	for (seq = w->first; seq < w->first + 3000; seq++) {
		put(w->rc, seq, 2000);
		if (lookup(w->rc, seq - 50, 2000) < 0 || lookup(w->rc, seq, 2000) < 0)
			w->ok = false;
	}
	return NULL;
}

static void test_concurrent_users_keep_the_bound(void **state)
{
	const size_t max = 2u << 20;
	struct revcache *rc = revcache_new(max);
	struct revcache_stats st;
	struct worker w[4];
	pthread_t t[4];
	int i;

	(void)state;
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){rc, 1 + i * 100000, false};
		pthread_create(&t[i], NULL, hammer, &w[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_true(w[i].ok);
	}
	revcache_get_stats(rc, &st);
	assert_true(st.bytes <= max);
	assert_int_equal(st.evictions + st.entries, 12000);
	revcache_free(rc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_and_counters),
		cmocka_unit_test(test_bound_under_pressure),
		cmocka_unit_test(test_clock_keeps_what_is_read),
		cmocka_unit_test(test_off_and_oversized),
		cmocka_unit_test(test_pinned_bytes_outlive_eviction),
		cmocka_unit_test(test_concurrent_users_keep_the_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
