/*
 * Artifact reads (PROTOCOL.md sections 6 and 10): `current`, `history` and
 * `head` over POST /query, and their counts over POST /count. The filter
 * is parsed by proto/artifact_filter.c; here it becomes one SQL statement in
 * which access (the policy plugins' read keys) and every predicate apply
 * before ORDER BY, LIMIT and OFFSET, so that a page is never filtered
 * afterwards. The statement selects only the served events' seqs (a
 * redaction's marker in a redacted revision's place); the answer, a bare
 * JSON array of their stored bytes, is then written as the plain /query's
 * is (read_send_listed): a small one whole, any other streamed a batch of
 * bytes at a time (from the revision cache, the misses on a pooled
 * connection given back before the batch is written), so that a read
 * holds its seq list, one batch and one chunk while the client reads,
 * never the whole answer, a copy of it, or a database connection. Every
 * statement runs under the pool's statement_timeout; running past it
 * answers 503 `error: query budget exceeded`.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/access.h"
#include "comb/error.h"
#include "comb/json.h"
#include "comb/log.h"
#include "proto/proto.h"
#include "read_int.h"
#include "request/request.h"

/* Parameters: 6 fixed, #d, #type and three per other predicate. */
#define MAX_PARAMS (8 + 3 * COMB_MAX_PREDICATES)
#define MAX_SQL 32768

struct statement {
	struct comb_buf sql;
	const char *params[MAX_PARAMS];
	char *owned[MAX_PARAMS];
	int n;
	bool failed;
};

static void stmt_release(struct statement *st)
{
	int i;

	for (i = 0; i < st->n; i++)
		free(st->owned[i]);
	comb_buf_release(&st->sql);
}

static void sql(struct statement *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sql(struct statement *st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (comb_buf_vprintf(&st->sql, fmt, ap))
		st->failed = true;
	va_end(ap);
}

/* Adds a borrowed parameter; returns its number. */
static int param(struct statement *st, const char *value)
{
	if (st->n >= MAX_PARAMS) {
		st->failed = true;
		return 1;
	}
	st->params[st->n] = value;
	st->owned[st->n] = NULL;
	return ++st->n;
}

/* Adds text as a parameter, taking ownership of it (NULL: out of
 * memory); returns its number. */
static int param_owned(struct statement *st, char *text)
{
	if (!text || st->n >= MAX_PARAMS) {
		free(text);
		st->failed = true;
		return 1;
	}
	st->params[st->n] = text;
	st->owned[st->n] = text;
	return ++st->n;
}

/* Adds an integer parameter; returns its number. */
static int param_int(struct statement *st, int value)
{
	char text[16];

	snprintf(text, sizeof(text), "%d", value);
	return param_owned(st, strdup(text));
}

/* values (an array of strings) as a PostgreSQL array literal, or NULL when
 * out of memory. Caller frees. */
static char *array_literal(const json_t *values)
{
	struct comb_buf b;
	size_t i, j;
	int rc = 0;

	comb_buf_init(&b, 2 * COMB_MAX_TAG_BYTES + 4 * COMB_MAX_VALUES + 16);
	rc |= comb_buf_putc(&b, '{');
	for (i = 0; i < json_array_size(values); i++) {
		const char *s = json_string_value(json_array_get(values, i));

		if (i)
			rc |= comb_buf_putc(&b, ',');
		rc |= comb_buf_putc(&b, '"');
		for (j = 0; s[j]; j++) {
			if (s[j] == '"' || s[j] == '\\')
				rc |= comb_buf_putc(&b, '\\');
			rc |= comb_buf_putc(&b, s[j]);
		}
		rc |= comb_buf_putc(&b, '"');
	}
	rc |= comb_buf_putc(&b, '}');
	if (rc) {
		comb_buf_release(&b);
		return NULL;
	}
	return comb_buf_detach(&b, NULL);
}

/* Adds values as an array literal parameter; returns its number. */
static int param_array(struct statement *st, const json_t *values)
{
	return param_owned(st, array_literal(values));
}

/* Appends s to b as a quoted, escaped JSON string, which a jsonpath string
 * literal accepts as it is; 0 or an error. */
static int put_quoted(struct comb_buf *b, const char *s)
{
	json_t *str = json_string(s);
	char *q = str ? json_dumps(str, JSON_ENCODE_ANY) : NULL;
	int rc = q ? comb_buf_puts(b, q) : COMB_ENOMEM;

	free(q);
	json_decref(str);
	return rc;
}

/* Adds, as a parameter, the jsonpath that holds for a head whose tags
 * (artifact_heads.tags: name -> its values) give name one of values:
 * $."name"[*] ? (@ == "v1" || @ == "v2" ...), which the GIN index
 * artifact_heads_tags answers (one hashed entry per name and value) and
 * PostgreSQL rechecks exactly on the row; returns its number. */
static int param_tag_path(struct statement *st, const char *name, const json_t *values)
{
	struct comb_buf b;
	size_t i;
	int rc;

	comb_buf_init(&b, 2 * COMB_MAX_TAG_BYTES + 16 * COMB_MAX_VALUES + 64);
	rc = comb_buf_puts(&b, "$.");
	rc = rc ? rc : put_quoted(&b, name);
	rc = rc ? rc : comb_buf_puts(&b, "[*] ? (");
	for (i = 0; rc == 0 && i < json_array_size(values); i++) {
		rc = comb_buf_puts(&b, i ? " || @ == " : "@ == ");
		rc = rc ? rc : put_quoted(&b, json_string_value(json_array_get(values, i)));
	}
	rc = rc ? rc : comb_buf_puts(&b, ")");
	if (rc) {
		comb_buf_release(&b);
		return param_owned(st, NULL);
	}
	return param_owned(st, comb_buf_detach(&b, NULL));
}

/*
 * The predicates other than #d, #h and #type. For `current` they are
 * jsonpath tests of the head's tags (param_tag_path, through the GIN
 * index artifact_heads_tags); for history and head they apply to the tags of the event
 * actually served (a redacted revision's marker), given as SQL in served.
 */
static void add_predicates(struct statement *st, const struct artifact_filter *f,
			   const char *served)
{
	size_t i;

	for (i = 0; i < f->npreds; i++) {
		int name, values;

		if (!served) {
			sql(st, " AND h.tags @? $%d::jsonpath",
			    param_tag_path(st, f->preds[i].name, f->preds[i].values));
			continue;
		}
		name = param(st, f->preds[i].name);
		values = param_array(st, f->preds[i].values);
		sql(st,
		    " AND EXISTS (SELECT 1 FROM json_array_elements((%s)::json -> 'tags') t"
		    " WHERE t->>0 = $%d AND t->>1 = ANY ($%d::text[]))",
		    served, name, values);
	}
}

/* The seq of the event head serves: a redacted revision's marker, else
 * the revision (served's raw, by seq). */
#define SERVED_SEQ "coalesce(mk.seq, e.seq)"

/* Builds the statement of f. alias is the table carrying channel_id, d and
 * type (h for heads, r for revisions). */
static void build(struct statement *st, const struct artifact_filter *f,
		  const char *named, const char *keys, const char *reader,
		  const char *community, bool count)
{
	const char *served = NULL, *alias = "h";
	char join[256], readable[256];
	int limit = 0, offset = 0;

	param(st, community);                 /* $1 */
	param(st, reader);                    /* $2 */
	param(st, named);                     /* $3 */
	param(st, keys);                      /* $4 */
	access_member_join_sql(join, sizeof(join), 2);
	access_readable_sql(readable, sizeof(readable), 3, 4);
	if (!count) {
		limit = param_int(st, f->limit);
		offset = param_int(st, f->offset);
	}

	switch (f->mode) {
	case ARTIFACT_MODE_CURRENT:
		sql(st, "SELECT %s FROM artifact_heads h"
			" JOIN events e ON e.seq = h.accepted_seq"
			" WHERE h.community_id = $1 AND NOT h.deleted AND NOT h.redacted",
		    count ? "count(*)" : "e.seq");
		break;
	case ARTIFACT_MODE_HEAD:
		served = "coalesce(mk.raw, e.raw)";
		sql(st, "SELECT %s FROM artifact_heads h"
			" LEFT JOIN events e ON e.seq = h.accepted_seq AND NOT h.redacted"
			" LEFT JOIN artifact_redactions rd ON h.redacted"
			"  AND rd.community_id = h.community_id AND rd.revision_id = h.revision_id"
			" LEFT JOIN events mk ON mk.seq = rd.marker_seq"
			" WHERE h.community_id = $1 AND %s IS NOT NULL",
		    count ? "count(*)" : SERVED_SEQ, served);
		break;
	default:
		/* A revision is its event's row (migration 0025). */
		alias = "r";
		served = "coalesce(mk.raw, CASE WHEN NOT r.redacted THEN r.raw END)";
		sql(st, "SELECT %s FROM events r"
			" LEFT JOIN artifact_redactions rd ON r.redacted"
			"  AND rd.community_id = r.community_id AND rd.revision_id = r.id"
			" LEFT JOIN events mk ON mk.seq = rd.marker_seq"
			" WHERE r.community_id = $1 AND r.d IS NOT NULL AND %s IS NOT NULL",
		    count ? "count(*)" : "coalesce(mk.seq, r.seq)", served);
		break;
	}
	/* Access as a semi-join on the reader's readable channels: the
	 * planner hashes that small set and probes it per candidate. */
	sql(st, " AND %s.channel_id IN (SELECT c.id FROM channels c %s"
		" WHERE c.community_id = $1 AND %s)", alias, join, readable);
	if (f->h)
		sql(st, " AND %s.channel_id = ANY ($3::uuid[])", alias);
	if (f->d)
		sql(st, " AND %s.d = ANY ($%d::uuid[])", alias, param_array(st, f->d));
	if (f->type)
		sql(st, " AND %s.type = ANY ($%d::text[])", alias, param_array(st, f->type));
	add_predicates(st, f, served);
	if (count)
		return;
	if (f->mode == ARTIFACT_MODE_HISTORY)
		sql(st, " ORDER BY r.seq");
	else
		sql(st, " ORDER BY h.accepted_seq DESC");
	sql(st, " LIMIT $%d OFFSET $%d", limit, offset);
}

/* Answers a failed statement: the budget, or the database. */
static void send_failure(struct request *req, PGresult *res)
{
	if (http_read_failed_over(req, res))
		return;  /* handle_query reads again on the primary */
	if (comb_db_is_error(res, "57014")) {
		http_send_error(req, 503, "error: query budget exceeded");
		return;
	}
	if (comb_db_conn_lost(req->db))
		req->db_broken = true;
	else
		comb_warn("artifact query failed: %s", PQresultErrorMessage(res));
	http_send_unavailable(req, "database");
}

/* The #h values as a uuid[] literal: the channels the request names.
 * Caller frees; NULL when out of memory. */
static char *named_literal(const struct artifact_filter *f)
{
	json_t *none;
	char *text;

	if (f->h)
		return array_literal(f->h);
	none = json_array();
	if (!none)
		return NULL;
	text = array_literal(none);
	json_decref(none);
	return text;
}

bool artifact_query_is_incremental(const json_t *filter, bool count)
{
	const char *mode = comb_json_get_string(filter, "artifact");

	return !count && mode && !strcmp(mode, "incremental");
}

void artifact_query(struct request *req, json_t *filter, bool count)
{
	char err[256], msg[300], keys[ACCESS_KEYS_LITERAL];
	struct artifact_filter f;
	struct statement st = {0};
	struct actor actor;
	char *named = NULL;
	PGresult *res;

	if (artifact_query_is_incremental(filter, count)) {
		incremental_read(req, filter);
		return;
	}
	if (artifact_filter_parse(filter, req->relay->cfg.max_limit, &f, err,
				  sizeof(err))) {
		snprintf(msg, sizeof(msg), "invalid: %s", err);
		http_send_error(req, 400, msg);
		return;
	}
	if (f.mode == ARTIFACT_MODE_INCREMENTAL) {
		/* reads went to incremental_read above: this is a count */
		http_send_error(req, 400, "invalid: incremental filters cannot be counted");
		return;
	}
	/* who the reader is, and what it reads, on one server */
	if (!http_borrow_read(req, 0))
		return;
	if (access_load_actor(request_pool(req), req->db, &req->community, req->pubkey, &actor)) {
		if (http_read_failed_over(req, NULL))
			return;  /* handle_query reads again on the primary */
		req->db_broken = comb_db_conn_lost(req->db);
		http_send_unavailable(req, "database");
		return;
	}
	access_read_keys_literal(req->relay, &actor, keys);
	named = named_literal(&f);
	comb_buf_init(&st.sql, MAX_SQL);
	if (!named) {
		http_send_error(req, 503, "error: out of memory");
		goto out;
	}
	build(&st, &f, named, keys, req->pubkey, req->community.id_text, count);
	if (st.failed) {
		http_send_error(req, 503, "error: out of memory");
		goto out;
	}
	res = PQexecParams(req->db, st.sql.data, st.n, NULL, st.params, NULL,
			   NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		send_failure(req, res);
	} else if (count) {
		char body[64];

		snprintf(body, sizeof(body), "{\"count\":%s}", PQgetvalue(res, 0, 0));
		http_send_json(req, 200, body, "");
	} else {
		read_send_listed(req, res, f.limit <= READ_SMALL_ANSWER);
	}
	PQclear(res);
out:
	free(named);
	stmt_release(&st);
}
