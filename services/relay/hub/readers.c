/*
 * The readers of open WebSockets on this node, by community, and the
 * application of community admin changes to them (hub.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "access/access.h"
#include "comb/db.h"
#include "comb/error.h"
#include "comb/log.h"
#include "hub.h"
#include "hub_int.h"

#define BUCKETS 256

struct node {
	struct node *next;
	struct reader_access *ra;
};

static struct {
	pthread_mutex_t mu;
	struct node *buckets[BUCKETS];
} readers = {.mu = PTHREAD_MUTEX_INITIALIZER};

static unsigned bucket_of(int64_t community)
{
	return (unsigned)((uint64_t)community * 11400714819323198485ULL >> 56) % BUCKETS;
}

void readers_apply_admin(const struct comb_signal *s)
{
	struct node *n;

	if (s->type != COMB_SIGNAL_ADMIN)
		return;
	pthread_mutex_lock(&readers.mu);
	for (n = readers.buckets[bucket_of(s->community)]; n; n = n->next) {
		if (n->ra->community_id != s->community ||
		    strcmp(n->ra->pubkey, s->pubkey))
			continue;
		atomic_fetch_add(&n->ra->generation, 1);
		atomic_store(&n->ra->admin, s->kind == 1);
	}
	pthread_mutex_unlock(&readers.mu);
}

void hub_stop(void)
{
	struct node *n, *next;
	size_t b;

	pthread_mutex_lock(&readers.mu);
	for (b = 0; b < BUCKETS; b++) {
		for (n = readers.buckets[b]; n; n = next) {
			next = n->next;
			free(n);
		}
		readers.buckets[b] = NULL;
	}
	pthread_mutex_unlock(&readers.mu);
}

int hub_add_reader(struct reader_access *ra)
{
	struct node *n = malloc(sizeof(*n));
	unsigned b = bucket_of(ra->community_id);

	if (!n)
		return COMB_ENOMEM;
	n->ra = ra;
	pthread_mutex_lock(&readers.mu);
	n->next = readers.buckets[b];
	readers.buckets[b] = n;
	pthread_mutex_unlock(&readers.mu);
	return 0;
}

void hub_remove_reader(struct reader_access *ra)
{
	struct node **p, *n = NULL;

	pthread_mutex_lock(&readers.mu);
	for (p = &readers.buckets[bucket_of(ra->community_id)]; *p; p = &(*p)->next) {
		if ((*p)->ra == ra) {
			n = *p;
			*p = n->next;
			break;
		}
	}
	pthread_mutex_unlock(&readers.mu);
	free(n);
}

int hub_load_admin(struct relay *relay, const struct community *c,
		   struct reader_access *ra, comb_lsn *primary_at)
{
	static struct comb_db_stmt stmt = COMB_DB_STMT(
		"SELECT EXISTS (SELECT 1 FROM community_admins"
		" WHERE community_id = $1 AND pubkey = $2),"
		" pg_current_wal_insert_lsn()::text", 2);
	unsigned before = atomic_load(&ra->generation);
	PGresult *res;
	PGconn *db;
	bool admin;
	int rc = 0;

	db = comb_db_acquire(relay->db, 2000);
	if (!db)
		return COMB_EUNAVAIL;
	res = comb_db_exec_stmt(relay->db, db, &stmt,
				(const char *const[]){c->id_text, ra->pubkey});
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		PQclear(res);
		comb_db_release(relay->db, db, comb_db_conn_lost(db));
		return COMB_EUNAVAIL;
	}
	admin = PQgetvalue(res, 0, 0)[0] == 't';
	if (primary_at && comb_lsn_parse(PQgetvalue(res, 0, 1), primary_at))
		rc = COMB_EUNAVAIL;
	PQclear(res);
	comb_db_release(relay->db, db, false);
	/* A signal counted meanwhile is at least as new as what was read. */
	pthread_mutex_lock(&readers.mu);
	if (atomic_load(&ra->generation) == before)
		atomic_store(&ra->admin, admin);
	pthread_mutex_unlock(&readers.mu);
	return rc;
}
