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

#include "access/access.h"
#include "comb/cursor.h"
#include "comb/error.h"
#include "comb/log.h"
#include "comb/random.h"
#include "comb/redis.h"
#include "comb/replay.h"
#include "metrics/metrics.h"
#include "proto/proto.h"
#include "read.h"
#include "read_int.h"
#include "readpos/readpos.h"

#define NIL_UUID "00000000-0000-0000-0000-000000000000"
#define ADMISSION_KEY "comb:incremental:active"
#define ADMISSION_LEASE_MS 30000
#define ADMISSION_TOKEN_LEN 33   /* 16 random bytes in hex */
#define CATCHUP_ADMISSION_WAIT_MS 2000

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
	const struct incremental_ask *ask;
	struct incremental_page *page;  /* what the read found */
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
	bool expect_change;     /* skip the no-change probe (INCREMENTAL_LIVE) */
	/* The connection the statements run on, lent by the read router. */
	struct comb_read_lease lease;
	bool broken;            /* give it back as broken */
	bool retry;             /* a standby failed under the read: read again
				 * on the primary */
	bool on_primary;        /* after a retry: every read on the primary */
	/* Admission control (not for INCREMENTAL_LIVE): a slot among the
	 * cluster's concurrent reads, claimed before the first statement
	 * (claim_slot) and given back when the read is done. */
	bool slot_due, slot_held;
	char slot[ADMISSION_TOKEN_LEN];
};

/* Records an error of PROTOCOL.md section 8's shape (code and message) as
 * the read's outcome. */
static void page_error(struct read_ctx *rc, int status, const char *code,
		       const char *message)
{
	metrics_incremental(code);
	rc->page->status = status;
	snprintf(rc->page->code, sizeof(rc->page->code), "%s", code);
	snprintf(rc->page->message, sizeof(rc->page->message), "%s", message);
}

/* Records a plain error ({"error": message}) as the read's outcome. */
static void page_fail(struct read_ctx *rc, int status, const char *message)
{
	rc->page->status = status;
	rc->page->code[0] = '\0';
	snprintf(rc->page->message, sizeof(rc->page->message), "%s", message);
}

/*
 * Claims a slot among the cluster-wide concurrent reads, and records the
 * use of the ask's NIP-98 token in the replay store in the same Redis
 * call (a used token takes no slot). *token is set to release the slot.
 * Returns 0; COMB_EREPLAY for a used token; COMB_EDENIED when full;
 * COMB_EUNAVAIL when Redis cannot answer.
 */
static int admit(const struct incremental_ask *ask, char token[ADMISSION_TOKEN_LEN])
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
	struct relay *relay = ask->relay;
	char now_ms[24], max[16], lease[16], expires[24];
	char replay_key[COMB_REPLAY_KEY_LEN];
	bool claim = ask->replay_token && ask->replay_token[0];
	struct timespec now;
	redisReply *r;
	int rc;

	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(now_ms, sizeof(now_ms), "%lld",
		 (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
	if (comb_random_hex(token, (ADMISSION_TOKEN_LEN - 1) / 2))
		return COMB_EUNAVAIL;
	if (claim && comb_replay_key(ask->replay_token, replay_key))
		return COMB_EUNAVAIL;
	snprintf(max, sizeof(max), "%d", relay->cfg.incremental_max_concurrent);
	snprintf(lease, sizeof(lease), "%d", ADMISSION_LEASE_MS);
	snprintf(expires, sizeof(expires), "%lld", (long long)ask->replay_expires);
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
	return rc;
}

/*
 * admit, and for a resumable sync's catch-up, which has no Retry-After to
 * give its client, a wait for a slot: tried again every 5 to 25 ms while
 * the reads are full, up to CATCHUP_ADMISSION_WAIT_MS, so that a thousand
 * syncs reopened at once take turns rather than being closed busy.
 */
static int admit_waiting(const struct incremental_ask *ask, char token[ADMISSION_TOKEN_LEN])
{
	struct timespec start, now, pause;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		rc = admit(ask, token);
		if (rc != COMB_EDENIED || ask->kind != INCREMENTAL_CATCHUP)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >=
		    CATCHUP_ADMISSION_WAIT_MS)
			return rc;
		pause = (struct timespec){.tv_nsec = (5 + (long)comb_random_below(21)) * 1000000};
		nanosleep(&pause, NULL);
	}
}

/* Gives the slot back without waiting for Redis: the read is done, and a
 * slot whose release is lost ends with its lease anyway. */
static void release_admission(struct relay *relay, const char *token)
{
	comb_redis_send(relay->redis, "ZREM %s %s", ADMISSION_KEY, token);
}

/* Claims the read's slot when one is due (admit_waiting); records the
 * refusal and returns false when none is had. */
static bool claim_slot(struct read_ctx *rc)
{
	const struct incremental_ask *ask = rc->ask;
	int admitted;

	if (!rc->slot_due)
		return true;
	rc->slot_due = false;
	admitted = admit_waiting(ask, rc->slot);
	if (admitted == COMB_EREPLAY ||
	    (admitted == COMB_EUNAVAIL && ask->replay_token && ask->replay_token[0])) {
		/* used before, or Redis could not record its use */
		page_fail(rc, admitted == COMB_EREPLAY ? 401 : 503,
			  admitted == COMB_EREPLAY ? "auth-required: authorization already used"
						   : "error: replay store unavailable");
		return false;
	}
	if (admitted) {
		page_error(rc, 503, "incremental_busy",
			   admitted == COMB_EDENIED ? "too many incremental reads are running"
						    : "admission control unavailable");
		return false;
	}
	rc->slot_held = true;
	return true;
}

/* Gives the read's connection back, if it holds one. */
static void give_back(struct read_ctx *rc)
{
	if (!rc->lease.conn)
		return;
	comb_read_release(rc->ask->relay->reads, &rc->lease,
			  rc->broken || comb_db_conn_lost(rc->lease.conn));
	rc->lease = (struct comb_read_lease){0};
	rc->broken = false;
}

/* Borrows a connection of a server that has replayed position at_least
 * and the reader's acknowledged writes (readpos.h); records the error and
 * returns false when none can be had. */
static bool borrow(struct read_ctx *rc, comb_lsn at_least)
{
	give_back(rc);
	if (rc->on_primary)
		at_least = COMB_READ_PRIMARY;
	if (readpos_borrow(rc->ask->relay, rc->ask->community, rc->ask->pubkey,
			   at_least, 2000, &rc->lease)) {
		page_fail(rc, 503, "error: database unavailable");
		return false;
	}
	if (!claim_slot(rc)) {
		give_back(rc);
		return false;
	}
	return true;
}

/* The connection the statements run on, and the pool that prepared them. */
#define DB(rc) (rc)->lease.conn
#define POOL(rc) (rc)->lease.pool

/* Records the outcome of a failed statement: a read to do again on the
 * primary (a standby failed under it), the query budget or the database. */
static void db_failure(struct read_ctx *rc, PGresult *res)
{
	bool lost;

	if (readpos_failed_over(&rc->lease, res, &lost)) {
		rc->broken = lost;
		give_back(rc);
		rc->retry = true;
		rc->on_primary = true;
		return;
	}
	if (comb_db_is_error(res, "57014")) {
		page_error(rc, 503, "incremental_busy", "query budget exceeded");
		return;
	}
	comb_warn("incremental read failed: %s", PQresultErrorMessage(res));
	rc->broken = comb_db_conn_lost(DB(rc));
	page_fail(rc, 503, "error: database unavailable");
}

/* Adds an upsert of artifact d's stored event seq (d may be NULL where
 * nothing compares the page's items by d) or, seq 0, a removal of d to
 * the page; 0 or COMB_ENOMEM. */
static int add_item(struct read_ctx *rc, int64_t seq, const char *d,
		    const char *channel, const char *reason)
{
	struct incremental_page *pg = rc->page;
	struct incremental_item *it;

	if (pg->nitems == pg->capitems) {
		int cap = pg->capitems ? 2 * pg->capitems : 128;
		struct incremental_item *grown = realloc(pg->items, (size_t)cap * sizeof(*grown));

		if (!grown)
			return COMB_ENOMEM;
		pg->items = grown;
		pg->capitems = cap;
	}
	it = &pg->items[pg->nitems++];
	*it = (struct incremental_item){.seq = seq};
	if (d)
		snprintf(it->d, sizeof(it->d), "%s", d);
	if (!seq) {
		snprintf(it->channel, sizeof(it->channel), "%s", channel ? channel : "");
		snprintf(it->reason, sizeof(it->reason), "%s", reason);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* writing a page (both answerers) */

/* A page being written. */
struct page_writer {
	const struct incremental_page *page;
	struct comb_buf *out;
	size_t chunk;
	page_flush_fn flush;
	void *ctx;
	int next;               /* the first item not written yet */
	int written;            /* items written */
};

/* Hands out to the flush once it holds a chunk's worth (or, with all,
 * whatever it holds). */
static int flush_out(struct page_writer *w, bool all)
{
	if (!w->flush || (!all && w->out->len < w->chunk))
		return 0;
	return w->flush(w->ctx, w->out);
}

/* Writes the removals from w->next up to the next upsert or the end. */
static int put_removals(struct page_writer *w)
{
	const struct incremental_page *pg = w->page;
	int err = 0;

	for (; w->next < pg->nitems && !pg->items[w->next].seq && !err; w->next++) {
		const struct incremental_item *it = &pg->items[w->next];

		err = comb_buf_printf(w->out, "%s{\"op\":\"remove\",\"d\":\"%s\"",
				      w->written++ ? "," : "", it->d);
		if (!err && it->channel[0])
			err = comb_buf_printf(w->out, ",\"h\":\"%s\"", it->channel);
		err = err ? err : comb_buf_printf(w->out, ",\"reason\":\"%s\"}", it->reason);
		err = err ? err : flush_out(w, false);
	}
	return err;
}

/* Returns err (0: 0), with the CLOSED reason of a failed page write in why. */
static int write_failed(int err, char *why, size_t whylen)
{
	if (!err)
		return 0;
	return comb_fail(why, whylen, err, err == COMB_EIO ? "error: client gone"
				     : err == COMB_ETOOBIG ? "error: answer too large"
				     : "error: out of memory");
}

/* Puts the seqs of page's upserts, in order, into seqs (room for
 * page->nitems); returns how many. */
static size_t upsert_seqs(const struct incremental_page *page, int64_t *seqs)
{
	size_t k = 0;
	int i;

	for (i = 0; i < page->nitems; i++)
		if (page->items[i].seq)
			seqs[k++] = page->items[i].seq;
	return k;
}

/* event_bytes_fn: the bytes of the next upsert, after the removals
 * before it. */
static int put_next_upsert(void *ctx, const char *raw, size_t len,
			   char *why, size_t whylen)
{
	struct page_writer *w = ctx;
	int err = put_removals(w);

	err = err ? err : comb_buf_puts(w->out, w->written++ ? ",{\"op\":\"upsert\",\"event\":"
							    : "{\"op\":\"upsert\",\"event\":");
	err = err ? err : comb_buf_append(w->out, raw, len);
	err = err ? err : comb_buf_putc(w->out, '}');
	w->next++;
	err = err ? err : flush_out(w, false);
	return write_failed(err, why, whylen);
}

int incremental_page_write(struct relay *relay, const struct incremental_page *page,
			   struct comb_buf *out, size_t chunk, page_flush_fn flush,
			   void *ctx, char *why, size_t whylen)
{
	struct page_writer w = {
		.page = page, .out = out, .chunk = chunk, .flush = flush, .ctx = ctx,
	};
	int64_t *seqs = calloc((size_t)page->nitems + 1, sizeof(*seqs));
	size_t k;
	int err;

	if (!seqs)
		return comb_fail(why, whylen, COMB_ENOMEM, "error: out of memory");
	k = upsert_seqs(page, seqs);
	err = comb_buf_puts(out, "{\"changes\":[");
	if (err) {
		free(seqs);
		return write_failed(err, why, whylen);
	}
	err = read_events_from(relay, &page->bytes, seqs, k, put_next_upsert, &w,
			       why, whylen);
	free(seqs);
	if (err)
		return err;  /* why is set */
	err = put_removals(&w);
	if (!err && page->known_ids)
		err = comb_buf_puts(out, "]}");
	else if (!err)
		err = comb_buf_printf(out, "],\"cursor\":\"%s\",\"more\":%s}",
				      page->cursor, page->more ? "true" : "false");
	err = err ? err : flush_out(&w, true);
	return write_failed(err, why, whylen);
}

void incremental_page_release(struct incremental_page *page)
{
	free(page->items);
	page->items = NULL;
	page->nitems = page->capitems = 0;
}

/* ------------------------------------------------------------------ */
/* reading a page */

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
	p[0] = rc->ask->community->id_text;
	p[1] = rc->ask->pubkey;
	p[2] = rc->keys;
	p[3] = rc->named.data;
	p[4] = rc->in.has_channels ? "true" : "false";
	p[5] = rc->in.has_types ? rc->types.data : NULL;
}

/* Known-ID read: one item per requested d, in request order; one
 * statement, so one snapshot. */
static void known_ids(struct read_ctx *rc)
{
	static struct comb_db_stmt stmt = COMB_DB_STMT(
		"SELECT r.d::text, h.channel_id::text, h.deleted, h.redacted, e.seq,"
		" CASE WHEN h.d IS NULL THEN 0"
		"  WHEN $6::text[] IS NOT NULL AND h.type <> ALL($6::text[]) THEN 0"
		"  ELSE comb_channel_view($1, h.channel_id, $2, " READER_KEYS(8) ","
		"   $4::uuid[], $5) END, " COMB_READ_POSITION_SQL
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
		page_fail(rc, 503, "error: out of memory");
		return;
	}
	p[6] = ids.data;
	p[7] = rc->admin_keys;
	res = comb_db_exec_stmt(POOL(rc), DB(rc), &stmt, p);
	comb_buf_release(&ids);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		db_failure(rc, res);
		PQclear(res);
		return;
	}
	if (PQntuples(res) > 0)
		comb_lsn_parse(PQgetvalue(res, 0, 6), &rc->pos);
	for (i = 0; i < PQntuples(res) && !err; i++) {
		const char *d = PQgetvalue(res, i, 0), *h = PQgetvalue(res, i, 1);
		int view = (int)strtol(PQgetvalue(res, i, 5), NULL, 10);

		if (view == 0)
			err = add_item(rc, 0, d, NULL, "access");
		else if (PQgetvalue(res, i, 2)[0] == 't')
			err = add_item(rc, 0, d, h, "deleted");
		else if (PQgetvalue(res, i, 3)[0] == 't')
			err = add_item(rc, 0, d, h, "redacted");
		else if (view == 2)
			err = add_item(rc, 0, d, h, "ttl");
		else
			err = add_item(rc, strtoll(PQgetvalue(res, i, 4), NULL, 10), NULL,
				       NULL, NULL);
	}
	PQclear(res);
	metrics_incremental("known_ids");
	if (err) {
		page_fail(rc, 503, "error: out of memory");
		return;
	}
	rc->page->known_ids = true;
	rc->page->status = 200;
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
	res = comb_db_exec_stmt(POOL(rc), DB(rc),
				rc->in.has_channels ? &scoped : &unscoped, p);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
		db_failure(rc, res);
		PQclear(res);
		return -1;
	}
	read_horizon(rc, res);
	/* One row with a NULL d when nothing is listed. */
	n = PQgetisnull(res, 0, 4) ? 0 : PQntuples(res);
	for (i = 0; i < n && i < limit && !err; i++) {
		err = add_item(rc, strtoll(PQgetvalue(res, i, 5), NULL, 10),
			       PQgetvalue(res, i, 4), NULL, NULL);
		snprintf(last, 37, "%s", PQgetvalue(res, i, 4));
	}
	PQclear(res);
	if (err) {
		page_fail(rc, 503, "error: out of memory");
		return -1;
	}
	return n;
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
		res = comb_db_exec_stmt(POOL(rc), DB(rc), &probe,
					(const char *const[]){p[0], p[1], after_xid});
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
			db_failure(rc, res);
			PQclear(res);
			return -1;
		}
		read_horizon(rc, res);
		*ran = PQgetvalue(res, 0, 4)[0] == 't';
		PQclear(res);
		if (!*ran)
			return 0;
	}
	res = comb_db_exec_stmt(POOL(rc), DB(rc), &stmt, p);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
		db_failure(rc, res);
		PQclear(res);
		return -1;
	}
	read_horizon(rc, res);
	/* One row with NULL changes when there are none. */
	n = PQgetisnull(res, 0, 5) ? 0 : PQntuples(res);
	for (i = 0; i < n && i < limit && !err; i++) {
		const char *d = PQgetvalue(res, i, 7), *what = PQgetvalue(res, i, 9);

		pos->xid = strtoull(PQgetvalue(res, i, 5), NULL, 10);
		pos->source = (uint8_t)strtol(PQgetvalue(res, i, 6), NULL, 10);
		snprintf(pos->key, sizeof(pos->key), "%s", d);
#ifdef COMB_PLANT_BUG
		/* A deliberate bug for test builds only (cmake -DCOMB_PLANT_BUG=ON,
		 * never in a release): `moved` removals are dropped, so a reader
		 * keeps artifacts that left its view. The convergence checker
		 * (tests/e2e/convergence.test.mjs) must fail against this build. */
		if (!strcmp(what, "moved"))
			continue;
#endif
		if (!strcmp(what, "upsert") && PQgetisnull(res, i, 10)) {
			/* An upsert always names its revision: one without is
			 * a broken database, not an answer. */
			comb_warn("incremental read: an upsert of %s has no revision", d);
			page_fail(rc, 503, "error: database unavailable");
			n = -1;
			goto out;
		}
		if (!strcmp(what, "upsert"))
			err = add_item(rc, strtoll(PQgetvalue(res, i, 10), NULL, 10), d, NULL, NULL);
		else
			err = add_item(rc, 0, d, PQgetvalue(res, i, 8), what);
	}
out:
	PQclear(res);
	if (err) {
		page_fail(rc, 503, "error: out of memory");
		return -1;
	}
	return n;
}

/* Orders pointers to a page's items by d, then by place. */
static int by_d_then_place(const void *a, const void *b)
{
	const struct incremental_item *x = *(const struct incremental_item *const *)a;
	const struct incremental_item *y = *(const struct incremental_item *const *)b;
	int c = strcmp(x->d, y->d);

	return c ? c : (x > y) - (x < y);
}

/*
 * Keeps, of the items of page pg that name one artifact, only the last:
 * within one answer only the latest item about an artifact counts. A
 * change query may name an artifact more than once, and a page that ends
 * a listing and goes on with the changes since the listing's horizon
 * lists an artifact changed above that horizon and names it again (a page
 * naming one revision twice would also ask for its bytes twice). Every
 * item must carry its d. Returns 0 or COMB_ENOMEM.
 */
static int keep_latest(struct incremental_page *pg)
{
	const struct incremental_item **by_d;
	bool *dropped;
	int i, kept = 0;

	if (pg->nitems < 2)
		return 0;
	by_d = malloc((size_t)pg->nitems * sizeof(*by_d));
	dropped = calloc((size_t)pg->nitems, sizeof(*dropped));
	if (!by_d || !dropped) {
		free(by_d);
		free(dropped);
		return COMB_ENOMEM;
	}
	for (i = 0; i < pg->nitems; i++)
		by_d[i] = &pg->items[i];
	qsort(by_d, (size_t)pg->nitems, sizeof(*by_d), by_d_then_place);
	for (i = 0; i + 1 < pg->nitems; i++)
		if (!strcmp(by_d[i]->d, by_d[i + 1]->d))
			dropped[by_d[i] - pg->items] = true;
	for (i = 0; i < pg->nitems; i++)
		if (!dropped[i])
			pg->items[kept++] = pg->items[i];
	pg->nitems = kept;
	free(by_d);
	free(dropped);
	return 0;
}

/* Checks that the cursor was issued for this reader, community and scope;
 * sends the error and returns false. */
static bool cursor_bound_here(struct read_ctx *rc, const struct comb_cursor *c)
{
	if (c->community != rc->ask->community->id ||
	    memcmp(c->scope, rc->scope, sizeof(rc->scope))) {
		page_error(rc, 400, "incremental_bad_cursor",
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
		page_error(rc, 409, "incremental_reset",
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
			page_error(rc, 400, "incremental_bad_cursor",
				       "the cursor is not one this relay issued");
			return;
		}
		if (!cursor_bound_here(rc, &cur))
			return;
	}
	/* Served where the cursor's snapshot, and the reader's writes, are; a
	 * cursor issued before positions were kept names none, and only the
	 * primary surely holds its snapshot. */
	if (!borrow(rc, rc->in.cursor && !cur.lsn ? COMB_READ_PRIMARY
			: cur.lsn > rc->ask->at_least ? cur.lsn : rc->ask->at_least))
		return;
	if (!rc->in.cursor) {
		cur.community = rc->ask->community->id;
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
			if (keep_latest(rc->page)) {
				page_fail(rc, 503, "error: out of memory");
				return;
			}
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
		page_fail(rc, 503, "error: out of memory");
		return;
	}
	memcpy(rc->page->cursor, text, sizeof(rc->page->cursor));
	rc->page->more = more;
	rc->page->status = 200;
}

/* Where the page's upserts' bytes are read once the connection is given
 * back: where the read's position is (a standby's), or on the primary,
 * which holds every event. */
static struct event_source bytes_source(const struct read_ctx *rc)
{
	if (rc->lease.server >= 0 && rc->pos)
		return (struct event_source){.routed = true, .at_least = rc->pos};
	return (struct event_source){.pool = rc->ask->relay->db};
}

/* event_bytes_fn: nothing to do with the bytes, now in the cache. */
static int keep_nothing(void *ctx, const char *raw, size_t len, char *why, size_t whylen)
{
	(void)ctx, (void)raw, (void)len, (void)why, (void)whylen;
	return 0;
}

/* For a small page, reads what the revision cache lacks of its upserts on
 * the connection the read holds anyway, so that its answerer finds them
 * there rather than borrowing another (a larger page's bytes are read a
 * batch at a time as it is written, no connection held). A failure here
 * only leaves the answerer to read them. */
static void warm_small_page(struct read_ctx *rc)
{
	const struct incremental_page *pg = rc->page;
	int64_t seqs[READ_SMALL_ANSWER];
	char why[128];
	size_t k;

	if (pg->status != 200 || pg->nitems > READ_SMALL_ANSWER)
		return;
	k = upsert_seqs(pg, seqs);
	if (k > 0)
		read_events_from(rc->ask->relay,
				 &(struct event_source){.pool = POOL(rc), .held = DB(rc)},
				 seqs, k, keep_nothing, NULL, why, sizeof(why));
}

/* Reads the page rc->in asks for, on the primary after a standby failed
 * under it. */
static void read_once(struct read_ctx *rc, const unsigned char key[32])
{
	do {
		rc->retry = false;
		rc->page->nitems = 0;
		rc->pos = 0;
		if (!rc->in.has_ids)
			cursor_read(rc, key);
		else if (borrow(rc, 0))
			known_ids(rc);
		if (!rc->retry) {
			rc->page->bytes = bytes_source(rc);
			warm_small_page(rc);
		}
		give_back(rc);
	} while (rc->retry);
}

void incremental_read_page(const struct incremental_ask *ask,
			   struct incremental_page *page)
{
	struct read_ctx rc = {
		.ask = ask, .page = page, .expect_change = ask->kind == INCREMENTAL_LIVE,
	};
	struct relay *relay = ask->relay;
	unsigned char key[32];
	struct actor member = {0}, admin = {.community_admin = true};
	char err[256];

	/* Over HTTP the token's use is recorded first, whatever the answer. A
	 * catch-up claims its slot once it holds its connection, so that
	 * syncs opened together queue for connections (in order) rather than
	 * hold slots while they wait for one. */
	rc.slot_due = ask->kind != INCREMENTAL_LIVE;
	if (ask->kind == INCREMENTAL_HTTP && !claim_slot(&rc))
		return;
	comb_buf_init(&rc.named, 64 * INC_MAX_SCOPE);
	comb_buf_init(&rc.types, 160 * INC_MAX_SCOPE);
	if (!relay->cfg.incremental_enabled) {
		page_error(&rc, 503, "incremental_unavailable",
			   "incremental reads are disabled on this relay");
		goto out;
	}
	switch (inc_request_parse(ask->filter, &rc.in, err, sizeof(err))) {
	case INC_BAD_REQUEST:
		page_error(&rc, 400, "incremental_bad_request", err);
		goto out;
	case INC_BAD_CURSOR:
		page_error(&rc, 400, "incremental_bad_cursor", err);
		goto out;
	default:
		break;
	}
	/* Both: the statements choose (READER_KEYS). */
	snprintf(member.pubkey, sizeof(member.pubkey), "%s", ask->pubkey);
	snprintf(admin.pubkey, sizeof(admin.pubkey), "%s", ask->pubkey);
	access_read_keys_literal(relay, &member, rc.keys);
	access_read_keys_literal(relay, &admin, rc.admin_keys);
	comb_cursor_scope(ask->pubkey, rc.in.channels, rc.in.nchannels,
			  rc.in.types, rc.in.ntypes, rc.scope);
	if (comb_buf_pg_array(&rc.named, rc.in.channels, rc.in.nchannels) ||
	    comb_buf_pg_array(&rc.types, rc.in.types, rc.in.ntypes) ||
	    comb_cursor_key(relay->secret_key, key)) {
		page_fail(&rc, 503, "error: out of memory");
		goto out;
	}
	read_once(&rc, key);
out:
	if (rc.slot_held)
		release_admission(relay, rc.slot);
	memset(key, 0, sizeof(key));
	comb_buf_release(&rc.named);
	comb_buf_release(&rc.types);
}
