/* Tests of timed-wait deadlines (shared/src/clock.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "comb/clock.h"

static long long ns(const struct timespec *ts)
{
	return (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static void deadlines_lie_ms_ahead_and_stay_normalized(void **state)
{
	const int delays[] = {0, 1, 999, 1000, 1999, 2500, 60000};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(delays) / sizeof(delays[0]); i++) {
		struct timespec before, deadline, after;

		clock_gettime(CLOCK_MONOTONIC, &before);
		comb_deadline_in(&deadline, CLOCK_MONOTONIC, delays[i]);
		clock_gettime(CLOCK_MONOTONIC, &after);
		assert_true(deadline.tv_nsec >= 0 && deadline.tv_nsec < 1000000000L);
		assert_true(ns(&deadline) >= ns(&before) + delays[i] * 1000000LL);
		assert_true(ns(&deadline) <= ns(&after) + delays[i] * 1000000LL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(deadlines_lie_ms_ahead_and_stay_normalized),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
