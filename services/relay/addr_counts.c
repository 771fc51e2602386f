/*
 * Counts per client address (addr_counts.h): a linear table, since it
 * holds at most a few thousand entries and each operation is one pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr_counts.h"
#include "comb/error.h"

int addr_counts_init(struct addr_counts *t, int size)
{
	t->entries = calloc((size_t)size, sizeof(*t->entries));
	if (!t->entries)
		return COMB_ENOMEM;
	t->size = size;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->freed, NULL);
	return 0;
}

/* addr's entry, else a free one (NULL when full); under t->mu. */
static struct addr_count *find(struct addr_counts *t, const char *addr)
{
	struct addr_count *free_entry = NULL;
	int i;

	for (i = 0; i < t->size; i++) {
		struct addr_count *e = &t->entries[i];

		if (e->n > 0 && !strcmp(e->addr, addr))
			return e;
		if (!free_entry && e->n == 0)
			free_entry = e;
	}
	return free_entry;
}

/* Adds a unit to e (addr's entry or a free one); under t->mu. */
static int add(struct addr_count *e, const char *addr)
{
	if (e->n++ == 0)
		snprintf(e->addr, sizeof(e->addr), "%s", addr);
	return e->n;
}

int addr_counts_add(struct addr_counts *t, const char *addr)
{
	struct addr_count *e;
	int n = -1;

	pthread_mutex_lock(&t->mu);
	e = find(t, addr);
	if (e)
		n = add(e, addr);
	pthread_mutex_unlock(&t->mu);
	return n;
}

bool addr_counts_claim(struct addr_counts *t, const char *addr, int limit)
{
	struct addr_count *e;
	bool ok = false;

	pthread_mutex_lock(&t->mu);
	e = find(t, addr);
	if (e && e->n < limit) {
		add(e, addr);
		ok = true;
	}
	pthread_mutex_unlock(&t->mu);
	return ok;
}

void addr_counts_claim_wait(struct addr_counts *t, const char *addr, int limit)
{
	struct addr_count *e;

	pthread_mutex_lock(&t->mu);
	while (!(e = find(t, addr)) || e->n >= limit)
		pthread_cond_wait(&t->freed, &t->mu);
	add(e, addr);
	pthread_mutex_unlock(&t->mu);
}

void addr_counts_release(struct addr_counts *t, const char *addr)
{
	int i;

	pthread_mutex_lock(&t->mu);
	for (i = 0; i < t->size; i++) {
		if (t->entries[i].n > 0 && !strcmp(t->entries[i].addr, addr)) {
			t->entries[i].n--;
			pthread_cond_broadcast(&t->freed);
			break;
		}
	}
	pthread_mutex_unlock(&t->mu);
}
