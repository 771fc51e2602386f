/*
 * libFuzzer target for incremental-read requests
 * (services/relay/proto/incremental_request.c, PROTOCOL.md section 8). The
 * input is the filter's JSON, as the relay takes it from the /query body.
 * Besides memory errors it traps on broken contracts:
 *   - an answer other than INC_OK, INC_BAD_REQUEST or INC_BAD_CURSOR, or a
 *     refusal without a reason;
 *   - an accepted request with a key other than artifact, #h, #type, #d,
 *     cursor and limit; #h or #d values that are not canonical uuids; #type
 *     values that are not artifact types; a value holding NUL (its C
 *     string would silently name something else); #h and #type over 256
 *     values together, #d over 1000; #d with a cursor; an empty cursor; a
 *     limit outside 1..1000 or not 100 when absent;
 *   - #h and #type sets that are not sorted and unique, or that differ
 *     from the request's values; #d not in first-occurrence order;
 *   - a scope that depends on order or duplicates: the same request with
 *     #h and #type reversed and a value repeated must get the same answer
 *     and, when accepted, the same comb_cursor_scope hash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comb/cursor.h"
#include "comb/uuid.h"
#include "fuzz_check.h"
#include "proto/proto.h"

#define FUZZ_MAX_INPUT (128 * 1024)
#define FUZZ_READER "f00dfacef00dfacef00dfacef00dfacef00dfacef00dfacef00dfacef00dface"

static int in_array(const json_t *arr, const char *s)
{
	size_t i;

	for (i = 0; i < json_array_size(arr); i++)
		if (!strcmp(json_string_value(json_array_get(arr, i)), s))
			return 1;
	return 0;
}

/* values[0..n) is the sorted, duplicate-free set of arr's strings. */
static void check_set(const char *const *values, size_t n, const json_t *arr,
		      bool (*valid)(const char *))
{
	size_t i;

	for (i = 0; i < json_array_size(arr); i++) {
		const json_t *s = json_array_get(arr, i);
		size_t k;

		FUZZ_CHECK(fuzz_string_is_whole(s));
		for (k = 0; k < n && strcmp(values[k], json_string_value(s)); k++)
			;
		FUZZ_CHECK(k < n);
	}
	for (i = 0; i < n; i++) {
		FUZZ_CHECK(valid(values[i]));
		FUZZ_CHECK(in_array(arr, values[i]));
		if (i > 0)
			FUZZ_CHECK(strcmp(values[i - 1], values[i]) < 0);
	}
}

static void check_accepted(const struct inc_request *req, const json_t *obj)
{
	const json_t *h = json_object_get(obj, "#h");
	const json_t *type = json_object_get(obj, "#type");
	const json_t *d = json_object_get(obj, "#d");
	const json_t *limit = json_object_get(obj, "limit");
	const char *key;
	size_t i, n = 0;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v)
		FUZZ_CHECK(!strcmp(key, "artifact") || !strcmp(key, "#h") ||
			   !strcmp(key, "#type") || !strcmp(key, "#d") ||
			   !strcmp(key, "cursor") || !strcmp(key, "limit"));
	FUZZ_CHECK(req->has_channels == (h != NULL));
	FUZZ_CHECK(req->has_types == (type != NULL));
	FUZZ_CHECK(req->has_ids == (d != NULL));
	FUZZ_CHECK(req->nchannels + req->ntypes <= INC_MAX_SCOPE);
	FUZZ_CHECK(json_array_size(h) + json_array_size(type) <= INC_MAX_SCOPE);
	check_set(req->channels, req->nchannels, h, comb_uuid_is_canonical);
	check_set(req->types, req->ntypes, type, artifact_type_is_valid);
	if (h)
		FUZZ_CHECK(req->nchannels >= 1);
	if (type)
		FUZZ_CHECK(req->ntypes >= 1);

	/* #d: unique, in the order each id first appears */
	FUZZ_CHECK(req->nids <= INC_MAX_IDS);
	for (i = 0; i < json_array_size(d); i++) {
		const json_t *s = json_array_get(d, i);
		size_t k;

		FUZZ_CHECK(fuzz_string_is_whole(s));
		FUZZ_CHECK(comb_uuid_is_canonical(json_string_value(s)));
		for (k = 0; k < i; k++)
			if (!strcmp(json_string_value(json_array_get(d, k)),
				    json_string_value(s)))
				break;
		if (k < i)
			continue;
		FUZZ_CHECK(n < req->nids && !strcmp(req->ids[n], json_string_value(s)));
		n++;
	}
	FUZZ_CHECK(n == req->nids);
	if (d)
		FUZZ_CHECK(req->nids >= 1);

	FUZZ_CHECK(!(req->has_ids && req->cursor));
	if (json_object_get(obj, "cursor")) {
		FUZZ_CHECK(req->cursor != NULL && req->cursor[0] != '\0');
		FUZZ_CHECK(fuzz_string_is_whole(json_object_get(obj, "cursor")));
	} else {
		FUZZ_CHECK(req->cursor == NULL);
	}
	FUZZ_CHECK(req->limit >= 1 && req->limit <= INC_MAX_LIMIT);
	FUZZ_CHECK(limit ? req->limit == json_integer_value(limit) :
			   req->limit == INC_DEFAULT_LIMIT);
}

/* A new array: arr reversed, with its last value repeated when extra. */
static json_t *shuffled(const json_t *arr, bool extra)
{
	json_t *out = json_array();
	size_t i, n = json_array_size(arr);

	for (i = n; i > 0; i--)
		json_array_append(out, json_array_get(arr, i - 1));
	if (extra && n > 0)
		json_array_append(out, json_array_get(arr, n - 1));
	return out;
}

/* The same request with #h and #type reordered and a duplicate added. */
static void check_scope_is_a_set(const json_t *obj, int rc,
				 const struct inc_request *req)
{
	const json_t *h = json_object_get(obj, "#h");
	const json_t *type = json_object_get(obj, "#type");
	size_t total = json_array_size(h) + json_array_size(type);
	unsigned char scope[COMB_CURSOR_SCOPE_LEN], scope2[COMB_CURSOR_SCOPE_LEN];
	struct inc_request *req2 = malloc(sizeof(*req2));
	json_t *copy = json_deep_copy(obj);
	char err[160];
	int rc2;

	if (req2 == NULL || copy == NULL)
		goto out;
	if (json_is_array(h))
		json_object_set_new(copy, "#h", shuffled(h, total + 1 <= INC_MAX_SCOPE));
	if (json_is_array(type))
		json_object_set_new(copy, "#type", shuffled(type, total + 2 <= INC_MAX_SCOPE));
	memset(err, 'x', sizeof(err));
	rc2 = inc_request_parse(copy, req2, err, sizeof(err));
	FUZZ_CHECK(rc2 == rc);
	if (rc != INC_OK)
		goto out;
	FUZZ_CHECK(req2->nchannels == req->nchannels && req2->ntypes == req->ntypes);
	comb_cursor_scope(FUZZ_READER, req->channels, req->nchannels,
			  req->types, req->ntypes, scope);
	comb_cursor_scope(FUZZ_READER, req2->channels, req2->nchannels,
			  req2->types, req2->ntypes, scope2);
	FUZZ_CHECK(memcmp(scope, scope2, sizeof(scope)) == 0);
out:
	json_decref(copy);
	free(req2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct inc_request *req;
	char err[160];
	json_t *obj;
	int rc;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	obj = fuzz_parse_json(data, size, FUZZ_MAX_INPUT);
	if (!json_is_object(obj)) {
		json_decref(obj);
		return 0;
	}
	req = malloc(sizeof(*req));
	if (req == NULL) {
		json_decref(obj);
		return 0;
	}
	memset(err, 'x', sizeof(err));
	rc = inc_request_parse(obj, req, err, sizeof(err));
	FUZZ_CHECK(rc == INC_OK || rc == INC_BAD_REQUEST || rc == INC_BAD_CURSOR);
	if (rc != INC_OK)
		fuzz_check_reason(err, sizeof(err));
	else
		check_accepted(req, obj);
	check_scope_is_a_set(obj, rc, req);
	free(req);
	json_decref(obj);
	return 0;
}
