/*
 * Unit tests for the run queue with fair turns per connection
 * (services/relay/hub/turns.c): owners are served in rotation whatever
 * how many turns each has queued, an owner's turns keep their order,
 * removing a turn (the last of its owner's too) keeps the rotation,
 * taking the turns alike takes them from every owner in queue order, and
 * an owner whose turns all went leaves the rotation.
 */
#include "test_util.h"

#include "hub/hub.h"

/* Pops every turn of q into out; returns how many. */
static size_t drain(struct hub_queue *q, struct hub_turn **out, size_t max)
{
	size_t n = 0;
	struct hub_turn *t;

	while (n < max && (t = hub_queue_pop(q)))
		out[n++] = t;
	return n;
}

static void test_rotation(void **state)
{
	struct hub_owner a = {0}, b = {0}, c = {0};
	struct hub_turn ta[5], tb = {.owner = &b}, tc[2], *out[8];
	struct hub_queue q = {0};
	size_t i;

	(void)state;
	for (i = 0; i < 5; i++) {
		ta[i] = (struct hub_turn){.owner = &a};
		hub_queue_push(&q, &ta[i]);
	}
	hub_queue_push(&q, &tb);
	for (i = 0; i < 2; i++) {
		tc[i] = (struct hub_turn){.owner = &c};
		hub_queue_push(&q, &tc[i]);
	}
	assert_int_equal(drain(&q, out, 8), 8);
	/* a, b, c in turn, then what a and c have left */
	assert_ptr_equal(out[0], &ta[0]);
	assert_ptr_equal(out[1], &tb);
	assert_ptr_equal(out[2], &tc[0]);
	assert_ptr_equal(out[3], &ta[1]);
	assert_ptr_equal(out[4], &tc[1]);
	assert_ptr_equal(out[5], &ta[2]);
	assert_ptr_equal(out[6], &ta[3]);
	assert_ptr_equal(out[7], &ta[4]);
	assert_true(hub_queue_empty(&q));
	for (i = 0; i < 8; i++)
		assert_false(out[i]->queued);
}

static void test_remove(void **state)
{
	struct hub_owner a = {0}, b = {0};
	struct hub_turn a1 = {.owner = &a}, a2 = {.owner = &a}, b1 = {.owner = &b};
	struct hub_turn *out[4];
	struct hub_queue q = {0};

	(void)state;
	hub_queue_push(&q, &a1);
	hub_queue_push(&q, &b1);
	hub_queue_push(&q, &a2);
	hub_queue_remove(&q, &a1);
	hub_queue_remove(&q, &a1);  /* not queued: nothing */
	hub_queue_remove(&q, &b1);  /* b's last: b leaves the rotation */
	assert_int_equal(drain(&q, out, 4), 1);
	assert_ptr_equal(out[0], &a2);
	assert_false(b.linked);
	/* an owner that left comes back with its next turn */
	hub_queue_push(&q, &b1);
	assert_ptr_equal(hub_queue_pop(&q), &b1);
	assert_true(hub_queue_empty(&q));
}

/* Turns whose owner is ctx. */
static bool owned_by(const struct hub_turn *t, const void *ctx)
{
	return t->owner == ctx;
}

static bool odd(const struct hub_turn *t, const void *ctx)
{
	const struct hub_turn *base = ctx;

	return (t - base) % 2 == 1;
}

static void test_take_if(void **state)
{
	struct hub_owner a = {0}, b = {0};
	struct hub_turn t[6], *out[6];
	struct hub_queue q = {0};
	size_t i, n;

	(void)state;
	for (i = 0; i < 6; i++) {
		t[i] = (struct hub_turn){.owner = i < 3 ? &a : &b};
		hub_queue_push(&q, &t[i]);
	}
	/* turns 1, 3 and 5, from both owners, in queue order */
	n = hub_queue_take_if(&q, odd, t, out, 6);
	assert_int_equal(n, 3);
	assert_ptr_equal(out[0], &t[1]);
	assert_ptr_equal(out[1], &t[3]);
	assert_ptr_equal(out[2], &t[5]);
	/* at most max */
	assert_int_equal(hub_queue_take_if(&q, owned_by, &b, out, 0), 0);
	/* all of b's: b leaves the rotation, a keeps its own */
	assert_int_equal(hub_queue_take_if(&q, owned_by, &b, out, 6), 1);
	assert_ptr_equal(out[0], &t[4]);
	assert_false(b.linked);
	assert_int_equal(drain(&q, out, 6), 2);
	assert_ptr_equal(out[0], &t[0]);
	assert_ptr_equal(out[1], &t[2]);
	assert_true(hub_queue_empty(&q));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_remove),
		cmocka_unit_test(test_take_if),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
