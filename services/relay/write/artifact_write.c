/*
 * The kind-45010 write path (PROTOCOL.md sections 5 and 10): the envelope
 * and the signer's permissions as the policy plugins decide them are
 * worked out here, then one call of comb_artifact_write
 * (migrations/0002_artifacts.sql) does the rest in one round trip:
 * idempotent resubmission of an accepted id, freshness, the lock on
 * (community, d), permission where the artifact lives, identity and prev,
 * the lifecycle rules and the root anchor, and the revision (its event's
 * row) with its head and tag rows. A move also needs the relay-signed
 * removal marker in the source channel, so it runs in an explicit
 * transaction that stores the marker and the move record after the call. In a
 * group-commit batch, a run of writes that are not moves is one call of
 * comb_artifact_write_run (migrations/0006_write_runs.sql and
 * 0007_set_based_writes.sql), which stores each stretch of creates of
 * distinct d with one statement per table and calls comb_artifact_write
 * for every other write in turn (write_artifact_run).
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

#include "access/access.h"
#include "artifact_int.h"
#include "comb/buf.h"
#include "comb/db.h"
#include "comb/error.h"
#include "comb/log.h"
#include "feed/feed.h"
#include "proto/proto.h"
#include "write_int.h"

/* The outcomes of comb_artifact_write, numbered as there. */
enum outcome {
	OUTCOME_STORED = 0,
	OUTCOME_ACCEPTED_BEFORE = 1,  /* nothing changes; accepted again */
	OUTCOME_DUPLICATE = 2,        /* a copy won the lock: accepted */
	OUTCOME_STALE = 3,
	OUTCOME_NOT_MEMBER = 4,
	OUTCOME_IDENTITY_TAKEN = 5,
	OUTCOME_HEAD_UNAVAILABLE = 6,
	OUTCOME_HEAD_CHANGED = 7,
	OUTCOME_TYPE_IMMUTABLE = 8,
	OUTCOME_DELETED = 9,
	OUTCOME_HOME_CHANGED = 10,
	OUTCOME_DELETE_DENIED = 11,
	OUTCOME_ROOT = 12,
	OUTCOME_COUNT = 13,
};

/* The answer to each refusal. */
static const struct {
	int status;
	const char *message;
} refusals[OUTCOME_COUNT] = {
	[OUTCOME_STALE] = {400, "invalid: created_at is too far from the relay's clock"},
	[OUTCOME_NOT_MEMBER] = {403, "restricted: not a channel member"},
	[OUTCOME_IDENTITY_TAKEN] = {409, "conflict: artifact identity is taken"},
	[OUTCOME_HEAD_UNAVAILABLE] = {409, "conflict: artifact head unavailable"},
	[OUTCOME_HEAD_CHANGED] = {409, "conflict: artifact head changed"},
	[OUTCOME_TYPE_IMMUTABLE] = {400, "invalid: artifact type is immutable"},
	[OUTCOME_DELETED] = {400, "invalid: deleted artifacts accept only restore"},
	[OUTCOME_HOME_CHANGED] = {400, "invalid: only move changes the home channel"},
	[OUTCOME_DELETE_DENIED] = {403, "restricted: only the creator or a channel admin may delete or restore"},
	[OUTCOME_ROOT] = {400, "invalid: root must be a message in the home channel"},
};

/* What comb_artifact_write answered. */
struct written {
	int outcome;
	bool inserted;          /* the revision's event was new */
	char seq[24];           /* the new event's seq, or "" */
	char source[37];        /* a move: the home it left */
	char replaced[65];      /* a move: the revision it replaced */
};

int artifact_lock(struct writer *w, const char *d)
{
	const char *params[2] = {w->community->id_text, d};
	PGresult *res = PQexecParams(w->db,
		"SELECT pg_advisory_xact_lock(hashtextextended('comb.artifact:' || $1 || ':' || $2, 0))",
		2, NULL, params, NULL, NULL, 0);
	int rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		comb_warn("artifact lock failed: %s", PQresultErrorMessage(res));
		rc = COMB_EUNAVAIL;
	}
	PQclear(res);
	return rc;
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

/* For a move: the marker in the source channel and the move record. */
static int store_move(struct writer *w, const struct comb_event *ev,
		      const struct artifact_envelope *env,
		      const struct written *wr)
{
	char marker_id[65];
	const char *params[7];
	PGresult *res;
	json_t *tags;
	int rc;

	tags = json_pack("[[ss][ss][ss][ss][ss]]", "ar", "1", "d", env->d,
			 "h", wr->source, "reason", "moved",
			 "prev", wr->replaced);
	if (!tags)
		return COMB_ENOMEM;
	rc = artifact_store_marker(w, tags, (int64_t)time(NULL), wr->source,
				   marker_id);
	json_decref(tags);
	if (rc)
		return rc;
	params[0] = w->community->id_text;
	params[1] = env->d;
	params[2] = wr->source;
	params[3] = env->h;
	params[4] = wr->replaced;
	params[5] = ev->id;
	params[6] = marker_id;
	res = PQexecParams(w->db,
		"INSERT INTO artifact_moves (community_id, d, from_channel, to_channel,"
		" replaced_revision, revision_id, marker_id)"
		" VALUES ($1, $2::uuid, $3::uuid, $4::uuid, $5, $6, $7)",
		7, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		comb_warn("storing a move failed: %s", PQresultErrorMessage(res));
		rc = COMB_EUNAVAIL;
	}
	PQclear(res);
	return rc;
}

/* The parameters of comb_artifact_write for one write, as text. */
enum {
	ARG_COUNT = 15,
};
struct write_args {
	struct event_params p;
	char write_keys[ACCESS_ACTION_KEYS_LITERAL];
	char delete_keys[ACCESS_ACTION_KEYS_LITERAL];
	const char *v[ARG_COUNT];  /* borrowed from ev, env and the above */
};

/* Fills a for ev with the plugins' keys; returns 0 or COMB_ENOMEM.
 * Release a with write_event_params_release(&a->p) either way. */
static int write_args_fill(const struct writer *w, const struct comb_event *ev,
			   const struct artifact_envelope *env,
			   struct write_args *a)
{
	bool deletes = env->op == ARTIFACT_DELETE || env->op == ARTIFACT_RESTORE;

	if (write_event_params(w, ev, &a->p))
		return COMB_ENOMEM;
	access_action_keys_literal(w->relay, ev->pubkey, COMB_ACT_WRITE,
				   a->write_keys);
	if (deletes)
		access_action_keys_literal(w->relay, ev->pubkey,
					   COMB_ACT_DELETE_ARTIFACT, a->delete_keys);
	memcpy(a->v, (const char *[ARG_COUNT]){
		w->community->id_text, ev->id, ev->pubkey, a->p.created_at,
		a->p.raw.data, a->p.tags, env->d, env->h, env->type,
		artifact_op_name(env->op), env->prev, env->root,
		write_is_fresh(w, ev) ? "t" : "f", a->write_keys,
		deletes ? a->delete_keys : NULL,
	}, sizeof(a->v));
	return 0;
}

/*
 * Calls comb_artifact_write for ev with the plugins' keys and fills wr;
 * keeps a new event's bytes in the revision cache.
 * Returns 0, COMB_ENOMEM or COMB_EUNAVAIL.
 */
static int call_write(struct writer *w, const struct comb_event *ev,
		      const struct artifact_envelope *env, struct written *wr)
{
	static struct comb_db_stmt write = COMB_DB_STMT(
		"SELECT outcome, inserted, coalesce(source::text, ''),"
		" coalesce(replaced, ''), CASE WHEN outcome = 0 AND inserted"
		"  THEN comb_written_seq($1::bigint, $2)::text ELSE '' END"
		" FROM comb_artifact_write($1::bigint, $2, $3, $4::bigint, $5,"
		" $6::json, $7::uuid, $8::uuid, $9, $10, $11, $12, $13::boolean,"
		" $14::integer[], $15::integer[])", ARG_COUNT);
	struct write_args a;
	PGresult *res;
	int rc = write_args_fill(w, ev, env, &a);

	if (rc)
		goto out;
	res = comb_db_exec_stmt(w->relay->db, w->db, &write, a.v);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		comb_warn("artifact write failed: %s", PQresultErrorMessage(res));
		rc = COMB_EUNAVAIL;
	} else {
		wr->outcome = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
		wr->inserted = PQgetvalue(res, 0, 1)[0] == 't';
		snprintf(wr->source, sizeof(wr->source), "%s", PQgetvalue(res, 0, 2));
		snprintf(wr->replaced, sizeof(wr->replaced), "%s",
			 PQgetvalue(res, 0, 3));
		snprintf(wr->seq, sizeof(wr->seq), "%s", PQgetvalue(res, 0, 4));
		if (wr->seq[0])
			write_keep_stored(w, wr->seq, &a.p.raw);
	}
	PQclear(res);
out:
	write_event_params_release(&a.p);
	return rc;
}

/*
 * Sets out from the outcome of a write that is not a move, or from the
 * end of a move's transaction; false for an outcome comb_artifact_write
 * does not give.
 */
static bool answer(const struct written *wr, struct write_result *out)
{
	if (wr->outcome == OUTCOME_STORED ||
	    wr->outcome == OUTCOME_ACCEPTED_BEFORE ||
	    wr->outcome == OUTCOME_DUPLICATE)
		return true;
	if (wr->outcome < 0 || wr->outcome >= OUTCOME_COUNT ||
	    !refusals[wr->outcome].message) {
		comb_warn("artifact write: unknown outcome %d", wr->outcome);
		return false;
	}
	write_refuse(out, refusals[wr->outcome].status, "%s",
		     refusals[wr->outcome].message);
	return true;
}

void write_artifact(struct writer *w, const struct comb_event *ev,
		    struct write_result *out)
{
	struct artifact_envelope env;
	struct written wr;
	char err[256];
	bool move;

	if (artifact_envelope_check(ev, &env, err, sizeof(err))) {
		write_refuse(out, 400, "invalid: %s", err);
		return;
	}
	move = env.op == ARTIFACT_MOVE;
	if (move && !write_exec(w, "BEGIN")) {
		write_db_failed(w, out);
		return;
	}
	if (call_write(w, ev, &env, &wr)) {
		write_db_failed(w, out);
		return;
	}
	if (wr.outcome == OUTCOME_STORED) {
		if (wr.inserted)
			feed_local_stored(w->community, ev, env.h);
		if (move && (store_move(w, ev, &env, &wr) ||
			     !write_exec(w, "COMMIT")))
			write_db_failed(w, out);
		return;
	}
	if (move && !write_exec(w, "ROLLBACK")) {
		write_db_failed(w, out);
		return;
	}
	if (!answer(&wr, out))
		write_db_failed(w, out);
}

/* The writes of a run that reach the database: their envelopes, and the
 * array literals of comb_artifact_write_run's parameters. */
struct run_args {
	size_t *item;                     /* index into the run's items */
	struct artifact_envelope *env;
	struct comb_buf *raw;             /* each write's event bytes */
	struct comb_buf lit[ARG_COUNT];
};

/* Runs the call for the n writes in r; fills wr. */
static int call_write_run(struct writer *w, struct run_args *r, size_t n,
			  struct written *wr)
{
	static struct comb_db_stmt write_run = COMB_DB_STMT(
		"SELECT outcome, inserted, coalesce(seq::text, '')"
		" FROM comb_artifact_write_run("
		"$1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[],"
		" $6::json[], $7::uuid[], $8::uuid[], $9::text[], $10::text[],"
		" $11::text[], $12::text[], $13::boolean[], $14::text[],"
		" $15::text[])", ARG_COUNT);
	const char *params[ARG_COUNT];
	PGresult *res;
	size_t i;
	int k, rc = 0;

	for (k = 0; k < ARG_COUNT; k++) {
		rc = rc ? rc : comb_buf_putc(&r->lit[k], '}');
		params[k] = r->lit[k].data;
	}
	if (rc)
		return COMB_ENOMEM;
	res = comb_db_exec_stmt(w->relay->db, w->db, &write_run, params);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != (int)n) {
		comb_warn("artifact writes failed: %s", PQresultErrorMessage(res));
		rc = COMB_EUNAVAIL;
	}
	for (i = 0; i < n && rc == 0; i++) {
		wr[i].outcome = (int)strtol(PQgetvalue(res, (int)i, 0), NULL, 10);
		wr[i].inserted = PQgetvalue(res, (int)i, 1)[0] == 't';
		snprintf(wr[i].seq, sizeof(wr[i].seq), "%s", PQgetvalue(res, (int)i, 2));
	}
	PQclear(res);
	return rc;
}

int write_artifact_run(struct writer *w, struct write_item *items, size_t n)
{
	/* Each raw event and its tags may double when escaped. */
	size_t max = n * (16 * (size_t)w->relay->cfg.max_message_length + 16384);
	struct run_args r = {
		.item = calloc(n, sizeof(*r.item)),
		.env = calloc(n, sizeof(*r.env)),
		.raw = calloc(n, sizeof(*r.raw)),
	};
	struct written *wr = calloc(n, sizeof(*wr));
	size_t i, called = 0;
	char err[256];
	int k, rc = r.item && r.env && r.raw && wr ? 0 : COMB_ENOMEM;

	for (k = 0; k < ARG_COUNT; k++) {
		comb_buf_init(&r.lit[k], max);
		rc = rc ? rc : comb_buf_putc(&r.lit[k], '{');
	}
	for (i = 0; i < n && rc == 0; i++) {
		struct writer one = *w;
		struct write_args a;

		if (artifact_envelope_check(items[i].ev, &r.env[called], err,
					    sizeof(err))) {
			write_refuse(items[i].out, 400, "invalid: %s", err);
			continue;
		}
		one.community = items[i].community;
		rc = write_args_fill(&one, items[i].ev, &r.env[called], &a);
		for (k = 0; k < ARG_COUNT && rc == 0; k++)
			rc = comb_buf_pg_array_item(&r.lit[k], a.v[k]);
		/* the bytes stay for the revision cache */
		r.raw[called] = a.p.raw;
		comb_buf_init(&a.p.raw, 0);
		write_event_params_release(&a.p);
		r.item[called++] = i;
	}
	if (rc == 0 && called > 0)
		rc = call_write_run(w, &r, called, wr);
	for (i = 0; i < called && rc == 0; i++) {
		if (!answer(&wr[i], items[r.item[i]].out))
			rc = COMB_EUNAVAIL;
	}
	for (i = 0; i < called && rc == 0; i++) {
		bool stored = wr[i].outcome == OUTCOME_STORED && wr[i].inserted;

		if (stored && wr[i].seq[0])
			write_keep_stored(w, wr[i].seq, &r.raw[i]);
		write_item_deliver(&items[r.item[i]], stored, r.env[i].h);
	}
	for (i = 0; i < called; i++)
		comb_buf_release(&r.raw[i]);
	for (k = 0; k < ARG_COUNT; k++)
		comb_buf_release(&r.lit[k]);
	free(r.item);
	free(r.env);
	free(r.raw);
	free(wr);
	return rc;
}
