/*
 * The readers of open WebSockets on this node, by community, and the
 * signal that applies community admin changes to them (hub.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "comb/error.h"
#include "comb/log.h"
#include "hub.h"

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

void hub_signal(const struct comb_signal *s)
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
		   struct reader_access *ra)
{
	unsigned before = atomic_load(&ra->generation);
	bool failed = false, admin;
	PGconn *db;

	db = comb_db_acquire(relay->db, 2000);
	if (!db)
		return COMB_EUNAVAIL;
	admin = community_is_admin(relay->db, db, c, ra->pubkey, &failed);
	comb_db_release(relay->db, db, failed && comb_db_conn_lost(db));
	if (failed)
		return COMB_EUNAVAIL;
	/* A signal counted meanwhile is at least as new as what was read. */
	pthread_mutex_lock(&readers.mu);
	if (atomic_load(&ra->generation) == before)
		atomic_store(&ra->admin, admin);
	pthread_mutex_unlock(&readers.mu);
	return 0;
}
