/*
 * Parsing of incremental-read requests (PROTOCOL.md section 8):
 * [{"artifact":"incremental", "#h":[...], "#type":[...], "cursor":"...",
 *   "limit":N}] or the known-ID form with "#d" and no cursor. Pure: no
 * database, no transport, so it is unit-tested and fuzzed alone.
 */
#ifndef COMB_INCREMENTAL_REQUEST_H
#define COMB_INCREMENTAL_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

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
