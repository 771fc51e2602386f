/*
 * Artifacts (kind 45010, PROTOCOL.md section 5): the write path, removal
 * markers, redaction of revisions and the current/history/head queries.
 */
#ifndef COMB_ARTIFACT_H
#define COMB_ARTIFACT_H

#include <jansson.h>
#include <stdbool.h>

#include "comb/event.h"
#include "http.h"
#include "writer.h"

/* Applies a kind-45010 event with every rule of section 5 (artifact_write.c). */
void write_artifact(struct writer *w, const struct comb_event *ev,
		    struct write_result *out);

/*
 * Redacts the artifact revision target_id (a stored kind-45010 event of
 * this community; the caller checked the redactor's permission in its
 * channel) inside the caller's open transaction: withholds its title,
 * content and client tags everywhere and stamps the head when it is the
 * current revision. redaction is the kind-9005 event (its created_at is
 * the marker's). Redacting an already redacted revision changes nothing.
 * Returns 0, COMB_ENOTFOUND when target_id is not an accepted revision of
 * this community, COMB_ENOMEM or COMB_EUNAVAIL (artifact_redact.c).
 */
int artifact_redact(struct writer *w, const char *target_id,
		    const struct comb_event *redaction);

/*
 * Answers POST /query (count false) or POST /count (count true) for a
 * filter object that has an "artifact" key (borrowed); sends exactly one
 * answer (artifact_query.c).
 */
void artifact_query(struct request *req, json_t *filter, bool count);

#endif
