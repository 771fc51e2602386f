/*
 * Counts per client address (addr_counts.h): an open-addressing table of
 * a few thousand entries at most, probed linearly from the address's
 * hash (a full pass at worst).
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

/* FNV-1a of addr. */
static unsigned hash(const char *addr)
{
	unsigned h = 2166136261u;

	for (; *addr; addr++)
		h = (h ^ (unsigned char)*addr) * 16777619u;
	return h;
}

/* addr's entry, else a free one (NULL when full); under t->mu. Probes
 * from addr's hash: an entry whose count fell to 0 keeps its address, so
 * the probe goes on past it, and stops at one never used. */
static struct addr_count *find(struct addr_counts *t, const char *addr)
{
	struct addr_count *free_entry = NULL;
	int i, start = (int)(hash(addr) % (unsigned)t->size);

	for (i = 0; i < t->size; i++) {
		struct addr_count *e = &t->entries[(start + i) % t->size];

		if (e->n > 0 && !strcmp(e->addr, addr))
			return e;
		if (!free_entry && e->n == 0)
			free_entry = e;
		if (!e->addr[0])
			break;
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
	struct addr_count *e;

	pthread_mutex_lock(&t->mu);
	e = find(t, addr);
	if (e && e->n > 0) {
		e->n--;
		pthread_cond_broadcast(&t->freed);
	}
	pthread_mutex_unlock(&t->mu);
}
