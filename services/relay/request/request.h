/*
 * One HTTP request as every part of the relay sees it: the context of a
 * civetweb callback (built by http/http.c, read by the route handlers in
 * http/, write/ and read/), and the JSON answers in the shapes of
 * PROTOCOL.md sections 2 and 10 (request.c).
 */
#ifndef COMB_REQUEST_H
#define COMB_REQUEST_H

#include <civetweb.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "relay.h"

struct comb_buf;

enum route {
	ROUTE_NIP11,
	ROUTE_EVENTS,
	ROUTE_QUERY,
	ROUTE_COUNT,
	ROUTE_HEALTHZ,
	ROUTE_READYZ,
	ROUTE_METRICS,
	ROUTE_WEBSOCKET,
	ROUTE_OTHER,
	ROUTE_COUNT_,
};

struct request {
	struct relay *relay;
	struct mg_connection *conn;
	const struct mg_request_info *info;
	enum route route;
	struct timespec start;     /* CLOCK_MONOTONIC, when it was handed over */
	char host[256];            /* Host header lowercased, port removed */
	char host_header[264];     /* Host header as sent */
	char *body;                /* owned; NUL-terminated */
	size_t body_len;
	char pubkey[65];           /* the NIP-98 signer, once authenticated */
	struct community community;
	PGconn *db;                /* borrowed from the pool while handling */
	bool db_broken;
	/* When db was lent by the read router (http_borrow_read): the lease,
	 * whose pool runs db's statements (request_pool). */
	struct comb_read_lease read;
	/* A position the reads of this request must see besides their own
	 * (a cursor's, the reader's writes'): COMB_READ_PRIMARY once a read
	 * failed over (http_read_failed_over); 0 none. */
	comb_lsn read_at_least;
	/* Set by http_read_failed_over: the read is to run again, on the
	 * primary; nothing was sent. */
	bool read_retry;
	int status;                /* the status sent, for metrics */
	/* The verified NIP-98 token, until its use is recorded in the replay
	 * store (http_claim_replay, or the incremental read's admission,
	 * which records it in the same Redis call): its id ("" once recorded,
	 * or without a token) and the unix time its use is kept until. */
	char replay_token[65];
	int64_t replay_expires;
};

/* Sends status with a JSON body (borrowed) and extra headers ("" or lines
 * ending in \r\n). */
void http_send_json(struct request *req, int status, const char *json,
		    const char *extra_headers);

/* Sends {"error": message} with status; 503 and 429 get a Retry-After. */
void http_send_error(struct request *req, int status, const char *message);

/* Sends the error of a failed database step: 503 "error: ..." */
void http_send_unavailable(struct request *req, const char *what);

/*
 * Records the use of req's NIP-98 token in the replay store, once (a
 * no-op without a token or when recorded already). Every handler of an
 * authenticated route calls it before it reads or writes anything.
 * Returns true, or answers as http_refuse_replay does and returns false.
 */
bool http_claim_replay(struct request *req);

/* Answers a failed record of the token's use: 401 `auth-required:
 * authorization already used` for COMB_EREPLAY, else 503 (the replay
 * store cannot say). */
void http_refuse_replay(struct request *req, int rc);

/* Borrows a database connection into req->db; on failure sends 503 and
 * returns false. */
bool http_acquire_db(struct request *req);

/* Gives req->db back to the pool (a no-op without one); every answer
 * does this before its first byte, so no connection waits on a client. */
void http_release_db(struct request *req);

/*
 * Gives req->db back and borrows in its place a connection for a read by
 * req->pubkey that must see position at_least, req->read_at_least and
 * the reader's last acknowledged write (readpos_borrow): a standby's when
 * one has replayed that far in time, else the primary's. On failure sends
 * 503 and returns false.
 */
bool http_borrow_read(struct request *req, comb_lsn at_least);

/*
 * After a statement failed (res, or NULL when the failed call gives
 * none) on req->db: true when req->db is a
 * standby's and the failure is the standby's (its connection was lost, or
 * replay cancelled the statement, SQLSTATE 40001 or 40P01), so that the
 * read runs again on the primary. The connection is then given back
 * (dropped when lost), req->read_retry and req->read_at_least =
 * COMB_READ_PRIMARY are set, and nothing is sent: the caller returns and
 * its route runs the read again. False otherwise: the caller answers.
 */
bool http_read_failed_over(struct request *req, const PGresult *res);

/* The pool req->db is from (its prepared statements are that pool's). */
struct comb_db_pool *request_pool(const struct request *req);

/* Answers 408 and closes the connection: the body did not arrive in
 * time. */
void http_send_timeout(struct request *req);

/*
 * A 200 JSON answer sent as it is produced (chunked transfer encoding),
 * for answers too large to hold: begin sends the headers (giving req->db
 * back first), write sends part of the body as one chunk (it returns 0,
 * COMB_EIO once the client is gone, or COMB_ENOMEM), end finishes the
 * answer, or, when complete is
 * false (the rest could not be produced), closes the connection without
 * the last chunk so that the client sees the answer cut short.
 */
void http_stream_begin(struct request *req);
int http_stream_write(struct request *req, const char *data, size_t len);
void http_stream_end(struct request *req, bool complete);

#endif
