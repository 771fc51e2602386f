/*
 * Group commit (write.h): the node's queue of submitted writes and the
 * batcher threads that commit them.
 *
 * A batcher takes, under the queue's mutex, the oldest writes whose
 * `order` has no write in another batcher's batch (so a connection's
 * writes keep their order even across batches), up to
 * COMB_WRITE_BATCH_MAX, stopping before a write that must run alone
 * unless it is the first. While other batchers wait for work, it takes
 * only the writes of its share of the queued orders (orders_share) and
 * wakes one of them for the rest. When the batch is not full and the node's
 * previous batch held more than one write (clients are pipelining), it
 * waits up to COMB_WRITE_BATCH_WAIT_US for the queue to hold enough
 * writes to fill it: a submitter wakes a batcher that waits for work at
 * once, but one that gathers only when the batch could be filled, so that
 * batches are full while clients pipeline rather than each write cutting
 * the wait short.
 *
 * A batch of several writes is one transaction:
 *     BEGIN; SAVEPOINT w        write 1
 *     RELEASE SAVEPOINT w; SAVEPOINT w   (accepted) or
 *     ROLLBACK TO SAVEPOINT w            (refused or failed)
 *     ... write n ...           COMMIT
 * Each write runs its kind's writer with `batched` set, so its own
 * BEGIN/COMMIT do nothing and its ROLLBACK rolls back only its savepoint:
 * a refused or failing write leaves the others as they were, and each
 * later write sees the earlier ones exactly as if they had committed
 * before it. Every answer and every live delivery waits for the COMMIT;
 * when the COMMIT (or the connection) fails every write of the batch
 * answers `error:`. A batch of one write runs as before, in its own
 * transaction.
 *
 * Consecutive writes of one kind in a batch (write_joins_run: chat
 * messages, or artifact writes that are not moves) take one savepoint
 * together: their kind's run writer (write_run) answers each as if they
 * ran one after another, in a few statements for the whole run. When one
 * of those statements fails, the run's savepoint is rolled back and its
 * writes run one by one as above, so that a database error fails only
 * the write it touched.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comb/clock.h"
#include "comb/db.h"
#include "comb/error.h"
#include "comb/log.h"
#include "client_addr/client_addr.h"
#include "feed/feed.h"
#include "metrics/metrics.h"
#include "write.h"
#include "write_int.h"

struct write_job {
	struct write_job *next;
	struct comb_event ev;            /* owned */
	struct community community;
	char auth_pubkey[65];
	char addr[COMB_NETADDR_TEXT];    /* the client address it counts against */
	const void *order;
	write_done_fn done;
	void *ctx;
	bool alone;
	struct write_result res;
	struct feed_local *live;         /* what to deliver after commit */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t work;             /* a write was queued, a batch ended */
	pthread_cond_t fill;             /* queued reached gather_need */
	pthread_cond_t room;             /* in_flight fell */
	struct write_job *head, *tail;
	int in_flight;                   /* queued or in a batch */
	int queued;                      /* in the queue, not in a batch */
	int idle;                        /* batchers waiting on work */
	int gathering;                   /* batchers waiting on fill */
	int gather_need;                 /* the fewest queued writes that
	                                    fill a gathering batch */
	int batchers;
	pthread_t *threads;
	const void **running;            /* batch_max orders per batcher */
	int *running_n;
	bool last_batch_plural;          /* the node's last batch had > 1 write */
	struct addr_counts per_addr;     /* writes in flight per client address */
	bool stop, started;
	struct relay *relay;
} wb = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
};

static void job_free(struct write_job *job)
{
	comb_event_release(&job->ev);
	free(job);
}

/* True when order is one of the n orders of set. */
static bool order_among(const void *const *set, int n, const void *order)
{
	int i;

	for (i = 0; i < n; i++) {
		if (set[i] == order)
			return true;
	}
	return false;
}

/* The orders of batcher b's batch (wb.running_n[b] of them). */
static const void **batch_orders(int b)
{
	return &wb.running[b * wb.relay->cfg.write_batch_max];
}

/* True when order has a write in another batcher's batch, or when this
 * scan skipped a write of it (held, held_n). Caller holds mu. */
static bool order_held(int self, const void *order, const void **held,
		       int held_n)
{
	int b;

	if (order_among(held, held_n, order))
		return true;
	for (b = 0; b < wb.batchers; b++) {
		if (b != self && order_among(batch_orders(b), wb.running_n[b], order))
			return true;
	}
	return false;
}

/* How many orders (connections) one batch may take writes of: every one
 * when no other batcher waits for work, else its share of the orders
 * queued among itself and the idle batchers, so that a few busy
 * connections' writes commit in parallel batches instead of one batch
 * holding every connection while the others wait. Caller holds mu. */
static int orders_share(int max)
{
	const void *seen[256];
	int seen_n = 0, scanned = 0;
	struct write_job *job;

	if (wb.idle == 0)
		return INT_MAX;
	for (job = wb.head; job && scanned++ < 4 * max; job = job->next) {
		if (order_among(seen, seen_n, job->order))
			continue;
		if (seen_n == (int)(sizeof(seen) / sizeof(seen[0])))
			break;
		seen[seen_n++] = job->order;
	}
	return (seen_n + wb.idle) / (wb.idle + 1);
}

/* Moves eligible queued writes into batch (n so far, at most max), of at
 * most orders_share orders; returns the new count. Caller holds mu. */
static int collect(int self, struct write_job **batch, int n, int max)
{
	const void *held[256];
	int held_n = 0, scanned = 0, share = orders_share(max), orders = 0, i;
	struct write_job **link = &wb.head, *job, *prev = NULL;
	const void **mine = batch_orders(self);

	if (n > 0 && batch[0]->alone)
		return n;
	for (i = 0; i < wb.running_n[self]; i++)
		orders += !order_among(mine, i, mine[i]);
	while ((job = *link) && n < max && scanned++ < 4 * max) {
		bool known = order_among(mine, wb.running_n[self], job->order);
		bool take = !order_held(self, job->order, held, held_n) &&
			    (!job->alone || n == 0) && (known || orders < share);

		if (!take) {
			if (held_n < (int)(sizeof(held) / sizeof(held[0])))
				held[held_n++] = job->order;
			else
				break;
			prev = job;
			link = &job->next;
			continue;
		}
		*link = job->next;
		if (wb.tail == job)
			wb.tail = prev;
		job->next = NULL;
		wb.queued--;
		batch[n++] = job;
		mine[wb.running_n[self]++] = job->order;
		orders += !known;
		if (job->alone)
			break;
	}
	return n;
}

/* Answers every write of the batch with res (error: on failure). */
static void fail_all(struct write_job **batch, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		write_refuse(&batch[i]->res, 503, "error: database unavailable");
		feed_local_deliver(batch[i]->live, false);
		batch[i]->live = NULL;
	}
}

static bool exec_ok(PGconn *db, const char *sql)
{
	PGresult *res = PQexec(db, sql);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		comb_warn("write batch: %s: %s", sql, PQresultErrorMessage(res));
	PQclear(res);
	return ok;
}

/* Runs one write on db; batched inside the batch's savepoint "w". */
static void run_one(struct write_job *job, PGconn *db, bool batched,
		    bool *broken)
{
	struct writer w = {
		.relay = wb.relay,
		.db = db,
		.community = &job->community,
		.auth_pubkey = job->auth_pubkey,
		.batched = batched,
	};

	feed_local_begin();
	write_dispatch(&w, &job->ev, &job->res);
	job->live = feed_local_take(&job->community, &job->ev,
				    job->res.status == 200);
	*broken = w.db_broken;
}

/* The number of writes at the start of batch (n writes) that form a run
 * (write_joins_run). */
static int run_length(struct write_job **batch, int n)
{
	int len = 1;

	while (len < n && write_joins_run(&batch[0]->ev, &batch[len]->ev))
		len++;
	return len;
}

/*
 * Runs the n >= 2 writes of a run at the start of batch in one step
 * (write_run) in savepoint "w" of the batch's transaction on db. Returns
 * false when that failed: the savepoint is then as before and *broken
 * tells whether the connection was lost.
 */
static bool run_together(struct write_job **batch, int n, PGconn *db,
			 bool *broken)
{
	struct write_item *items = calloc((size_t)n, sizeof(*items));
	struct writer w = {
		.relay = wb.relay,
		.db = db,
		.batched = true,
	};
	int i, rc;

	if (!items)
		return false;
	for (i = 0; i < n; i++) {
		items[i] = (struct write_item){
			.community = &batch[i]->community,
			.ev = &batch[i]->ev,
			.out = &batch[i]->res,
		};
	}
	rc = write_run(&w, items, (size_t)n);
	for (i = 0; i < n && rc == 0; i++)
		batch[i]->live = items[i].live;
	free(items);
	*broken = w.db_broken;
	return rc == 0;
}

/* Runs a batch of n >= 2 writes in one transaction on db; returns false
 * when the connection is to be dropped. A run of consecutive writes of
 * one kind takes one step (run_together), in arrival order with the
 * writes around it; when that fails, its writes run one by one. */
static bool run_batch(struct write_job **batch, int n, PGconn *db)
{
	bool broken = false, committed = false, accepted;
	int i, step, one_by_one_until = 0;

	if (!exec_ok(db, "BEGIN; SAVEPOINT w")) {
		fail_all(batch, n);
		return !comb_db_conn_lost(db);
	}
	for (i = 0; i < n; i += step) {
		step = i < one_by_one_until ? 1 : run_length(batch + i, n - i);
		if (step >= 2 && !run_together(batch + i, step, db, &broken)) {
			one_by_one_until = i + step;
			step = 1;
		}
		if (broken)
			break;
		if (step == 1) {
			run_one(batch[i], db, true, &broken);
			if (broken)
				break;
		}
		/* A run keeps what it stored; its refusals stored nothing. */
		accepted = step > 1 || batch[i]->res.status == 200;
		if (i + step == n && accepted)
			break;
		if (!exec_ok(db, accepted ? "RELEASE SAVEPOINT w; SAVEPOINT w" :
					    "ROLLBACK TO SAVEPOINT w")) {
			broken = true;
			break;
		}
	}
	if (!broken)
		committed = exec_ok(db, "COMMIT");
	if (!committed) {
		if (!comb_db_conn_lost(db) &&
		    PQtransactionStatus(db) != PQTRANS_IDLE)
			PQclear(PQexec(db, "ROLLBACK"));
		fail_all(batch, n);
		return !comb_db_conn_lost(db);
	}
	return true;
}

/* Read-your-writes: records the position of the accepted writes of
 * batch, committed on db, for their authors (write_note_position), one
 * call per community of the batch, before any of them is answered. */
static void record_positions(struct write_job **batch, int n, PGconn *db)
{
	const char **authors;
	bool *done;
	int i, j, k;

	if (comb_read_standbys(wb.relay->reads) == 0)
		return;
	authors = calloc((size_t)n, sizeof(*authors));
	done = calloc((size_t)n, sizeof(*done));
	for (i = 0; authors && done && i < n; i++) {
		if (done[i] || batch[i]->res.status != 200)
			continue;
		for (j = i, k = 0; j < n; j++) {
			if (done[j] || batch[j]->res.status != 200 ||
			    batch[j]->community.id != batch[i]->community.id)
				continue;
			done[j] = true;
			authors[k++] = batch[j]->auth_pubkey;
		}
		write_note_position(wb.relay, db, &batch[i]->community, authors, (size_t)k);
	}
	if (!authors || !done)
		comb_warn("write: out of memory keeping the writes' read position");
	free(authors);
	free(done);
}

static void run(struct write_job **batch, int n)
{
	PGconn *db = comb_db_acquire(wb.relay->db, 2000);
	bool keep = true, broken = false;

	if (!db) {
		fail_all(batch, n);
		return;
	}
	if (n == 1) {
		run_one(batch[0], db, false, &broken);
		keep = !broken && !comb_db_conn_lost(db);
	} else {
		keep = run_batch(batch, n, db);
	}
	if (keep)
		record_positions(batch, n, db);
	comb_db_release(wb.relay->db, db, !keep);
}

/* True when a write after batch[i] (of n) has batch[i]'s order, so that
 * its answer follows batch[i]'s in the same delivery. */
static bool answer_follows(struct write_job **batch, int n, int i)
{
	int j;

	for (j = i + 1; j < n; j++) {
		if (batch[j]->order == batch[i]->order)
			return true;
	}
	return false;
}

/* Waits, up to the node's batch wait, until the queue holds the need
 * writes more that would fill a batch. Caller holds mu. */
static void gather(int need)
{
	struct timespec deadline;

	comb_deadline_in(&deadline, CLOCK_MONOTONIC, 0);
	deadline.tv_nsec += (long)wb.relay->cfg.write_batch_wait_us * 1000;
	deadline.tv_sec += deadline.tv_nsec / 1000000000L;
	deadline.tv_nsec %= 1000000000L;
	wb.gathering++;
	if (need < wb.gather_need)
		wb.gather_need = need;
	while (wb.queued < need && !wb.stop &&
	       pthread_cond_timedwait(&wb.fill, &wb.mu, &deadline) != ETIMEDOUT)
		;
	if (--wb.gathering == 0)
		wb.gather_need = INT_MAX;
}

static void *batcher_main(void *arg)
{
	int self = (int)(intptr_t)arg, max = wb.relay->cfg.write_batch_max;
	struct write_job **batch = calloc((size_t)max, sizeof(*batch));
	int n, i;

	if (!batch) {
		comb_error("write batch: out of memory");
		return NULL;
	}
	pthread_mutex_lock(&wb.mu);
	for (;;) {
		n = collect(self, batch, 0, max);
		if (n == 0) {
			if (wb.stop && !wb.head)
				break;
			wb.idle++;
			pthread_cond_wait(&wb.work, &wb.mu);
			wb.idle--;
			continue;
		}
		if (n < max && !batch[0]->alone && wb.last_batch_plural &&
		    wb.relay->cfg.write_batch_wait_us > 0) {
			gather(max - n);
			n = collect(self, batch, n, max);
		}
		/* what this batch left to the others */
		if (wb.head && wb.idle > 0)
			pthread_cond_signal(&wb.work);
		wb.last_batch_plural = n > 1;
		pthread_mutex_unlock(&wb.mu);

		run(batch, n);
		for (i = 0; i < n; i++) {
			feed_local_deliver(batch[i]->live, true);
			metrics_write(batch[i]->res.message);
			batch[i]->done(batch[i]->ctx, &batch[i]->ev, &batch[i]->res,
				       answer_follows(batch, n, i));
			addr_counts_release(&wb.per_addr, batch[i]->addr);
			job_free(batch[i]);
		}

		pthread_mutex_lock(&wb.mu);
		wb.running_n[self] = 0;
		wb.in_flight -= n;
		pthread_cond_broadcast(&wb.room);
		pthread_cond_broadcast(&wb.work);
	}
	pthread_mutex_unlock(&wb.mu);
	free(batch);
	return NULL;
}

int write_batch_start(struct relay *relay, char *errbuf, size_t errlen)
{
	pthread_condattr_t ca;
	int i, err;

	wb.relay = relay;
	wb.batchers = relay->cfg.db_pool_size / 2 < 1 ? 1 : relay->cfg.db_pool_size / 2;
	wb.threads = calloc((size_t)wb.batchers, sizeof(*wb.threads));
	wb.running = calloc((size_t)wb.batchers * (size_t)relay->cfg.write_batch_max,
			    sizeof(*wb.running));
	wb.running_n = calloc((size_t)wb.batchers, sizeof(*wb.running_n));
	/* the addresses of the writes in flight, and of the worker threads
	 * waiting for the node's room with their address's share claimed */
	if (!wb.per_addr.entries &&
	    addr_counts_init(&wb.per_addr, relay->cfg.write_inflight_per_node +
					   relay->cfg.num_threads)) {
		free(wb.threads);
		wb.threads = NULL;
	}
	if (!wb.threads || !wb.running || !wb.running_n) {
		free(wb.threads);
		free(wb.running);
		free(wb.running_n);
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wb.work, &ca);
	pthread_cond_init(&wb.fill, &ca);
	pthread_cond_init(&wb.room, &ca);
	pthread_condattr_destroy(&ca);
	wb.stop = false;
	wb.gather_need = INT_MAX;
	for (i = 0; i < wb.batchers; i++) {
		err = pthread_create(&wb.threads[i], NULL, batcher_main,
				     (void *)(intptr_t)i);
		if (err) {
			wb.batchers = i;
			wb.started = true;
			write_batch_stop();
			return comb_fail(errbuf, errlen, COMB_EIO,
					 "cannot start a write batcher: %s",
					 strerror(err));
		}
	}
	wb.started = true;
	comb_info("write: %d batchers, at most %d writes per batch", wb.batchers,
		  relay->cfg.write_batch_max);
	return 0;
}

void write_batch_stop(void)
{
	int i;

	if (!wb.started)
		return;
	pthread_mutex_lock(&wb.mu);
	wb.stop = true;
	pthread_cond_broadcast(&wb.work);
	pthread_cond_broadcast(&wb.fill);
	pthread_mutex_unlock(&wb.mu);
	for (i = 0; i < wb.batchers; i++)
		pthread_join(wb.threads[i], NULL);
	pthread_cond_destroy(&wb.work);
	pthread_cond_destroy(&wb.fill);
	pthread_cond_destroy(&wb.room);
	free(wb.threads);
	free(wb.running);
	free(wb.running_n);
	wb.threads = NULL;
	wb.running = NULL;
	wb.running_n = NULL;
	wb.started = false;
}

void write_submit(struct relay *relay, const struct community *c,
		  const char *auth_pubkey, const char *addr, struct comb_event *ev,
		  const void *order, write_done_fn done, void *ctx)
{
	struct write_job *job = calloc(1, sizeof(*job));
	struct writer w = {
		.relay = relay,
		.community = c,
		.auth_pubkey = auth_pubkey,
	};
	struct write_result res;

	if (!job || !write_admit(&w, ev, &res)) {
		if (!job)
			write_refuse(&res, 503, "error: out of memory");
		metrics_write(res.message);
		done(ctx, ev, &res, false);
		comb_event_release(ev);
		free(job);
		return;
	}
	job->ev = *ev;
	memset(ev, 0, sizeof(*ev));
	job->community = *c;
	snprintf(job->auth_pubkey, sizeof(job->auth_pubkey), "%s", auth_pubkey);
	job->order = order;
	job->done = done;
	job->ctx = ctx;
	job->alone = write_runs_alone(&job->ev);
	snprintf(job->addr, sizeof(job->addr), "%s", addr);
	/* the address's share first: waiting for it holds no node slot */
	addr_counts_claim_wait(&wb.per_addr, job->addr,
			       relay->cfg.write_inflight_per_ip);
	pthread_mutex_lock(&wb.mu);
	while (wb.in_flight >= relay->cfg.write_inflight_per_node)
		pthread_cond_wait(&wb.room, &wb.mu);
	wb.in_flight++;
	if (wb.tail)
		wb.tail->next = job;
	else
		wb.head = job;
	wb.tail = job;
	if (++wb.queued >= wb.gather_need)
		pthread_cond_broadcast(&wb.fill);
	if (wb.idle > 0)
		pthread_cond_signal(&wb.work);
	pthread_mutex_unlock(&wb.mu);
}
