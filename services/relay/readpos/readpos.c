/*
 * Read positions kept in Redis: key comb:readpos:<community>:<pubkey>,
 * value the position as 16 hexadecimal digits (so that Lua compares two
 * of them as strings), kept for a while after the last write: longer
 * than any standby in rotation can lag behind it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/log.h"
#include "comb/redis.h"
#include "readpos.h"

#define KEY_MAX 128
/* A kept position outlives the lag any standby in rotation may have by
 * far; past it every standby in rotation has replayed the write. */
#define KEEP_MIN_MS 60000

static void key_of(const struct community *c, const char *pubkey, char out[KEY_MAX])
{
	snprintf(out, KEY_MAX, "comb:readpos:%s:%s", c->id_text, pubkey);
}

static long long keep_ms(const struct relay *relay)
{
	long long ms = 4LL * relay->cfg.read_max_lag_ms;

	return ms > KEEP_MIN_MS ? ms : KEEP_MIN_MS;
}

/* comb_redis_script takes at most 16 arguments: the keys of one call
 * and its two values. */
#define KEYS_PER_CALL 14

int readpos_record(struct relay *relay, const struct community *c,
		   const char *const *authors, size_t n, comb_lsn lsn)
{
	static const char script[] =
		"for _, k in ipairs(KEYS) do\n"
		"  local v = redis.call('GET', k)\n"
		"  if not v or v < ARGV[1] then\n"
		"    redis.call('SET', k, ARGV[1], 'PX', ARGV[2])\n"
		"  else\n"
		"    redis.call('PEXPIRE', k, ARGV[2])\n"
		"  end\n"
		"end\n"
		"return 1";
	char (*keys)[KEY_MAX];
	const char *args[KEYS_PER_CALL + 2];
	char pos[24], keep[24];
	redisReply *r;
	size_t i, j, nkeys = 0, k;
	int rc = 0;

	if (comb_read_standbys(relay->reads) == 0 || n == 0)
		return 0;
	keys = calloc(n, sizeof(*keys));
	if (!keys)
		return COMB_EUNAVAIL;
	/* each author once (a batch holds many writes of one author) */
	for (i = 0; i < n; i++) {
		for (j = 0; j < i && strcmp(authors[j], authors[i]) != 0; j++)
			;
		if (j == i)
			key_of(c, authors[i], keys[nkeys++]);
	}
	snprintf(pos, sizeof(pos), "%016" PRIx64, lsn);
	snprintf(keep, sizeof(keep), "%lld", keep_ms(relay));
	/* one call per KEYS_PER_CALL authors: one for any batch of fewer */
	for (i = 0; i < nkeys && rc == 0; i += k) {
		k = nkeys - i < KEYS_PER_CALL ? nkeys - i : KEYS_PER_CALL;
		for (j = 0; j < k; j++)
			args[j] = keys[i + j];
		args[k] = pos;
		args[k + 1] = keep;
		r = comb_redis_script(relay->redis, script, (int)k, args, (int)k + 2);
		rc = r && r->type == REDIS_REPLY_INTEGER ? 0 : COMB_EUNAVAIL;
		if (r)
			freeReplyObject(r);
	}
	free(keys);
	return rc;
}

int readpos_of(struct relay *relay, const struct community *c,
	       const char *reader, comb_lsn *out)
{
	char key[KEY_MAX], *end;
	redisReply *r;
	int rc = 0;

	*out = 0;
	if (comb_read_standbys(relay->reads) == 0 || !reader || !*reader)
		return 0;
	key_of(c, reader, key);
	r = comb_redis_command(relay->redis, "GET %s", key);
	if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
		rc = COMB_EUNAVAIL;
	} else if (r->type == REDIS_REPLY_STRING) {
		*out = strtoull(r->str, &end, 16);
		if (*end)
			rc = COMB_EUNAVAIL;
	}
	if (r)
		freeReplyObject(r);
	return rc;
}

int readpos_borrow(struct relay *relay, const struct community *c,
		   const char *reader, comb_lsn at_least, int pool_wait_ms,
		   struct comb_read_lease *out)
{
	comb_lsn own = 0;

	if (readpos_of(relay, c, reader, &own)) {
		/* Only the primary is sure to hold the reader's writes.
		 * (Debug only: with Redis down every read says so, and
		 * comb_read_fallbacks_total counts them.) */
		comb_debug("read routing: Redis cannot say where %s last wrote; reading from the primary",
			   reader);
		own = COMB_READ_PRIMARY;
	}
	return comb_read_acquire(relay->reads, own > at_least ? own : at_least,
				 pool_wait_ms, out);
}

bool readpos_failed_over(const struct comb_read_lease *lease, const PGresult *res,
			 bool *lost)
{
	*lost = false;
	if (!lease->conn || lease->server < 0)
		return false;
	*lost = comb_db_conn_lost(lease->conn);
	if (!*lost && !comb_db_is_error(res, "40001") && !comb_db_is_error(res, "40P01"))
		return false;
	comb_warn("read routing: a read failed on a standby (%s); reading again on the primary",
		  *lost ? "connection lost" : "cancelled by replay");
	return true;
}
