/*
 * Incremental reads. Every statement of a read takes its own snapshot's
 * horizon, pg_snapshot_xmin(pg_current_snapshot()), in the same statement
 * as the data it reads: every transaction below the horizon has finished,
 * so items stamped below it can never appear later. A read returns only
 * such items and never moves the cursor past the horizon; a slow writer
 * delays the horizon but is never skipped. The change sources and their
 * access rules live in SQL (migrations/0004_incremental.sql, 0005 and 0011,
 * comb_incremental_changes) so that access is applied before the page
 * limit.
 *
 * A first read lists every readable current artifact by d (phase INITIAL,
 * pinned to the first page's horizon), then continues with the changes
 * since that horizon (phase CHANGES), ordered by (xid, source, d). A page
 * of the listing may come from a later snapshot than the pinned horizon:
 * everything below the horizon is in it, and what changed since is
 * delivered again by the changes. A read in phase CHANGES first takes the
 * horizon and asks comb_incremental_unchanged whether any change lies
 * between the cursor and the horizon (one round trip, all of a no-change
 * read); only then does it run the change query, which takes its own,
 * later horizon.
 *
 * Statements are prepared once per pooled connection (comb_db_exec_stmt);
 * none runs inside an explicit transaction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access.h"
#include "comb/cursor.h"
#include "comb/error.h"
#include "comb/log.h"
#include "comb/random.h"
#include "comb/redis.h"
#include "comb/replay.h"
#include "metrics.h"
#include "proto/proto.h"
#include "read.h"
#include "read_int.h"
#include "request.h"

#define NIL_UUID "00000000-0000-0000-0000-000000000000"
#define ADMISSION_KEY "comb:incremental:active"
#define ADMISSION_LEASE_MS 30000
#define ADMISSION_TOKEN_LEN 33   /* 16 random bytes in hex */

/* For comb_db_pool_warm (read.h): calls the change function, the probe,
 * the listing of unscoped first reads and the channel read of plain
 * filters for no community, so that a new connection has compiled them
 * and planned what they run before its first read (about 20 ms otherwise
 * paid by that read). */
const char read_warm_sql[] =
	"SELECT (SELECT count(*) FROM comb_incremental_changes(0, '', '{}', '{}',"
	" false, NULL, '0', 0, '" NIL_UUID "', '1', 1)),"
	" comb_incremental_unchanged(0, '', '0', '1'),"
	" (SELECT count(*) FROM comb_channel_events(0, '', '{}', '{}',"
	" '" NIL_UUID "', NULL, 0, 0, 0)),"
	" (SELECT count(*) FROM comb_heads_page(0, '', '{}', '{}', NULL,"
	" '" NIL_UUID "', 0))";

/* Everything one read needs, gathered before the first statement. */
struct read_ctx {
	struct request *req;
	struct inc_request in;
	char keys[ACCESS_KEYS_LITERAL];        /* the reader's, as a member */
	char admin_keys[ACCESS_KEYS_LITERAL];  /* as a community admin */
	struct comb_buf named;  /* uuid[] literal of #h ("{}" when absent) */
	struct comb_buf types;  /* text[] literal of #type, or empty: any */
	unsigned char scope[COMB_CURSOR_SCOPE_LEN];
	uint64_t horizon;
	uint64_t system_id;
	comb_lsn pos;           /* the WAL position the last statement saw */
	int epoch;
	struct comb_buf out;    /* the answer being written (a chunk of it when
				 * streaming) */
	int items;              /* items written */
	struct item *list;      /* a cursor read's page: its items, in order */
	int nlist, caplist;
	int next;               /* the first item of list not written yet */
	bool streaming;         /* the answer goes out in chunks */
	bool expect_change;     /* skip the no-change probe (SYNC_READ_LIVE) */
	struct incremental_page *page; /* told what a 200 answer holds, or NULL */
};

static void send_inc_error(struct request *req, int status, const char *code,
			   const char *message)
{
	struct comb_buf b;
	char headers[64] = "";

	metrics_incremental(code);
	comb_buf_init(&b, 1024);
	comb_buf_printf(&b, "{\"error\":\"%s\",\"message\":", code);
	comb_buf_json_string(&b, message, strlen(message));
	comb_buf_putc(&b, '}');
	if (status == 503)
		snprintf(headers, sizeof(headers), "Retry-After: %d\r\n",
			 1 + (int)comb_random_below(5));
	http_send_json(req, status, b.data ? b.data : "{}", headers);
	comb_buf_release(&b);
}

/*
 * Claims a slot among the cluster-wide concurrent reads, and records the
 * use of req's NIP-98 token in the replay store in the same Redis call
 * (a used token takes no slot). *token is set to release the slot.
 * Returns 0; COMB_EREPLAY for a used token; COMB_EDENIED when full;
 * COMB_EUNAVAIL when Redis cannot answer.
 */
static int admit(struct request *req, char token[ADMISSION_TOKEN_LEN])
{
	static const char script[] =
		"if #KEYS == 2 and not redis.call('SET', KEYS[2], '1', 'NX', 'EXAT', ARGV[5]) then\n"
		"  return -1\n"
		"end\n"
		"redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[4]))\n"
		"if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end\n"
		"redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])\n"
		"redis.call('PEXPIRE', KEYS[1], ARGV[4])\n"
		"return 1";
	struct relay *relay = req->relay;
	char now_ms[24], max[16], lease[16], expires[24];
	char replay_key[COMB_REPLAY_KEY_LEN];
	bool claim = req->replay_token[0] != '\0';
	struct timespec now;
	redisReply *r;
	int rc;

	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(now_ms, sizeof(now_ms), "%lld",
		 (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
	if (comb_random_hex(token, (ADMISSION_TOKEN_LEN - 1) / 2))
		return COMB_EUNAVAIL;
	if (claim && comb_replay_key(req->replay_token, replay_key))
		return COMB_EUNAVAIL;
	snprintf(max, sizeof(max), "%d", relay->cfg.incremental_max_concurrent);
	snprintf(lease, sizeof(lease), "%d", ADMISSION_LEASE_MS);
	snprintf(expires, sizeof(expires), "%lld", (long long)req->replay_expires);
	r = comb_redis_script(relay->redis, script, claim ? 2 : 1,
			      claim ? (const char *const[]){ADMISSION_KEY, replay_key, now_ms,
							     token, max, lease, expires}
				    : (const char *const[]){ADMISSION_KEY, now_ms, token,
							     max, lease, expires},
			      claim ? 7 : 6);
	if (!r || r->type != REDIS_REPLY_INTEGER)
		rc = COMB_EUNAVAIL;
	else
		rc = r->integer == 1 ? 0 : r->integer == -1 ? COMB_EREPLAY : COMB_EDENIED;
	if (r)
		freeReplyObject(r);
	if (rc != COMB_EUNAVAIL)
		req->replay_token[0] = '\0';
	return rc;
}

/* Gives the slot back without waiting for Redis: the answer has gone
 * out, and a slot whose release is lost ends with its lease anyway. */
static void release_admission(struct relay *relay, const char *token)
{
	comb_redis_send(relay->redis, "ZREM %s %s", ADMISSION_KEY, token);
}

/* Sends the answer for a failed statement: the budget or the database. */
static void send_db_failure(struct read_ctx *rc, PGresult *res)
{
	if (http_read_failed_over(rc->req, res))
		return;  /* incremental_run reads again on the primary */
	if (comb_db_is_error(res, "57014")) {
		send_inc_error(rc->req, 503, "incremental_busy", "query budget exceeded");
		return;
	}
	comb_warn("incremental read failed: %s", PQresultErrorMessage(res));
	rc->req->db_broken = comb_db_conn_lost(rc->req->db);
	http_send_unavailable(rc->req, "database");
}

static int put_upsert(struct read_ctx *rc, const char *raw, size_t len)
{
	int err = comb_buf_puts(&rc->out, rc->items++ ? ",{\"op\":\"upsert\",\"event\":"
						     : "{\"op\":\"upsert\",\"event\":");

	if (!err)
		err = comb_buf_append(&rc->out, raw, len);
	return err ? err : comb_buf_putc(&rc->out, '}');
}

static int put_remove(struct read_ctx *rc, const char *d, const char *h,
		      const char *reason)
{
	int err = comb_buf_printf(&rc->out, "%s{\"op\":\"remove\",\"d\":\"%s\"",
				  rc->items++ ? "," : "", d);

	if (!err && h)
		err = comb_buf_printf(&rc->out, ",\"h\":\"%s\"", h);
	return err ? err : comb_buf_printf(&rc->out, ",\"reason\":\"%s\"}", reason);
}

/* One item of a page: an upsert of the stored event seq, or a removal. */
struct item {
	int64_t seq;               /* an upsert; 0 for a removal */
	char d[37], channel[37], reason[16];
};

/* Adds an item to the page; 0 or COMB_ENOMEM. */
static int add_item(struct read_ctx *rc, int64_t seq, const char *d,
		    const char *channel, const char *reason)
{
	struct item *it;

	if (rc->nlist == rc->caplist) {
		int cap = rc->caplist ? 2 * rc->caplist : 128;
		struct item *grown = realloc(rc->list, (size_t)cap * sizeof(*grown));

		if (!grown)
			return COMB_ENOMEM;
		rc->list = grown;
		rc->caplist = cap;
	}
	it = &rc->list[rc->nlist++];
	*it = (struct item){.seq = seq};
	if (!seq) {
		snprintf(it->d, sizeof(it->d), "%s", d);
		snprintf(it->channel, sizeof(it->channel), "%s", channel);
		snprintf(it->reason, sizeof(it->reason), "%s", reason);
	}
	return 0;
}

/* When the answer is streamed, sends what rc->out holds once it is a
 * chunk's worth (or, with all, whatever it holds). */
static int flush_out(struct read_ctx *rc, bool all)
{
	int err;

	if (!rc->streaming || (!all && rc->out.len < READ_CHUNK_BYTES))
		return 0;
	err = http_stream_write(rc->req, rc->out.data, rc->out.len);
	comb_buf_reset(&rc->out);
	return err;
}

/* Writes the removals from rc->next up to the next upsert or the end. */
static int put_removals(struct read_ctx *rc)
{
	int err = 0;

	for (; rc->next < rc->nlist && !rc->list[rc->next].seq && !err; rc->next++) {
		const struct item *it = &rc->list[rc->next];

		err = put_remove(rc, it->d, it->channel, it->reason);
		err = err ? err : flush_out(rc, false);
	}
	return err;
}

/* event_bytes_fn: the bytes of the next upsert, after the removals
 * before it. */
static int put_next_upsert(void *ctx, const char *raw, size_t len,
			   char *why, size_t whylen)
{
	struct read_ctx *rc = ctx;
	int err = put_removals(rc);

	if (!err) {
		err = put_upsert(rc, raw, len);
		rc->next++;
	}
	err = err ? err : flush_out(rc, false);
	return err ? comb_fail(why, whylen, err, err == COMB_EIO ?
			       "error: client gone" : "error: out of memory") : 0;
}

/*
 * Sends the page: its items in order, then the cursor and more. The
 * upserts' bytes come from the revision cache or, for what it lacks, one
 * statement per batch (stored bytes never change, so reading them after
 * the statements that chose the items sends exactly what they chose). A
 * page of more than READ_SMALL_ANSWER items goes out in chunks as it is
 * written (the database connection given back first, misses then read on
 * pooled connections a batch at a time), so a read holds one batch and
 * one chunk rather than its whole answer; should the bytes fail after the
 * answer began, it is cut short. Smaller pages, and captured answers,
 * come whole.
 */
static void send_page(struct read_ctx *rc, const char *cursor, bool more)
{
	int64_t *seqs = calloc((size_t)rc->nlist + 1, sizeof(*seqs));
	struct event_source src;
	char why[128] = "";
	int i, k = 0, err;

	if (!seqs) {
		http_send_error(rc->req, 503, "error: out of memory");
		return;
	}
	for (i = 0; i < rc->nlist; i++)
		if (rc->list[i].seq)
			seqs[k++] = rc->list[i].seq;
	rc->streaming = !rc->req->capture && rc->nlist > READ_SMALL_ANSWER;
	/* Streamed, the connection is given back first: misses are then read
	 * where the items' statement's position is (a standby's), or on the
	 * primary. */
	src = (struct event_source){request_pool(rc->req), rc->req->db, false, 0};
	if (rc->streaming) {
		if (rc->req->read.conn && rc->req->read.server >= 0)
			src = (struct event_source){.routed = true, .at_least = rc->pos};
		else
			src = (struct event_source){.pool = rc->req->relay->db};
		http_stream_begin(rc->req);
	}
	err = read_events_from(rc->req->relay, &src, seqs, (size_t)k,
			       put_next_upsert, rc, why, sizeof(why));
	free(seqs);
	if (!err)
		err = put_removals(rc);
	if (!err)
		err = comb_buf_printf(&rc->out, "],\"cursor\":\"%s\",\"more\":%s}",
				      cursor, more ? "true" : "false");
	if (rc->streaming) {
		if (!err)
			err = flush_out(rc, true);
		if (err && err != COMB_EIO)
			comb_warn("incremental read cut short: %s", why);
		http_stream_end(rc->req, !err);
	} else if (!err) {
		http_send_json_buf(rc->req, &rc->out);
	} else if (err == COMB_ETOOBIG && rc->page) {
		/* a captured answer passed its buffer's bound: the caller
		 * reads fewer items */
		rc->page->too_large = true;
		http_send_error(rc->req, 503, "error: answer too large");
	} else if (err == COMB_ENOMEM) {
		http_send_error(rc->req, 503, "error: out of memory");
	} else if (!strcmp(why, "error: query budget exceeded")) {
		send_inc_error(rc->req, 503, "incremental_busy", "query budget exceeded");
	} else {
		rc->req->db_broken = comb_db_conn_lost(rc->req->db);
		http_send_unavailable(rc->req, "database");
	}
}

/* Reads the horizon, the database identity, the community's cursor epoch
 * and the WAL position seen from the first four columns of row 0 of res
 * (SNAPSHOT_COLUMNS). */
static void read_horizon(struct read_ctx *rc, const PGresult *res)
{
	rc->horizon = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	rc->system_id = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
	rc->epoch = (int)strtol(PQgetvalue(res, 0, 2), NULL, 10);
	comb_lsn_parse(PQgetvalue(res, 0, 3), &rc->pos);
}

/* The snapshot columns every cursor statement starts with. The WAL
 * position is read after the statement's snapshot was taken, so every
 * commit the snapshot sees lies at or below it. */
#define SNAPSHOT_CTE \
	"WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon," \
	" (SELECT system_identifier FROM pg_control_system()) AS sysid," \
	" (SELECT cursor_epoch FROM communities WHERE id = $1) AS epoch," \
	" " COMB_READ_POSITION_SQL " AS pos)"
#define SNAPSHOT_COLUMNS "s.horizon::text, s.sysid::text, s.epoch, s.pos"

/* The reader's read keys in a statement whose $n is rc->admin_keys: the
 * admin's when the reader is a community admin in the statement's own
 * snapshot, else $3, so that who the reader is and what it may read are
 * one snapshot's, like the data (and no statement of its own is needed
 * to ask). */
#define READER_KEYS(n) \
	"(CASE WHEN EXISTS (SELECT 1 FROM community_admins a" \
	" WHERE a.community_id = $1 AND a.pubkey = $2)" \
	" THEN $" #n "::int[] ELSE $3::int[] END)"

/* The parameters shared by every statement: $1 community, $2 reader,
 * $3 read keys as a member, $4 named channels, $5 scoped, $6 types. */
static void common_params(struct read_ctx *rc, const char **p)
{
	p[0] = rc->req->community.id_text;
	p[1] = rc->req->pubkey;
	p[2] = rc->keys;
	p[3] = rc->named.data;
	p[4] = rc->in.has_channels ? "true" : "false";
	p[5] = rc->in.has_types ? rc->types.data : NULL;
}

/* Known-ID read: one answer per requested d, in request order; one
 * statement, so one snapshot. */
static void known_ids(struct read_ctx *rc)
{
	static struct comb_db_stmt stmt = COMB_DB_STMT(
		"SELECT r.d::text, h.channel_id::text, h.deleted, h.redacted, e.raw,"
		" CASE WHEN h.d IS NULL THEN 0"
		"  WHEN $6::text[] IS NOT NULL AND h.type <> ALL($6::text[]) THEN 0"
		"  ELSE comb_channel_view($1, h.channel_id, $2, " READER_KEYS(8) ","
		"   $4::uuid[], $5) END"
		" FROM unnest($7::uuid[]) WITH ORDINALITY AS r(d, n)"
		" LEFT JOIN artifact_heads h ON h.community_id = $1 AND h.d = r.d"
		" LEFT JOIN events e ON e.community_id = $1 AND e.id = h.revision_id"
		" ORDER BY r.n", 8);
	const char *p[8];
	struct comb_buf ids;
	PGresult *res;
	int i, err = 0;

	common_params(rc, p);
	comb_buf_init(&ids, 64 * INC_MAX_IDS);
	if (comb_buf_pg_array(&ids, rc->in.ids, rc->in.nids)) {
		comb_buf_release(&ids);
		http_send_error(rc->req, 503, "error: out of memory");
		return;
	}
	p[6] = ids.data;
	p[7] = rc->admin_keys;
	res = comb_db_exec_stmt(request_pool(rc->req), rc->req->db, &stmt, p);
	comb_buf_release(&ids);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		send_db_failure(rc, res);
		PQclear(res);
		return;
	}
	for (i = 0; i < PQntuples(res) && !err; i++) {
		const char *d = PQgetvalue(res, i, 0), *h = PQgetvalue(res, i, 1);
		int view = (int)strtol(PQgetvalue(res, i, 5), NULL, 10);

		if (view == 0)
			err = put_remove(rc, d, NULL, "access");
		else if (PQgetvalue(res, i, 2)[0] == 't')
			err = put_remove(rc, d, h, "deleted");
		else if (PQgetvalue(res, i, 3)[0] == 't')
			err = put_remove(rc, d, h, "redacted");
		else if (view == 2)
			err = put_remove(rc, d, h, "ttl");
		else
			err = put_upsert(rc, PQgetvalue(res, i, 4),
					 (size_t)PQgetlength(res, i, 4));
	}
	PQclear(res);
	metrics_incremental("known_ids");
	if (err || comb_buf_puts(&rc->out, "]}")) {
		http_send_error(rc->req, 503, "error: out of memory");
		return;
	}
	http_send_json_buf(rc->req, &rc->out);
}

/*
 * Lists up to limit readable current artifacts after key, by d, and reads
 * the statement's horizon, database identity and epoch into rc. Returns
 * the number listed (limit + 1 means there are more), or -1 after sending
 * an error. *last is set to the last d listed.
 */
static int initial_page(struct read_ctx *rc, const char *after, int limit,
			char last[37])
{
	/* A read of some channels: planned for them at each page. */
	static struct comb_db_stmt scoped = COMB_DB_STMT(
		SNAPSHOT_CTE
		" SELECT " SNAPSHOT_COLUMNS ", l.d::text, l.accepted_seq"
		" FROM s LEFT JOIN LATERAL ("
		"  SELECT h.d, h.accepted_seq FROM artifact_heads h"
		"  JOIN channels c ON c.community_id = h.community_id AND c.id = h.channel_id"
		"  LEFT JOIN members m ON m.community_id = c.community_id"
		"   AND m.channel_id = c.id AND m.pubkey = $2 AND m.active"
		"  WHERE h.community_id = $1 AND h.d > $6::uuid"
		"   AND NOT h.deleted AND NOT h.redacted AND c.ttl IS NULL"
		"   AND c.id = ANY($4::uuid[])"
		"   AND ($5::text[] IS NULL OR h.type = ANY($5::text[]))"
		"   AND comb_read_key(c.visibility, c.is_dm, c.deleted, c.archived,"
		"    m.role, true) = ANY(" READER_KEYS(8) ")"
		"  ORDER BY h.d LIMIT $7::int) l ON true"
		" ORDER BY l.d", 8);
	/* A read of every channel: the same plan for every page, made once
	 * per connection (comb_heads_page). */
	static struct comb_db_stmt unscoped = COMB_DB_STMT(
		SNAPSHOT_CTE
		" SELECT " SNAPSHOT_COLUMNS ", l.d::text, l.accepted_seq"
		" FROM s LEFT JOIN LATERAL comb_heads_page($1, $2, " READER_KEYS(8) ","
		"  $4::uuid[], $5::text[], $6::uuid, $7::int) l ON true"
		" ORDER BY l.d", 8);
	const char *p[8];
	char lim[16];
	PGresult *res;
	int i, n, err = 0;

	common_params(rc, p);
	/* common_params' $5 (scoped) is the statement's choice here. */
	p[4] = p[5];
	p[5] = after;
	snprintf(lim, sizeof(lim), "%d", limit + 1);
	p[6] = lim;
	p[7] = rc->admin_keys;
	res = comb_db_exec_stmt(request_pool(rc->req), rc->req->db,
				rc->in.has_channels ? &scoped : &unscoped, p);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
		send_db_failure(rc, res);
		PQclear(res);
		return -1;
	}
	read_horizon(rc, res);
	/* One row with a NULL d when nothing is listed. */
	n = PQgetisnull(res, 0, 4) ? 0 : PQntuples(res);
	for (i = 0; i < n && i < limit && !err; i++) {
		err = add_item(rc, strtoll(PQgetvalue(res, i, 5), NULL, 10), NULL,
			       NULL, NULL);
		snprintf(last, 37, "%s", PQgetvalue(res, i, 4));
	}
	PQclear(res);
	if (err) {
		http_send_error(rc->req, 503, "error: out of memory");
		return -1;
	}
	return n;
}

struct change {
	uint64_t xid;
	int src;
	const char *d;
	const char *channel;
	const char *what;
	int row;
	bool superseded;   /* a later item of this page names the same d */
};

static int by_d_then_row(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	int c = strcmp(x->d, y->d);

	return c ? c : x->row - y->row;
}

/*
 * Appends up to limit changes after *pos and below the statement's
 * horizon, reading that horizon, the database identity and the epoch into
 * rc; on return *pos is the last position delivered. Unless rc expects a
 * change, a first statement takes the horizon and asks
 * comb_incremental_unchanged; *ran tells whether the change query then
 * ran: it does not when the horizon is not above *pos or no stamp lies in
 * between. Returns the
 * number of rows seen (limit + 1 means there are more), or -1 after
 * sending an error.
 */
static int changes_page(struct read_ctx *rc, struct comb_position *pos, int limit,
			bool *ran)
{
	/* Whether anything can lie between the cursor and the horizon. */
	static struct comb_db_stmt probe = COMB_DB_STMT(
		SNAPSHOT_CTE
		" SELECT " SNAPSHOT_COLUMNS ", s.horizon > $3::xid8"
		"  AND NOT comb_incremental_unchanged($1, $2, $3::xid8, s.horizon)"
		" FROM s", 3);
	/* The changes, with the horizon of their own snapshot. (Gating this
	 * statement by the probe inside one statement made the catch-up
	 * twice as slow: docs/benchmarks-history.md.) */
	static struct comb_db_stmt stmt = COMB_DB_STMT(
		SNAPSHOT_CTE
		" SELECT " SNAPSHOT_COLUMNS ", true,"
		"  c.xid::text, c.src, c.d::text, c.channel::text, c.what, c.seq"
		" FROM s LEFT JOIN LATERAL comb_incremental_changes($1, $2,"
		"  " READER_KEYS(11) ", $4::uuid[], $5::boolean, $6::text[], $7::xid8,"
		"  $8::int, $9::uuid, s.horizon, $10::int) c ON true"
		" ORDER BY c.xid, c.src, c.d", 11);
	char after_xid[24], after_src[8], lim[16];
	struct change *items = NULL, *sorted = NULL;
	const char *p[11];
	PGresult *res;
	int i, n, err = 0;

	common_params(rc, p);
	snprintf(after_xid, sizeof(after_xid), "%llu", (unsigned long long)pos->xid);
	snprintf(after_src, sizeof(after_src), "%d", pos->source);
	snprintf(lim, sizeof(lim), "%d", limit + 1);
	p[6] = after_xid;
	p[7] = after_src;
	p[8] = *pos->key ? pos->key : NIL_UUID;
	p[9] = lim;
	p[10] = rc->admin_keys;
	*ran = true;
	if (!rc->expect_change) {
		res = comb_db_exec_stmt(request_pool(rc->req), rc->req->db, &probe,
					(const char *const[]){p[0], p[1], after_xid});
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
			send_db_failure(rc, res);
			PQclear(res);
			return -1;
		}
		read_horizon(rc, res);
		*ran = PQgetvalue(res, 0, 4)[0] == 't';
		PQclear(res);
		if (!*ran)
			return 0;
	}
	res = comb_db_exec_stmt(request_pool(rc->req), rc->req->db, &stmt, p);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
		send_db_failure(rc, res);
		PQclear(res);
		return -1;
	}
	read_horizon(rc, res);
	/* One row with NULL changes when there are none. */
	n = PQgetisnull(res, 0, 5) ? 0 : PQntuples(res);
	items = calloc((size_t)n + 1, sizeof(*items));
	sorted = calloc((size_t)n + 1, sizeof(*sorted));
	if (!items || !sorted) {
		err = COMB_ENOMEM;
		goto out;
	}
	for (i = 0; i < n && i < limit; i++) {
		items[i] = (struct change){
			.xid = strtoull(PQgetvalue(res, i, 5), NULL, 10),
			.src = (int)strtol(PQgetvalue(res, i, 6), NULL, 10),
			.d = PQgetvalue(res, i, 7),
			.channel = PQgetvalue(res, i, 8),
			.what = PQgetvalue(res, i, 9),
			.row = i,
		};
		sorted[i] = items[i];
	}
	/* Within one answer only the latest item about an artifact counts. */
	qsort(sorted, (size_t)i, sizeof(*sorted), by_d_then_row);
	for (int j = 0; j + 1 < i; j++)
		if (!strcmp(sorted[j].d, sorted[j + 1].d))
			items[sorted[j].row].superseded = true;
	for (int j = 0; j < i && !err; j++) {
		const struct change *c = &items[j];

		pos->xid = c->xid;
		pos->source = (uint8_t)c->src;
		snprintf(pos->key, sizeof(pos->key), "%s", c->d);
		if (c->superseded)
			continue;
#ifdef COMB_PLANT_BUG
		/* A deliberate bug for test builds only (cmake -DCOMB_PLANT_BUG=ON,
		 * never in a release): `moved` removals are dropped, so a reader
		 * keeps artifacts that left its view. The convergence checker
		 * (tests/e2e/convergence.test.mjs) must fail against this build. */
		if (!strcmp(c->what, "moved"))
			continue;
#endif
		if (!strcmp(c->what, "upsert") && PQgetisnull(res, c->row, 10)) {
			/* An upsert always names its revision: one without is
			 * a broken database, not an answer. */
			comb_warn("incremental read: an upsert of %s has no revision", c->d);
			http_send_unavailable(rc->req, "database");
			n = -1;
			goto out;
		}
		if (!strcmp(c->what, "upsert"))
			err = add_item(rc, strtoll(PQgetvalue(res, c->row, 10), NULL, 10),
				       NULL, NULL, NULL);
		else
			err = add_item(rc, 0, c->d, c->channel, c->what);
	}
out:
	free(items);
	free(sorted);
	PQclear(res);
	if (err) {
		http_send_error(rc->req, 503, "error: out of memory");
		return -1;
	}
	return n;
}

/* Checks that the cursor was issued for this reader, community and scope;
 * sends the error and returns false. */
static bool cursor_bound_here(struct read_ctx *rc, const struct comb_cursor *c)
{
	if (c->community != rc->req->community.id ||
	    memcmp(c->scope, rc->scope, sizeof(rc->scope))) {
		send_inc_error(rc->req, 400, "incremental_bad_cursor",
			       "the cursor was issued for another reader, community or scope");
		return false;
	}
	return true;
}

/* Checks the cursor against the database identity and the epoch the last
 * statement read; sends the error and returns false. */
static bool cursor_current(struct read_ctx *rc, const struct comb_cursor *c)
{
	if (c->system_id != rc->system_id || c->epoch != rc->epoch) {
		send_inc_error(rc->req, 409, "incremental_reset",
			       "the cursor cannot be continued: read again without a cursor and revalidate saved ids");
		return false;
	}
	return true;
}

/* Runs one cursor read and sends its answer. */
static void cursor_read(struct read_ctx *rc, const unsigned char key[32])
{
	struct comb_cursor cur = {0};
	char text[COMB_CURSOR_MAX_TEXT];
	int limit = rc->in.limit, n;
	bool more = false, listed = false, ran;

	if (rc->in.cursor) {
		if (comb_cursor_decode(rc->in.cursor, key, &cur)) {
			send_inc_error(rc->req, 400, "incremental_bad_cursor",
				       "the cursor is not one this relay issued");
			return;
		}
		if (!cursor_bound_here(rc, &cur))
			return;
	}
	/* Served where the cursor's snapshot, and the reader's writes, are; a
	 * cursor issued before positions were kept names none, and only the
	 * primary surely holds its snapshot. */
	if (!http_borrow_read(rc->req, rc->in.cursor && !cur.lsn ? COMB_READ_PRIMARY : cur.lsn))
		return;
	if (!rc->in.cursor) {
		cur.community = rc->req->community.id;
		memcpy(cur.scope, rc->scope, sizeof(cur.scope));
		cur.phase = COMB_CURSOR_INITIAL;
	}

	if (cur.phase == COMB_CURSOR_INITIAL) {
		char last[37] = "";

		n = initial_page(rc, *cur.after.key ? cur.after.key : NIL_UUID,
				 limit, last);
		if (n < 0)
			return;
		if (!rc->in.cursor) {
			/* A new cursor is pinned to its first page's horizon. */
			cur.epoch = rc->epoch;
			cur.system_id = rc->system_id;
			cur.horizon = rc->horizon;
		} else if (!cursor_current(rc, &cur)) {
			return;
		}
		metrics_incremental("initial");
		listed = true;
		if (n > limit) {
			more = true;
			snprintf(cur.after.key, sizeof(cur.after.key), "%s", last);
		} else {
			/* Listing done: the changes since its horizon follow. */
			limit -= n;
			cur.phase = COMB_CURSOR_CHANGES;
			cur.after = (struct comb_position){.xid = cur.horizon};
		}
	}
	if (cur.phase == COMB_CURSOR_CHANGES && !more) {
		if (limit == 0) {
			more = rc->horizon > cur.after.xid;
		} else {
			n = changes_page(rc, &cur.after, limit, &ran);
			if (n < 0)
				return;
			if (!listed) {
				if (!cursor_current(rc, &cur))
					return;
				metrics_incremental(ran ? "changes" : "short_circuit");
			}
			more = n > limit;
			/* Nothing lies between the last item and the horizon. */
			if (!more && rc->horizon > cur.after.xid)
				cur.after = (struct comb_position){.xid = rc->horizon};
		}
	}
	/* The horizon pinned by the first page only tells the listing where
	 * the changes begin: past it, two cursors at one position are one
	 * text (a resumable sync reads the subs of one cursor together). */
	if (cur.phase == COMB_CURSOR_CHANGES)
		cur.horizon = 0;
	/* Never behind a position the reader was given. */
	if (rc->pos > cur.lsn)
		cur.lsn = rc->pos;
	if (comb_cursor_encode(&cur, key, text, sizeof(text))) {
		http_send_error(rc->req, 503, "error: out of memory");
		return;
	}
	if (rc->page) {
		memcpy(rc->page->cursor, text, sizeof(rc->page->cursor));
		rc->page->more = more;
		rc->page->items = rc->nlist;
	}
	send_page(rc, text, more);
}

/* One incremental read (see incremental_read_for_sync), under admission
 * control when admission is true, skipping the no-change probe when
 * expect_change is true. */
static void incremental_run(struct request *req, json_t *filter, bool admission,
			    bool expect_change, struct incremental_page *page)
{
	struct read_ctx rc = {.req = req, .page = page, .expect_change = expect_change};
	unsigned char key[32];
	struct actor member = {0}, admin = {.community_admin = true};
	char err[256], token[ADMISSION_TOKEN_LEN];
	size_t mark;
	int admitted;

	/* The token's use is recorded first, whatever the answer. */
	if (admission) {
		admitted = admit(req, token);
		if (admitted == COMB_EREPLAY || req->replay_token[0]) {
			/* used before, or Redis could not record its use */
			http_refuse_replay(req, admitted);
			return;
		}
		if (admitted) {
			send_inc_error(req, 503, "incremental_busy",
				       admitted == COMB_EDENIED ? "too many incremental reads are running"
								: "admission control unavailable");
			return;
		}
	} else if (!http_claim_replay(req)) {
		return;
	}
	comb_buf_init(&rc.named, 64 * INC_MAX_SCOPE);
	comb_buf_init(&rc.types, 160 * INC_MAX_SCOPE);
	if (req->capture) {
		/* written after what the caller put there (read.h) */
		rc.out = *req->capture;
		comb_buf_init(req->capture, rc.out.max);
	} else {
		comb_buf_init(&rc.out, 64u << 20);
	}
	if (!req->relay->cfg.incremental_enabled) {
		send_inc_error(req, 503, "incremental_unavailable",
			       "incremental reads are disabled on this relay");
		goto out;
	}
	switch (inc_request_parse(filter, &rc.in, err, sizeof(err))) {
	case INC_BAD_REQUEST:
		send_inc_error(req, 400, "incremental_bad_request", err);
		goto out;
	case INC_BAD_CURSOR:
		send_inc_error(req, 400, "incremental_bad_cursor", err);
		goto out;
	default:
		break;
	}
	/* Both: the statements choose (READER_KEYS). */
	snprintf(member.pubkey, sizeof(member.pubkey), "%s", req->pubkey);
	snprintf(admin.pubkey, sizeof(admin.pubkey), "%s", req->pubkey);
	access_read_keys_literal(req->relay, &member, rc.keys);
	access_read_keys_literal(req->relay, &admin, rc.admin_keys);
	comb_cursor_scope(req->pubkey, rc.in.channels, rc.in.nchannels,
			  rc.in.types, rc.in.ntypes, rc.scope);
	if (comb_buf_pg_array(&rc.named, rc.in.channels, rc.in.nchannels) ||
	    comb_buf_pg_array(&rc.types, rc.in.types, rc.in.ntypes) ||
	    comb_buf_puts(&rc.out, "{\"changes\":[") ||
	    comb_cursor_key(req->relay->secret_key, key)) {
		http_send_error(req, 503, "error: out of memory");
		goto out;
	}
	mark = rc.out.len;
	do {
		if (req->read_retry) {
			/* A standby failed under the read, which sent nothing:
			 * again, from the start, on the primary. */
			req->read_retry = false;
			rc.out.len = mark;
			rc.out.data[mark] = '\0';
			rc.items = rc.nlist = rc.next = 0;
			rc.pos = 0;
		}
		if (rc.in.has_ids) {
			if (http_borrow_read(req, 0))
				known_ids(&rc);
		} else {
			cursor_read(&rc, key);
		}
	} while (req->read_retry);
out:
	if (admission)
		release_admission(req->relay, token);
	memset(key, 0, sizeof(key));
	comb_buf_release(&rc.named);
	comb_buf_release(&rc.types);
	comb_buf_release(&rc.out);
	free(rc.list);
}

void incremental_read(struct request *req, json_t *filter)
{
	incremental_run(req, filter, true, false, NULL);
}

void incremental_read_for_sync(struct request *req, json_t *filter,
			       enum sync_read kind, struct incremental_page *page)
{
	incremental_run(req, filter, kind == SYNC_READ_CATCHUP, kind == SYNC_READ_LIVE, page);
}
