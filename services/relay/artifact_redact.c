/*
 * Redaction of artifact revisions (kind 9005 naming a kind-45010 event):
 * the relay-signed "redacted" marker that is served in the revision's
 * place, and the head stamp when the current revision is redacted.
 */
#include "artifact.h"
#include "comb/error.h"

int artifact_redact(struct writer *w, const char *target_id,
		    const struct comb_event *redaction)
{
	(void)w;
	(void)target_id;
	(void)redaction;
	return COMB_EUNAVAIL;
}
