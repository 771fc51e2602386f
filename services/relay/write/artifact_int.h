/*
 * Internals shared by the artifact files (artifact_write.c,
 * artifact_redact.c): the per-artifact write lock and relay-signed
 * kind-45011 removal markers.
 */
#ifndef COMB_ARTIFACT_INT_H
#define COMB_ARTIFACT_INT_H

#include <jansson.h>
#include <stdint.h>

#include "write.h"

/*
 * Takes the transaction-scoped lock that serializes every write on artifact
 * d of w's community (creates of a not yet existing d included): the lock
 * comb_artifact_write (migrations/0002_artifacts.sql) takes for the write
 * path. Must run inside the caller's transaction and before the head is
 * read. Returns 0 or COMB_EUNAVAIL.
 */
int artifact_lock(struct writer *w, const char *d);

/*
 * Signs a kind-45011 marker with the relay key (empty content, created_at,
 * tags borrowed) and stores it in channel_id inside the caller's
 * transaction. Writes its id into id_out. Returns 0, COMB_ENOMEM or
 * COMB_EUNAVAIL.
 */
int artifact_store_marker(struct writer *w, json_t *tags, int64_t created_at,
			  const char *channel_id, char id_out[65]);

#endif
