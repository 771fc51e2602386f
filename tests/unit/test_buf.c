/*
 * Unit tests for comb_buf: growth up to a hard maximum, all-or-nothing
 * appends, detach semantics, the JSON string writer checked against
 * the escaping JSON.stringify performs (with its plain runs read eight
 * bytes at a time), and PostgreSQL array elements.
 */
#include "test_util.h"

#include <stdlib.h>

#include "comb/buf.h"
#include "comb/error.h"
#include "comb/utf8.h"

static void test_append_and_terminate(void **state)
{
	struct comb_buf b;

	(void)state;
	comb_buf_init(&b, 100);
	assert_null(b.data);
	assert_int_equal(comb_buf_puts(&b, "hello"), 0);
	assert_int_equal(comb_buf_putc(&b, ' '), 0);
	assert_int_equal(comb_buf_append(&b, "world!!", 5), 0);
	assert_int_equal(comb_buf_printf(&b, " %d-%s", 42, "x"), 0);
	assert_int_equal(b.len, strlen("hello world 42-x"));
	assert_string_equal(b.data, "hello world 42-x");
	assert_int_equal(b.data[b.len], '\0');
	assert_true(b.cap <= 101);
	assert_int_equal(comb_buf_append(&b, NULL, 0), 0);
	assert_int_equal(b.len, 16);
	comb_buf_release(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.max, 100);
}

static void test_max_is_hard(void **state)
{
	struct comb_buf b;

	(void)state;
	comb_buf_init(&b, 8);
	assert_int_equal(comb_buf_puts(&b, "12345"), 0);
	assert_int_equal(comb_buf_puts(&b, "6789"), COMB_ETOOBIG);
	assert_string_equal(b.data, "12345");
	assert_int_equal(comb_buf_printf(&b, "%s", "abcd"), COMB_ETOOBIG);
	assert_string_equal(b.data, "12345");
	assert_int_equal(comb_buf_json_string(&b, "ab", 2), COMB_ETOOBIG);
	assert_string_equal(b.data, "12345");
	assert_int_equal(b.len, 5);
	assert_int_equal(comb_buf_puts(&b, "678"), 0);
	assert_int_equal(b.len, 8);
	assert_int_equal(comb_buf_putc(&b, 'x'), COMB_ETOOBIG);
	assert_string_equal(b.data, "12345678");
	assert_true(b.cap <= 9);
	comb_buf_release(&b);

	comb_buf_init(&b, 0);
	assert_int_equal(comb_buf_putc(&b, 'x'), COMB_ETOOBIG);
	assert_int_equal(comb_buf_append(&b, "", 0), 0);
	assert_non_null(b.data);
	assert_string_equal(b.data, "");
	comb_buf_release(&b);
}

static void test_large_growth(void **state)
{
	struct comb_buf b;
	char chunk[1000];
	size_t i;

	(void)state;
	memset(chunk, 'a', sizeof(chunk));
	comb_buf_init(&b, 1000 * 1000);
	for (i = 0; i < 1000; i++)
		assert_int_equal(comb_buf_append(&b, chunk, sizeof(chunk)), 0);
	assert_int_equal(b.len, 1000 * 1000);
	assert_int_equal(comb_buf_putc(&b, 'a'), COMB_ETOOBIG);
	for (i = 0; i < b.len; i++) {
		if (b.data[i] != 'a')
			fail_msg("byte %zu is %d", i, b.data[i]);
	}
	assert_int_equal(b.data[b.len], '\0');
	comb_buf_release(&b);
}

static void test_reset_and_detach(void **state)
{
	struct comb_buf b;
	size_t len = 99;
	char *s;

	(void)state;
	comb_buf_init(&b, 64);
	s = comb_buf_detach(&b, &len);
	assert_non_null(s);
	assert_string_equal(s, "");
	assert_int_equal(len, 0);
	free(s);

	comb_buf_reset(&b);
	assert_int_equal(comb_buf_puts(&b, "abc"), 0);
	comb_buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_non_null(b.data);
	assert_string_equal(b.data, "");
	assert_int_equal(comb_buf_puts(&b, "xyz"), 0);
	s = comb_buf_detach(&b, &len);
	assert_string_equal(s, "xyz");
	assert_int_equal(len, 3);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	assert_int_equal(b.max, 64);
	free(s);
	s = comb_buf_detach(&b, NULL);
	assert_string_equal(s, "");
	free(s);
	comb_buf_release(&b);
}

/* Asserts that s (len bytes) is written as the JSON literal want. */
static void check_json(const char *s, size_t len, const char *want)
{
	struct comb_buf b;

	comb_buf_init(&b, 4096);
	assert_int_equal(comb_buf_json_string(&b, s, len), 0);
	assert_bytes_equal(b.data, b.len, want, strlen(want));
	comb_buf_release(&b);
}

#define CHECK_JSON(lit, want) check_json(lit, sizeof(lit) - 1, want)

static void test_json_string_escapes(void **state)
{
	(void)state;
	CHECK_JSON("", "\"\"");
	CHECK_JSON("plain", "\"plain\"");
	CHECK_JSON("q\"b\\", "\"q\\\"b\\\\\"");
	CHECK_JSON("\n\r\t\b\f", "\"\\n\\r\\t\\b\\f\"");
	CHECK_JSON("\x01\x1f", "\"\\u0001\\u001f\"");
	CHECK_JSON("a\0b", "\"a\\u0000b\"");
	CHECK_JSON("\x0b\x1b", "\"\\u000b\\u001b\"");
	/* Not escaped by JSON.stringify: DEL, '/', U+2028/9, astral. */
	CHECK_JSON("\x7f/", "\"\x7f/\"");
	CHECK_JSON("\xe2\x80\xa8\xe2\x80\xa9", "\"\xe2\x80\xa8\xe2\x80\xa9\"");
	CHECK_JSON("\xf0\x9f\x8c\xb0 caf\xc3\xa9",
		   "\"\xf0\x9f\x8c\xb0 caf\xc3\xa9\"");
	CHECK_JSON("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"");
	CHECK_JSON("\xef\xbf\xbf\xc2\x80", "\"\xef\xbf\xbf\xc2\x80\"");
}

static void test_json_string_all_controls(void **state)
{
	static const char *const want[32] = {
	    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005",
	    "\\u0006", "\\u0007", "\\b",     "\\t",	"\\n",	   "\\u000b",
	    "\\f",     "\\r",	  "\\u000e", "\\u000f", "\\u0010", "\\u0011",
	    "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
	    "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d",
	    "\\u001e", "\\u001f",
	};
	char in[1], expect[16];
	int c;

	(void)state;
	for (c = 0; c < 32; c++) {
		in[0] = (char)c;
		snprintf(expect, sizeof(expect), "\"%s\"", want[c]);
		check_json(in, 1, expect);
	}
}

static void test_json_string_invalid_utf8(void **state)
{
	static const char *const bad[] = {
	    "\xff",
	    "\xc0\x80",
	    "\xc1\xbf",
	    "\xe0\x80\x80",
	    "\xed\xa0\x80",
	    "\xed\xbf\xbf",
	    "\xf0\x80\x80\x80",
	    "\xf4\x90\x80\x80",
	    "\xf5\x80\x80\x80",
	    "\x80",
	    "\xe2\x82",
	    "\xc3",
	    "a\xc3(",
	    "\xf0\x9f\x8c",
	};
	struct comb_buf b;
	size_t i;

	(void)state;
	comb_buf_init(&b, 4096);
	assert_int_equal(comb_buf_puts(&b, "keep"), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = comb_buf_json_string(&b, bad[i], strlen(bad[i]));

		if (rc != COMB_EINVAL)
			fail_msg("case %zu accepted (rc %d)", i, rc);
		assert_int_equal(b.len, 4);
		assert_string_equal(b.data, "keep");
	}
	comb_buf_release(&b);
}

/*
 * Property: for random well-formed UTF-8 the output is valid JSON that
 * jansson decodes back to the same bytes, and contains no raw control
 * characters.
 */
static void test_json_string_roundtrip(void **state)
{
	static const char *const pieces[] = {
	    "a",
	    "\"",
	    "\\",
	    "\n",
	    "\x01",
	    "\x1f",
	    "\x7f",
	    "\0",
	    "\xc3\xa9",
	    "\xe2\x80\xa8",
	    "\xf0\x9f\x8e\x89",
	    "/",
	    " ",
	    "\xed\x9f\xbf",
	    "\xee\x80\x80",
	};
	static const size_t lens[] = {1, 1, 1, 1, 1, 1, 1, 1,
				      2, 3, 4, 1, 1, 3, 3};
	unsigned int seed = 12345;
	int iter;

	(void)state;
	for (iter = 0; iter < 2000; iter++) {
		struct comb_buf in, out;
		json_error_t err;
		json_t *v;
		size_t i, n;

		comb_buf_init(&in, 4096);
		comb_buf_init(&out, 4096 * 6);
		n = (size_t)(rand_r(&seed) % 40);
		for (i = 0; i < n; i++) {
			size_t k = (size_t)rand_r(&seed) %
				   (sizeof(lens) / sizeof(lens[0]));

			assert_int_equal(
			    comb_buf_append(&in, pieces[k], lens[k]), 0);
		}
		assert_int_equal(
		    comb_buf_json_string(&out, in.data ? in.data : "", in.len),
		    0);
		for (i = 0; i < out.len; i++)
			assert_true((unsigned char)out.data[i] >= 0x20);
		v = json_loadb(out.data, out.len,
			       JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
		if (v == NULL)
			fail_msg("jansson refused output: %s", err.text);
		assert_true(json_is_string(v));
		assert_bytes_equal(json_string_value(v), json_string_length(v),
				   in.data ? in.data : "", in.len);
		json_decref(v);
		comb_buf_release(&in);
		comb_buf_release(&out);
	}
}

static void test_pg_array_items(void **state)
{
	static const char want[] = "{\"a\",NULL,\"{\\\"k\\\":\\\"x\\\\\\\\y\\\"}\",\"\"}";
	struct comb_buf b;

	(void)state;
	comb_buf_init(&b, 64);
	assert_int_equal(comb_buf_putc(&b, '{'), 0);
	assert_int_equal(comb_buf_pg_array_item(&b, "a"), 0);
	assert_int_equal(comb_buf_pg_array_item(&b, NULL), 0);
	assert_int_equal(comb_buf_pg_array_item(&b, "{\"k\":\"x\\\\y\"}"), 0);
	assert_int_equal(comb_buf_pg_array_item(&b, ""), 0);
	assert_int_equal(comb_buf_putc(&b, '}'), 0);
	assert_string_equal(b.data, want);
	/* Too big: nothing of the element is appended. */
	b.max = b.len + 4;
	assert_int_equal(comb_buf_pg_array_item(&b, "abcdef"), COMB_ETOOBIG);
	assert_string_equal(b.data, want);
	comb_buf_release(&b);
}

static void test_pg_array(void **state)
{
	static const char *const values[] = {"a", "b\"c", "d\\e"};
	struct comb_buf b;

	(void)state;
	comb_buf_init(&b, 32);
	assert_int_equal(comb_buf_puts(&b, "x"), 0);
	assert_int_equal(comb_buf_pg_array(&b, values, 3), 0);
	assert_string_equal(b.data, "x{\"a\",\"b\\\"c\",\"d\\\\e\"}");
	comb_buf_reset(&b);
	assert_int_equal(comb_buf_pg_array(&b, values, 0), 0);
	assert_string_equal(b.data, "{}");
	/* Too big: nothing of the literal is appended. */
	b.max = b.len + 8;
	assert_int_equal(comb_buf_pg_array(&b, values, 3), COMB_ETOOBIG);
	assert_string_equal(b.data, "{}");
	comb_buf_release(&b);
}

/* A plain run ends at the first byte needing care, wherever it falls in
 * or across the eight-byte words. */
static void test_json_plain_run(void **state)
{
	static const unsigned char stops[] = {
		'"', '\\', 0x00, 0x1f, 0x0a, 0x80, 0xc3, 0xff,
	};
	unsigned char text[40];
	size_t len, at, i;

	(void)state;
	for (len = 0; len <= sizeof(text); len++) {
		memset(text, 'a', sizeof(text));
		text[len % 3] = ' ';
		text[len / 2 % sizeof(text)] = 0x7f;
		text[len / 3 % sizeof(text)] = '~';
		assert_int_equal(comb_json_plain_run(text, len), len);
		for (at = 0; at < len; at++) {
			for (i = 0; i < sizeof(stops); i++) {
				unsigned char keep = text[at];

				text[at] = stops[i];
				assert_int_equal(comb_json_plain_run(text, len), at);
				text[at] = keep;
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_append_and_terminate),
	    cmocka_unit_test(test_max_is_hard),
	    cmocka_unit_test(test_large_growth),
	    cmocka_unit_test(test_reset_and_detach),
	    cmocka_unit_test(test_json_string_escapes),
	    cmocka_unit_test(test_json_string_all_controls),
	    cmocka_unit_test(test_json_string_invalid_utf8),
	    cmocka_unit_test(test_json_string_roundtrip),
	    cmocka_unit_test(test_json_plain_run),
	    cmocka_unit_test(test_pg_array_items),
	    cmocka_unit_test(test_pg_array),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
