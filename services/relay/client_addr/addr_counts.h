/*
 * A count per client address under one lock, for the per-address caps
 * (client_addr.c, write/batch.c): holders claim a unit for an address and
 * give it back. The table has room for a fixed number of distinct
 * addresses; callers size it by how many units can be held at once, so
 * that it never runs out.
 */
#ifndef COMB_ADDR_COUNTS_H
#define COMB_ADDR_COUNTS_H

#include <pthread.h>
#include <stdbool.h>

#include "comb/netaddr.h"

struct addr_counts {
	pthread_mutex_t mu;
	pthread_cond_t freed;        /* a unit was given back */
	struct addr_count {
		char addr[COMB_NETADDR_TEXT];
		int n;               /* 0: a free entry */
	} *entries;
	int size;
};

/* Sets t up with room for size distinct addresses. Returns 0 or
 * COMB_ENOMEM. */
int addr_counts_init(struct addr_counts *t, int size);

/* Claims a unit for addr. Returns the address's count with it (it is
 * claimed whatever the count: the caller gives it back when it refuses
 * past a limit), or -1 when the table is full. */
int addr_counts_add(struct addr_counts *t, const char *addr);

/* Claims a unit for addr when it holds fewer than limit; false otherwise
 * (or when the table is full). */
bool addr_counts_claim(struct addr_counts *t, const char *addr, int limit);

/* Claims a unit for addr, waiting while it holds limit or more (or the
 * table is full). */
void addr_counts_claim_wait(struct addr_counts *t, const char *addr, int limit);

/* Gives back a unit addr holds (a no-op when it holds none). */
void addr_counts_release(struct addr_counts *t, const char *addr);

#endif
