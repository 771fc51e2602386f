/*
 * Unit tests for artifact filter parsing
 * (services/relay/proto/artifact_filter.c): modes, limits and offsets,
 * kinds, predicate classification and every limit of PROTOCOL.md section
 * 6, each refusal with its reason.
 */
#include "test_util.h"

#include <stdlib.h>

#include "comb/buf.h"
#include "comb/error.h"
#include "proto/proto.h"

#define D "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84"
#define H "0b7e2c1a-9d4f-4e8b-a1c2-3d4e5f6a7b8c"

static json_t *load(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);

	if (!v)
		fail_msg("bad test filter %.200s: %s", text, jerr.text);
	return v;
}

static void refused(const char *text, const char *reason)
{
	struct artifact_filter f;
	json_t *v = load(text);
	char err[256] = "";
	int rc = artifact_filter_parse(v, 1000, &f, err, sizeof(err));

	json_decref(v);
	if (rc != COMB_EINVAL)
		fail_msg("accepted %.200s", text);
	if (strcmp(err, reason))
		fail_msg("%.200s: reason \"%s\", want \"%s\"", text, err, reason);
}

static void test_modes_and_defaults(void **state)
{
	struct artifact_filter f;
	char err[256];
	json_t *v;

	(void)state;
	v = load("{\"artifact\":\"current\"}");
	assert_int_equal(artifact_filter_parse(v, 1000, &f, err, sizeof(err)), 0);
	assert_int_equal(f.mode, ARTIFACT_MODE_CURRENT);
	assert_int_equal(f.limit, 100);
	assert_int_equal(f.offset, 0);
	assert_null(f.d);
	assert_int_equal(f.npreds, 0);
	json_decref(v);

	v = load("{\"artifact\":\"history\",\"#d\":[\"" D "\"]}");
	assert_int_equal(artifact_filter_parse(v, 1000, &f, err, sizeof(err)), 0);
	assert_int_equal(f.mode, ARTIFACT_MODE_HISTORY);
	assert_int_equal(f.limit, 1000);
	assert_non_null(f.d);
	json_decref(v);

	v = load("{\"artifact\":\"head\",\"#d\":[\"" D "\"],\"limit\":3,\"offset\":2,"
		 "\"kinds\":[45010]}");
	assert_int_equal(artifact_filter_parse(v, 1000, &f, err, sizeof(err)), 0);
	assert_int_equal(f.mode, ARTIFACT_MODE_HEAD);
	assert_int_equal(f.limit, 3);
	assert_int_equal(f.offset, 2);
	json_decref(v);

	/* Incremental is recognised and nothing else is looked at. */
	v = load("{\"artifact\":\"incremental\",\"cursor\":\"x\"}");
	assert_int_equal(artifact_filter_parse(v, 1000, &f, err, sizeof(err)), 0);
	assert_int_equal(f.mode, ARTIFACT_MODE_INCREMENTAL);
	json_decref(v);

	/* A smaller configured page size caps the default too. */
	v = load("{\"artifact\":\"current\"}");
	assert_int_equal(artifact_filter_parse(v, 50, &f, err, sizeof(err)), 0);
	assert_int_equal(f.limit, 50);
	json_decref(v);
}

static void test_predicates_classified(void **state)
{
	struct artifact_filter f;
	char err[256];
	json_t *v;

	(void)state;
	v = load("{\"artifact\":\"current\",\"#h\":[\"" H "\"],\"#type\":[\"a.b\",\"c.d\"],"
		 "\"#status\":[\"open\"],\"#assignee\":[\"x\",\"y\"],\"#p\":[\"z\"]}");
	assert_int_equal(artifact_filter_parse(v, 1000, &f, err, sizeof(err)), 0);
	assert_non_null(f.h);
	assert_non_null(f.type);
	assert_int_equal(json_array_size(f.type), 2);
	assert_int_equal(f.npreds, 3);
	assert_string_equal(f.preds[0].name, "status");
	assert_string_equal(f.preds[1].name, "assignee");
	assert_int_equal(json_array_size(f.preds[1].values), 2);
	assert_string_equal(f.preds[2].name, "p");
	json_decref(v);
}

static void test_refusals(void **state)
{
	(void)state;
	refused("{\"artifact\":\"latest\"}",
		"artifact must be current, history, head or incremental");
	refused("{\"artifact\":1}",
		"artifact must be current, history, head or incremental");
	refused("{\"artifact\":\"current\",\"since\":1}", "unknown filter key since");
	refused("{\"artifact\":\"current\",\"ids\":[]}", "unknown filter key ids");
	refused("{\"artifact\":\"history\"}", "history needs #d");
	refused("{\"artifact\":\"head\",\"#h\":[\"" H "\"]}", "head needs #d");
	refused("{\"artifact\":\"current\",\"kinds\":[9]}",
		"kinds of an artifact filter must be [45010]");
	refused("{\"artifact\":\"current\",\"kinds\":[]}",
		"kinds of an artifact filter must be [45010]");
	refused("{\"artifact\":\"current\",\"kinds\":[45010,45011]}",
		"kinds of an artifact filter must be [45010]");
	refused("{\"artifact\":\"current\",\"limit\":0}",
		"limit must be an integer from 1 to 1000");
	refused("{\"artifact\":\"current\",\"limit\":1001}",
		"limit must be an integer from 1 to 1000");
	refused("{\"artifact\":\"current\",\"limit\":\"5\"}",
		"limit must be an integer from 1 to 1000");
	refused("{\"artifact\":\"current\",\"offset\":-1}",
		"offset must be an integer from 0 to 10000");
	refused("{\"artifact\":\"current\",\"offset\":10001}",
		"offset must be an integer from 0 to 10000");
	refused("{\"artifact\":\"current\",\"#\":[\"x\"]}",
		"a predicate needs a tag name after #");
	refused("{\"artifact\":\"current\",\"#status\":[]}",
		"#status must be a non-empty array of strings");
	refused("{\"artifact\":\"current\",\"#status\":\"open\"}",
		"#status must be a non-empty array of strings");
	refused("{\"artifact\":\"current\",\"#status\":[1]}",
		"#status must be a non-empty array of strings");
	refused("{\"artifact\":\"current\",\"#h\":[\"general\"]}",
		"#h values must be canonical uuids");
	refused("{\"artifact\":\"head\",\"#d\":[\"" D "\",\"x\"]}",
		"#d values must be canonical uuids");
}

static void test_limits(void **state)
{
	struct comb_buf b;
	char *big;
	int i;

	(void)state;
	comb_buf_init(&b, 1 << 22);
	big = malloc(5000);
	assert_non_null(big);

	/* 32 names pass, 33 do not. */
	comb_buf_puts(&b, "{\"artifact\":\"current\"");
	for (i = 0; i < 32; i++)
		comb_buf_printf(&b, ",\"#n%d\":[\"v\"]", i);
	comb_buf_puts(&b, "}");
	{
		struct artifact_filter f;
		char err[256];
		json_t *v = load(b.data);

		assert_int_equal(artifact_filter_parse(v, 1000, &f, err, sizeof(err)), 0);
		assert_int_equal(f.npreds, 32);
		json_decref(v);
	}
	comb_buf_reset(&b);
	comb_buf_puts(&b, "{\"artifact\":\"current\"");
	for (i = 0; i < 33; i++)
		comb_buf_printf(&b, ",\"#n%d\":[\"v\"]", i);
	comb_buf_puts(&b, "}");
	refused(b.data, "more than 32 predicates");

	/* 256 values over all predicates pass, 257 do not. */
	comb_buf_reset(&b);
	comb_buf_puts(&b, "{\"artifact\":\"current\",\"#a\":[");
	for (i = 0; i < 200; i++)
		comb_buf_printf(&b, "%s\"v%d\"", i ? "," : "", i);
	comb_buf_puts(&b, "],\"#b\":[");
	for (i = 0; i < 57; i++)
		comb_buf_printf(&b, "%s\"v%d\"", i ? "," : "", i);
	comb_buf_puts(&b, "]}");
	refused(b.data, "more than 256 predicate values");

	/* A value over 4096 bytes. */
	memset(big, 'x', 4097);
	big[4097] = '\0';
	comb_buf_reset(&b);
	comb_buf_printf(&b, "{\"artifact\":\"current\",\"#a\":[\"%s\"]}", big);
	refused(b.data, "a #a value is longer than 4096 bytes");

	/* 16 values of 4096 bytes and the name: 65537 bytes in all. */
	big[4096] = '\0';
	comb_buf_reset(&b);
	comb_buf_puts(&b, "{\"artifact\":\"current\",\"#a\":[");
	for (i = 0; i < 16; i++)
		comb_buf_printf(&b, "%s\"%s\"", i ? "," : "", big);
	comb_buf_puts(&b, "]}");
	refused(b.data, "predicates longer than 65536 bytes in all");

	/* A name over 128 bytes. */
	memset(big, 'n', 129);
	big[129] = '\0';
	comb_buf_reset(&b);
	comb_buf_printf(&b, "{\"artifact\":\"current\",\"#%s\":[\"v\"]}", big);
	refused(b.data, "a predicate tag name is longer than 128 bytes");

	/* NUL inside a value can never match a tag: refused. */
	refused("{\"artifact\":\"current\",\"#a\":[\"x\\u0000y\"]}",
		"a #a value contains NUL");
	free(big);
	comb_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes_and_defaults),
		cmocka_unit_test(test_predicates_classified),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
