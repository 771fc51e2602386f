/* Incremental reads (PROTOCOL.md section 8): a cursor-driven feed of
 * current revisions and explicit removals, exact without any clock bound. */
#ifndef COMB_INCREMENTAL_H
#define COMB_INCREMENTAL_H

#include <jansson.h>

#include "http.h"

/* Answers POST /query for a filter whose "artifact" is "incremental"
 * (borrowed); sends exactly one answer. */
void incremental_read(struct request *req, json_t *filter);

#endif
