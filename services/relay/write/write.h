/*
 * The write path shared by POST /events and WebSocket EVENT: one parsed,
 * verified event in, one answer (status and NIP-01 OK message) out. Each
 * kind's handler runs one short transaction on the borrowed connection.
 */
#ifndef COMB_WRITER_H
#define COMB_WRITER_H

#include <libpq-fe.h>
#include <stdbool.h>

#include "comb/event.h"
#include "relay.h"

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

/* Applies ev (parsed and verified by the caller) and fills out. */
void write_event(struct writer *w, const struct comb_event *ev,
		 struct write_result *out);

/* Sets out to a refusal with status and a formatted message. */
void write_refuse(struct write_result *out, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Sets out to 503 and marks the connection when it was lost; use after a
 * failed statement. Rolls back any open transaction. */
void write_db_failed(struct writer *w, struct write_result *out);

/* True when created_at is within the configured window of now. */
bool write_is_fresh(const struct writer *w, const struct comb_event *ev);

/* Runs a statement without parameters; false on failure. */
bool write_exec(struct writer *w, const char *sql);

/*
 * Inserts ev into events (and its single-letter tags into event_tags)
 * inside the caller's transaction, with channel_id (NULL for none).
 * *inserted is false when the community already had this event id.
 * Returns 0, or COMB_EUNAVAIL / COMB_ENOMEM.
 */
int write_store_event(struct writer *w, const struct comb_event *ev,
		      const char *channel_id, bool *inserted);

/* Kind handlers, each in its own file. */
void write_chat(struct writer *w, const struct comb_event *ev,
		struct write_result *out);        /* kind 9 (chat.c) */
void write_deletion(struct writer *w, const struct comb_event *ev,
		    struct write_result *out);    /* kind 5 (chat.c) */
void write_moderation(struct writer *w, const struct comb_event *ev,
		      struct write_result *out);  /* 9000-9022 (moderation.c) */
void write_ephemeral(struct writer *w, const struct comb_event *ev,
		     struct write_result *out);   /* 20000-29999 (ephemeral.c) */

#endif
