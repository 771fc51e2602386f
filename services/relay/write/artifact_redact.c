/*
 * Redaction of artifact revisions (a kind 9005 naming a kind-45010
 * revision, PROTOCOL.md section 5): the revision is withheld everywhere and
 * a relay-signed kind-45011 "redacted" marker, stored once so that every
 * read serves the same bytes, is served in its place. Which revision is
 * current never changes; when the redacted revision is current, the head
 * is marked and stamped and its tag rows are dropped, so that no predicate
 * can match the withheld tags.
 */
#include <stdio.h>
#include <string.h>

#include "artifact_int.h"
#include "comb/error.h"
#include "comb/log.h"
#include "write_int.h"

/* What the marker repeats of the redacted revision. */
struct revision {
	char d[37];
	char channel_id[37];
	char type[160];
	char op[16];
	char prev[65];   /* "" for a create */
	bool redacted;
};

static PGresult *run(struct writer *w, const char *sql, int n,
		     const char *const *params, ExecStatusType want)
{
	PGresult *res = PQexecParams(w->db, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != want) {
		comb_warn("artifact redaction failed: %s", PQresultErrorMessage(res));
		PQclear(res);
		return NULL;
	}
	return res;
}

/* Reads revision id, its event's row (migration 0025), locked with lock;
 * COMB_ENOTFOUND when the community never accepted such a revision. */
static int load_revision(struct writer *w, const char *id, bool lock,
			 struct revision *out)
{
	const char *params[2] = {w->community->id_text, id};
	PGresult *res = run(w, lock ?
		"SELECT d, channel_id, type, op, coalesce(prev, ''), redacted"
		" FROM events WHERE community_id = $1 AND id = $2 AND d IS NOT NULL FOR UPDATE" :
		"SELECT d, channel_id, type, op, coalesce(prev, ''), redacted"
		" FROM events WHERE community_id = $1 AND id = $2 AND d IS NOT NULL",
		2, params, PGRES_TUPLES_OK);
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!res)
		return COMB_EUNAVAIL;
	if (PQntuples(res) != 1) {
		rc = COMB_ENOTFOUND;
	} else {
		snprintf(out->d, sizeof(out->d), "%s", PQgetvalue(res, 0, 0));
		snprintf(out->channel_id, sizeof(out->channel_id), "%s", PQgetvalue(res, 0, 1));
		snprintf(out->type, sizeof(out->type), "%s", PQgetvalue(res, 0, 2));
		snprintf(out->op, sizeof(out->op), "%s", PQgetvalue(res, 0, 3));
		snprintf(out->prev, sizeof(out->prev), "%s", PQgetvalue(res, 0, 4));
		out->redacted = PQgetvalue(res, 0, 5)[0] == 't';
	}
	PQclear(res);
	return rc;
}

/* Signs and stores the marker served in place of target_id. */
static int store_marker(struct writer *w, const char *target_id,
			const struct revision *rev, int64_t created_at,
			char marker_id[65])
{
	json_t *tags;
	int rc;

	tags = json_pack("[[ss][ss][ss][ss][ss]]", "ar", "1", "d", rev->d,
			 "h", rev->channel_id, "type", rev->type, "op", rev->op);
	if (!tags)
		return COMB_ENOMEM;
	if ((rev->prev[0] &&
	     json_array_append_new(tags, json_pack("[ss]", "prev", rev->prev))) ||
	    json_array_append_new(tags, json_pack("[ss]", "reason", "redacted")) ||
	    json_array_append_new(tags, json_pack("[ss]", "e", target_id))) {
		json_decref(tags);
		return COMB_ENOMEM;
	}
	rc = artifact_store_marker(w, tags, created_at, rev->channel_id, marker_id);
	json_decref(tags);
	return rc;
}

/* Records the redaction and withholds the revision (and the head's tags
 * when it is current). */
static int record(struct writer *w, const char *target_id,
		  const struct revision *rev, const struct comb_event *redaction,
		  const char *marker_id)
{
	char redacted_at[24];
	const char *params[7];
	PGresult *res;

	snprintf(redacted_at, sizeof(redacted_at), "%lld",
		 (long long)redaction->created_at);
	params[0] = w->community->id_text;
	params[1] = target_id;
	params[2] = rev->d;
	params[3] = rev->channel_id;
	params[4] = redaction->id;
	params[5] = marker_id;
	params[6] = redacted_at;
	res = run(w,
		"INSERT INTO artifact_redactions (community_id, revision_id, d, channel_id,"
		" redaction_id, marker_id, marker_seq, redacted_at)"
		" SELECT $1, $2, $3::uuid, $4::uuid, $5, $6, e.seq, $7"
		" FROM events e WHERE e.community_id = $1 AND e.id = $6",
		7, params, PGRES_COMMAND_OK);
	if (!res)
		return COMB_EUNAVAIL;
	PQclear(res);
	res = run(w,
		"UPDATE events SET redacted = true WHERE community_id = $1 AND id = $2",
		2, params, PGRES_COMMAND_OK);
	if (!res)
		return COMB_EUNAVAIL;
	PQclear(res);
	/* The head's tags (migration 0018) go with the current revision. */
	res = run(w,
		"UPDATE artifact_heads SET redacted = true, tags = '{}'"
		" WHERE community_id = $1 AND d = $3::uuid AND revision_id = $2",
		3, params, PGRES_COMMAND_OK);
	if (!res)
		return COMB_EUNAVAIL;
	PQclear(res);
	return 0;
}

int artifact_redact(struct writer *w, const char *target_id,
		    const struct comb_event *redaction)
{
	struct revision rev;
	char marker_id[65];
	int rc;

	rc = load_revision(w, target_id, false, &rev);
	if (rc)
		return rc;
	/* d never changes, so it can be read before the artifact lock; the
	 * redacted flag is read again under it. */
	rc = artifact_lock(w, rev.d);
	if (rc)
		return rc;
	rc = load_revision(w, target_id, true, &rev);
	if (rc)
		return rc;
	if (rev.redacted)
		return 0;
	rc = store_marker(w, target_id, &rev, redaction->created_at, marker_id);
	if (rc)
		return rc;
	return record(w, target_id, &rev, redaction, marker_id);
}
