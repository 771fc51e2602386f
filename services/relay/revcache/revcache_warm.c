/*
 * The revision cache's warm when a node starts (see revcache.h). A node
 * starts with an empty cache, and after a restart of PostgreSQL, a
 * restore or a bulk load (COPY) the server may hold none of the events'
 * pages in its shared buffers either: the node's first read of many
 * events paid both, reading their pages from the kernel to list them and
 * then their bytes (docs/benchmarks.md, issue 38, part 3). The warm reads
 * the newest stored events, which readers ask for most, once, in the
 * background: a batch per statement through the events_seq index,
 * whose heap pages PostgreSQL keeps in its shared buffers like any
 * read's (a sequential scan would go through a small ring instead).
 *
 * Exactness does not depend on when the warm runs. A stored event's
 * bytes never change (deletion and redaction only flag its row, and a
 * seq is never reused), so the bytes the warm keeps for a seq are those
 * any later read would fetch; which events a read sends is always
 * decided by a statement of its own snapshot, which leaves out what was
 * deleted or redacted, whether the warm read that event's row before or
 * after its removal committed. The warm leaves out what is removed when
 * it reads only so as not to spend its budget on bytes no plain read
 * sends.
 */
#include "revcache.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "comb/clock.h"
#include "comb/db.h"
#include "comb/error.h"
#include "comb/log.h"
#include "comb/readroute.h"
#include "relay.h"

/* A batch: about BATCH_BYTES of events, BATCH_MIN to BATCH_MAX of them
 * (the first one BATCH_FIRST, before their size is known). */
#define BATCH_BYTES (1024 * 1024)
#define BATCH_FIRST 64
#define BATCH_MIN 16
#define BATCH_MAX 1024
/* How long a batch waits for a pooled connection. */
#define POOL_WAIT_MS 2000

/* The node's one warm. */
static struct {
	struct relay *relay;       /* borrowed */
	size_t budget;             /* bytes, entry costs included */
	pthread_t thread;
	bool started;              /* thread to join */
	atomic_bool stop;          /* revcache_warm_stop asks */
	atomic_bool running;
	atomic_ulong events;       /* kept so far */
	atomic_size_t bytes;       /* their cost so far */
	atomic_long ms;            /* run time at the last batch, or in all */
	int64_t t0_ms;             /* comb_monotonic_ms when it started */
} warm;

/* Milliseconds since the warm started. */
static long ms_since_start(void)
{
	return (long)(comb_monotonic_ms() - warm.t0_ms);
}

/* Reads the next batch, at most limit events older than seq before, into
 * *res (the caller PQclear()s it) on a connection lent by the read router
 * and given back at once. Returns 0, or COMB_EUNAVAIL with a warning
 * logged. */
static int read_batch(int64_t before, size_t limit, PGresult **res)
{
	static struct comb_db_stmt stmt = COMB_DB_STMT(
		"SELECT seq, raw FROM events WHERE seq < $1::bigint"
		" AND NOT deleted AND NOT redacted ORDER BY seq DESC LIMIT $2::int", 2);
	struct comb_read_lease lease;
	char at[24], n[24];
	int rc = 0;

	snprintf(at, sizeof(at), "%" PRId64, before);
	snprintf(n, sizeof(n), "%zu", limit);
	*res = NULL;
	if (comb_read_acquire(warm.relay->reads, 0, POOL_WAIT_MS, &lease)) {
		comb_warn("revision cache warm: no database connection");
		return COMB_EUNAVAIL;
	}
	*res = comb_db_exec_stmt(lease.pool, lease.conn, &stmt,
				 (const char *const[]){at, n});
	if (PQresultStatus(*res) != PGRES_TUPLES_OK) {
		comb_warn("revision cache warm: reading stored events failed: %s",
			  PQresultErrorMessage(*res));
		rc = COMB_EUNAVAIL;
	}
	comb_read_release(warm.relay->reads, &lease, rc && comb_db_conn_lost(lease.conn));
	return rc;
}

/* The warm's thread: batches until the budget, the stored events, a
 * database error or the node's stop ends it, then the log line. */
static void *run(void *arg)
{
	const char *why = "every stored event read";
	int64_t before = INT64_MAX;
	size_t limit = BATCH_FIRST, used = 0, read;
	unsigned long kept = 0;

	(void)arg;
	for (;;) {
		PGresult *res;
		bool full = false;
		int row, rows;

		if (atomic_load(&warm.stop) || atomic_load(&warm.relay->draining)) {
			why = "stopped by the node's stop";
			break;
		}
		if (read_batch(before, limit, &res)) {
			why = "stopped by a database error";
			PQclear(res);
			break;
		}
		rows = PQntuples(res);
		for (row = 0, read = 0; row < rows; row++) {
			size_t len = (size_t)PQgetlength(res, row, 1);
			int64_t seq = strtoll(PQgetvalue(res, row, 0), NULL, 10);

			/* the newest that fit, not older ones past one that does not */
			full = used + len + REVCACHE_ENTRY_COST > warm.budget;
			if (full)
				break;
			before = seq;
			read += len;
			if (revcache_put(warm.relay->revisions, seq, PQgetvalue(res, row, 1), len)) {
				used += len + REVCACHE_ENTRY_COST;
				kept++;
				atomic_store(&warm.events, kept);
				atomic_store(&warm.bytes, used);
			}
		}
		PQclear(res);
		atomic_store(&warm.ms, ms_since_start());
		if (full) {
			why = "budget reached";
			break;
		}
		if ((size_t)rows < limit)
			break;   /* the oldest stored event was read */
		limit = BATCH_BYTES / (read / (size_t)rows + 1);
		limit = limit < BATCH_MIN ? BATCH_MIN : limit > BATCH_MAX ? BATCH_MAX : limit;
	}
	atomic_store(&warm.ms, ms_since_start());
	atomic_store(&warm.running, false);
	comb_info("revision cache warm: %lu events, %zu bytes in %ld ms (%s)",
		  kept, used, atomic_load(&warm.ms), why);
	return NULL;
}

int revcache_warm_start(struct relay *relay, char *errbuf, size_t errlen)
{
	size_t budget = (size_t)relay->cfg.revision_cache_warm_mb << 20;
	size_t half = ((size_t)relay->cfg.revision_cache_mb << 20) / 2;

	warm.relay = relay;
	warm.budget = budget < half ? budget : half;
	if (!warm.budget)
		return 0;
	warm.t0_ms = comb_monotonic_ms();
	atomic_store(&warm.running, true);
	if (pthread_create(&warm.thread, NULL, run, NULL)) {
		atomic_store(&warm.running, false);
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "cannot start the revision cache warm");
	}
	warm.started = true;
	return 0;
}

void revcache_warm_stop(void)
{
	if (!warm.started)
		return;
	atomic_store(&warm.stop, true);
	pthread_join(warm.thread, NULL);
	warm.started = false;
}

void revcache_warm_get_stats(struct revcache_warm_stats *out)
{
	out->events = atomic_load(&warm.events);
	out->bytes = atomic_load(&warm.bytes);
	out->ms = atomic_load(&warm.running) ? ms_since_start() : atomic_load(&warm.ms);
	out->running = atomic_load(&warm.running);
}
