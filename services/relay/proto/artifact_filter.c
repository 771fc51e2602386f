/*
 * Parsing of artifact filters (see proto.h): every key is known,
 * every limit is checked, and no predicate is ever dropped.
 */
#include <stdbool.h>
#include <string.h>

#include "comb/error.h"
#include "comb/uuid.h"
#include "proto.h"

static int parse_mode(const json_t *v, enum artifact_mode *mode)
{
	static const char *const names[] = {"current", "history", "head",
					    "incremental"};
	const char *s = json_string_value(v);
	size_t i;

	if (!s)
		return -1;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			*mode = (enum artifact_mode)i;
			return 0;
		}
	}
	return -1;
}

static int parse_int(const json_t *v, json_int_t lo, json_int_t hi, int *out)
{
	json_int_t n;

	if (!json_is_integer(v))
		return -1;
	n = json_integer_value(v);
	if (n < lo || n > hi)
		return -1;
	*out = (int)n;
	return 0;
}

static int check_kinds(const json_t *v, char *errbuf, size_t errlen)
{
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "kinds of an artifact filter must be [45010]");
	for (i = 0; i < json_array_size(v); i++) {
		json_t *k = json_array_get(v, i);

		if (!json_is_integer(k) || json_integer_value(k) != 45010)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "kinds of an artifact filter must be [45010]");
	}
	return 0;
}

/* Checks the values of one predicate; adds their count and bytes. */
static int check_values(const char *name, const json_t *values,
			size_t *nvalues, size_t *bytes, char *errbuf,
			size_t errlen)
{
	bool uuids = !strcmp(name, "d") || !strcmp(name, "h");
	size_t i;

	if (!json_is_array(values) || json_array_size(values) == 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "#%s must be a non-empty array of strings", name);
	for (i = 0; i < json_array_size(values); i++) {
		const json_t *v = json_array_get(values, i);
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);

		if (!s)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "#%s must be a non-empty array of strings", name);
		if (len > COMB_MAX_TAG_VALUE_BYTES)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "a #%s value is longer than %d bytes",
					 name, COMB_MAX_TAG_VALUE_BYTES);
		if (strlen(s) != len)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "a #%s value contains NUL", name);
		if (uuids && !comb_uuid_is_canonical(s))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "#%s values must be canonical uuids", name);
		*bytes += len;
	}
	*nvalues += json_array_size(values);
	if (*nvalues > COMB_MAX_VALUES)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "more than %d predicate values", COMB_MAX_VALUES);
	if (*bytes > COMB_MAX_TAG_BYTES)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "predicates longer than %d bytes in all",
				 COMB_MAX_TAG_BYTES);
	return 0;
}

static int add_predicate(struct artifact_filter *out, const char *key,
			 const json_t *values, size_t *names, size_t *nvalues,
			 size_t *bytes, char *errbuf, size_t errlen)
{
	const char *name = key + 1;
	size_t len = strlen(name);
	int rc;

	if (len == 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "a predicate needs a tag name after #");
	if (len > COMB_MAX_TAG_NAME_BYTES)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "a predicate tag name is longer than %d bytes",
				 COMB_MAX_TAG_NAME_BYTES);
	if (++*names > COMB_MAX_PREDICATES)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "more than %d predicates", COMB_MAX_PREDICATES);
	*bytes += len;
	rc = check_values(name, values, nvalues, bytes, errbuf, errlen);
	if (rc)
		return rc;
	if (!strcmp(name, "d"))
		out->d = values;
	else if (!strcmp(name, "h"))
		out->h = values;
	else if (!strcmp(name, "type"))
		out->type = values;
	else
		out->preds[out->npreds++] = (struct artifact_predicate){
			.name = name, .values = values};
	return 0;
}

int artifact_filter_parse(const json_t *filter, int max_limit,
			  struct artifact_filter *out, char *errbuf,
			  size_t errlen)
{
	size_t names = 0, nvalues = 0, bytes = 0;
	bool has_limit = false;
	const char *key;
	json_t *value;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(filter) ||
	    parse_mode(json_object_get(filter, "artifact"), &out->mode))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "artifact must be current, history, head or incremental");
	if (out->mode == ARTIFACT_MODE_INCREMENTAL)
		return 0;
	json_object_foreach((json_t *)filter, key, value) {
		if (!strcmp(key, "artifact"))
			continue;
		if (!strcmp(key, "kinds")) {
			rc = check_kinds(value, errbuf, errlen);
			if (rc)
				return rc;
		} else if (!strcmp(key, "limit")) {
			if (parse_int(value, 1, max_limit, &out->limit))
				return comb_fail(errbuf, errlen, COMB_EINVAL,
						 "limit must be an integer from 1 to %d",
						 max_limit);
			has_limit = true;
		} else if (!strcmp(key, "offset")) {
			if (parse_int(value, 0, COMB_MAX_OFFSET, &out->offset))
				return comb_fail(errbuf, errlen, COMB_EINVAL,
						 "offset must be an integer from 0 to %d",
						 COMB_MAX_OFFSET);
		} else if (key[0] == '#') {
			rc = add_predicate(out, key, value, &names, &nvalues,
					   &bytes, errbuf, errlen);
			if (rc)
				return rc;
		} else {
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "unknown filter key %.64s", key);
		}
	}
	if (out->mode != ARTIFACT_MODE_CURRENT && !out->d)
		return comb_fail(errbuf, errlen, COMB_EINVAL, "%s needs #d",
				 out->mode == ARTIFACT_MODE_HISTORY ? "history" : "head");
	if (!has_limit)
		out->limit = out->mode == ARTIFACT_MODE_CURRENT ?
			(ARTIFACT_DEFAULT_LIMIT < max_limit ? ARTIFACT_DEFAULT_LIMIT : max_limit) :
			max_limit;
	return 0;
}
