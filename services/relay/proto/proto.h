/*
 * proto/: the protocol objects the relay parses and checks without any
 * I/O (no civetweb, libpq or Redis), so that they are unit-tested and
 * fuzzed alone: plain NIP-01 filters and their SQL predicates (filter.c),
 * artifact filters (artifact_filter.c), the envelope of an artifact
 * revision (artifact_envelope.c) and incremental-read requests
 * (incremental_request.c). The only public header of the folder.
 */
#ifndef COMB_PROTO_H
#define COMB_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/buf.h"
#include "comb/event.h"
#include "protocol_limits.h"

/*
 * filter.c:
 * Plain NIP-01 filters (PROTOCOL.md section 6, last paragraph): parsing a
 * filter object with every limit, and turning it into SQL predicates over
 * the `events` table (alias `e`) with the client's values passed as
 * parameters, never spliced into the statement. Knows nothing of HTTP or
 * access rules, so it is unit-tested alone (tests/unit/test_filter.c).
 */

/* The limit of a filter that names none. */
#define FILTER_DEFAULT_LIMIT 100
/* The tag predicates a plain filter accepts, in this order. */
#define FILTER_TAG_NAMES "ephd"
#define FILTER_TAGS 4
/* The index of #h and of #d among them. */
#define FILTER_TAG_H 2
#define FILTER_TAG_D 3
/* Parameters filter_append_sql adds at most (#d takes two). */
#define FILTER_MAX_PARAMS 10

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

/* Parameter values built by filter_append_sql or filter_channel_params,
 * each owned or NULL for SQL NULL (caller releases with
 * filter_params_release). */
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
 * True when ev matches the plain filter f, as a live event: ids,
 * authors, kinds, since, until and the #e #p #h #d predicates (a tag
 * matches on its name and first value). limit plays no part.
 */
bool filter_matches(const struct plain_filter *f, const struct comb_event *ev);

/*
 * Appends the canonical channel UUIDs among the #h values of f as a
 * PostgreSQL uuid[] literal ("{}" when none): the channels the request
 * names. Returns 0 or COMB_ENOMEM / COMB_ETOOBIG.
 */
int filter_named_channels(const struct plain_filter *f, struct comb_buf *out);

/* The channel of f's #h when it names exactly one canonical channel uuid,
 * else NULL (borrowed from f). */
const char *filter_one_channel_value(const struct plain_filter *f);

/*
 * The channel f reads when it names exactly one channel in #h and narrows
 * it by nothing but kinds, since and until (no ids, authors or other
 * tags), else NULL (borrowed from f). Such a filter is read by the SQL
 * function comb_channel_events (migrations/0010_reads_planned_once.sql), whose
 * plan is made once per connection.
 */
const char *filter_one_channel(const struct plain_filter *f);

/*
 * For a filter f of filter_one_channel: adds to params the values of the
 * arguments of comb_channel_events that follow its access ones, p_channel
 * to p_limit: the channel, the kinds as an int[] literal (NULL, meaning
 * any, when f has none), since (0 when absent), until (INT64_MAX when
 * absent) and the limit. Returns 0, or COMB_ENOMEM / COMB_ETOOBIG.
 */
int filter_channel_params(const struct plain_filter *f,
			  struct filter_params *params);

/*
 * Appends the strings of array (borrowed JSON array of strings) as a
 * PostgreSQL array literal with every element quoted and escaped. Returns
 * 0 or COMB_ENOMEM / COMB_ETOOBIG.
 */
int filter_array_literal(const json_t *array, struct comb_buf *out);

/*
 * artifact_filter.c:
 * Artifact filters (PROTOCOL.md section 6): the pure parsing and limit
 * checks of a filter object with an "artifact" key, so that they can be
 * tested without a database. read/artifact_query.c turns the result into SQL.
 */

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

/*
 * artifact_envelope.c:
 * The envelope of an artifact revision (PROTOCOL.md section 5): the pure
 * checks of its tags and content that need no database, so that they can
 * be tested alone. Everything that depends on stored state (identity,
 * prev, permissions, root) is checked by write/artifact_write.c.
 */

#define ARTIFACT_MAX_TYPE_BYTES 128
#define ARTIFACT_MAX_TITLE_BYTES 512

enum artifact_op {
	ARTIFACT_CREATE = 0,
	ARTIFACT_UPDATE = 1,
	ARTIFACT_MOVE = 2,
	ARTIFACT_DELETE = 3,
	ARTIFACT_RESTORE = 4,
};

/* The envelope tags of one revision; strings are borrowed from the event's
 * tags and stay valid while the event lives. root and prev are NULL when
 * absent, title is NULL on a delete. */
struct artifact_envelope {
	enum artifact_op op;
	const char *d;
	const char *h;
	const char *type;
	const char *title;
	const char *root;
	const char *prev;
};

/*
 * Checks ev (a kind-45010 event whose shape comb_event_parse accepted)
 * against every envelope rule: ar, d, h, type, op, root, prev and title,
 * each envelope tag at most once with exactly two elements, prev exactly
 * when op is not create, the delete form (no title, empty content, only
 * envelope tags), and the tag size limits. On success fills env and
 * returns 0; otherwise returns COMB_EINVAL with the reason (lowercase,
 * without the "invalid: " prefix) in errbuf.
 */
int artifact_envelope_check(const struct comb_event *ev,
			    struct artifact_envelope *env, char *errbuf,
			    size_t errlen);

/* The op's wire name ("create", ...). */
const char *artifact_op_name(enum artifact_op op);

/* True when type is dot-separated lowercase components (a letter first,
 * then letters, digits, '_' or '-'), at least one dot, at most 128 bytes. */
bool artifact_type_is_valid(const char *type);

/*
 * incremental_request.c:
 * Parsing of incremental-read requests (PROTOCOL.md section 8):
 * [{"artifact":"incremental", "#h":[...], "#type":[...], "cursor":"...",
 *   "limit":N}] or the known-ID form with "#d" and no cursor. Pure: no
 * database, no transport, so it is unit-tested and fuzzed alone.
 */

#define INC_MAX_SCOPE 256      /* values in #h and #type together */
#define INC_MAX_IDS 1000       /* values in #d */
#define INC_MAX_LIMIT 1000
#define INC_DEFAULT_LIMIT 100

enum inc_error {
	INC_OK = 0,
	INC_BAD_REQUEST = 1,
	INC_BAD_CURSOR = 2,
};

struct inc_request {
	const char *channels[INC_MAX_SCOPE]; /* sorted, unique; borrowed from the filter */
	size_t nchannels;
	bool has_channels;                   /* #h present */
	const char *types[INC_MAX_SCOPE];    /* sorted, unique */
	size_t ntypes;
	bool has_types;
	const char *ids[INC_MAX_IDS];        /* #d in request order, unique */
	size_t nids;
	bool has_ids;
	const char *cursor;                  /* NULL on a first read */
	int limit;
};

/*
 * Fills req from filter (borrowed: req points into it). Returns INC_OK, or
 * INC_BAD_REQUEST / INC_BAD_CURSOR with a human message in errbuf.
 */
int inc_request_parse(const json_t *filter, struct inc_request *req,
		      char *errbuf, size_t errlen);

#endif
