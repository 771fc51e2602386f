/* Tests of the read router's parts that need no server: WAL positions as
 * text, and the checks of COMB_READ_DATABASE_URLS. Routing itself runs
 * against a real primary and standby in tests/e2e/standby.test.mjs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "comb/db.h"
#include "comb/error.h"
#include "comb/readroute.h"

static void lsn_text(void **state)
{
	comb_lsn lsn;
	char text[24];

	(void)state;
	assert_int_equal(comb_lsn_parse("16/B374D848", &lsn), 0);
	assert_true(lsn == UINT64_C(0x16B374D848));
	comb_lsn_format(lsn, text, sizeof(text));
	assert_string_equal(text, "16/B374D848");
	assert_int_equal(comb_lsn_parse("0/0", &lsn), 0);
	assert_true(lsn == 0);
	assert_int_equal(comb_lsn_parse("FFFFFFFF/FFFFFFFF", &lsn), 0);
	assert_true(lsn == UINT64_MAX);
	assert_int_equal(comb_lsn_parse("", &lsn), COMB_EINVAL);
	assert_int_equal(comb_lsn_parse("16", &lsn), COMB_EINVAL);
	assert_int_equal(comb_lsn_parse("16/", &lsn), COMB_EINVAL);
	assert_int_equal(comb_lsn_parse("1/2/3", &lsn), COMB_EINVAL);
	assert_int_equal(comb_lsn_parse("100000000/0", &lsn), COMB_EINVAL);
	assert_int_equal(comb_lsn_parse(NULL, &lsn), COMB_EINVAL);
}

/* Builds a router over a pool of an unreachable primary with urls. */
static int router_for(const char *urls, struct comb_read_router **r,
		      struct comb_db_pool **primary, char *err, size_t errlen)
{
	struct comb_read_options opts = {
		.primary_conninfo = "postgresql://127.0.0.1:1/none?connect_timeout=2",
		.standby_urls = urls,
		.pool_size = 1,
		.statement_timeout_ms = 1000,
		.wait_ms = 10,
		.max_lag_ms = 1000,
	};

	*primary = comb_db_pool_new(opts.primary_conninfo, 1, 1000);
	assert_non_null(*primary);
	return comb_read_router_new(*primary, &opts, r, err, errlen);
}

static void bad_urls(void **state)
{
	struct comb_read_router *r = NULL;
	struct comb_db_pool *primary;
	char err[256] = "";

	(void)state;
	assert_int_equal(router_for("postgresql://a/x,,postgresql://b/x", &r, &primary,
				    err, sizeof(err)), COMB_EINVAL);
	assert_null(r);
	assert_non_null(strstr(err, "empty"));
	comb_db_pool_free(primary);

	assert_int_equal(router_for("a,b,c,d,e,f,g,h,i", &r, &primary, err, sizeof(err)),
			 COMB_EINVAL);
	assert_non_null(strstr(err, "more than 8"));
	comb_db_pool_free(primary);
}

/* Without standbys every read goes to the primary, and a primary that
 * cannot be reached is an error, not a wait. */
static void no_standby(void **state)
{
	struct comb_read_router *r = NULL;
	struct comb_db_pool *primary;
	struct comb_read_lease lease;
	struct comb_read_stats st;
	char err[256] = "";

	(void)state;
	assert_int_equal(router_for("", &r, &primary, err, sizeof(err)), 0);
	assert_int_equal(comb_read_standbys(r), 0);
	assert_int_equal(comb_read_acquire(r, 12345, 10, &lease), COMB_EUNAVAIL);
	assert_null(lease.conn);
	comb_read_stats(r, &st);
	assert_int_equal(st.standbys, 0);
	assert_int_equal(st.fallbacks, 0);
	assert_int_equal(st.waits, 0);
	comb_read_router_free(r);
	comb_db_pool_free(primary);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lsn_text),
		cmocka_unit_test(bad_urls),
		cmocka_unit_test(no_standby),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
