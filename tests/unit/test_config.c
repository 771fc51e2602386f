/*
 * Unit tests for the configuration loader (shared/src/config.c):
 * COMB_LOG_LEVEL takes debug, info, warn or error, defaults to info, and
 * anything else is refused with a message naming the variable and the
 * accepted words; the Redis credentials as shared/src/redis.c reads them
 * back: the password of COMB_REDIS_PASSWORD_FILE is folded,
 * percent-encoded, into the URL with or without an ACL user; a password in
 * both places, an empty file and a missing file are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comb/config.h"
#include "comb/error.h"
#include "comb/redis.h"

static char pw_path[64];

/* Writes text to the password file. */
static void write_password(const char *text)
{
	FILE *f = fopen(pw_path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Loads the configuration for url and the password file; returns its rc
 * and, on success, the parsed URL in u. */
static int load(const char *url, struct comb_redis_url *u, char *err,
		size_t errlen)
{
	struct comb_config cfg;
	int rc;

	setenv("COMB_REDIS_URL", url, 1);
	setenv("COMB_REDIS_PASSWORD_FILE", pw_path, 1);
	err[0] = '\0';
	rc = comb_config_load(&cfg, err, errlen);
	if (rc == 0) {
		assert_int_equal(comb_redis_url_parse(cfg.redis_url, u, err, errlen), 0);
		comb_config_release(&cfg);
	}
	return rc;
}

static void test_password_file_folds_into_url(void **state)
{
	struct comb_redis_url u;
	char err[256];

	(void)state;
	write_password("s3cr:t/@ %x\n");
	assert_int_equal(load("redis://cache.internal:6380/2", &u, err, sizeof(err)), 0);
	assert_string_equal(u.host, "cache.internal");
	assert_int_equal(u.port, 6380);
	assert_int_equal(u.db, 2);
	assert_string_equal(u.user, "");
	assert_string_equal(u.password, "s3cr:t/@ %x");

	assert_int_equal(load("redis://comb@[::1]", &u, err, sizeof(err)), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 6379);
	assert_string_equal(u.user, "comb");
	assert_string_equal(u.password, "s3cr:t/@ %x");
}

static void test_password_file_refusals(void **state)
{
	struct comb_redis_url u;
	char err[256];

	(void)state;
	write_password("x\n");
	assert_int_equal(load("redis://:pw@h", &u, err, sizeof(err)), COMB_EINVAL);
	assert_non_null(strstr(err, "give it in one place"));
	write_password("\n");
	assert_int_equal(load("redis://h", &u, err, sizeof(err)), COMB_EINVAL);
	assert_non_null(strstr(err, "COMB_REDIS_PASSWORD_FILE"));
	unlink(pw_path);
	assert_int_equal(load("redis://h", &u, err, sizeof(err)), COMB_EINVAL);
	assert_non_null(strstr(err, "cannot open"));
}

static void test_url_credentials(void **state)
{
	struct comb_redis_url u;
	char err[256];

	(void)state;
	assert_int_equal(comb_redis_url_parse("redis://:p%40ss@h:1", &u, err, sizeof(err)), 0);
	assert_string_equal(u.user, "");
	assert_string_equal(u.password, "p@ss");
	assert_int_equal(comb_redis_url_parse("redis://u%3a:a:b@h", &u, err, sizeof(err)), 0);
	assert_string_equal(u.user, "u:");
	assert_string_equal(u.password, "a:b");
	assert_int_equal(comb_redis_url_parse("redis://:%00@h", &u, err, sizeof(err)), COMB_EINVAL);
	assert_int_equal(comb_redis_url_parse("redis://:%zz@h", &u, err, sizeof(err)), COMB_EINVAL);
	assert_int_equal(comb_redis_url_parse("redis://:pw%4@h", &u, err, sizeof(err)), COMB_EINVAL);
	assert_null(strstr(err, "pw"));
}

static void test_log_level_accepted(void **state)
{
	static const char *const levels[] = {"debug", "info", "warn", "error"};
	struct comb_config cfg;
	char err[256];
	size_t i;

	(void)state;
	/* the Redis tests above leave their credentials behind */
	unsetenv("COMB_REDIS_URL");
	unsetenv("COMB_REDIS_PASSWORD_FILE");
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
		cmocka_unit_test(test_password_file_folds_into_url),
		cmocka_unit_test(test_password_file_refusals),
		cmocka_unit_test(test_url_credentials),
		cmocka_unit_test(test_log_level_accepted),
		cmocka_unit_test(test_log_level_refused),
	};

	snprintf(pw_path, sizeof(pw_path), "/tmp/comb-test-config-%d", (int)getpid());
	unsetenv("COMB_REDIS_URL");
	unsetenv("COMB_REDIS_PASSWORD_FILE");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
