/*
 * Tenancy: the community bound to a request's Host header, and its admins.
 *
 * Every request looks its host up, so found bindings are kept for
 * HOST_CACHE_TTL_MS in a small direct-mapped table. Only found hosts are
 * kept: a host added a moment ago is never answered "unknown" from the
 * cache, and one removed (comb-admin community remove-host) stops
 * resolving within the TTL. A cached cursor_epoch may be up to the TTL
 * old; incremental reads check the epoch in their own statement.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/clock.h"
#include "comb/error.h"
#include "relay.h"

#define HOST_CACHE_SLOTS 64
#define HOST_CACHE_TTL_MS 2000

struct host_entry {
	char host[256];
	struct community community;
	int64_t expires_ms;
};

static struct host_entry host_cache[HOST_CACHE_SLOTS];
static pthread_mutex_t host_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a of host, reduced to a slot. */
static size_t host_slot(const char *host)
{
	uint32_t h = 2166136261u;

	for (; *host; host++)
		h = (h ^ (unsigned char)*host) * 16777619u;
	return h % HOST_CACHE_SLOTS;
}

bool community_cached(const char *host, struct community *out)
{
	struct host_entry *e = &host_cache[host_slot(host)];
	bool hit;

	pthread_mutex_lock(&host_cache_lock);
	hit = e->expires_ms > comb_monotonic_ms() && !strcmp(e->host, host);
	if (hit)
		*out = e->community;
	pthread_mutex_unlock(&host_cache_lock);
	return hit;
}

static void host_remember(const char *host, const struct community *c)
{
	struct host_entry *e = &host_cache[host_slot(host)];

	if (strlen(host) >= sizeof(e->host))
		return;
	pthread_mutex_lock(&host_cache_lock);
	snprintf(e->host, sizeof(e->host), "%s", host);
	e->community = *c;
	e->expires_ms = comb_monotonic_ms() + HOST_CACHE_TTL_MS;
	pthread_mutex_unlock(&host_cache_lock);
}

int community_lookup(PGconn *db, const char *host, struct community *out)
{
	const char *params[1] = {host};
	PGresult *res;
	int rc = 0;

	if (community_cached(host, out))
		return 0;
	res = PQexecParams(db,
			   "SELECT c.id, c.cursor_epoch FROM community_hosts h"
			   " JOIN communities c ON c.id = h.community_id WHERE h.host = $1",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = COMB_EUNAVAIL;
	else if (PQntuples(res) == 0)
		rc = COMB_ENOTFOUND;
	else {
		out->id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		snprintf(out->id_text, sizeof(out->id_text), "%lld",
			 (long long)out->id);
		out->cursor_epoch = (int)strtol(PQgetvalue(res, 0, 1), NULL, 10);
		host_remember(host, out);
	}
	PQclear(res);
	return rc;
}

bool community_is_admin(struct comb_db_pool *pool, PGconn *db,
			const struct community *c, const char *pubkey,
			bool *failed)
{
	static struct comb_db_stmt stmt = COMB_DB_STMT(
		"SELECT 1 FROM community_admins WHERE community_id = $1 AND pubkey = $2", 2);
	PGresult *res;
	bool admin;

	res = comb_db_exec_stmt(pool, db, &stmt,
				(const char *const[]){c->id_text, pubkey});
	*failed = PQresultStatus(res) != PGRES_TUPLES_OK;
	admin = !*failed && PQntuples(res) == 1;
	PQclear(res);
	return admin;
}
