/*
 * The kind-45010 write path (PROTOCOL.md sections 5 and 10): the envelope,
 * idempotent resubmission of an accepted id, freshness, then one short
 * transaction that serializes on (community, d), checks permission where
 * the artifact lives, identity and prev, the lifecycle rules and the root
 * anchor, and stores the revision with its head, ledger and tag rows (and,
 * for a move, the removal marker in the source channel).
 *
 * Every denial about a non-create's current home is the one answer
 * `conflict: artifact head unavailable`, given before anything else about
 * the head is compared, so that a missing artifact and one in a channel
 * the signer cannot write are indistinguishable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access.h"
#include "artifact.h"
#include "artifact_envelope.h"
#include "artifact_int.h"
#include "comb/error.h"
#include "comb/log.h"

#define HEAD_UNAVAILABLE "conflict: artifact head unavailable"

/* Outcomes of the transactional part. */
enum outcome {
	OUTCOME_COMMIT = 0,    /* stored: commit and accept */
	OUTCOME_REFUSED = 1,   /* out holds the refusal: roll back */
	OUTCOME_DUPLICATE = 2, /* accepted meanwhile: roll back, accept */
};

/* The current head of an artifact as the rules compare it. */
struct head {
	bool exists;
	char revision_id[65];
	char channel_id[37];
	char type[160];
	char creator[65];
	bool deleted;
	char root[65];          /* "" when none */
};

/* Runs a statement with text parameters; NULL (logged) on failure. */
static PGresult *run(struct writer *w, const char *sql, int n,
		     const char *const *params, ExecStatusType want)
{
	PGresult *res = PQexecParams(w->db, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != want) {
		comb_warn("artifact statement failed: %s", PQresultErrorMessage(res));
		PQclear(res);
		return NULL;
	}
	return res;
}

int artifact_lock(struct writer *w, const char *d)
{
	const char *params[2] = {w->community->id_text, d};
	PGresult *res = run(w,
		"SELECT pg_advisory_xact_lock(hashtextextended('comb.artifact:' || $1 || ':' || $2, 0))",
		2, params, PGRES_TUPLES_OK);

	if (!res)
		return COMB_EUNAVAIL;
	PQclear(res);
	return 0;
}

int artifact_store_marker(struct writer *w, json_t *tags, int64_t created_at,
			  const char *channel_id, char id_out[65])
{
	struct comb_event marker = {
		.created_at = created_at,
		.kind = 45011,
		.tags = tags,
		.content = (char *)"",
		.content_len = 0,
	};
	bool inserted;
	int rc;

	if (comb_event_sign(&marker, w->relay->secret_key))
		return COMB_ENOMEM;
	rc = write_store_event(w, &marker, channel_id, &inserted);
	if (rc == 0)
		memcpy(id_out, marker.id, 65);
	return rc;
}

/* 1 when id is in the ledger, 0 when not, COMB_EUNAVAIL on failure. */
static int ledger_has(struct writer *w, const char *id)
{
	const char *params[2] = {w->community->id_text, id};
	PGresult *res = run(w,
		"SELECT 1 FROM artifact_revisions WHERE community_id = $1 AND id = $2",
		2, params, PGRES_TUPLES_OK);
	int found;

	if (!res)
		return COMB_EUNAVAIL;
	found = PQntuples(res) > 0;
	PQclear(res);
	return found;
}

static void copy_field(char *dst, size_t dstlen, PGresult *res, int col)
{
	snprintf(dst, dstlen, "%s", PQgetvalue(res, 0, col));
}

/* Reads the head of d, locked for the rest of the transaction. */
static int load_head(struct writer *w, const char *d, struct head *out)
{
	const char *params[2] = {w->community->id_text, d};
	PGresult *res = run(w,
		"SELECT revision_id, channel_id, type, creator, deleted, coalesce(root, '')"
		" FROM artifact_heads WHERE community_id = $1 AND d = $2::uuid FOR UPDATE",
		2, params, PGRES_TUPLES_OK);

	memset(out, 0, sizeof(*out));
	if (!res)
		return COMB_EUNAVAIL;
	if (PQntuples(res) == 1) {
		out->exists = true;
		copy_field(out->revision_id, sizeof(out->revision_id), res, 0);
		copy_field(out->channel_id, sizeof(out->channel_id), res, 1);
		copy_field(out->type, sizeof(out->type), res, 2);
		copy_field(out->creator, sizeof(out->creator), res, 3);
		out->deleted = PQgetvalue(res, 0, 4)[0] == 't';
		copy_field(out->root, sizeof(out->root), res, 5);
	}
	PQclear(res);
	return 0;
}

/* 1 when root is an undeleted, unredacted kind-9 message in channel_id. */
static int root_is_message(struct writer *w, const char *root,
			   const char *channel_id)
{
	const char *params[3] = {w->community->id_text, root, channel_id};
	PGresult *res = run(w,
		"SELECT 1 FROM events WHERE community_id = $1 AND id = $2 AND kind = 9"
		" AND channel_id = $3::uuid AND NOT deleted AND NOT redacted",
		3, params, PGRES_TUPLES_OK);
	int found;

	if (!res)
		return COMB_EUNAVAIL;
	found = PQntuples(res) > 0;
	PQclear(res);
	return found;
}

/* Whether the signer may write channel_id; <0 on failure. */
static int may_write(struct writer *w, const struct actor *actor,
		     const char *channel_id, struct channel_row *channel)
{
	if (access_load_channel(w->db, w->community, channel_id, actor, true,
				ACCESS_LOCK_SHARE, channel))
		return COMB_EUNAVAIL;
	return access_allows(w->relay, actor, COMB_ACT_WRITE, channel, NULL);
}

/*
 * The rules of a non-create against its head, in the order of section 10.
 * Returns OUTCOME_COMMIT to go on, OUTCOME_REFUSED with out set, or
 * COMB_EUNAVAIL.
 */
static int check_edit(struct writer *w, const struct comb_event *ev,
		      const struct artifact_envelope *env,
		      const struct actor *actor, const struct head *head,
		      struct write_result *out)
{
	struct channel_row home, dest;
	int ok;

	if (!head->exists) {
		write_refuse(out, 409, HEAD_UNAVAILABLE);
		return OUTCOME_REFUSED;
	}
	ok = may_write(w, actor, head->channel_id, &home);
	if (ok < 0)
		return ok;
	if (!ok) {
		write_refuse(out, 409, HEAD_UNAVAILABLE);
		return OUTCOME_REFUSED;
	}
	if (strcmp(env->prev, head->revision_id)) {
		write_refuse(out, 409, "conflict: artifact head changed");
		return OUTCOME_REFUSED;
	}
	if (strcmp(env->type, head->type)) {
		write_refuse(out, 400, "invalid: artifact type is immutable");
		return OUTCOME_REFUSED;
	}
	if ((env->op == ARTIFACT_RESTORE) != head->deleted) {
		write_refuse(out, 400, "invalid: deleted artifacts accept only restore");
		return OUTCOME_REFUSED;
	}
	if ((env->op == ARTIFACT_MOVE) == !strcmp(env->h, head->channel_id)) {
		write_refuse(out, 400, "invalid: only move changes the home channel");
		return OUTCOME_REFUSED;
	}
	if (env->op == ARTIFACT_MOVE) {
		ok = may_write(w, actor, env->h, &dest);
		if (ok < 0)
			return ok;
		if (!ok) {
			write_refuse(out, 403, "restricted: not a channel member");
			return OUTCOME_REFUSED;
		}
	}
	if (env->op == ARTIFACT_DELETE || env->op == ARTIFACT_RESTORE) {
		struct comb_policy_request extra = {
			.actor_is_creator = !strcmp(ev->pubkey, head->creator),
		};

		if (!access_allows(w->relay, actor, COMB_ACT_DELETE_ARTIFACT,
				   &home, &extra)) {
			write_refuse(out, 403,
				     "restricted: only the creator or a channel admin may delete or restore");
			return OUTCOME_REFUSED;
		}
	}
	return OUTCOME_COMMIT;
}

/* The root rule: a new or changed root must be a message in h (for a
 * move, in the destination, whether changed or not); a delete may only
 * repeat the stored root, which it keeps. */
static int check_root(struct writer *w, const struct artifact_envelope *env,
		      const struct head *head, struct write_result *out)
{
	bool check;
	int ok;

	if (!env->root)
		return OUTCOME_COMMIT;
	if (env->op == ARTIFACT_DELETE) {
		if (!strcmp(env->root, head->root))
			return OUTCOME_COMMIT;
		write_refuse(out, 400, "invalid: root must be a message in the home channel");
		return OUTCOME_REFUSED;
	}
	check = env->op == ARTIFACT_CREATE || env->op == ARTIFACT_MOVE ||
		strcmp(env->root, head->root);
	if (!check)
		return OUTCOME_COMMIT;
	ok = root_is_message(w, env->root, env->h);
	if (ok < 0)
		return ok;
	if (!ok) {
		write_refuse(out, 400, "invalid: root must be a message in the home channel");
		return OUTCOME_REFUSED;
	}
	return OUTCOME_COMMIT;
}

/* Replaces the head's tag rows with the (name, first value) pairs of ev. */
static int store_head_tags(struct writer *w, const struct comb_event *ev,
			   const char *d)
{
	const char *params[3] = {w->community->id_text, d, NULL};
	PGresult *res;
	char *tags;
	int rc = 0;

	res = run(w, "DELETE FROM artifact_head_tags WHERE community_id = $1 AND d = $2::uuid",
		  2, params, PGRES_COMMAND_OK);
	if (!res)
		return COMB_EUNAVAIL;
	PQclear(res);
	tags = json_dumps(ev->tags, JSON_COMPACT);
	if (!tags)
		return COMB_ENOMEM;
	params[2] = tags;
	res = run(w,
		"INSERT INTO artifact_head_tags (community_id, d, name, value)"
		" SELECT $1, $2::uuid, t->>0, t->>1 FROM json_array_elements($3::json) t"
		" WHERE json_array_length(t) >= 2 AND t->>0 NOT IN ('d', 'h', 'type')"
		" ON CONFLICT DO NOTHING",
		3, params, PGRES_COMMAND_OK);
	if (!res)
		rc = COMB_EUNAVAIL;
	PQclear(res);
	free(tags);
	return rc;
}

/* For a move: the marker in the source channel and the move record. */
static int store_move(struct writer *w, const struct comb_event *ev,
		      const struct artifact_envelope *env,
		      const struct head *head)
{
	char marker_id[65];
	const char *params[7];
	PGresult *res;
	json_t *tags;
	int rc;

	tags = json_pack("[[ss][ss][ss][ss][ss]]", "ar", "1", "d", env->d,
			 "h", head->channel_id, "reason", "moved",
			 "prev", head->revision_id);
	if (!tags)
		return COMB_ENOMEM;
	rc = artifact_store_marker(w, tags, (int64_t)time(NULL),
				   head->channel_id, marker_id);
	json_decref(tags);
	if (rc)
		return rc;
	params[0] = w->community->id_text;
	params[1] = env->d;
	params[2] = head->channel_id;
	params[3] = env->h;
	params[4] = head->revision_id;
	params[5] = ev->id;
	params[6] = marker_id;
	res = run(w,
		"INSERT INTO artifact_moves (community_id, d, from_channel, to_channel,"
		" replaced_revision, revision_id, marker_id)"
		" VALUES ($1, $2::uuid, $3::uuid, $4::uuid, $5, $6, $7)",
		7, params, PGRES_COMMAND_OK);
	if (!res)
		return COMB_EUNAVAIL;
	PQclear(res);
	return 0;
}

/* Stores the accepted revision: event, ledger row, head and head tags. */
static int store_revision(struct writer *w, const struct comb_event *ev,
			  const struct artifact_envelope *env,
			  const struct head *head)
{
	const char *root = env->op == ARTIFACT_DELETE ?
		(head->root[0] ? head->root : NULL) : env->root;
	const char *params[10];
	char seq[24];
	PGresult *res;
	bool inserted;
	int rc;

	rc = write_store_event(w, ev, env->h, &inserted);
	if (rc)
		return rc;
	params[0] = w->community->id_text;
	params[1] = ev->id;
	params[2] = env->d;
	params[3] = env->h;
	params[4] = env->type;
	params[5] = artifact_op_name(env->op);
	params[6] = env->prev;
	res = run(w,
		"INSERT INTO artifact_revisions (community_id, id, d, seq, channel_id, type, op, prev)"
		" SELECT $1, $2, $3::uuid, e.seq, $4::uuid, $5, $6, $7"
		" FROM events e WHERE e.community_id = $1 AND e.id = $2 RETURNING seq",
		7, params, PGRES_TUPLES_OK);
	if (!res)
		return COMB_EUNAVAIL;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return COMB_EUNAVAIL;
	}
	snprintf(seq, sizeof(seq), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);

	params[0] = w->community->id_text;
	params[1] = env->d;
	params[2] = ev->id;
	params[3] = seq;
	params[4] = env->h;
	params[5] = env->type;
	params[6] = ev->pubkey;
	params[7] = env->op == ARTIFACT_DELETE ? "t" : "f";
	params[8] = root;
	res = run(w,
		"INSERT INTO artifact_heads AS h (community_id, d, revision_id, accepted_seq,"
		" channel_id, type, creator, deleted, root, redacted)"
		" VALUES ($1, $2::uuid, $3, $4, $5::uuid, $6, $7, $8, $9, false)"
		" ON CONFLICT (community_id, d) DO UPDATE SET revision_id = EXCLUDED.revision_id,"
		" accepted_seq = EXCLUDED.accepted_seq, channel_id = EXCLUDED.channel_id,"
		" deleted = EXCLUDED.deleted, root = EXCLUDED.root, redacted = false",
		9, params, PGRES_COMMAND_OK);
	if (!res)
		return COMB_EUNAVAIL;
	PQclear(res);
	rc = store_head_tags(w, ev, env->d);
	if (rc == 0 && env->op == ARTIFACT_MOVE)
		rc = store_move(w, ev, env, head);
	return rc;
}

/* Share-locks channel_id's row (nothing when it does not exist). */
static int lock_channel(struct writer *w, const char *channel_id)
{
	const char *params[2] = {w->community->id_text, channel_id};
	PGresult *res = run(w,
		"SELECT 1 FROM channels WHERE community_id = $1 AND id = $2::uuid FOR SHARE",
		2, params, PGRES_TUPLES_OK);

	if (!res)
		return COMB_EUNAVAIL;
	PQclear(res);
	return 0;
}

/* The home of d as last committed, without locking; "" when none. */
static int peek_home(struct writer *w, const char *d, char home[37])
{
	const char *params[2] = {w->community->id_text, d};
	PGresult *res = run(w,
		"SELECT channel_id FROM artifact_heads WHERE community_id = $1 AND d = $2::uuid",
		2, params, PGRES_TUPLES_OK);

	if (!res)
		return COMB_EUNAVAIL;
	snprintf(home, 37, "%s", PQntuples(res) ? PQgetvalue(res, 0, 0) : "");
	PQclear(res);
	return 0;
}

/*
 * A write that brings an artifact into a channel or takes it out (create,
 * move) share-locks the channel rows first, so that against membership and
 * policy changes (which lock them FOR UPDATE) xid order is commit order
 * (see migrations/0004_incremental.sql). The locks are taken before the
 * artifact lock, in the order moderation takes its own (channel, then
 * artifact), so the two never wait on each other in a cycle. A move's
 * source is read before the artifact lock and checked after it.
 */
static int lock_homes(struct writer *w, const struct artifact_envelope *env,
		      char source[37])
{
	int rc;

	source[0] = '\0';
	if (env->op != ARTIFACT_CREATE && env->op != ARTIFACT_MOVE)
		return 0;
	if (env->op == ARTIFACT_MOVE) {
		rc = peek_home(w, env->d, source);
		if (rc)
			return rc;
		if (source[0] && strcmp(source, env->h) < 0) {
			rc = lock_channel(w, source);
			if (rc)
				return rc;
		}
	}
	rc = lock_channel(w, env->h);
	if (rc == 0 && source[0] && strcmp(source, env->h) > 0)
		rc = lock_channel(w, source);
	return rc;
}

/* Everything between BEGIN and COMMIT. */
static int apply(struct writer *w, const struct comb_event *ev,
		 const struct artifact_envelope *env, struct write_result *out)
{
	struct channel_row target;
	struct actor actor;
	struct head head;
	char source[37];
	int rc;

	rc = lock_homes(w, env, source);
	if (rc)
		return rc;
	rc = artifact_lock(w, env->d);
	if (rc)
		return rc;
	/* A concurrent copy of this very event may have won the lock. */
	rc = ledger_has(w, ev->id);
	if (rc)
		return rc < 0 ? rc : OUTCOME_DUPLICATE;
	if (access_load_actor(w->db, w->community, ev->pubkey, &actor) ||
	    load_head(w, env->d, &head))
		return COMB_EUNAVAIL;
	/* Moved meanwhile: lock the source it has now (rare, and a cycle
	 * with moderation would only cost this write a retry). */
	if (env->op == ARTIFACT_MOVE && head.exists &&
	    strcmp(head.channel_id, source) && lock_channel(w, head.channel_id))
		return COMB_EUNAVAIL;
	if (env->op == ARTIFACT_CREATE) {
		rc = may_write(w, &actor, env->h, &target);
		if (rc < 0)
			return rc;
		if (!rc) {
			write_refuse(out, 403, "restricted: not a channel member");
			return OUTCOME_REFUSED;
		}
		if (head.exists) {
			write_refuse(out, 409, "conflict: artifact identity is taken");
			return OUTCOME_REFUSED;
		}
	} else {
		rc = check_edit(w, ev, env, &actor, &head, out);
		if (rc)
			return rc;
	}
	rc = check_root(w, env, &head, out);
	if (rc)
		return rc;
	rc = store_revision(w, ev, env, &head);
	return rc ? rc : OUTCOME_COMMIT;
}

void write_artifact(struct writer *w, const struct comb_event *ev,
		    struct write_result *out)
{
	struct artifact_envelope env;
	char err[256];
	int rc;

	if (artifact_envelope_check(ev, &env, err, sizeof(err))) {
		write_refuse(out, 400, "invalid: %s", err);
		return;
	}
	rc = ledger_has(w, ev->id);
	if (rc < 0) {
		write_db_failed(w, out);
		return;
	}
	if (rc)
		return; /* accepted before: accepted again, nothing changes */
	if (!write_is_fresh(w, ev)) {
		write_refuse(out, 400, "invalid: created_at is too far from the relay's clock");
		return;
	}
	if (!write_exec(w, "BEGIN")) {
		write_db_failed(w, out);
		return;
	}
	rc = apply(w, ev, &env, out);
	if (rc < 0) {
		write_db_failed(w, out);
		return;
	}
	if (rc == OUTCOME_COMMIT) {
		if (!write_exec(w, "COMMIT"))
			write_db_failed(w, out);
		return;
	}
	if (!write_exec(w, "ROLLBACK")) {
		write_db_failed(w, out);
		return;
	}
	if (rc == OUTCOME_DUPLICATE) {
		out->status = 200;
		out->message[0] = '\0';
	}
}
