/* Tests of comma-separated setting lists (shared/src/list.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "comb/error.h"
#include "comb/list.h"

static void items_are_trimmed_and_empty_ones_skipped(void **state)
{
	const char *p = " tcp://a:1 ,, \ttcp://b:2\t,";
	char item[32];

	(void)state;
	assert_int_equal(comb_list_next(&p, item, sizeof(item)), 1);
	assert_string_equal(item, "tcp://a:1");
	assert_int_equal(comb_list_next(&p, item, sizeof(item)), 1);
	assert_string_equal(item, "tcp://b:2");
	assert_int_equal(comb_list_next(&p, item, sizeof(item)), 0);
	assert_int_equal(comb_list_next(&p, item, sizeof(item)), 0);
}

static void empty_lists_have_no_items(void **state)
{
	const char *lists[] = {"", " ", ",", " , \t ,"};
	char item[8];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		const char *p = lists[i];

		assert_int_equal(comb_list_next(&p, item, sizeof(item)), 0);
	}
}

static void an_item_that_does_not_fit_is_refused(void **state)
{
	const char *p = "abcdefgh,x";
	char item[8];

	(void)state;
	assert_int_equal(comb_list_next(&p, item, sizeof(item)), COMB_ETOOBIG);
	assert_int_equal(comb_list_next(&p, item, sizeof(item)), 1);
	assert_string_equal(item, "x");
	p = "abcdefg";
	assert_int_equal(comb_list_next(&p, item, sizeof(item)), 1);
	assert_string_equal(item, "abcdefg");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(items_are_trimmed_and_empty_ones_skipped),
		cmocka_unit_test(empty_lists_have_no_items),
		cmocka_unit_test(an_item_that_does_not_fit_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
