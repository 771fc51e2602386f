/* The statement of plain NIP-01 filters over stored events, shared by
 * POST /query and /count (query.c) and WebSocket REQ (ws_req.c). */
#ifndef COMB_QUERY_H
#define COMB_QUERY_H

#include "comb/buf.h"
#include "filter.h"

/* Fixed parameters of the plain query; the filter's follow. */
enum {
	QUERY_P_COMMUNITY = 1,
	QUERY_P_READER = 2,
	QUERY_P_NAMED = 3,  /* uuid[] of the channels named in #h */
	QUERY_P_KEYS = 4,   /* int[] of the reader's read keys */
	QUERY_P_FIRST_FILTER = 5,
	QUERY_P_MAX = QUERY_P_FIRST_FILTER + FILTER_MAX_PARAMS,
};

/*
 * Appends the statement selecting columns (e.g. "e.raw" or "count(*)") of
 * every stored event of the community matching f that is neither deleted
 * nor redacted, in a channel the reader may read (its read key is among
 * the reader's) or, with no channel, written by the reader. With ordered,
 * newest first and limited to f->limit. The filter's values are added to
 * params.
 */
int query_plain_sql(const struct plain_filter *f, const char *columns,
		    bool ordered, struct comb_buf *sql,
		    struct filter_params *params);

#endif
