/*
 * The relay's process-wide state, built once at start-up and read by every
 * worker thread, and the per-request context handlers receive.
 */
#ifndef COMB_RELAY_H
#define COMB_RELAY_H

#include <civetweb.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/buf.h"
#include "comb/config.h"
#include "comb/db.h"
#include "comb/policy_set.h"
#include "comb/readroute.h"
#include "comb/redis.h"

struct relay {
	struct comb_config cfg;
	struct comb_db_pool *db;        /* the primary's: writes, and reads
					 * that need no routing */
	struct comb_read_router *reads; /* reads, over the primary and its
					 * standbys (readpos.h) */
	struct comb_redis_pool *redis;
	struct comb_policy_set *policy;
	struct revcache *revisions;     /* revcache.h; never NULL once started */
	unsigned char secret_key[32];
	char pubkey[65];
	struct mg_context *http;
	atomic_bool draining;           /* shutting down: /readyz 503 */
};

/* The community a request belongs to, from its Host header. */
struct community {
	int64_t id;
	char id_text[24];
	int cursor_epoch;
};

/* True when the community bound to host (lowercase, no port) was looked
 * up less than a couple of seconds ago: *out is set without asking the
 * database. */
bool community_cached(const char *host, struct community *out);

/* Looks up the community bound to host (lowercase, no port). Returns 0,
 * COMB_ENOTFOUND, or COMB_EUNAVAIL when the database failed. */
int community_lookup(PGconn *db, const char *host, struct community *out);

/* True when pubkey is an admin of community, asked on db (borrowed from
 * pool, where the statement is prepared once per connection). Returns
 * false on error too; *failed tells the two apart. */
bool community_is_admin(struct comb_db_pool *pool, PGconn *db,
			const struct community *c, const char *pubkey,
			bool *failed);

#endif
