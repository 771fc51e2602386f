/*
 * Artifact filters (PROTOCOL.md section 6): the pure parsing and limit
 * checks of a filter object with an "artifact" key, so that they can be
 * tested without a database. artifact_query.c turns the result into SQL.
 */
#ifndef COMB_ARTIFACT_FILTER_H
#define COMB_ARTIFACT_FILTER_H

#include <jansson.h>
#include <stddef.h>

#include "protocol_limits.h"

#define ARTIFACT_DEFAULT_LIMIT 100

enum artifact_mode {
	ARTIFACT_MODE_CURRENT = 0,
	ARTIFACT_MODE_HISTORY = 1,
	ARTIFACT_MODE_HEAD = 2,
	ARTIFACT_MODE_INCREMENTAL = 3,
};

/* One "#name": [values] predicate other than #d, #h and #type. */
struct artifact_predicate {
	const char *name;      /* without the '#'; borrowed from the filter */
	const json_t *values;  /* non-empty array of strings; borrowed */
};

struct artifact_filter {
	enum artifact_mode mode;
	int limit;             /* resolved: the given one or the mode's default */
	int offset;
	const json_t *d;       /* #d values (canonical uuids) or NULL; borrowed */
	const json_t *h;       /* #h values (canonical uuids) or NULL; borrowed */
	const json_t *type;    /* #type values or NULL; borrowed */
	struct artifact_predicate preds[COMB_MAX_PREDICATES];
	size_t npreds;
};

/*
 * Parses filter (a JSON object holding an "artifact" key; borrowed, and it
 * must outlive out). Accepted keys: artifact (current, history, head or
 * incremental), kinds (only 45010), limit (1..max_limit; default 100 for
 * current, max_limit for history and head), offset (0..COMB_MAX_OFFSET)
 * and "#<name>" predicates within the advertised limits; history and head
 * need #d. For "incremental" only the mode is filled and nothing else is
 * checked. Returns 0, or COMB_EINVAL with the reason (lowercase, without
 * the "invalid: " prefix) in errbuf.
 */
int artifact_filter_parse(const json_t *filter, int max_limit,
			  struct artifact_filter *out, char *errbuf,
			  size_t errlen);

#endif
