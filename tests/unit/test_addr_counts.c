/*
 * Unit tests for the per-address counts (services/relay/client_addr/addr_counts.c):
 * counts per address and their limit, giving back, a table kept in use
 * long after many addresses came and went (entries whose count fell to 0
 * keep the probe going), a full table, and a claim that waits until the
 * address holds fewer than its limit.
 */
#include "test_util.h"

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "client_addr/addr_counts.h"

static void test_add_and_limit(void **state)
{
	struct addr_counts t;

	(void)state;
	assert_int_equal(addr_counts_init(&t, 8), 0);
	assert_int_equal(addr_counts_add(&t, "127.0.0.2"), 1);
	assert_int_equal(addr_counts_add(&t, "127.0.0.2"), 2);
	assert_int_equal(addr_counts_add(&t, "127.0.0.3"), 1);
	assert_false(addr_counts_claim(&t, "127.0.0.2", 2));
	assert_true(addr_counts_claim(&t, "127.0.0.3", 2));
	assert_false(addr_counts_claim(&t, "127.0.0.3", 2));
	addr_counts_release(&t, "127.0.0.2");
	assert_true(addr_counts_claim(&t, "127.0.0.2", 2));
	/* giving back what an address does not hold changes nothing */
	addr_counts_release(&t, "10.0.0.1");
	assert_false(addr_counts_claim(&t, "127.0.0.2", 2));
	free(t.entries);
}

static void test_many_addresses_over_time(void **state)
{
	struct addr_counts t;
	char a[32], b[32];
	int i;

	(void)state;
	assert_int_equal(addr_counts_init(&t, 4), 0);
	/* one address held throughout while a thousand others come and go
	 * through the same four entries */
	assert_int_equal(addr_counts_add(&t, "198.51.100.1"), 1);
	for (i = 0; i < 1000; i++) {
		snprintf(a, sizeof(a), "10.0.%d.%d", i / 250, i % 250);
		snprintf(b, sizeof(b), "10.1.%d.%d", i / 250, i % 250);
		assert_int_equal(addr_counts_add(&t, a), 1);
		assert_int_equal(addr_counts_add(&t, b), 1);
		assert_int_equal(addr_counts_add(&t, a), 2);
		assert_int_equal(addr_counts_add(&t, "198.51.100.1"), 2);
		addr_counts_release(&t, "198.51.100.1");
		addr_counts_release(&t, a);
		addr_counts_release(&t, a);
		addr_counts_release(&t, b);
	}
	assert_int_equal(addr_counts_add(&t, "198.51.100.1"), 2);
	/* three more fill the table; a fifth address finds no room */
	assert_int_equal(addr_counts_add(&t, "192.0.2.1"), 1);
	assert_int_equal(addr_counts_add(&t, "192.0.2.2"), 1);
	assert_int_equal(addr_counts_add(&t, "192.0.2.3"), 1);
	assert_int_equal(addr_counts_add(&t, "192.0.2.4"), -1);
	assert_false(addr_counts_claim(&t, "192.0.2.4", 10));
	addr_counts_release(&t, "192.0.2.2");
	assert_int_equal(addr_counts_add(&t, "192.0.2.4"), 1);
	free(t.entries);
}

struct waiter {
	struct addr_counts *t;
	int done;
};

static void *claim_one(void *arg)
{
	struct waiter *w = arg;

	addr_counts_claim_wait(w->t, "127.0.0.2", 1);
	__atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void test_claim_wait(void **state)
{
	struct addr_counts t;
	struct waiter w = {.t = &t};
	pthread_t th;
	int i;

	(void)state;
	assert_int_equal(addr_counts_init(&t, 4), 0);
	addr_counts_claim_wait(&t, "127.0.0.2", 1);
	assert_int_equal(pthread_create(&th, NULL, claim_one, &w), 0);
	/* it waits while the address holds its limit... */
	usleep(100000);
	assert_int_equal(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST), 0);
	/* ...while another address is not held up */
	addr_counts_claim_wait(&t, "127.0.0.3", 1);
	addr_counts_release(&t, "127.0.0.2");
	for (i = 0; i < 500 && !__atomic_load_n(&w.done, __ATOMIC_SEQ_CST); i++)
		usleep(10000);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(w.done, 1);
	assert_false(addr_counts_claim(&t, "127.0.0.2", 1));
	free(t.entries);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_and_limit),
		cmocka_unit_test(test_many_addresses_over_time),
		cmocka_unit_test(test_claim_wait),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
