/*
 * libFuzzer target for artifact filters
 * (services/relay/proto/artifact_filter.c, PROTOCOL.md section 6). The
 * first input byte picks the configured max_limit, the rest is the
 * filter's JSON. Besides memory errors it traps on broken contracts:
 *   - a refusal that is not COMB_EINVAL with a reason;
 *   - an accepted filter with an unknown key, kinds other than [45010,...],
 *     a limit outside 1..max_limit or not the mode's default when absent,
 *     an offset outside 0..10000, history or head without #d, #d or #h
 *     values that are not canonical uuids, more than 32 predicate names,
 *     256 values or 65536 bytes, a value over 4096 bytes or holding NUL,
 *     or a tag name over 128 bytes;
 *   - a predicate that is dropped, duplicated or altered: every "#name"
 *     key of the filter must come back exactly once, as d, h, type or one
 *     of preds, pointing at the filter's own array;
 *   - for "incremental", anything filled but the mode.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "comb/error.h"
#include "comb/uuid.h"
#include "fuzz_check.h"
#include "proto/proto.h"

#define FUZZ_MAX_INPUT (2 * COMB_MAX_TAG_BYTES)

static const int max_limits[] = {1, 100, 1000, 100000};

static void check_values(const char *name, const json_t *values,
			 size_t *nvalues, size_t *bytes)
{
	bool uuids = !strcmp(name, "d") || !strcmp(name, "h");
	size_t i;

	FUZZ_CHECK(json_is_array(values) && json_array_size(values) > 0);
	for (i = 0; i < json_array_size(values); i++) {
		const json_t *v = json_array_get(values, i);

		FUZZ_CHECK(fuzz_string_is_whole(v));
		FUZZ_CHECK(json_string_length(v) <= COMB_MAX_TAG_VALUE_BYTES);
		if (uuids)
			FUZZ_CHECK(comb_uuid_is_canonical(json_string_value(v)));
		*bytes += json_string_length(v);
	}
	*nvalues += json_array_size(values);
}

static void check_accepted(const struct artifact_filter *f, const json_t *obj,
			   int max_limit)
{
	size_t names = 0, nvalues = 0, bytes = 0, found_preds = 0, i;
	const char *key;
	json_t *v;

	FUZZ_CHECK(json_is_object(obj));
	FUZZ_CHECK(f->mode <= ARTIFACT_MODE_INCREMENTAL);
	if (f->mode == ARTIFACT_MODE_INCREMENTAL) {
		/* only the mode: the incremental parser checks the rest */
		FUZZ_CHECK(!strcmp(json_string_value(json_object_get(obj, "artifact")),
				   "incremental"));
		FUZZ_CHECK(f->limit == 0 && f->offset == 0 && f->npreds == 0);
		FUZZ_CHECK(f->d == NULL && f->h == NULL && f->type == NULL);
		return;
	}
	FUZZ_CHECK(f->limit >= 1 && f->limit <= max_limit);
	if (json_object_get(obj, "limit") == NULL)
		FUZZ_CHECK(f->limit == (f->mode == ARTIFACT_MODE_CURRENT &&
					max_limit > ARTIFACT_DEFAULT_LIMIT ?
					ARTIFACT_DEFAULT_LIMIT : max_limit));
	else
		FUZZ_CHECK(f->limit == json_integer_value(json_object_get(obj, "limit")));
	FUZZ_CHECK(f->offset >= 0 && f->offset <= COMB_MAX_OFFSET);
	if (f->mode != ARTIFACT_MODE_CURRENT)
		FUZZ_CHECK(f->d != NULL);
	FUZZ_CHECK(f->npreds <= COMB_MAX_PREDICATES);

	json_object_foreach((json_t *)obj, key, v) {
		const char *name = key + 1;

		if (!strcmp(key, "artifact") || !strcmp(key, "limit"))
			continue;
		if (!strcmp(key, "offset")) {
			FUZZ_CHECK(f->offset == json_integer_value(v));
			continue;
		}
		if (!strcmp(key, "kinds")) {
			FUZZ_CHECK(json_is_array(v) && json_array_size(v) > 0);
			for (i = 0; i < json_array_size(v); i++)
				FUZZ_CHECK(json_integer_value(json_array_get(v, i)) == 45010 &&
					   json_is_integer(json_array_get(v, i)));
			continue;
		}
		FUZZ_CHECK(key[0] == '#');
		FUZZ_CHECK(strlen(name) >= 1 &&
			   strlen(name) <= COMB_MAX_TAG_NAME_BYTES);
		names++;
		bytes += strlen(name);
		check_values(name, v, &nvalues, &bytes);
		if (!strcmp(name, "d")) {
			FUZZ_CHECK(f->d == v);
		} else if (!strcmp(name, "h")) {
			FUZZ_CHECK(f->h == v);
		} else if (!strcmp(name, "type")) {
			FUZZ_CHECK(f->type == v);
		} else {
			size_t hits = 0;

			for (i = 0; i < f->npreds; i++)
				if (f->preds[i].values == v) {
					FUZZ_CHECK(!strcmp(f->preds[i].name, name));
					hits++;
				}
			FUZZ_CHECK(hits == 1);
			found_preds++;
		}
	}
	/* nothing invented: every pred is one of the filter's keys */
	FUZZ_CHECK(found_preds == f->npreds);
	FUZZ_CHECK((f->d != NULL) == (json_object_get(obj, "#d") != NULL));
	FUZZ_CHECK((f->h != NULL) == (json_object_get(obj, "#h") != NULL));
	FUZZ_CHECK((f->type != NULL) == (json_object_get(obj, "#type") != NULL));
	FUZZ_CHECK(names <= COMB_MAX_PREDICATES);
	FUZZ_CHECK(nvalues <= COMB_MAX_VALUES);
	FUZZ_CHECK(bytes <= COMB_MAX_TAG_BYTES);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct artifact_filter f, again;
	int max_limit, rc;
	char err[160];
	json_t *obj;

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	max_limit = max_limits[data[0] % 4];
	obj = fuzz_parse_json(data + 1, size - 1, FUZZ_MAX_INPUT);
	if (obj == NULL)
		return 0;
	memset(err, 'x', sizeof(err));
	rc = artifact_filter_parse(obj, max_limit, &f, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == COMB_EINVAL);
	if (rc) {
		fuzz_check_reason(err, sizeof(err));
	} else {
		check_accepted(&f, obj, max_limit);
		FUZZ_CHECK(artifact_filter_parse(obj, max_limit, &again, err,
						 sizeof(err)) == 0);
		FUZZ_CHECK(memcmp(&f, &again, sizeof(f)) == 0);
	}
	json_decref(obj);
	return 0;
}
