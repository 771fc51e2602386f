/*
 * read/: everything that answers a read over HTTP (PROTOCOL.md sections 6
 * and 8): POST /query and /count with plain NIP-01 filters (query.c),
 * artifact queries current/history/head/count (artifact_query.c) and
 * incremental reads (incremental.c); and the statement of plain filters
 * over stored events that WebSocket REQ shares. The only public header of
 * the folder.
 */
#ifndef COMB_READ_H
#define COMB_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/buf.h"
#include "comb/cursor.h"
#include "proto/proto.h"
#include "request.h"

/* Fixed parameters of the plain query; the filter's follow. */
enum {
	QUERY_P_COMMUNITY = 1,
	QUERY_P_READER = 2,
	QUERY_P_NAMED = 3,  /* uuid[] of the channels named in #h */
	QUERY_P_KEYS = 4,   /* int[] of the reader's read keys */
	QUERY_P_FIRST_FILTER = 5,
	QUERY_P_MAX = QUERY_P_FIRST_FILTER + FILTER_MAX_PARAMS,
};

/* What a plain query selects of each event (or of all of them). */
enum query_columns {
	QUERY_SEQ,          /* e.seq */
	QUERY_ID_SEQ,       /* e.id, e.seq */
	QUERY_COUNT,        /* count(*): one row, unordered */
};

/*
 * Runs on db (borrowed from pool) the query selecting columns of every
 * stored event of community matching f that is neither deleted nor
 * redacted, in a channel reader may read (its read key is among keys, an
 * int[] literal) or, with no channel, written by reader; newest first
 * (then by id) and limited to f->limit unless columns is QUERY_COUNT. A
 * filter of one channel (filter_one_channel) is read by the prepared
 * statement of comb_channel_events, the same answer planned once per
 * connection; any other is planned for its values. Returns the result
 * (the caller PQclear()s it and checks its status), or NULL when out of
 * memory. Shared by POST /query and /count and WebSocket REQ
 * (ws/ws_req.c).
 */
PGresult *query_plain_run(struct comb_db_pool *pool, PGconn *db,
			  const struct plain_filter *f, enum query_columns columns,
			  const char *community, const char *reader,
			  const char *keys);

/* True when filter f asks for so few events (16 at most) that POST /query
 * sends its answer whole and a plain REQ sends no first events ahead of
 * its list. */
bool query_small_filter(const struct plain_filter *f);

/* Answers POST /query (count false) or POST /count (count true) for the
 * authenticated request req; sends exactly one answer. */
void handle_query(struct request *req, bool count);

/* What an incremental read answered besides its body: its cursor, more,
 * and how many items its changes hold. */
struct incremental_page {
	char cursor[COMB_CURSOR_MAX_TEXT];
	bool more;
	int items;
	/* the answer did not fit req->capture's maximum (status 503): the
	 * same read with a smaller limit may */
	bool too_large;
};

/* How a resumable sync reads (see incremental_read_for_sync). */
enum sync_read {
	SYNC_READ_CATCHUP,  /* under admission control, as over HTTP */
	SYNC_READ_LIVE,     /* after a signal of the scope: without admission,
			     * and straight to the change query (the probe
			     * for a read that finds nothing is skipped) */
};

/*
 * One incremental read (PROTOCOL.md section 8) for filter (borrowed, an
 * "incremental" filter without #d) as req->pubkey, answered exactly as
 * POST /query answers it, into req->capture with its status in
 * req->status; when that is 200, *page says what the answer holds, so
 * that the caller need not parse it. A 200 answer is written after what
 * the capture held (so that a caller can wrap it in a frame without a
 * copy, bounded by the capture's maximum), any other in its place. The
 * caller fills relay, community,
 * pubkey, capture and db (borrowed from the pool; the answer gives it
 * back). The resumable sync (sync/resume.c) reads its catch-up pages
 * and live frames with it, so its cursors are the HTTP ones; kind says
 * which of the two this read is: it decides whether admission control
 * applies and what the read costs, never which changes it returns.
 */
void incremental_read_for_sync(struct request *req, json_t *filter,
			       enum sync_read kind, struct incremental_page *page);

/* Takes one stored event's bytes (raw, len: borrowed for the call);
 * returns 0 to go on, or a negative COMB_E* (with a CLOSED message in
 * why, unless COMB_EIO) to stop. */
typedef int (*event_bytes_fn)(void *ctx, const char *raw, size_t len,
			      char *why, size_t whylen);

/*
 * Hands the bytes of the stored events seqs[0..n) to emit, in that order,
 * fetching them a batch at a time from the revision cache (revcache.h)
 * and, for a batch's misses, with one statement whose answers the cache
 * then keeps (event_bytes.c). With held NULL the misses are read on a
 * pooled connection given back before emit runs, so none is held while a
 * client reads; a caller that holds a connection anyway (an HTTP read
 * building its answer) passes it as held. For answers decided in one
 * statement and sent afterwards: stored bytes never change. Returns 0,
 * what emit returned, or a negative COMB_E* with the CLOSED message in
 * why.
 */
int read_events_by_seq(struct relay *relay, PGconn *held,
		       const int64_t *seqs, size_t n, event_bytes_fn emit,
		       void *ctx, char *why, size_t whylen);

/* Where read_events_from reads what the revision cache lacks: on held
 * (borrowed from pool) when not NULL; else, when routed, on a connection
 * the read router lends at position at_least (that of the statement that
 * chose the events, so that every one of them is there); else on a
 * connection of the primary's pool. */
struct event_source {
	struct comb_db_pool *pool;
	PGconn *held;
	bool routed;
	comb_lsn at_least;
};

/*
 * Sets *src for the misses of an answer whose events were chosen on
 * req->db, to be read once req->db is given back: routed at the position
 * req->db's server has replayed by now (at least what the choosing
 * statement saw) when it is a standby, else the primary's pool (which
 * holds every event).
 */
void read_misses_source(struct request *req, struct event_source *src);

/* read_events_by_seq, reading misses where src says. */
int read_events_from(struct relay *relay, const struct event_source *src,
		     const int64_t *seqs, size_t n, event_bytes_fn emit,
		     void *ctx, char *why, size_t whylen);

/* A statement for comb_db_pool_warm: it readies a new connection for
 * incremental reads and plain filters of one channel (incremental.c). */
extern const char read_warm_sql[];

#endif
