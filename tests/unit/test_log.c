/*
 * Unit tests for logging (log.c): one line per message, starting with a UTC
 * timestamp to the millisecond, then the program name and the level; lines
 * below the chosen level are not written.
 */
#include "test_util.h"

#include <regex.h>
#include <stdlib.h>
#include <unistd.h>

#include "comb/log.h"

/* Writes one line through comb_log with stderr sent to a file; checks it. */
static void test_log_line_has_milliseconds(void **state)
{
	char path[] = "/tmp/comb-test-log.XXXXXX";
	char line[256] = "";
	regex_t re;
	FILE *f;
	int fd, saved;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	comb_log_init("comb-test", COMB_LOG_INFO);
	comb_info("hello %d", 42);
	comb_debug("not written");
	fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	close(fd);

	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	assert_null(fgets(line + strlen(line), (int)(sizeof(line) - strlen(line)), f));
	fclose(f);
	unlink(path);
	assert_int_equal(regcomp(&re,
		"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
		"comb-test info: hello 42\n$", REG_EXTENDED | REG_NOSUB), 0);
	if (regexec(&re, line, 0, NULL, 0) != 0)
		fail_msg("unexpected log line: %s", line);
	regfree(&re);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_log_line_has_milliseconds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
