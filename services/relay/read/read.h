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
#include "request/request.h"

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

/* How an incremental read is asked for. */
enum incremental_kind {
	INCREMENTAL_HTTP,        /* POST /query: under admission control,
				  * recording the NIP-98 token's use */
	INCREMENTAL_CATCHUP,     /* a resumable sync's catch-up: under
				  * admission control, as over HTTP */
	INCREMENTAL_LIVE,        /* a resumable sync's read after a signal
				  * of its scope: without admission, and
				  * straight to the change query (the probe
				  * for a read that finds nothing is skipped) */
};

/* Who asks for an incremental read, and what for (all borrowed). */
struct incremental_ask {
	struct relay *relay;
	const struct community *community;
	const char *pubkey;            /* the reader, authenticated */
	json_t *filter;                /* an "incremental" filter */
	enum incremental_kind kind;    /* decides whether admission control
					* applies and what the read costs,
					* never which changes it returns */
	/* INCREMENTAL_HTTP: the verified NIP-98 token whose use the
	 * admission records ("" for none), and until when it is kept */
	const char *replay_token;
	int64_t replay_expires;
	/* A position the read must see besides its cursor's and the reader's
	 * writes' (a live signal's), 0 for none. */
	comb_lsn at_least;
};

/* One item of a page: an upsert of the stored event seq, or (seq 0) the
 * removal of d, last seen in channel (may be "") for reason. */
struct incremental_item {
	int64_t seq;
	char d[37], channel[37], reason[16];
};

/*
 * What one incremental read found, for an answerer to write: the HTTP
 * JSON answer (incremental_http.c) or a CHANGES frame
 * (sync/resume.c), each through incremental_page_write. Either an error
 * (status not 200) or a page of items, in the order a client applies
 * them, with the cursor to continue from and whether more waits.
 */
struct incremental_page {
	int status;                 /* 200, or the HTTP status of the error */
	/* An error: a code of PROTOCOL.md section 8 (incremental_*) with its
	 * message, or, with code "", message alone ("error: ...",
	 * "auth-required: ..."). */
	char code[32];
	char message[256];
	struct incremental_item *items; /* owned (incremental_page_release) */
	int nitems, capitems;
	bool known_ids;             /* an answer by ids: no cursor, no more */
	char cursor[COMB_CURSOR_MAX_TEXT];
	bool more;
	/* Where the upserts' bytes are read, once the read has given its
	 * connection back: at the read's position when a standby served it,
	 * else on the primary. */
	struct event_source bytes;
};

/*
 * Runs the incremental read (PROTOCOL.md section 8) ask describes into
 * *page (zeroed by the caller), holding a database connection only while
 * its statements run; nothing is sent. Release the page with
 * incremental_page_release.
 */
void incremental_read_page(const struct incremental_ask *ask,
			   struct incremental_page *page);

/* Frees what page holds. */
void incremental_page_release(struct incremental_page *page);

/* Takes what incremental_page_write wrote so far (out, borrowed); returns
 * 0 to go on (out emptied or not, as it chooses) or a negative COMB_E*. */
typedef int (*page_flush_fn)(void *ctx, struct comb_buf *out);

/*
 * Writes page (status 200) as the answer object of PROTOCOL.md section 8,
 * {"changes":[...],"cursor":...,"more":...} ({"changes":[...]} for known
 * ids), after what out holds, the upserts' bytes read where page->bytes
 * says a batch at a time. When flush is not NULL it is called whenever out
 * holds at least chunk bytes, and at the end. Returns 0, or a negative
 * COMB_E* with a CLOSED reason in why (COMB_ETOOBIG: out's maximum was
 * passed; a page of fewer items may fit).
 */
int incremental_page_write(struct relay *relay, const struct incremental_page *page,
			   struct comb_buf *out, size_t chunk, page_flush_fn flush,
			   void *ctx, char *why, size_t whylen);

/* Takes one stored event's bytes (raw, len: borrowed for the call);
 * returns 0 to go on, or a negative COMB_E* (with a CLOSED message in
 * why, unless COMB_EIO) to stop. */
typedef int (*event_bytes_fn)(void *ctx, const char *raw, size_t len,
			      char *why, size_t whylen);

/*
 * Sets *src for the misses of an answer whose events were chosen on
 * req->db, to be read once req->db is given back: routed at the position
 * req->db's server has replayed by now (at least what the choosing
 * statement saw) when it is a standby, else the primary's pool (which
 * holds every event).
 */
void read_misses_source(struct request *req, struct event_source *src);

/* read_misses_source for events chosen on the connection of lease (still
 * held). */
void read_misses_source_of(struct relay *relay, const struct comb_read_lease *lease,
			   struct event_source *src);

/*
 * Hands the bytes of the stored events seqs[0..n) to emit, in that order,
 * fetching them a batch at a time from the revision cache (revcache.h)
 * and, for a batch's misses, with one statement whose answers the cache
 * then keeps (event_bytes.c), on a connection where src says: a held one
 * (a caller that holds a connection anyway), else one borrowed and given
 * back before emit runs, so none is held while a client reads. For
 * answers decided in one statement and sent afterwards: stored bytes
 * never change. Returns 0, what emit returned, or a negative COMB_E* with
 * the CLOSED message in why.
 */
int read_events_from(struct relay *relay, const struct event_source *src,
		     const int64_t *seqs, size_t n, event_bytes_fn emit,
		     void *ctx, char *why, size_t whylen);

/* A statement for comb_db_pool_warm: it readies a new connection for
 * incremental reads and plain filters of one channel (incremental.c). */
extern const char read_warm_sql[];

#endif
