/*
 * Incremental-read request parsing: every key checked, every value
 * bounded, #h and #type normalized to sorted sets so that the scope hash
 * does not depend on order or duplicates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/uuid.h"
#include "proto.h"

static int fail(char *errbuf, size_t errlen, int code, const char *msg)
{
	snprintf(errbuf, errlen, "%s", msg);
	return code;
}


static int by_string(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts values and drops duplicates; returns the new count. */
static size_t sort_unique(const char **values, size_t n)
{
	size_t i, out = 0;

	qsort(values, n, sizeof(*values), by_string);
	for (i = 0; i < n; i++)
		if (out == 0 || strcmp(values[out - 1], values[i]))
			values[out++] = values[i];
	return out;
}

/* Reads a non-empty array of strings that pass check into out. */
static bool read_set(const json_t *arr, const char **out, size_t max,
		     size_t *n, bool (*check)(const char *))
{
	size_t i;

	if (!json_is_array(arr) || json_array_size(arr) == 0 ||
	    json_array_size(arr) > max)
		return false;
	for (i = 0; i < json_array_size(arr); i++) {
		const json_t *v = json_array_get(arr, i);
		const char *s = json_string_value(v);

		/* a NUL inside a value would silently shorten it */
		if (!s || strlen(s) != json_string_length(v) || !check(s))
			return false;
		out[i] = s;
	}
	*n = i;
	return true;
}

int inc_request_parse(const json_t *filter, struct inc_request *req,
		      char *errbuf, size_t errlen)
{
	const char *key;
	json_t *value;
	size_t i, j;

	memset(req, 0, sizeof(*req));
	req->limit = INC_DEFAULT_LIMIT;
	json_object_foreach((json_t *)filter, key, value) {
		if (!strcmp(key, "artifact")) {
			continue;
		} else if (!strcmp(key, "#h")) {
			req->has_channels = true;
			if (!read_set(value, req->channels, INC_MAX_SCOPE,
				      &req->nchannels, comb_uuid_is_canonical))
				return fail(errbuf, errlen, INC_BAD_REQUEST,
					    "#h must be a non-empty array of canonical channel uuids");
		} else if (!strcmp(key, "#type")) {
			req->has_types = true;
			if (!read_set(value, req->types, INC_MAX_SCOPE,
				      &req->ntypes, artifact_type_is_valid))
				return fail(errbuf, errlen, INC_BAD_REQUEST,
					    "#type must be a non-empty array of artifact types");
		} else if (!strcmp(key, "#d")) {
			req->has_ids = true;
			if (!read_set(value, req->ids, INC_MAX_IDS, &req->nids,
				      comb_uuid_is_canonical))
				return fail(errbuf, errlen, INC_BAD_REQUEST,
					    "#d must hold 1 to 1000 canonical artifact uuids");
		} else if (!strcmp(key, "cursor")) {
			req->cursor = json_string_value(value);
			if (!req->cursor || !*req->cursor ||
			    strlen(req->cursor) != json_string_length(value))
				return fail(errbuf, errlen, INC_BAD_CURSOR,
					    "cursor must be a non-empty string");
		} else if (!strcmp(key, "limit")) {
			json_int_t n = json_integer_value(value);

			if (!json_is_integer(value) || n < 1 || n > INC_MAX_LIMIT)
				return fail(errbuf, errlen, INC_BAD_REQUEST,
					    "limit must be an integer from 1 to 1000");
			req->limit = (int)n;
		} else {
			return fail(errbuf, errlen, INC_BAD_REQUEST,
				    "only #h, #type, #d, cursor and limit are allowed");
		}
	}
	if (req->has_ids && req->cursor)
		return fail(errbuf, errlen, INC_BAD_REQUEST,
			    "#d cannot be combined with a cursor");
	if (req->nchannels + req->ntypes > INC_MAX_SCOPE)
		return fail(errbuf, errlen, INC_BAD_REQUEST,
			    "#h and #type hold at most 256 values together");
	req->nchannels = sort_unique(req->channels, req->nchannels);
	req->ntypes = sort_unique(req->types, req->ntypes);
	/* Known-ID answers follow request order; drop repeated ids. */
	for (i = 0, j = 0; i < req->nids; i++) {
		size_t k;

		for (k = 0; k < j && strcmp(req->ids[k], req->ids[i]); k++)
			;
		if (k == j)
			req->ids[j++] = req->ids[i];
	}
	req->nids = j;
	return INC_OK;
}
