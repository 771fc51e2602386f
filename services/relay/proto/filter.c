/*
 * Plain NIP-01 filters: the parser with every limit of PROTOCOL.md
 * sections 6 and 10, and the SQL predicates they become (see proto.h).
 * Client values only ever travel as parameters: arrays are passed as
 * PostgreSQL array literals whose elements are all quoted and escaped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/uuid.h"
#include "proto.h"
#include "protocol_limits.h"

/* ids and authors: arrays of at most COMB_MAX_IDS event ids or pubkeys. */
static int parse_hex_array(const char *key, const json_t *v, char *errbuf,
			   size_t errlen)
{
	size_t i;

	if (!json_is_array(v))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "%s must be an array", key);
	if (json_array_size(v) > COMB_MAX_IDS)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "%s holds more than %d entries", key, COMB_MAX_IDS);
	for (i = 0; i < json_array_size(v); i++) {
		const json_t *s = json_array_get(v, i);

		if (!json_is_string(s) ||
		    (json_string_length(s) != 64 ||
		     !comb_hex_is_lower(json_string_value(s), 64)))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "%s entries must be 64 lowercase hex digits", key);
	}
	return 0;
}

static int parse_kinds(const json_t *v, char *errbuf, size_t errlen)
{
	size_t i;

	if (!json_is_array(v))
		return comb_fail(errbuf, errlen, COMB_EINVAL, "kinds must be an array");
	if (json_array_size(v) > COMB_MAX_VALUES)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "kinds holds more than %d entries", COMB_MAX_VALUES);
	for (i = 0; i < json_array_size(v); i++) {
		const json_t *k = json_array_get(v, i);

		if (!json_is_integer(k) || json_integer_value(k) < 0 ||
		    json_integer_value(k) > 65535)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "kinds must be integers from 0 to 65535");
	}
	return 0;
}

/* A #x predicate: an array of strings; *values counts them over all. */
static int parse_tag_values(const char *key, const json_t *v, size_t *values,
			    char *errbuf, size_t errlen)
{
	size_t i;

	if (!json_is_array(v))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "%s must be an array", key);
	*values += json_array_size(v);
	if (*values > COMB_MAX_VALUES)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "more than %d tag values", COMB_MAX_VALUES);
	for (i = 0; i < json_array_size(v); i++) {
		const json_t *s = json_array_get(v, i);

		if (!json_is_string(s))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "%s values must be strings", key);
		if (json_string_length(s) > COMB_MAX_TAG_VALUE_BYTES)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "a tag value is longer than %d bytes",
					 COMB_MAX_TAG_VALUE_BYTES);
		if (memchr(json_string_value(s), '\0', json_string_length(s)))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "tag values may not contain nul");
	}
	return 0;
}

static int parse_time(const char *key, const json_t *v, int64_t *out,
		      char *errbuf, size_t errlen)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "%s must be a non-negative integer", key);
	*out = (int64_t)json_integer_value(v);
	return 0;
}

static int parse_tag_key(struct plain_filter *f, const char *key,
			 const json_t *v, size_t *values, char *errbuf,
			 size_t errlen)
{
	const char *pos;

	if (strlen(key) != 2)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "multi-character tag predicates need an artifact filter");
	pos = strchr(FILTER_TAG_NAMES, key[1]);
	if (key[1] == '\0' || !pos)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "unsupported tag predicate %s", key);
	f->tags[pos - FILTER_TAG_NAMES] = v;
	return parse_tag_values(key, v, values, errbuf, errlen);
}

int filter_parse(struct plain_filter *f, const json_t *obj, int max_limit,
		 char *errbuf, size_t errlen)
{
	size_t values = 0;
	const char *key;
	json_t *v;
	int rc;

	memset(f, 0, sizeof(*f));
	f->limit = max_limit < FILTER_DEFAULT_LIMIT ? max_limit : FILTER_DEFAULT_LIMIT;
	if (!json_is_object(obj))
		return comb_fail(errbuf, errlen, COMB_EINVAL, "a filter must be an object");
	json_object_foreach((json_t *)obj, key, v) {
		if (!strcmp(key, "ids")) {
			f->ids = v;
			rc = parse_hex_array(key, v, errbuf, errlen);
		} else if (!strcmp(key, "authors")) {
			f->authors = v;
			rc = parse_hex_array(key, v, errbuf, errlen);
		} else if (!strcmp(key, "kinds")) {
			f->kinds = v;
			rc = parse_kinds(v, errbuf, errlen);
		} else if (!strcmp(key, "since")) {
			f->has_since = true;
			rc = parse_time(key, v, &f->since, errbuf, errlen);
		} else if (!strcmp(key, "until")) {
			f->has_until = true;
			rc = parse_time(key, v, &f->until, errbuf, errlen);
		} else if (!strcmp(key, "limit")) {
			if (!json_is_integer(v) || json_integer_value(v) < 1 ||
			    json_integer_value(v) > max_limit)
				return comb_fail(errbuf, errlen, COMB_EINVAL,
						 "limit must be an integer from 1 to %d",
						 max_limit);
			f->limit = (int)json_integer_value(v);
			rc = 0;
		} else if (key[0] == '#') {
			rc = parse_tag_key(f, key, v, &values, errbuf, errlen);
		} else {
			rc = comb_fail(errbuf, errlen, COMB_EINVAL,
				       "unknown filter key %s", key);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int filter_array_literal(const json_t *array, struct comb_buf *out)
{
	size_t i, j;
	int rc = comb_buf_putc(out, '{');

	for (i = 0; i < json_array_size(array) && rc == 0; i++) {
		const char *s = json_string_value(json_array_get(array, i));
		size_t len = json_string_length(json_array_get(array, i));

		if (!s)
			continue;
		if (i)
			rc = comb_buf_putc(out, ',');
		if (rc == 0)
			rc = comb_buf_putc(out, '"');
		for (j = 0; j < len && rc == 0; j++) {
			if (s[j] == '"' || s[j] == '\\')
				rc = comb_buf_putc(out, '\\');
			if (rc == 0)
				rc = comb_buf_putc(out, s[j]);
		}
		if (rc == 0)
			rc = comb_buf_putc(out, '"');
	}
	if (rc == 0)
		rc = comb_buf_putc(out, '}');
	return rc;
}

static int kinds_literal(const json_t *array, struct comb_buf *out)
{
	size_t i;
	int rc = comb_buf_putc(out, '{');

	for (i = 0; i < json_array_size(array) && rc == 0; i++)
		rc = comb_buf_printf(out, "%s%lld", i ? "," : "",
				     (long long)json_integer_value(json_array_get(array, i)));
	if (rc == 0)
		rc = comb_buf_putc(out, '}');
	return rc;
}

/* Moves the content of b into the next parameter. */
static int push_param(struct filter_params *p, struct comb_buf *b)
{
	char *value;

	if (p->count >= FILTER_MAX_PARAMS)
		return COMB_ETOOBIG;
	value = comb_buf_detach(b, NULL);
	if (!value)
		return COMB_ENOMEM;
	p->values[p->count++] = value;
	return 0;
}

/*
 * Appends " AND column = ANY($n::type[])" for the values of array, or,
 * for exactly one value, " AND column = $n::type", which lets PostgreSQL
 * walk an index on (community, column, created_at) in the answer's order;
 * the value or literal goes to the next parameter (v is scratch). Moves
 * *n on.
 */
static int match_set(const json_t *array, const char *column, const char *type,
		     struct comb_buf *v, struct comb_buf *sql,
		     struct filter_params *params, int *n)
{
	bool one = json_array_size(array) == 1;
	const json_t *first = json_array_get(array, 0);
	int rc;

	if (!one)
		rc = json_is_integer(first) ? kinds_literal(array, v)
					    : filter_array_literal(array, v);
	else if (json_is_integer(first))
		rc = comb_buf_printf(v, "%lld", (long long)json_integer_value(first));
	else
		rc = comb_buf_puts(v, json_string_value(first));
	if (rc == 0)
		rc = push_param(params, v);
	if (rc == 0)
		rc = comb_buf_printf(sql, one ? " AND %s = $%d::%s" : " AND %s = ANY($%d::%s[])",
				     column, (*n)++, type);
	return rc;
}

/*
 * Appends the predicate of f's #h: an event's h tag names its channel
 * (migrations/0010_reads_planned_once.sql), so "#h" is a condition on
 * e.channel_id, "= $n::uuid" for one channel (an index walk in the
 * answer's order) and "= ANY($n::uuid[])" otherwise. Values that are not
 * canonical channel uuids name no stored channel and match nothing. The
 * value goes to the next parameter (v is scratch); moves *n on.
 */
static int channel_match(const struct plain_filter *f, struct comb_buf *v,
			 struct comb_buf *sql, struct filter_params *params,
			 int *n)
{
	const char *one = filter_one_channel_value(f);
	int rc = one ? comb_buf_puts(v, one) : filter_named_channels(f, v);

	if (rc == 0)
		rc = push_param(params, v);
	if (rc == 0)
		rc = comb_buf_printf(sql, one ? " AND e.channel_id = $%d::uuid"
					      : " AND e.channel_id = ANY($%d::uuid[])",
				     (*n)++);
	return rc;
}

/* Appends the canonical uuids among values (a JSON array of strings) as
 * a PostgreSQL uuid[] literal, "{}" when there is none. */
static int uuid_literal(const json_t *values, struct comb_buf *out)
{
	bool first = true;
	size_t i;
	int rc = comb_buf_putc(out, '{');

	for (i = 0; values && i < json_array_size(values) && rc == 0; i++) {
		const char *s = json_string_value(json_array_get(values, i));

		if (!comb_uuid_is_canonical(s))
			continue;
		rc = comb_buf_printf(out, "%s%s", first ? "" : ",", s);
		first = false;
	}
	if (rc == 0)
		rc = comb_buf_putc(out, '}');
	return rc;
}

/*
 * Appends the predicate of f's #d: the events whose d tag is one of the
 * values, from two places. Other kinds' d tags are event_tags rows; an
 * artifact revision's (kind 45010: exactly one d tag, a canonical uuid) is
 * not (migrations/0023_artifact_d_not_a_tag_row.sql) and is read from its
 * row's d column (migration 0025; index events_revisions (community_id, d,
 * seq) WHERE d IS NOT NULL), with the canonical uuids among the values (no
 * other value is an artifact's d).
 * Both go to the next two parameters (v is scratch); moves *n on.
 */
static int d_match(const struct plain_filter *f, struct comb_buf *v,
		   struct comb_buf *sql, int community_param,
		   struct filter_params *params, int *n)
{
	int rc = filter_array_literal(f->tags[FILTER_TAG_D], v);

	if (rc == 0)
		rc = push_param(params, v);
	if (rc == 0)
		rc = uuid_literal(f->tags[FILTER_TAG_D], v);
	if (rc == 0)
		rc = push_param(params, v);
	if (rc == 0)
		rc = comb_buf_printf(sql,
			" AND e.seq IN (SELECT t.event_seq FROM event_tags t"
			" WHERE t.community_id = $%d AND t.name = 'd'"
			" AND t.value = ANY($%d::text[])"
			" UNION ALL SELECT r.seq FROM events r"
			" WHERE r.community_id = $%d AND r.d IS NOT NULL"
			" AND r.d = ANY($%d::uuid[]))",
			community_param, *n, community_param, *n + 1);
	*n += 2;
	return rc;
}

int filter_append_sql(const struct plain_filter *f, struct comb_buf *sql,
		      int community_param, int first_param,
		      struct filter_params *params)
{
	struct comb_buf v;
	int n = first_param, rc = 0, i;

	/* A literal of 256 quoted values of 4096 escaped bytes at most. */
	comb_buf_init(&v, (size_t)COMB_MAX_VALUES * (2 * COMB_MAX_TAG_VALUE_BYTES + 4) + 16);
	if (f->ids)
		rc = match_set(f->ids, "e.id", "text", &v, sql, params, &n);
	if (rc == 0 && f->authors)
		rc = match_set(f->authors, "e.pubkey", "text", &v, sql, params, &n);
	if (rc == 0 && f->kinds)
		rc = match_set(f->kinds, "e.kind", "int", &v, sql, params, &n);
	if (rc == 0 && f->has_since) {
		rc = comb_buf_printf(&v, "%lld", (long long)f->since);
		if (rc == 0)
			rc = push_param(params, &v);
		if (rc == 0)
			rc = comb_buf_printf(sql, " AND e.created_at >= $%d::bigint", n++);
	}
	if (rc == 0 && f->has_until) {
		rc = comb_buf_printf(&v, "%lld", (long long)f->until);
		if (rc == 0)
			rc = push_param(params, &v);
		if (rc == 0)
			rc = comb_buf_printf(sql, " AND e.created_at <= $%d::bigint", n++);
	}
	for (i = 0; i < FILTER_TAGS && rc == 0; i++) {
		if (!f->tags[i])
			continue;
		if (i == FILTER_TAG_H) {
			rc = channel_match(f, &v, sql, params, &n);
			continue;
		}
		if (i == FILTER_TAG_D) {
			rc = d_match(f, &v, sql, community_param, params, &n);
			continue;
		}
		rc = filter_array_literal(f->tags[i], &v);
		if (rc == 0)
			rc = push_param(params, &v);
		if (rc == 0)
			rc = comb_buf_printf(sql,
				" AND e.seq IN (SELECT t.event_seq FROM event_tags t"
				" WHERE t.community_id = $%d AND t.name = '%c'"
				" AND t.value = ANY($%d::text[]))",
				community_param, FILTER_TAG_NAMES[i], n++);
	}
	comb_buf_release(&v);
	return rc;
}

void filter_params_release(struct filter_params *params)
{
	int i;

	for (i = 0; i < params->count; i++)
		free(params->values[i]);
	params->count = 0;
}

const char *filter_one_channel_value(const struct plain_filter *f)
{
	const json_t *h = f->tags[FILTER_TAG_H];
	const char *s = json_string_value(json_array_get(h, 0));

	if (json_array_size(h) != 1 || !comb_uuid_is_canonical(s))
		return NULL;
	return s;
}

const char *filter_one_channel(const struct plain_filter *f)
{
	int i;

	if (f->ids || f->authors)
		return NULL;
	for (i = 0; i < FILTER_TAGS; i++)
		if (f->tags[i] && i != FILTER_TAG_H)
			return NULL;
	return filter_one_channel_value(f);
}

int filter_channel_params(const struct plain_filter *f,
			  struct filter_params *params)
{
	struct comb_buf v;
	int rc;

	if (params->count + 5 > FILTER_MAX_PARAMS)
		return COMB_ETOOBIG;
	comb_buf_init(&v, (size_t)COMB_MAX_VALUES * 8 + 64);
	rc = comb_buf_puts(&v, filter_one_channel(f));
	if (rc == 0)
		rc = push_param(params, &v);
	if (rc == 0 && f->kinds)
		rc = kinds_literal(f->kinds, &v);
	if (rc == 0 && f->kinds)
		rc = push_param(params, &v);
	else if (rc == 0)
		params->values[params->count++] = NULL;
	if (rc == 0)
		rc = comb_buf_printf(&v, "%lld", (long long)(f->has_since ? f->since : 0));
	if (rc == 0)
		rc = push_param(params, &v);
	if (rc == 0)
		rc = comb_buf_printf(&v, "%lld",
				     (long long)(f->has_until ? f->until : INT64_MAX));
	if (rc == 0)
		rc = push_param(params, &v);
	if (rc == 0)
		rc = comb_buf_printf(&v, "%d", f->limit);
	if (rc == 0)
		rc = push_param(params, &v);
	comb_buf_release(&v);
	return rc;
}

int filter_named_channels(const struct plain_filter *f, struct comb_buf *out)
{
	return uuid_literal(f->tags[FILTER_TAG_H], out);
}

/* ------------------------------------------------------------------ */
/* matching a live event */

/* True when array holds the string s. */
static bool string_in(const json_t *array, const char *s)
{
	size_t i;

	for (i = 0; i < json_array_size(array); i++) {
		const char *v = json_string_value(json_array_get(array, i));

		if (v && !strcmp(v, s))
			return true;
	}
	return false;
}

/* True when array holds the integer kind. */
static bool kind_in(const json_t *array, int kind)
{
	size_t i;

	for (i = 0; i < json_array_size(array); i++) {
		if (json_integer_value(json_array_get(array, i)) == kind)
			return true;
	}
	return false;
}

/* True when ev has a tag named letter whose first value is in values. */
static bool tag_in(const struct comb_event *ev, char letter, const json_t *values)
{
	const char name[2] = {letter, '\0'};
	size_t i;

	for (i = 0; i < json_array_size(ev->tags); i++) {
		const json_t *tag = json_array_get(ev->tags, i);
		const char *n = json_string_value(json_array_get(tag, 0));
		const char *v = json_string_value(json_array_get(tag, 1));

		if (n && v && !strcmp(n, name) && string_in(values, v))
			return true;
	}
	return false;
}

bool filter_matches(const struct plain_filter *f, const struct comb_event *ev)
{
	int i;

	if (f->ids && !string_in(f->ids, ev->id))
		return false;
	if (f->authors && !string_in(f->authors, ev->pubkey))
		return false;
	if (f->kinds && !kind_in(f->kinds, ev->kind))
		return false;
	if (f->has_since && ev->created_at < f->since)
		return false;
	if (f->has_until && ev->created_at > f->until)
		return false;
	for (i = 0; i < FILTER_TAGS; i++) {
		if (f->tags[i] && !tag_in(ev, FILTER_TAG_NAMES[i], f->tags[i]))
			return false;
	}
	return true;
}
