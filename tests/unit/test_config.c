/*
 * Unit tests for the configuration loader (config.c): COMB_LOG_LEVEL takes
 * debug, info, warn or error, defaults to info, and anything else is
 * refused with a message naming the variable and the accepted words.
 */
#include "test_util.h"

#include <stdlib.h>

#include "comb/config.h"
#include "comb/error.h"

static void test_log_level_accepted(void **state)
{
	static const char *const levels[] = {"debug", "info", "warn", "error"};
	struct comb_config cfg;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		assert_int_equal(setenv("COMB_LOG_LEVEL", levels[i], 1), 0);
		assert_int_equal(comb_config_load(&cfg, err, sizeof(err)), 0);
		assert_string_equal(cfg.log_level, levels[i]);
		comb_config_release(&cfg);
	}
	assert_int_equal(unsetenv("COMB_LOG_LEVEL"), 0);
	assert_int_equal(comb_config_load(&cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.log_level, "info");
	comb_config_release(&cfg);
}

static void test_log_level_refused(void **state)
{
	static const char *const bad[] = {"verbose", "INFO", "", "info "};
	struct comb_config cfg;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(setenv("COMB_LOG_LEVEL", bad[i], 1), 0);
		err[0] = '\0';
		assert_int_equal(comb_config_load(&cfg, err, sizeof(err)), COMB_EINVAL);
		assert_non_null(strstr(err, "COMB_LOG_LEVEL: expected debug, info, warn or error"));
		assert_non_null(strstr(err, bad[i]));
	}
	assert_int_equal(unsetenv("COMB_LOG_LEVEL"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_log_level_accepted),
	    cmocka_unit_test(test_log_level_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
