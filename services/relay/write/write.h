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

#include "comb/event.h"
#include "relay.h"
#include "request.h"

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
};

/* Applies ev (parsed and verified by the caller) and fills out. Live
 * delivery learns of every event the write committed. */
void write_event(struct writer *w, const struct comb_event *ev,
		 struct write_result *out);

/* Sets out to a refusal with status and a formatted message. */
void write_refuse(struct write_result *out, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Answers POST /events for the authenticated request req: parses and
 * verifies the body, writes it and sends exactly one answer. */
void handle_events(struct request *req);

#endif
