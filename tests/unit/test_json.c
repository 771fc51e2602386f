/*
 * Unit tests for comb_json_parse: the size limit comes first, the whole
 * buffer must be one value, duplicate keys and invalid UTF-8 are refused
 * with their own message, NUL inside strings is kept.
 */
#include "test_util.h"

#include "comb/json.h"

/* Parses a literal (without its terminating NUL) and checks the outcome:
 * want_err NULL means success. */
static void check(const char *buf, size_t len, size_t max, const char *want_err)
{
	char err[128] = "untouched";
	json_t *v = comb_json_parse(buf, len, max, err, sizeof(err));

	if (want_err == NULL) {
		if (v == NULL)
			fail_msg("refused: %s", err);
		json_decref(v);
		return;
	}
	if (v != NULL)
		fail_msg("accepted input that should fail with %s", want_err);
	assert_string_equal(err, want_err);
}

#define CHECK(lit, want) check(lit, sizeof(lit) - 1, 1024, want)

static void test_accepts(void **state)
{
	(void)state;
	CHECK("{}", NULL);
	CHECK("[]", NULL);
	CHECK(" {\"a\": [1, 2.5, \"x\", null, true]} \n", NULL);
	CHECK("\"just a string\"", NULL);
	CHECK("42", NULL);
	CHECK("{\"a\":{\"a\":1}}", NULL); /* same key at two levels */
}

static void test_rejects(void **state)
{
	(void)state;
	CHECK("", "invalid json");
	CHECK("{", "invalid json");
	CHECK("{} x", "invalid json");
	CHECK("{}{}", "invalid json");
	CHECK("[1,]", "invalid json");
	CHECK("{'a':1}", "invalid json");
	CHECK("{\"a\":1}\0", "invalid json");
	CHECK("[\"a\0b\"]", "invalid json");	/* raw NUL byte */
	CHECK("[\"\x01\"]", "invalid json");	/* raw control character */
	CHECK("[\"\\ud800\"]", "invalid json"); /* lone surrogate */
	CHECK("[NaN]", "invalid json");
	CHECK("[99999999999999999999]", "invalid json");
	CHECK("{\"a\":1,\"a\":2}", "duplicate key");
	CHECK("{\"a\":1,\"b\":{\"c\":1,\"c\":1}}", "duplicate key");
	CHECK("[\"\xff\"]", "invalid utf-8");
	CHECK("[\"\xc0\x80\"]", "invalid utf-8");
	CHECK("[\"\xed\xa0\x80\"]", "invalid utf-8");
	CHECK("{\"\xe2\x82\":1}", "invalid utf-8");
}

static void test_size_limit(void **state)
{
	char big[2048];

	(void)state;
	memset(big, ' ', sizeof(big));
	big[0] = '[';
	big[sizeof(big) - 1] = ']';
	check(big, sizeof(big), sizeof(big), NULL);
	check(big, sizeof(big), sizeof(big) - 1, "body too large");
	/* Checked before parsing: even garbage reports the size. */
	check("xxxx", 4, 3, "body too large");
	assert_null(comb_json_parse("[]", 2, 1, NULL, 0));
}

static void test_length_bounded(void **state)
{
	const char buf[] = "[1]trailing garbage";
	char err[64];
	json_t *v;

	(void)state;
	v = comb_json_parse(buf, 3, 1024, err, sizeof(err));
	assert_non_null(v);
	assert_int_equal(json_array_size(v), 1);
	json_decref(v);
	assert_null(comb_json_parse(buf, 4, 1024, err, sizeof(err)));
	assert_null(comb_json_parse(NULL, 0, 1024, err, sizeof(err)));
	assert_string_equal(err, "invalid json");
}

static void test_nul_inside_strings(void **state)
{
	const char buf[] = "{\"s\":\"a\\u0000b\"}";
	char err[64];
	json_t *v, *s;

	(void)state;
	v = comb_json_parse(buf, sizeof(buf) - 1, 1024, err, sizeof(err));
	assert_non_null(v);
	s = json_object_get(v, "s");
	assert_int_equal(json_string_length(s), 3);
	assert_memory_equal(json_string_value(s), "a\0b", 3);
	json_decref(v);
	/* NUL is never allowed in a key. */
	check("{\"a\\u0000\":1}", sizeof("{\"a\\u0000\":1}") - 1, 1024,
	      "invalid json");
}

/* Nesting is bounded before jansson recurses; brackets in strings do not
 * count. */
static void test_depth_limit(void **state)
{
	char deep[2 * COMB_JSON_MAX_DEPTH + 8], quoted[2 * COMB_JSON_MAX_DEPTH + 16];
	int i;

	(void)state;
	for (i = 0; i < COMB_JSON_MAX_DEPTH; i++) {
		deep[i] = '[';
		deep[2 * COMB_JSON_MAX_DEPTH - 1 - i] = ']';
	}
	deep[2 * COMB_JSON_MAX_DEPTH] = '\0';
	check(deep, strlen(deep), 1024, NULL);
	memmove(deep + 1, deep, strlen(deep) + 1);
	deep[0] = '[';
	deep[strlen(deep) + 1] = '\0';
	deep[strlen(deep)] = ']';
	check(deep, strlen(deep), 1024, "json nested too deeply");
	snprintf(quoted, sizeof(quoted), "\"%.*s\"", 2 * COMB_JSON_MAX_DEPTH, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[");
	check(quoted, strlen(quoted), 1024, NULL);
}

static void test_get_string(void **state)
{
	const char buf[] = "{\"a\":\"x\",\"b\":1,\"c\":null}";
	json_t *v = comb_json_parse(buf, sizeof(buf) - 1, 1024, NULL, 0);

	(void)state;
	assert_non_null(v);
	assert_string_equal(comb_json_get_string(v, "a"), "x");
	assert_null(comb_json_get_string(v, "b"));
	assert_null(comb_json_get_string(v, "c"));
	assert_null(comb_json_get_string(v, "missing"));
	assert_null(comb_json_get_string(json_object_get(v, "a"), "a"));
	assert_null(comb_json_get_string(NULL, "a"));
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_accepts),
	    cmocka_unit_test(test_rejects),
	    cmocka_unit_test(test_size_limit),
	    cmocka_unit_test(test_length_bounded),
	    cmocka_unit_test(test_nul_inside_strings),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_get_string),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
