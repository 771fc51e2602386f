/*
 * write/: the write path shared by POST /events and WebSocket EVENT
 * (PROTOCOL.md section 3): one parsed, verified event in, one answer
 * (status and NIP-01 OK message) out. The dispatcher (events.c) checks the
 * author and the rate limit (rate_limit.c) and hands the event to its
 * kind's writer (chat.c, moderation.c, ephemeral.c, artifact_write.c and
 * artifact_redact.c), each running one short transaction on the borrowed
 * connection with the helpers of writer.c. The only public header of the
 * folder.
 */
#ifndef COMB_WRITE_H
#define COMB_WRITE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "comb/event.h"
#include "relay.h"
#include "request/request.h"

struct write_result {
	int status;         /* HTTP status: 200 when accepted */
	char message[512];  /* "" when accepted, else "<prefix>: <text>" */
};

struct writer {
	struct relay *relay;
	PGconn *db;                        /* borrowed */
	const struct community *community;
	const char *auth_pubkey;           /* the authenticated signer */
	bool db_broken;                    /* set when the connection failed */
	/* Inside a group-commit batch (batch.c): the write runs in the
	 * savepoint "w" of the batch's transaction, so the writers' BEGIN and
	 * COMMIT do nothing and their ROLLBACK rolls back to the savepoint. */
	bool batched;
};

/* Applies ev (parsed and verified by the caller) and fills out. Live
 * delivery learns of every event the write committed. */
void write_event(struct writer *w, const struct comb_event *ev,
		 struct write_result *out);

/*
 * batch.c, group commit: writes handed over with write_submit wait in one
 * queue per node; batcher threads (half the database pool, at least one)
 * each take up to COMB_WRITE_BATCH_MAX of them in arrival order and
 * commit them in one transaction, each write (or each run of
 * consecutive writes of one kind) in a savepoint of its own, so that
 * every write keeps the rules of PROTOCOL.md section 5 as if the batch
 * ran one write after another. Writes that need a transaction of
 * their own (moves, deletions, moderation, ephemeral events) run alone.
 * Writes with the same `order` run in submission order and never in two
 * batches at once.
 */

/* Called exactly once per submitted write, on a batcher thread (or on the
 * submitting thread when the write was refused before the database), once
 * the write's transaction ended: res says what to answer. more is true
 * when the answer of another write with the same `order` follows at once
 * on the same thread (one batch's answers), so that the answers can leave
 * together; the last of them has it false. */
typedef void (*write_done_fn)(void *ctx, const struct comb_event *ev,
			      const struct write_result *res, bool more);

/* Starts the batcher threads. Returns 0 or COMB_EIO with errbuf set. */
int write_batch_start(struct relay *relay, char *errbuf, size_t errlen);

/* Runs what is queued, then stops the batcher threads. */
void write_batch_stop(void);

/*
 * Hands *ev (parsed and verified; moved: the caller must not release it)
 * to the group commit for community c, authenticated as auth_pubkey, from
 * client address addr (all three copied). Blocks while addr holds
 * COMB_WRITE_INFLIGHT_PER_IP of the node's writes, then while the node
 * holds COMB_WRITE_INFLIGHT_PER_NODE, so that one address leaves room in
 * the node's queue for the others. done(ctx, ...) follows exactly once.
 */
void write_submit(struct relay *relay, const struct community *c,
		  const char *auth_pubkey, const char *addr, struct comb_event *ev,
		  const void *order, write_done_fn done, void *ctx);

/* Sets out to a refusal with status and a formatted message. */
void write_refuse(struct write_result *out, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Answers POST /events for the authenticated request req: parses and
 * verifies the body, writes it and sends exactly one answer. */
void handle_events(struct request *req);

#endif
