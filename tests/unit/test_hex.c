/*
 * Unit tests for the hex helpers: lowercase encoding, and decoding that
 * refuses uppercase, non-hex characters and any other length.
 */
#include "test_util.h"

#include "comb/error.h"
#include "comb/hex.h"

static void test_encode(void **state)
{
	const unsigned char in[] = {0x00, 0x01, 0xab, 0xcd, 0xef, 0xff, 0x10};
	char out[2 * sizeof(in) + 1];
	char empty[1] = {'x'};

	(void)state;
	comb_hex_encode(in, sizeof(in), out);
	assert_string_equal(out, "0001abcdefff10");
	comb_hex_encode(in, 0, empty);
	assert_string_equal(empty, "");
}

static void test_decode_roundtrip(void **state)
{
	unsigned char in[256], out[256];
	char hex[513];
	int i;

	(void)state;
	for (i = 0; i < 256; i++)
		in[i] = (unsigned char)i;
	comb_hex_encode(in, sizeof(in), hex);
	memset(out, 0, sizeof(out));
	assert_int_equal(comb_hex_decode(hex, out, sizeof(out)), 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(comb_hex_decode("", out, 0), 0);
}

static void test_decode_rejects(void **state)
{
	unsigned char out[4];

	(void)state;
	assert_int_equal(comb_hex_decode("deadbeef", out, 4), 0);
	assert_int_equal(out[0], 0xde);
	assert_int_equal(out[3], 0xef);
	assert_int_equal(comb_hex_decode("DEADBEEF", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode("deadbeeF", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode("deadbee", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode("deadbeef0", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode("deadbeef00", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode("deadbeeg", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode("dead beef", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode(" deadbeef", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode("", out, 4), COMB_EINVAL);
	assert_int_equal(comb_hex_decode("0x", out, 1), COMB_EINVAL);
	assert_int_equal(comb_hex_decode(NULL, out, 4), COMB_EINVAL);
}

static void test_is_lower(void **state)
{
	(void)state;
	assert_true(comb_hex_is_lower("0123456789abcdef", 16));
	assert_true(comb_hex_is_lower("", 0));
	assert_false(comb_hex_is_lower("0123456789abcdef", 15));
	assert_false(comb_hex_is_lower("0123456789abcdef", 17));
	assert_false(comb_hex_is_lower("0123456789ABCDEF", 16));
	assert_false(comb_hex_is_lower("0123456789abcdeg", 16));
	assert_false(comb_hex_is_lower("x", 0));
	assert_false(comb_hex_is_lower(NULL, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_encode),
	    cmocka_unit_test(test_decode_roundtrip),
	    cmocka_unit_test(test_decode_rejects),
	    cmocka_unit_test(test_is_lower),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
