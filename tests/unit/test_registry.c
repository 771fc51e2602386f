/*
 * Unit tests for the registry of subscriptions by community and channel
 * (services/relay/hub/registry.c): a registration is found in the slot of
 * each channel it names (once, however often it names one) or in its
 * community-wide slot, removing it empties and drops its slots, and
 * visiting a community meets only that community's registrations.
 */
#include "test_util.h"

#include "hub/hub.h"

static const char A[37] = "0b6c8e2a-7d1f-4c3e-9a5b-2f4e6d8c0a1b";
static const char B[37] = "9a3e1c5b-2d4f-4e6a-8b0c-1d3f5a7c9e2b";

/* Counts the visits of ctx (an int) by hub_registry_each. */
static void count(void *member, void *ctx)
{
	(void)member;
	(*(int *)ctx)++;
}

static void test_channels_and_community(void **state)
{
	static struct hub_registry r;
	char named[3][37];
	struct hub_slot *s;
	int x, y, z, visits = 0;

	(void)state;
	memcpy(named[0], A, 37);
	memcpy(named[1], B, 37);
	memcpy(named[2], A, 37);  /* A twice: registered once */
	assert_int_equal(hub_registry_add(&r, 7, (const char (*)[37])named, 3, &x), 0);
	assert_int_equal(hub_registry_add(&r, 7, NULL, 0, &y), 0);
	assert_int_equal(hub_registry_add(&r, 8, (const char (*)[37])named, 1, &z), 0);

	s = hub_registry_find(&r, 7, A);
	assert_non_null(s);
	assert_int_equal(s->n, 1);
	assert_ptr_equal(s->members[0], &x);
	assert_non_null(hub_registry_find(&r, 7, B));
	s = hub_registry_find(&r, 7, "");
	assert_non_null(s);
	assert_ptr_equal(s->members[0], &y);
	assert_null(hub_registry_find(&r, 8, B));
	assert_ptr_equal(hub_registry_find(&r, 8, A)->members[0], &z);

	hub_registry_each(&r, 7, count, &visits);
	assert_int_equal(visits, 3);  /* x in A and B, y community-wide */
	visits = 0;
	hub_registry_each(&r, 0, count, &visits);
	assert_int_equal(visits, 4);

	hub_registry_remove(&r, 7, (const char (*)[37])named, 3, &x);
	assert_null(hub_registry_find(&r, 7, A));
	assert_null(hub_registry_find(&r, 7, B));
	hub_registry_remove(&r, 7, NULL, 0, &y);
	assert_null(hub_registry_find(&r, 7, ""));
	hub_registry_remove(&r, 8, (const char (*)[37])named, 1, &z);
	visits = 0;
	hub_registry_each(&r, 0, count, &visits);
	assert_int_equal(visits, 0);
}

static void test_many_in_one_slot(void **state)
{
	static struct hub_registry r;
	int members[100], i, visits = 0;
	struct hub_slot *s;

	(void)state;
	for (i = 0; i < 100; i++)
		assert_int_equal(hub_registry_add(&r, 1, (const char (*)[37])&A, 1, &members[i]), 0);
	s = hub_registry_find(&r, 1, A);
	assert_int_equal(s->n, 100);
	for (i = 0; i < 100; i += 2)
		hub_registry_remove(&r, 1, (const char (*)[37])&A, 1, &members[i]);
	s = hub_registry_find(&r, 1, A);
	assert_int_equal(s->n, 50);
	for (i = 0; i < 50; i++)
		assert_true(((int *)s->members[i] - members) % 2 == 1);
	hub_registry_each(&r, 1, count, &visits);
	assert_int_equal(visits, 50);
	for (i = 1; i < 100; i += 2)
		hub_registry_remove(&r, 1, (const char (*)[37])&A, 1, &members[i]);
	assert_null(hub_registry_find(&r, 1, A));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_channels_and_community),
		cmocka_unit_test(test_many_in_one_slot),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
