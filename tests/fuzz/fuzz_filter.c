/*
 * libFuzzer target for plain NIP-01 filters
 * (services/relay/proto/filter.c): the parser with every limit of
 * PROTOCOL.md sections 6 and 10, and the SQL it becomes. The first input
 * byte picks the configured max_limit, the rest is the filter's JSON (the
 * relay's /query body element or REQ filter). Besides memory errors it
 * traps on broken contracts:
 *   - a refusal that is not COMB_EINVAL with a reason;
 *   - an accepted filter that breaks a limit: unknown key, ids or authors
 *     that are not 64 lowercase hex or more than 256, kinds outside
 *     0..65535, a tag predicate other than #e #p #h #d, more than 256 tag
 *     values, a value over 4096 bytes or holding NUL, negative
 *     since/until, a limit outside 1..max_limit;
 *   - SQL that could carry client bytes: the statement text may hold only
 *     the fixed templates (no quote but the tag letter's, no backslash, no
 *     semicolon), its parameters must be numbered in order, and every
 *     array parameter must parse back to exactly the client's values
 *     (escaping is lossless and nothing is dropped or added), but #h's,
 *     which holds exactly its canonical channel uuids (the one channel
 *     itself when #h is exactly one such uuid);
 *   - named channels that are not exactly the canonical uuids of #h;
 *   - a filter read as one channel (filter_one_channel) that is not
 *     exactly one canonical #h with nothing but kinds, since, until and
 *     limit, or whose arguments (filter_channel_params) are not its own.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/uuid.h"
#include "fuzz_check.h"
#include "proto/proto.h"
#include "protocol_limits.h"

#define FUZZ_MAX_INPUT 65536

static const int max_limits[] = {1, 100, 1000, 100000};

/*
 * Parses a PostgreSQL array literal of quoted elements as written by
 * filter_array_literal ({"a","b\"c"}) and compares it element by element,
 * byte for byte, with the strings of array.
 */
static void check_literal(const char *lit, const json_t *array)
{
	const char *p = lit;
	size_t i = 0;

	FUZZ_CHECK(*p == '{');
	p++;
	if (*p == '}') {
		FUZZ_CHECK(json_array_size(array) == 0 && p[1] == '\0');
		return;
	}
	for (;;) {
		const json_t *want = json_array_get(array, i);
		const char *w = json_string_value(want);
		size_t wlen = json_string_length(want), n = 0;

		FUZZ_CHECK(w != NULL);
		FUZZ_CHECK(*p == '"');
		p++;
		while (*p != '"') {
			FUZZ_CHECK(*p != '\0');
			if (*p == '\\') {
				p++;
				FUZZ_CHECK(*p == '"' || *p == '\\');
			}
			FUZZ_CHECK(n < wlen && w[n] == *p);
			n++;
			p++;
		}
		FUZZ_CHECK(n == wlen);
		p++;
		i++;
		if (*p == '}')
			break;
		FUZZ_CHECK(*p == ',');
		p++;
	}
	FUZZ_CHECK(p[1] == '\0');
	FUZZ_CHECK(i == json_array_size(array));
}

/* {1,2,3}: the kinds, in order, as decimal integers. */
static void check_kinds_literal(const char *lit, const json_t *kinds)
{
	const char *p = lit;
	size_t i;

	FUZZ_CHECK(*p++ == '{');
	for (i = 0; i < json_array_size(kinds); i++) {
		char *end;
		long v = strtol(p, &end, 10);

		FUZZ_CHECK(end != p);
		FUZZ_CHECK(v == (long)json_integer_value(json_array_get(kinds, i)));
		p = end;
		if (i + 1 < json_array_size(kinds))
			FUZZ_CHECK(*p++ == ',');
	}
	FUZZ_CHECK(p[0] == '}' && p[1] == '\0');
}

static void check_accepted(const struct plain_filter *f, const json_t *obj,
			   int max_limit)
{
	size_t values = 0, i, t;
	const char *key;
	json_t *v;

	FUZZ_CHECK(json_is_object(obj));
	FUZZ_CHECK(f->limit >= 1 && f->limit <= max_limit);
	if (json_object_get(obj, "limit") == NULL)
		FUZZ_CHECK(f->limit == (max_limit < FILTER_DEFAULT_LIMIT ?
					max_limit : FILTER_DEFAULT_LIMIT));
	json_object_foreach((json_t *)obj, key, v) {
		if (!strcmp(key, "ids") || !strcmp(key, "authors")) {
			FUZZ_CHECK(json_array_size(v) <= COMB_MAX_IDS);
			for (i = 0; i < json_array_size(v); i++) {
				const char *s = json_string_value(json_array_get(v, i));

				FUZZ_CHECK(s != NULL && strlen(s) == 64);
				FUZZ_CHECK(strspn(s, "0123456789abcdef") == 64);
			}
			FUZZ_CHECK(v == (!strcmp(key, "ids") ? f->ids : f->authors));
		} else if (!strcmp(key, "kinds")) {
			FUZZ_CHECK(v == f->kinds);
			for (i = 0; i < json_array_size(v); i++) {
				json_t *k = json_array_get(v, i);

				FUZZ_CHECK(json_is_integer(k));
				FUZZ_CHECK(json_integer_value(k) >= 0 &&
					   json_integer_value(k) <= 65535);
			}
		} else if (!strcmp(key, "since")) {
			FUZZ_CHECK(f->has_since && f->since >= 0 &&
				   f->since == json_integer_value(v));
		} else if (!strcmp(key, "until")) {
			FUZZ_CHECK(f->has_until && f->until >= 0 &&
				   f->until == json_integer_value(v));
		} else if (!strcmp(key, "limit")) {
			FUZZ_CHECK(f->limit == json_integer_value(v));
		} else {
			const char *pos;

			/* only #e #p #h #d, each kept where the SQL reads it */
			FUZZ_CHECK(key[0] == '#' && strlen(key) == 2);
			pos = strchr(FILTER_TAG_NAMES, key[1]);
			FUZZ_CHECK(pos != NULL && key[1] != '\0');
			FUZZ_CHECK(f->tags[pos - FILTER_TAG_NAMES] == v);
			values += json_array_size(v);
			for (i = 0; i < json_array_size(v); i++) {
				const json_t *s = json_array_get(v, i);

				FUZZ_CHECK(json_is_string(s));
				FUZZ_CHECK(json_string_length(s) <= COMB_MAX_TAG_VALUE_BYTES);
				FUZZ_CHECK(fuzz_string_is_whole(s));
			}
		}
	}
	FUZZ_CHECK(values <= COMB_MAX_VALUES);
	for (t = 0; t < FILTER_TAGS; t++) {
		char name[3] = {'#', FILTER_TAG_NAMES[t], '\0'};

		FUZZ_CHECK((f->tags[t] != NULL) == (json_object_get(obj, name) != NULL));
	}
}

/* The statement text holds only the fixed templates. */
static void check_sql_text(const char *sql, size_t len, int community_param,
			   int first_param, int nparams)
{
	int next = first_param;
	size_t i;

	for (i = 0; i < len; i++) {
		char c = sql[i];

		FUZZ_CHECK(c >= 0x20 && c < 0x7f);
		FUZZ_CHECK(c != '"' && c != '\\' && c != ';');
		if (c == '\'') {
			/* t.name = 'x' with x one of the tag letters */
			FUZZ_CHECK(i + 2 < len && sql[i + 2] == '\'');
			FUZZ_CHECK(strchr(FILTER_TAG_NAMES, sql[i + 1]) != NULL &&
				   sql[i + 1] != '\0');
			i += 2;
		} else if (c == '$') {
			char *end;
			long n = strtol(sql + i + 1, &end, 10);

			FUZZ_CHECK(end != sql + i + 1);
			if (n != community_param)
				FUZZ_CHECK(n == next++);
			i = (size_t)(end - sql) - 1;
		}
	}
	FUZZ_CHECK(next == first_param + nparams);
}

/* The parameter of an ids, authors or kinds set: for one value that value
 * (in sql as "= $n", not "= ANY"), else the array literal. */
static void check_set(const char *param, const json_t *array, const char *sql)
{
	const json_t *one = json_array_get(array, 0);
	char kind[16];

	if (json_array_size(array) != 1) {
		if (json_is_integer(one))
			check_kinds_literal(param, array);
		else
			check_literal(param, array);
		return;
	}
	if (json_is_integer(one)) {
		snprintf(kind, sizeof(kind), "%lld", (long long)json_integer_value(one));
		FUZZ_CHECK(strcmp(param, kind) == 0);
	} else {
		FUZZ_CHECK(strcmp(param, json_string_value(one)) == 0);
	}
	FUZZ_CHECK(sql != NULL && strstr(sql, " = $") != NULL);
}

/* The parameter of #h: its one canonical channel itself (compared with
 * =), else the named channels' literal (compared with = ANY). */
static void check_channels(const char *param, const struct plain_filter *f,
			   const char *named, const char *sql)
{
	const json_t *h = f->tags[FILTER_TAG_H];
	const char *first = json_string_value(json_array_get(h, 0));
	bool one = json_array_size(h) == 1 && comb_uuid_is_canonical(first);

	FUZZ_CHECK((filter_one_channel_value(f) != NULL) == one);
	FUZZ_CHECK(sql != NULL);
	if (one) {
		FUZZ_CHECK(strcmp(param, first) == 0);
		FUZZ_CHECK(strstr(sql, " AND e.channel_id = $") != NULL);
	} else {
		FUZZ_CHECK(strcmp(param, named) == 0);
		FUZZ_CHECK(strstr(sql, " AND e.channel_id = ANY($") != NULL);
	}
}

/* filter_one_channel and the arguments of comb_channel_events. */
static void check_one_channel(const struct plain_filter *f)
{
	struct filter_params params = {0};
	const char *channel = filter_one_channel(f);
	bool others = f->ids || f->authors;
	char num[32];
	int t;

	for (t = 0; t < FILTER_TAGS; t++)
		others = others || (t != FILTER_TAG_H && f->tags[t]);
	FUZZ_CHECK((channel != NULL) == (!others && filter_one_channel_value(f)));
	if (!channel)
		return;
	FUZZ_CHECK(filter_channel_params(f, &params) == 0);
	FUZZ_CHECK(params.count == 5);
	FUZZ_CHECK(strcmp(params.values[0], channel) == 0);
	if (f->kinds)
		check_kinds_literal(params.values[1], f->kinds);
	else
		FUZZ_CHECK(params.values[1] == NULL);
	FUZZ_CHECK(strtoll(params.values[2], NULL, 10) == (f->has_since ? f->since : 0));
	FUZZ_CHECK(strtoll(params.values[3], NULL, 10) ==
		   (f->has_until ? f->until : INT64_MAX));
	snprintf(num, sizeof(num), "%d", f->limit);
	FUZZ_CHECK(strcmp(params.values[4], num) == 0);
	filter_params_release(&params);
}

/* lit is the uuid[] literal of exactly the canonical uuids among values
 * (a JSON array of strings, or NULL), in order. */
static void check_uuids(const char *lit, const json_t *values)
{
	const char *p = lit;
	size_t i, n = 0;

	FUZZ_CHECK(p != NULL && *p++ == '{');
	for (i = 0; values && i < json_array_size(values); i++) {
		const char *s = json_string_value(json_array_get(values, i));

		if (!comb_uuid_is_canonical(s))
			continue;
		if (n++)
			FUZZ_CHECK(*p++ == ',');
		FUZZ_CHECK(strncmp(p, s, COMB_UUID_LEN) == 0);
		p += COMB_UUID_LEN;
	}
	FUZZ_CHECK(p[0] == '}' && p[1] == '\0');
}

static void check_sql(const struct plain_filter *f)
{
	const int community_param = 1, first_param = 2;
	struct filter_params params = {0};
	struct comb_buf sql, named;
	int k = 0, t, rc;

	comb_buf_init(&sql, 1 << 16);
	rc = filter_append_sql(f, &sql, community_param, first_param, &params);
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(params.count <= FILTER_MAX_PARAMS);
	check_sql_text(sql.data ? sql.data : "", sql.len, community_param,
		       first_param, params.count);
	/* parameters come in the order filter_append_sql documents; one id,
	 * author or kind is the value itself, compared with = */
	if (f->ids)
		check_set(params.values[k++], f->ids, sql.data);
	if (f->authors)
		check_set(params.values[k++], f->authors, sql.data);
	if (f->kinds)
		check_set(params.values[k++], f->kinds, sql.data);
	if (f->has_since)
		FUZZ_CHECK(strtoll(params.values[k++], NULL, 10) == f->since);
	if (f->has_until)
		FUZZ_CHECK(strtoll(params.values[k++], NULL, 10) == f->until);
	comb_buf_init(&named, 1 << 16);
	FUZZ_CHECK(filter_named_channels(f, &named) == 0);
	for (t = 0; t < FILTER_TAGS; t++) {
		if (!f->tags[t])
			continue;
		if (t == FILTER_TAG_H) {
			check_channels(params.values[k++], f, named.data, sql.data);
		} else if (t == FILTER_TAG_D) {
			/* every value, for event_tags; the canonical uuids
			 * among them, for artifact revisions */
			check_literal(params.values[k++], f->tags[t]);
			check_uuids(params.values[k++], f->tags[t]);
		} else {
			check_literal(params.values[k++], f->tags[t]);
		}
	}
	FUZZ_CHECK(k == params.count);
	filter_params_release(&params);
	FUZZ_CHECK(params.count == 0);
	comb_buf_release(&sql);
	check_one_channel(f);

	/* named channels: exactly the canonical uuids of #h, in order */
	check_uuids(named.data, f->tags[FILTER_TAG_H]);
	comb_buf_release(&named);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct plain_filter f, again;
	char err[160];
	int max_limit, rc;
	json_t *obj;

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	max_limit = max_limits[data[0] % 4];
	obj = fuzz_parse_json(data + 1, size - 1, FUZZ_MAX_INPUT);
	if (obj == NULL)
		return 0;
	memset(err, 'x', sizeof(err));
	rc = filter_parse(&f, obj, max_limit, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == COMB_EINVAL);
	if (rc) {
		fuzz_check_reason(err, sizeof(err));
	} else {
		check_accepted(&f, obj, max_limit);
		check_sql(&f);
		/* a pure function: the same answer twice */
		FUZZ_CHECK(filter_parse(&again, obj, max_limit, err, sizeof(err)) == 0);
		FUZZ_CHECK(memcmp(&f, &again, sizeof(f)) == 0);
	}
	json_decref(obj);
	return 0;
}
