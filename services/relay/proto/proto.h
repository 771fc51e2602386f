/*
 * Plain NIP-01 filters (PROTOCOL.md section 6, last paragraph): parsing a
 * filter object with every limit, and turning it into SQL predicates over
 * the `events` table (alias `e`) with the client's values passed as
 * parameters, never spliced into the statement. Knows nothing of HTTP or
 * access rules, so it is unit-tested alone (tests/unit/test_filter.c).
 */
#ifndef COMB_FILTER_H
#define COMB_FILTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/buf.h"

/* The limit of a filter that names none. */
#define FILTER_DEFAULT_LIMIT 100
/* The tag predicates a plain filter accepts, in this order. */
#define FILTER_TAG_NAMES "ephd"
#define FILTER_TAGS 4
/* Parameters filter_append_sql adds at most. */
#define FILTER_MAX_PARAMS 9

struct plain_filter {
	const json_t *ids;               /* borrowed arrays, NULL when absent */
	const json_t *authors;
	const json_t *kinds;
	const json_t *tags[FILTER_TAGS]; /* #e #p #h #d */
	bool has_since;
	bool has_until;
	int64_t since;
	int64_t until;
	int limit;
};

/* Parameter values built by filter_append_sql, each owned (caller releases
 * with filter_params_release). */
struct filter_params {
	int count;
	char *values[FILTER_MAX_PARAMS];
};

/*
 * Parses the filter object obj (borrowed; f borrows from it, so obj must
 * outlive f). Refuses unknown keys, multi-character and unsupported tag
 * predicates, wrong types, ids and authors that are not 64 lowercase hex
 * (at most COMB_MAX_IDS each), kinds outside 0..65535, more than
 * COMB_MAX_VALUES tag values in all or one over COMB_MAX_TAG_VALUE_BYTES
 * or holding NUL, negative since/until, and a limit outside 1..max_limit.
 * A missing limit is FILTER_DEFAULT_LIMIT (or max_limit when that is
 * lower). Returns 0, or COMB_EINVAL with the reason (no prefix) in errbuf.
 */
int filter_parse(struct plain_filter *f, const json_t *obj, int max_limit,
		 char *errbuf, size_t errlen);

/*
 * Appends to sql one " AND <predicate>" per constraint of f, numbering
 * parameters from first_param, and stores their values (PostgreSQL array
 * literals or integers as text) in params, which must start empty. The
 * predicates need `e` (events) and the community id as parameter
 * community_param. Returns 0, or COMB_ENOMEM / COMB_ETOOBIG.
 */
int filter_append_sql(const struct plain_filter *f, struct comb_buf *sql,
		      int community_param, int first_param,
		      struct filter_params *params);

/* Frees the values of params and leaves it empty. */
void filter_params_release(struct filter_params *params);

/*
 * Appends the canonical channel UUIDs among the #h values of f as a
 * PostgreSQL uuid[] literal ("{}" when none): the channels the request
 * names. Returns 0 or COMB_ENOMEM / COMB_ETOOBIG.
 */
int filter_named_channels(const struct plain_filter *f, struct comb_buf *out);

/*
 * Appends the strings of array (borrowed JSON array of strings) as a
 * PostgreSQL array literal with every element quoted and escaped. Returns
 * 0 or COMB_ENOMEM / COMB_ETOOBIG.
 */
int filter_array_literal(const json_t *array, struct comb_buf *out);

#endif
