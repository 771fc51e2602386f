/*
 * POST /query and POST /count (PROTOCOL.md section 6): the body is a JSON
 * array holding exactly one filter. Artifact filters go to
 * artifact_query(); plain NIP-01 filters are answered here over the stored
 * events the caller can read, with access applied inside the SQL before
 * LIMIT so a page is never filtered afterwards. The query lists the
 * events' seqs, which listed.c answers with their bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/access.h"
#include "comb/error.h"
#include "comb/json.h"
#include "comb/log.h"
#include "proto/proto.h"
#include "protocol_limits.h"
#include "read.h"
#include "read_int.h"
#include "request/request.h"

static const char *const column_sql[] = {
	[QUERY_SEQ] = "e.seq",
	[QUERY_ID_SEQ] = "e.id, e.seq",
	[QUERY_COUNT] = "count(*)",
};

/* Appends the general plain query of f (any filter), with its values in
 * params. */
static int general_sql(const struct plain_filter *f, enum query_columns columns,
		       struct comb_buf *sql, struct filter_params *params)
{
	char join[256], readable[256];
	int rc;

	access_member_join_sql(join, sizeof(join), QUERY_P_READER);
	access_readable_sql(readable, sizeof(readable), QUERY_P_NAMED,
			    QUERY_P_KEYS);
	rc = comb_buf_printf(sql,
		"SELECT %s FROM events e"
		" LEFT JOIN channels c ON c.community_id = e.community_id"
		" AND c.id = e.channel_id %s"
		" WHERE e.community_id = $%d AND NOT e.deleted AND NOT e.redacted"
		" AND ((e.channel_id IS NULL AND e.pubkey = $%d)"
		" OR (c.id IS NOT NULL AND %s))",
		column_sql[columns], join, QUERY_P_COMMUNITY, QUERY_P_READER,
		readable);
	if (rc == 0)
		rc = filter_append_sql(f, sql, QUERY_P_COMMUNITY,
				       QUERY_P_FIRST_FILTER, params);
	if (rc == 0 && columns != QUERY_COUNT)
		rc = comb_buf_printf(sql, " ORDER BY e.created_at DESC, e.id LIMIT %d",
				     f->limit);
	return rc;
}

PGresult *query_plain_run(struct comb_db_pool *pool, PGconn *db,
			  const struct plain_filter *f, enum query_columns columns,
			  const char *community, const char *reader,
			  const char *keys)
{
	/* A filter of one channel, by columns (QUERY_SEQ, QUERY_ID_SEQ). */
#define CHANNEL_EVENTS(cols) COMB_DB_STMT("SELECT " cols " FROM comb_channel_events(" \
	"$1, $2, $3::uuid[], $4::int[], $5::uuid, $6::int[], $7::bigint, $8::bigint," \
	" $9::int) e", 9)
	static struct comb_db_stmt one_channel[] = {
		[QUERY_SEQ] = CHANNEL_EVENTS("e.seq"),
		[QUERY_ID_SEQ] = CHANNEL_EVENTS("e.id, e.seq"),
	};
#undef CHANNEL_EVENTS
	const char *values[QUERY_P_MAX];
	struct filter_params params = {0};
	struct comb_buf sql, named;
	PGresult *res = NULL;
	bool channel = columns != QUERY_COUNT && filter_one_channel(f);
	int i, rc;

	comb_buf_init(&sql, 16384);
	comb_buf_init(&named, (size_t)COMB_MAX_VALUES * 40 + 8);
	rc = filter_named_channels(f, &named);
	if (rc == 0)
		rc = channel ? filter_channel_params(f, &params)
			     : general_sql(f, columns, &sql, &params);
	if (rc == 0) {
		values[QUERY_P_COMMUNITY - 1] = community;
		values[QUERY_P_READER - 1] = reader;
		values[QUERY_P_NAMED - 1] = named.data;
		values[QUERY_P_KEYS - 1] = keys;
		for (i = 0; i < params.count; i++)
			values[QUERY_P_FIRST_FILTER - 1 + i] = params.values[i];
		res = channel ? comb_db_exec_stmt(pool, db, &one_channel[columns], values)
			      : PQexecParams(db, sql.data, QUERY_P_FIRST_FILTER - 1 + params.count,
					     NULL, values, NULL, NULL, 0);
	}
	filter_params_release(&params);
	comb_buf_release(&named);
	comb_buf_release(&sql);
	return res;
}

bool query_small_filter(const struct plain_filter *f)
{
	return f->limit > 0 && f->limit <= READ_SMALL_ANSWER;
}

/* Answers one plain filter (obj) of req: its events, or their count. */
static void plain_query(struct request *req, const json_t *obj, bool count)
{
	char err[256], msg[300], keys[ACCESS_KEYS_LITERAL];
	struct plain_filter f;
	struct actor actor;
	PGresult *res;

	if (filter_parse(&f, obj, req->relay->cfg.max_limit, err, sizeof(err))) {
		snprintf(msg, sizeof(msg), "invalid: %s", err);
		http_send_error(req, 400, msg);
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
	res = query_plain_run(request_pool(req), req->db, &f, count ? QUERY_COUNT : QUERY_SEQ,
			      req->community.id_text, req->pubkey, keys);
	if (!res) {
		http_send_error(req, 503, "error: out of memory");
	} else if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		if (http_read_failed_over(req, res)) {
			/* handle_query reads again on the primary */
		} else if (comb_db_is_error(res, "57014")) {
			http_send_error(req, 503, "error: query budget exceeded");
		} else {
			comb_warn("plain query failed: %s", PQresultErrorMessage(res));
			req->db_broken = comb_db_conn_lost(req->db);
			http_send_unavailable(req, "database");
		}
	} else if (count) {
		snprintf(msg, sizeof(msg), "{\"count\":%s}", PQgetvalue(res, 0, 0));
		http_send_json(req, 200, msg, "");
	} else {
		read_send_listed(req, res, query_small_filter(&f));
	}
	PQclear(res);
}

void handle_query(struct request *req, bool count)
{
	char err[128], msg[160];
	json_t *body, *filter;

	body = comb_json_parse(req->body, req->body_len,
			       (size_t)req->relay->cfg.max_message_length,
			       err, sizeof(err));
	filter = json_array_size(body) == 1 ? json_array_get(body, 0) : NULL;
	/* An incremental read records the token's use when it is admitted;
	 * every other answer does it now. */
	if (!artifact_query_is_incremental(filter, count) && !http_claim_replay(req)) {
		json_decref(body);
		return;
	}
	if (!body) {
		snprintf(msg, sizeof(msg), "invalid: %s", err);
		http_send_error(req, 400, msg);
		return;
	}
	if (!json_is_array(body) || json_array_size(body) != 1 ||
	    !json_is_object(filter)) {
		http_send_error(req, 400,
				"invalid: the body must be a json array holding exactly one filter");
	} else {
		/* twice when a standby failed under the first (request.h) */
		do {
			req->read_retry = false;
			if (json_object_get(filter, "artifact"))
				artifact_query(req, filter, count);
			else
				plain_query(req, filter, count);
		} while (req->read_retry);
	}
	json_decref(body);
}
