/*
 * Unit tests for the held maps of a connection
 * (services/relay/session/held_map.c): every key put is found with its
 * value until it is removed, also when many share a home slot and removals
 * shift the rest of their run back; no more than max entries; new slots
 * only within the connection's budget, every byte of it given back on
 * release; a cleared map forgets every key and keeps its slots up to the
 * bound it was given, giving the rest back.
 */
#include "test_util.h"

#include <string.h>

#include "comb/error.h"
#include "session/session.h"

/* The budget of the tests' one connection, in place of budget.c's. */
static size_t budget_room, budget_held;

bool ws_session_hold(struct ws_session *s, size_t bytes)
{
	(void)s;
	if (budget_held + bytes > budget_room)
		return false;
	budget_held += bytes;
	return true;
}

void ws_session_unhold(struct ws_session *s, size_t bytes)
{
	(void)s;
	budget_held -= bytes;
}

/* Key i of 32 bytes; with same_home, the first 8 bytes (the hash) are
 * those of every other key. */
static void key_of(unsigned i, bool same_home, unsigned char key[32])
{
	memset(key, 0xa5, 32);
	memcpy(key + (same_home ? 24 : 0), &i, sizeof(i));
}

static void test_put_get_del(void **state)
{
	struct ws_held_map m;
	unsigned char key[32];
	unsigned i;
	int64_t *v;

	(void)state;
	ws_held_map_init(&m, 32, 10000, NULL);
	for (i = 0; i < 2000; i++) {
		key_of(i, i % 2, key);
		assert_int_equal(ws_held_map_put(&m, key, 7 * i), 0);
	}
	key_of(3, true, key);
	assert_int_equal(ws_held_map_put(&m, key, -1), 0);  /* a new value */
	assert_int_equal(m.count, 2000);
	/* remove every third: the colliding run shifts back */
	for (i = 0; i < 2000; i += 3) {
		key_of(i, i % 2, key);
		ws_held_map_del(&m, key);
	}
	for (i = 0; i < 2000; i++) {
		key_of(i, i % 2, key);
		v = ws_held_map_get(&m, key);
		if (i % 3 == 0) {
			assert_null(v);
		} else {
			assert_non_null(v);
			assert_int_equal(*v, i == 3 ? -1 : 7 * (int64_t)i);
		}
	}
	assert_int_equal(m.count, 2000 - 667);
	ws_held_map_release(&m);
	assert_int_equal(m.count, 0);
	assert_null(ws_held_map_get(&m, key));
}

static void test_visit(void **state)
{
	struct ws_held_map m;
	struct ws_held_visit v = WS_HELD_VISIT;
	uint8_t d[16] = {1, 2, 3};
	size_t seen = 0;

	(void)state;
	ws_held_map_init(&m, 16, 4, NULL);
	for (d[15] = 0; d[15] < 4; d[15]++)
		assert_int_equal(ws_held_map_put(&m, d, 0), 0);
	assert_int_equal(ws_held_map_put(&m, d, 0), COMB_ETOOBIG);  /* a fifth */
	d[15] = 0;
	assert_int_equal(ws_held_map_put(&m, d, 9), 0);  /* not new */
	while (ws_held_map_next(&m, &v))
		seen++;
	assert_int_equal(seen, 4);
	assert_null(ws_held_map_next(&m, &v));
	ws_held_map_release(&m);
}

static void test_budget(void **state)
{
	struct ws_held_map m;
	unsigned char key[32];
	unsigned i;
	int rc = 0;

	(void)state;
	budget_room = 4096;
	budget_held = 0;
	ws_held_map_init(&m, 32, 100000, (struct ws_session *)&m);
	for (i = 0; i < 1000 && rc == 0; i++) {
		key_of(i, false, key);
		rc = ws_held_map_put(&m, key, i);
	}
	assert_int_equal(rc, COMB_EDENIED);
	assert_true(budget_held <= budget_room);
	assert_int_equal(budget_held, m.held);
	assert_int_equal(budget_held, m.cap * m.stride);
	/* what was put before stays */
	key_of(0, false, key);
	assert_non_null(ws_held_map_get(&m, key));
	ws_held_map_release(&m);
	assert_int_equal(budget_held, 0);
}

static void test_clear(void **state)
{
	struct ws_held_map m;
	unsigned char key[32];
	unsigned i;

	(void)state;
	budget_room = 1 << 20;
	budget_held = 0;
	ws_held_map_init(&m, 32, 100000, (struct ws_session *)&m);
	for (i = 0; i < 5; i++) {
		key_of(i, false, key);
		assert_int_equal(ws_held_map_put(&m, key, i), 0);
	}
	assert_int_equal(m.cap, 16);
	/* within the bound: empty, its slots kept and still counted */
	ws_held_map_clear(&m, 16);
	assert_int_equal(m.count, 0);
	assert_int_equal(m.cap, 16);
	assert_int_equal(budget_held, 16 * m.stride);
	for (i = 0; i < 5; i++) {
		key_of(i, false, key);
		assert_null(ws_held_map_get(&m, key));
	}
	key_of(7, false, key);
	assert_int_equal(ws_held_map_put(&m, key, 7), 0);
	assert_int_equal(*ws_held_map_get(&m, key), 7);
	assert_int_equal(m.count, 1);
	/* grown past it: every slot given back */
	for (i = 100; i < 120; i++) {
		key_of(i, false, key);
		assert_int_equal(ws_held_map_put(&m, key, i), 0);
	}
	assert_true(m.cap > 16);
	ws_held_map_clear(&m, 16);
	assert_int_equal(m.count, 0);
	assert_int_equal(m.cap, 0);
	assert_int_equal(budget_held, 0);
	key_of(100, false, key);
	assert_null(ws_held_map_get(&m, key));
	ws_held_map_release(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_get_del),
	    cmocka_unit_test(test_visit),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_clear),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
