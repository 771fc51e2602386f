/*
 * Unit tests for the plain NIP-01 filter of services/relay/proto/filter.c:
 * every accepted key, every limit and refusal, the SQL predicates and
 * parameter values a filter becomes (values travel only as parameters,
 * quoted and escaped inside PostgreSQL array literals), and which live
 * events it matches.
 */
#include "test_util.h"

#include "comb/error.h"
#include "proto/proto.h"
#include "protocol_limits.h"

#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define UUID_A "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84"
#define UUID_B "0c2d7e4a-9b1f-4f3a-8e6d-5a7b9c1d2e3f"
#define UUID_UPPER "5A0F2F6E-3C1B-4A9E-8F7D-2B6C1E0D9A84"

static json_t *load(const char *text)
{
	json_error_t err;
	json_t *v = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);

	if (!v)
		fail_msg("bad test json %s: %s", text, err.text);
	return v;
}

/* Parses text with max_limit 1000; returns the parser's status and leaves
 * its message in err. */
static int parse(const char *text, struct plain_filter *f, json_t **obj,
		 char *err, size_t errlen)
{
	*obj = load(text);
	err[0] = '\0';
	return filter_parse(f, *obj, 1000, err, errlen);
}

static void expect_invalid(const char *text, const char *message)
{
	struct plain_filter f;
	char err[256];
	json_t *obj;
	int rc = parse(text, &f, &obj, err, sizeof(err));

	if (rc != COMB_EINVAL)
		fail_msg("accepted %s", text);
	if (strcmp(err, message))
		fail_msg("%s: message \"%s\", expected \"%s\"", text, err, message);
	json_decref(obj);
}

static void test_empty_filter_defaults(void **state)
{
	struct plain_filter f;
	char err[256];
	json_t *obj;

	(void)state;
	assert_int_equal(parse("{}", &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(f.limit, FILTER_DEFAULT_LIMIT);
	assert_null(f.ids);
	assert_null(f.authors);
	assert_null(f.kinds);
	assert_false(f.has_since);
	assert_false(f.has_until);
	json_decref(obj);

	/* A max_limit below the default caps the default. */
	obj = load("{}");
	assert_int_equal(filter_parse(&f, obj, 10, err, sizeof(err)), 0);
	assert_int_equal(f.limit, 10);
	json_decref(obj);
}

static void test_every_key(void **state)
{
	struct plain_filter f;
	char err[256];
	json_t *obj;

	(void)state;
	assert_int_equal(parse("{\"ids\":[\"" ID_A "\"],\"authors\":[\"" ID_B "\"],"
			       "\"kinds\":[9,5,65535,0],\"#e\":[\"x\"],\"#p\":[\"y\"],"
			       "\"#h\":[\"" UUID_A "\"],\"#d\":[\"z\"],\"since\":10,"
			       "\"until\":20,\"limit\":1000}",
			       &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(f.ids), 1);
	assert_int_equal(json_array_size(f.authors), 1);
	assert_int_equal(json_array_size(f.kinds), 4);
	assert_non_null(f.tags[0]);
	assert_non_null(f.tags[1]);
	assert_non_null(f.tags[2]);
	assert_non_null(f.tags[3]);
	assert_true(f.has_since);
	assert_int_equal(f.since, 10);
	assert_true(f.has_until);
	assert_int_equal(f.until, 20);
	assert_int_equal(f.limit, 1000);
	json_decref(obj);
}

static void test_refusals(void **state)
{
	(void)state;
	expect_invalid("[]", "a filter must be an object");
	expect_invalid("{\"search\":\"x\"}", "unknown filter key search");
	expect_invalid("{\"artifacts\":\"current\"}", "unknown filter key artifacts");
	expect_invalid("{\"#type\":[\"x\"]}",
		       "multi-character tag predicates need an artifact filter");
	expect_invalid("{\"#\":[\"x\"]}",
		       "multi-character tag predicates need an artifact filter");
	expect_invalid("{\"#t\":[\"x\"]}", "unsupported tag predicate #t");
	expect_invalid("{\"#e\":\"x\"}", "#e must be an array");
	expect_invalid("{\"#e\":[1]}", "#e values must be strings");
	expect_invalid("{\"ids\":\"" ID_A "\"}", "ids must be an array");
	expect_invalid("{\"ids\":[\"abc\"]}", "ids entries must be 64 lowercase hex digits");
	expect_invalid("{\"authors\":[\"" "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" "\"]}",
		       "authors entries must be 64 lowercase hex digits");
	expect_invalid("{\"authors\":[7]}", "authors entries must be 64 lowercase hex digits");
	expect_invalid("{\"kinds\":9}", "kinds must be an array");
	expect_invalid("{\"kinds\":[65536]}", "kinds must be integers from 0 to 65535");
	expect_invalid("{\"kinds\":[-1]}", "kinds must be integers from 0 to 65535");
	expect_invalid("{\"kinds\":[\"9\"]}", "kinds must be integers from 0 to 65535");
	expect_invalid("{\"kinds\":[1.5]}", "kinds must be integers from 0 to 65535");
	expect_invalid("{\"since\":-1}", "since must be a non-negative integer");
	expect_invalid("{\"until\":\"1\"}", "until must be a non-negative integer");
	expect_invalid("{\"limit\":0}", "limit must be an integer from 1 to 1000");
	expect_invalid("{\"limit\":1001}", "limit must be an integer from 1 to 1000");
	expect_invalid("{\"limit\":10.0}", "limit must be an integer from 1 to 1000");
	expect_invalid("{\"#e\":[\"a\\u0000b\"]}", "tag values may not contain nul");
}

/* Builds {"key":[n values]}: 64-hex numbers with hex, else "vN". */
static char *many(const char *key, int n, bool hex)
{
	struct comb_buf b;
	int i;

	comb_buf_init(&b, 1 << 20);
	comb_buf_printf(&b, "{\"%s\":[", key);
	for (i = 0; i < n; i++) {
		if (hex)
			comb_buf_printf(&b, "%s\"%064x\"", i ? "," : "", i);
		else
			comb_buf_printf(&b, "%s\"v%d\"", i ? "," : "", i);
	}
	comb_buf_puts(&b, "]}");
	return comb_buf_detach(&b, NULL);
}

/* {"#e":[ne values],"#p":[np values]} */
static char *two_predicates(int ne, int np)
{
	struct comb_buf b;
	int i;

	comb_buf_init(&b, 1 << 20);
	comb_buf_puts(&b, "{\"#e\":[");
	for (i = 0; i < ne; i++)
		comb_buf_printf(&b, "%s\"e%d\"", i ? "," : "", i);
	comb_buf_puts(&b, "],\"#p\":[");
	for (i = 0; i < np; i++)
		comb_buf_printf(&b, "%s\"p%d\"", i ? "," : "", i);
	comb_buf_puts(&b, "]}");
	return comb_buf_detach(&b, NULL);
}

static void test_count_limits(void **state)
{
	struct plain_filter f;
	char err[256], *text;
	json_t *obj;

	(void)state;
	text = many("ids", COMB_MAX_IDS, true);
	assert_int_equal(parse(text, &f, &obj, err, sizeof(err)), 0);
	json_decref(obj);
	free(text);
	text = many("ids", COMB_MAX_IDS + 1, true);
	expect_invalid(text, "ids holds more than 256 entries");
	free(text);
	text = many("authors", COMB_MAX_IDS + 1, true);
	expect_invalid(text, "authors holds more than 256 entries");
	free(text);

	text = many("#e", COMB_MAX_VALUES, false);
	assert_int_equal(parse(text, &f, &obj, err, sizeof(err)), 0);
	json_decref(obj);
	free(text);
	text = many("#e", COMB_MAX_VALUES + 1, false);
	expect_invalid(text, "more than 256 tag values");
	free(text);

	/* The value limit counts over every tag predicate together. */
	text = two_predicates(200, 56);
	assert_int_equal(parse(text, &f, &obj, err, sizeof(err)), 0);
	json_decref(obj);
	free(text);
	text = two_predicates(200, 57);
	expect_invalid(text, "more than 256 tag values");
	free(text);
}

static void test_value_size_limit(void **state)
{
	struct plain_filter f;
	char err[256], text[COMB_MAX_TAG_VALUE_BYTES + 64];
	json_t *obj;
	int n;

	(void)state;
	n = snprintf(text, sizeof(text), "{\"#d\":[\"");
	memset(text + n, 'x', COMB_MAX_TAG_VALUE_BYTES);
	snprintf(text + n + COMB_MAX_TAG_VALUE_BYTES, 8, "\"]}");
	assert_int_equal(parse(text, &f, &obj, err, sizeof(err)), 0);
	json_decref(obj);
	n = snprintf(text, sizeof(text), "{\"#d\":[\"");
	memset(text + n, 'x', COMB_MAX_TAG_VALUE_BYTES + 1);
	snprintf(text + n + COMB_MAX_TAG_VALUE_BYTES + 1, 8, "\"]}");
	expect_invalid(text, "a tag value is longer than 4096 bytes");
}

static void test_sql(void **state)
{
	struct filter_params p = {0};
	struct plain_filter f;
	struct comb_buf sql;
	char err[256];
	json_t *obj;

	(void)state;
	comb_buf_init(&sql, 1 << 16);
	assert_int_equal(parse("{\"ids\":[\"" ID_A "\",\"" ID_B "\"],\"kinds\":[9,5],"
			       "\"since\":10,\"until\":20,\"#p\":[\"q\\\"uo\\\\te\",\"{x,y}\"],"
			       "\"#h\":[]}",
			       &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_append_sql(&f, &sql, 1, 5, &p), 0);
	assert_string_equal(sql.data,
		" AND e.id = ANY($5::text[])"
		" AND e.kind = ANY($6::int[])"
		" AND e.created_at >= $7::bigint"
		" AND e.created_at <= $8::bigint"
		" AND e.seq IN (SELECT t.event_seq FROM event_tags t"
		" WHERE t.community_id = $1 AND t.name = 'p' AND t.value = ANY($9::text[]))"
		" AND e.channel_id = ANY($10::uuid[])");
	assert_int_equal(p.count, 6);
	assert_string_equal(p.values[0], "{\"" ID_A "\",\"" ID_B "\"}");
	assert_string_equal(p.values[1], "{9,5}");
	assert_string_equal(p.values[2], "10");
	assert_string_equal(p.values[3], "20");
	/* Quotes and backslashes are escaped; braces and commas stay quoted. */
	assert_string_equal(p.values[4], "{\"q\\\"uo\\\\te\",\"{x,y}\"}");
	/* An empty predicate matches nothing rather than being ignored. */
	assert_string_equal(p.values[5], "{}");
	filter_params_release(&p);
	assert_int_equal(p.count, 0);
	json_decref(obj);

	/* One value of ids, authors or kinds is compared with =, so that an
	 * index on (community, column, created_at) gives the answer's order. */
	comb_buf_reset(&sql);
	assert_int_equal(parse("{\"ids\":[\"" ID_A "\"],\"authors\":[\"" ID_B "\"],"
			       "\"kinds\":[9]}", &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_append_sql(&f, &sql, 1, 5, &p), 0);
	assert_string_equal(sql.data,
		" AND e.id = $5::text AND e.pubkey = $6::text AND e.kind = $7::int");
	assert_int_equal(p.count, 3);
	assert_string_equal(p.values[0], ID_A);
	assert_string_equal(p.values[1], ID_B);
	assert_string_equal(p.values[2], "9");
	filter_params_release(&p);
	json_decref(obj);

	/* #h is a condition on the channel (an event's h tag names it): one
	 * canonical channel with =, several with ANY, and values that are no
	 * canonical channel uuid left out, so that they match nothing. */
	comb_buf_reset(&sql);
	assert_int_equal(parse("{\"#h\":[\"" UUID_A "\"]}", &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_append_sql(&f, &sql, 1, 5, &p), 0);
	assert_string_equal(sql.data, " AND e.channel_id = $5::uuid");
	assert_string_equal(p.values[0], UUID_A);
	filter_params_release(&p);
	json_decref(obj);
	comb_buf_reset(&sql);
	assert_int_equal(parse("{\"#h\":[\"" UUID_UPPER "\"]}", &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_append_sql(&f, &sql, 1, 5, &p), 0);
	assert_string_equal(sql.data, " AND e.channel_id = ANY($5::uuid[])");
	assert_string_equal(p.values[0], "{}");
	filter_params_release(&p);
	json_decref(obj);
	comb_buf_reset(&sql);
	assert_int_equal(parse("{\"#h\":[\"" UUID_A "\",\"x\",\"" UUID_B "\"]}",
			       &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_append_sql(&f, &sql, 1, 5, &p), 0);
	assert_string_equal(sql.data, " AND e.channel_id = ANY($5::uuid[])");
	assert_string_equal(p.values[0], "{" UUID_A "," UUID_B "}");
	filter_params_release(&p);
	json_decref(obj);

	/* #d reads other kinds' d tags from event_tags (every value) and
	 * artifact revisions' from their ledger rows (the canonical uuids
	 * among the values: an artifact's d is one). */
	comb_buf_reset(&sql);
	assert_int_equal(parse("{\"kinds\":[45010],\"#d\":[\"" UUID_A "\",\"x\",\""
			       UUID_UPPER "\"]}", &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_append_sql(&f, &sql, 1, 5, &p), 0);
	assert_string_equal(sql.data,
		" AND e.kind = $5::int"
		" AND e.seq IN (SELECT t.event_seq FROM event_tags t"
		" WHERE t.community_id = $1 AND t.name = 'd' AND t.value = ANY($6::text[])"
		" UNION ALL SELECT r.seq FROM events r"
		" WHERE r.community_id = $1 AND r.d IS NOT NULL"
		" AND r.d = ANY($7::uuid[]))");
	assert_int_equal(p.count, 3);
	assert_string_equal(p.values[1], "{\"" UUID_A "\",\"x\",\"" UUID_UPPER "\"}");
	assert_string_equal(p.values[2], "{" UUID_A "}");
	filter_params_release(&p);
	comb_buf_release(&sql);
	json_decref(obj);
}

/* Which filters are read by comb_channel_events, and its arguments. */
static void test_one_channel(void **state)
{
	static const char *const general[] = {
		"{}",
		"{\"#h\":[]}",
		"{\"#h\":[\"" UUID_A "\",\"" UUID_B "\"]}",
		"{\"#h\":[\"" UUID_UPPER "\"]}",
		"{\"#h\":[\"" UUID_A "\"],\"ids\":[\"" ID_A "\"]}",
		"{\"#h\":[\"" UUID_A "\"],\"authors\":[\"" ID_A "\"]}",
		"{\"#h\":[\"" UUID_A "\"],\"#p\":[\"" ID_A "\"]}",
		"{\"#h\":[\"" UUID_A "\"],\"#d\":[\"x\"]}",
	};
	struct filter_params p = {0};
	struct plain_filter f;
	char err[256];
	json_t *obj;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(general) / sizeof(general[0]); i++) {
		assert_int_equal(parse(general[i], &f, &obj, err, sizeof(err)), 0);
		assert_null(filter_one_channel(&f));
		json_decref(obj);
	}
	assert_int_equal(parse("{\"#h\":[\"" UUID_A "\"],\"kinds\":[9,5],\"since\":10,"
			       "\"until\":20,\"limit\":7}", &f, &obj, err, sizeof(err)), 0);
	assert_string_equal(filter_one_channel(&f), UUID_A);
	assert_int_equal(filter_channel_params(&f, &p), 0);
	assert_int_equal(p.count, 5);
	assert_string_equal(p.values[0], UUID_A);
	assert_string_equal(p.values[1], "{9,5}");
	assert_string_equal(p.values[2], "10");
	assert_string_equal(p.values[3], "20");
	assert_string_equal(p.values[4], "7");
	filter_params_release(&p);
	json_decref(obj);
	/* No kinds: NULL, any kind; no since or until: every created_at. */
	assert_int_equal(parse("{\"#h\":[\"" UUID_A "\"]}", &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_channel_params(&f, &p), 0);
	assert_int_equal(p.count, 5);
	assert_null(p.values[1]);
	assert_string_equal(p.values[2], "0");
	assert_string_equal(p.values[3], "9223372036854775807");
	assert_string_equal(p.values[4], "100");
	filter_params_release(&p);
	json_decref(obj);
}

static void test_sql_empty_filter(void **state)
{
	struct filter_params p = {0};
	struct plain_filter f;
	struct comb_buf sql;
	char err[256];
	json_t *obj;

	(void)state;
	comb_buf_init(&sql, 1 << 16);
	assert_int_equal(parse("{\"limit\":3}", &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_append_sql(&f, &sql, 1, 5, &p), 0);
	assert_null(sql.data);
	assert_int_equal(p.count, 0);
	comb_buf_release(&sql);
	json_decref(obj);
}

static void test_named_channels(void **state)
{
	struct plain_filter f;
	struct comb_buf b;
	char err[256];
	json_t *obj;

	(void)state;
	comb_buf_init(&b, 1 << 16);
	assert_int_equal(parse("{\"#h\":[\"" UUID_A "\",\"not-a-uuid\","
			       "\"5A0F2F6E-3C1B-4A9E-8F7D-2B6C1E0D9A84\","
			       "\"00000000-0000-0000-0000-000000000001\"]}",
			       &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_named_channels(&f, &b), 0);
	assert_string_equal(b.data, "{" UUID_A ",00000000-0000-0000-0000-000000000001}");
	json_decref(obj);

	comb_buf_reset(&b);
	assert_int_equal(parse("{}", &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(filter_named_channels(&f, &b), 0);
	assert_string_equal(b.data, "{}");
	comb_buf_release(&b);
	json_decref(obj);
}

/* True when the filter text matches the event text. */
static bool matches(const char *filter, const char *event)
{
	struct comb_event ev;
	struct plain_filter f;
	json_t *obj;
	char err[200];
	bool m;

	assert_int_equal(parse(filter, &f, &obj, err, sizeof(err)), 0);
	assert_int_equal(comb_event_parse(&ev, event, strlen(event), 65536, err,
					  sizeof(err)), 0);
	m = filter_matches(&f, &ev);
	comb_event_release(&ev);
	json_decref(obj);
	return m;
}

static void test_matches(void **state)
{
	const char *ev = "{\"id\":\"" ID_A "\",\"pubkey\":\"" ID_B "\","
			 "\"created_at\":100,\"kind\":9,\"tags\":[[\"h\",\"" UUID_A "\"],"
			 "[\"e\",\"" ID_B "\",\"wss://x\"],[\"p\"]],\"content\":\"hi\","
			 "\"sig\":\"" ID_A ID_A "\"}";

	(void)state;
	assert_true(matches("{}", ev));
	assert_true(matches("{\"ids\":[\"" ID_B "\",\"" ID_A "\"]}", ev));
	assert_false(matches("{\"ids\":[\"" ID_B "\"]}", ev));
	assert_true(matches("{\"authors\":[\"" ID_B "\"],\"kinds\":[1,9]}", ev));
	assert_false(matches("{\"authors\":[\"" ID_A "\"]}", ev));
	assert_false(matches("{\"kinds\":[1]}", ev));
	assert_true(matches("{\"since\":100,\"until\":100}", ev));
	assert_false(matches("{\"since\":101}", ev));
	assert_false(matches("{\"until\":99}", ev));
	/* a tag matches on its name and first value, every predicate must */
	assert_true(matches("{\"#h\":[\"" UUID_B "\",\"" UUID_A "\"],\"#e\":[\"" ID_B "\"]}", ev));
	assert_false(matches("{\"#h\":[\"" UUID_A "\"],\"#e\":[\"wss://x\"]}", ev));
	assert_false(matches("{\"#h\":[\"" UUID_B "\"]}", ev));
	assert_false(matches("{\"#d\":[\"" UUID_A "\"]}", ev));
	/* a tag without a value matches nothing */
	assert_false(matches("{\"#p\":[\"" ID_B "\"]}", ev));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_matches),
		cmocka_unit_test(test_empty_filter_defaults),
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_count_limits),
		cmocka_unit_test(test_value_size_limit),
		cmocka_unit_test(test_sql),
		cmocka_unit_test(test_sql_empty_filter),
		cmocka_unit_test(test_one_channel),
		cmocka_unit_test(test_named_channels),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
