/*
 * Unit tests for comb_uuid_is_canonical: only the lowercase hyphenated
 * 8-4-4-4-12 spelling of a non-nil UUID is accepted; and for
 * comb_uuid_parse and comb_uuid_format, its 16 bytes and back.
 */
#include "test_util.h"

#include <string.h>

#include "comb/error.h"
#include "comb/uuid.h"

static void test_accepts_canonical(void **state)
{
	(void)state;
	assert_true(
	    comb_uuid_is_canonical("5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84"));
	assert_true(
	    comb_uuid_is_canonical("00000000-0000-0000-0000-000000000001"));
	assert_true(
	    comb_uuid_is_canonical("ffffffff-ffff-ffff-ffff-ffffffffffff"));
	/* Version and variant bits are not checked. */
	assert_true(
	    comb_uuid_is_canonical("01234567-89ab-cdef-0123-456789abcdef"));
	assert_int_equal(COMB_UUID_LEN, 36);
}

static void test_rejects(void **state)
{
	static const char *const bad[] = {
	    "00000000-0000-0000-0000-000000000000",   /* nil */
	    "5A0F2F6E-3C1B-4A9E-8F7D-2B6C1E0D9A84",   /* uppercase */
	    "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9A84",   /* one uppercase */
	    "{5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84}", /* braces */
	    "5a0f2f6e3c1b4a9e8f7d2b6c1e0d9a84",	      /* no hyphens */
	    "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a8",    /* short */
	    "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a845",  /* long */
	    "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84 ",  /* trailing space */
	    "5a0f2f6e3-c1b-4a9e-8f7d-2b6c1e0d9a84",   /* hyphen moved */
	    "5a0f2f6e-3c1b-4a9e-8f7d_2b6c1e0d9a84",   /* wrong separator */
	    "5a0f2f6g-3c1b-4a9e-8f7d-2b6c1e0d9a84",   /* non-hex */
	    "urn:uuid:5a0f2f6e-3c1b-4a9e-8f7d-2b6c",  /* prefix */
	    "",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (comb_uuid_is_canonical(bad[i]))
			fail_msg("accepted \"%s\"", bad[i]);
	}
	assert_false(comb_uuid_is_canonical(NULL));
}

static void test_parse_and_format(void **state)
{
	static const uint8_t bytes[16] = {
	    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
	    0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
	const char *text = "01234567-89ab-cdef-fedc-ba9876543210";
	uint8_t d[16];
	char out[COMB_UUID_LEN + 1];

	(void)state;
	assert_int_equal(comb_uuid_parse(text, d), 0);
	assert_memory_equal(d, bytes, 16);
	memset(out, 'x', sizeof(out));
	comb_uuid_format(bytes, out);
	assert_string_equal(out, text);
	/* Whatever is not canonical is refused. */
	assert_int_equal(comb_uuid_parse("01234567-89AB-cdef-fedc-ba9876543210", d),
			 COMB_EINVAL);
	assert_int_equal(comb_uuid_parse("0123456789ab-cdef-fedc-ba9876543210", d),
			 COMB_EINVAL);
	assert_int_equal(comb_uuid_parse(NULL, d), COMB_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_accepts_canonical),
	    cmocka_unit_test(test_rejects),
	    cmocka_unit_test(test_parse_and_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
