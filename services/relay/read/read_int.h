/* What the files of read/ call of each other: query.c hands artifact
 * filters to artifact_query.c, which hands incremental ones on; both
 * answer with the events they listed through listed.c. */
#ifndef COMB_READ_INT_H
#define COMB_READ_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "request/request.h"

/* HTTP answers of at most READ_SMALL_ANSWER events come whole, with a
 * length; larger ones are streamed (chunked) in chunks of about
 * READ_CHUNK_BYTES, so a read holds one chunk and one batch of bytes
 * rather than its whole answer. */
#define READ_SMALL_ANSWER 16
#define READ_CHUNK_BYTES (64 * 1024)

/*
 * Sends the stored events whose seqs res lists (its first column, in
 * order) as a bare JSON array (listed.c): when small (at most
 * READ_SMALL_ANSWER asked for) whole with a length, their bytes read on
 * req->db; else streamed as they are read, req->db given back before the
 * first byte, the bytes fetched a batch at a time (read_events_from) on
 * a pooled connection given back before each batch is written, so that
 * the answer holds one batch and one chunk, never a connection, while
 * the client reads. res is the caller's (only its seqs are copied before
 * anything is sent).
 */
void read_send_listed(struct request *req, const PGresult *res, bool small);

/*
 * Answers POST /query (count false) or POST /count (count true) for a
 * filter object that has an "artifact" key (borrowed); sends exactly one
 * answer (artifact_query.c).
 */
void artifact_query(struct request *req, json_t *filter, bool count);

/* True when filter (borrowed, may be NULL) of a /query (count false) or
 * /count answer is an incremental read, which artifact_query hands to
 * incremental_read (artifact_query.c). */
bool artifact_query_is_incremental(const json_t *filter, bool count);

/* Incremental reads (PROTOCOL.md section 8), a cursor-driven feed of
 * current revisions and explicit removals, exact without any clock bound:
 * answers POST /query for a filter whose "artifact" is "incremental"
 * (borrowed); sends exactly one answer, written from the page
 * incremental_read_page reads (incremental_http.c). */
void incremental_read(struct request *req, json_t *filter);

#endif
