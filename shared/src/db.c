/*
 * The PostgreSQL connection pool: a fixed array of slots, a mutex and a
 * condition variable. Connections are opened lazily and checked on
 * release; a connection whose socket is gone is closed and reopened by the
 * next borrower. Each slot also remembers which comb_db_stmt statements
 * its connection has prepared, one bit per statement number.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comb/db.h"
#include "comb/clock.h"
#include "comb/error.h"
#include "comb/log.h"

struct slot {
	PGconn *conn;
	bool busy;
	uint64_t prepared;  /* bit n-1: statement n is prepared on conn */
};

/* Statement numbers are handed out once per process, under this lock. */
static pthread_mutex_t stmt_ids_lock = PTHREAD_MUTEX_INITIALIZER;
static int stmt_ids_used;

struct comb_db_pool {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	char *conninfo;
	char options[64];
	char *warm_sql;     /* run on each new connection, or NULL */
	pthread_t opener;   /* comb_db_pool_open_all's thread */
	bool opening;       /* it was started (and is joined on free) */
	atomic_bool closing;
	int size;
	struct slot *slots;
	long waits;
	long failures;
};

struct comb_db_pool *comb_db_pool_new(const char *conninfo, int size,
				      int statement_timeout_ms)
{
	struct comb_db_pool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return NULL;
	pool->conninfo = strdup(conninfo);
	pool->slots = calloc((size_t)size, sizeof(*pool->slots));
	if (!pool->conninfo || !pool->slots) {
		free(pool->conninfo);
		free(pool->slots);
		free(pool);
		return NULL;
	}
	pool->size = size;
	snprintf(pool->options, sizeof(pool->options),
		 "-c statement_timeout=%d", statement_timeout_ms);
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->freed, NULL);
	return pool;
}

void comb_db_pool_free(struct comb_db_pool *pool)
{
	int i;

	if (!pool)
		return;
	atomic_store(&pool->closing, true);
	if (pool->opening)
		pthread_join(pool->opener, NULL);
	for (i = 0; i < pool->size; i++)
		if (pool->slots[i].conn)
			PQfinish(pool->slots[i].conn);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->freed);
	free(pool->slots);
	free(pool->conninfo);
	free(pool->warm_sql);
	free(pool);
}

int comb_db_pool_warm(struct comb_db_pool *pool, const char *sql)
{
	char *copy = strdup(sql);

	if (!copy)
		return COMB_ENOMEM;
	free(pool->warm_sql);
	pool->warm_sql = copy;
	return 0;
}

static PGconn *connect_db(struct comb_db_pool *pool)
{
	const char *keys[] = {"dbname", "options", "application_name",
			      "connect_timeout", NULL};
	const char *values[] = {pool->conninfo, pool->options, "comb",
				"5", NULL};
	PGconn *conn = PQconnectdbParams(keys, values, 1);

	if (PQstatus(conn) != CONNECTION_OK) {
		comb_warn("database connection failed: %s",
			  conn ? PQerrorMessage(conn) : "out of memory");
		PQfinish(conn);
		return NULL;
	}
	if (pool->warm_sql) {
		PGresult *res = PQexec(conn, pool->warm_sql);

		if (PQresultStatus(res) != PGRES_TUPLES_OK &&
		    PQresultStatus(res) != PGRES_COMMAND_OK)
			comb_debug("database: warming a new connection failed: %s",
				   PQresultErrorMessage(res));
		PQclear(res);
	}
	return conn;
}

/* Opens the connection of one slot nobody holds that has none; returns
 * false when there is no such slot or the database cannot be reached. */
static bool open_one(struct comb_db_pool *pool)
{
	struct slot *slot = NULL;
	PGconn *conn;
	int i;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < pool->size && !slot; i++)
		if (!pool->slots[i].busy && !pool->slots[i].conn)
			slot = &pool->slots[i];
	if (slot)
		slot->busy = true;
	pthread_mutex_unlock(&pool->lock);
	if (!slot)
		return false;
	conn = connect_db(pool);
	pthread_mutex_lock(&pool->lock);
	slot->conn = conn;
	slot->prepared = 0;
	slot->busy = false;
	if (!conn)
		pool->failures++;
	pthread_cond_signal(&pool->freed);
	pthread_mutex_unlock(&pool->lock);
	return conn != NULL;
}

static void *open_slots(void *arg)
{
	struct comb_db_pool *pool = arg;

	while (!atomic_load(&pool->closing) && open_one(pool))
		;
	return NULL;
}

int comb_db_pool_open_all(struct comb_db_pool *pool)
{
	if (pool->opening)
		return 0;
	if (pthread_create(&pool->opener, NULL, open_slots, pool))
		return COMB_ENOMEM;
	pool->opening = true;
	return 0;
}

static int find_free(struct comb_db_pool *pool)
{
	int i, empty = -1;

	for (i = 0; i < pool->size; i++) {
		if (pool->slots[i].busy)
			continue;
		if (pool->slots[i].conn)
			return i;
		if (empty < 0)
			empty = i;
	}
	return empty;
}

PGconn *comb_db_acquire(struct comb_db_pool *pool, int wait_ms)
{
	struct timespec deadline;
	struct slot *slot;
	bool fresh = false;
	PGconn *conn;
	int i;

	comb_deadline_in(&deadline, CLOCK_REALTIME, wait_ms);

	pthread_mutex_lock(&pool->lock);
	while ((i = find_free(pool)) < 0) {
		pool->waits++;
		if (pthread_cond_timedwait(&pool->freed, &pool->lock,
					   &deadline) == ETIMEDOUT) {
			pthread_mutex_unlock(&pool->lock);
			return NULL;
		}
	}
	slot = &pool->slots[i];
	slot->busy = true;
	conn = slot->conn;
	pthread_mutex_unlock(&pool->lock);

	if (conn && PQstatus(conn) != CONNECTION_OK) {
		PQfinish(conn);
		conn = NULL;
	}
	if (!conn) {
		conn = connect_db(pool);
		fresh = true;
	}

	pthread_mutex_lock(&pool->lock);
	/* A new connection (possibly at the old one's address) has prepared
	 * nothing yet. */
	if (fresh)
		slot->prepared = 0;
	slot->conn = conn;
	if (!conn) {
		slot->busy = false;
		pool->failures++;
		pthread_cond_signal(&pool->freed);
	}
	pthread_mutex_unlock(&pool->lock);
	return conn;
}

void comb_db_release(struct comb_db_pool *pool, PGconn *conn, bool broken)
{
	int i;

	if (!conn)
		return;
	/* A connection a failure left in pipeline mode is not reused. */
	if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF)
		broken = true;
	if (!broken && PQtransactionStatus(conn) != PQTRANS_IDLE) {
		PGresult *res = PQexec(conn, "ROLLBACK");

		broken = PQresultStatus(res) != PGRES_COMMAND_OK;
		PQclear(res);
	}
	if (PQstatus(conn) != CONNECTION_OK)
		broken = true;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < pool->size; i++) {
		if (pool->slots[i].conn != conn)
			continue;
		if (broken) {
			PQfinish(conn);
			pool->slots[i].conn = NULL;
			pool->slots[i].prepared = 0;
		}
		pool->slots[i].busy = false;
		break;
	}
	pthread_cond_signal(&pool->freed);
	pthread_mutex_unlock(&pool->lock);
}

void comb_db_stats(struct comb_db_pool *pool, struct comb_db_stats *out)
{
	int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&pool->lock);
	out->size = pool->size;
	for (i = 0; i < pool->size; i++) {
		out->open += pool->slots[i].conn != NULL;
		out->in_use += pool->slots[i].busy;
	}
	out->waits = pool->waits;
	out->failures = pool->failures;
	pthread_mutex_unlock(&pool->lock);
}

int comb_db_exec(PGconn *conn, const char *sql, char *errbuf, size_t errlen)
{
	PGresult *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	int rc = 0;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		rc = comb_fail(errbuf, errlen,
			       comb_db_conn_lost(conn) ? COMB_EUNAVAIL : COMB_EINVAL,
			       "%s", PQresultErrorMessage(res));
	}
	PQclear(res);
	return rc;
}

bool comb_db_conn_lost(PGconn *conn)
{
	return PQstatus(conn) != CONNECTION_OK;
}

bool comb_db_is_error(const PGresult *res, const char *sqlstate)
{
	const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	return code && !strcmp(code, sqlstate);
}

/* The statement's number (1...COMB_DB_MAX_STMTS), given on first use; 0
 * when every number is taken. */
static int stmt_id(struct comb_db_stmt *stmt)
{
	int id = atomic_load(&stmt->id);

	if (id)
		return id;
	pthread_mutex_lock(&stmt_ids_lock);
	id = atomic_load(&stmt->id);
	if (!id && stmt_ids_used < COMB_DB_MAX_STMTS) {
		id = ++stmt_ids_used;
		atomic_store(&stmt->id, id);
	}
	pthread_mutex_unlock(&stmt_ids_lock);
	if (!id)
		comb_warn("database: more than %d prepared statements, running unprepared",
			  COMB_DB_MAX_STMTS);
	return id;
}

/* The slot that holds conn, or NULL. Call with pool->lock held. */
static struct slot *slot_of(struct comb_db_pool *pool, const PGconn *conn)
{
	int i;

	for (i = 0; i < pool->size; i++)
		if (pool->slots[i].conn == conn)
			return &pool->slots[i];
	return NULL;
}

/*
 * Makes sure conn (borrowed from pool) has stmt prepared, preparing it
 * now when it has not, and writes its name to name. Returns 1 (prepared),
 * 0 (it runs unprepared: no number is left or conn is not the pool's), or
 * -1 with the failed preparation's result in *failed.
 */
static int prepare_once(struct comb_db_pool *pool, PGconn *conn,
			struct comb_db_stmt *stmt, char name[32],
			PGresult **failed)
{
	uint64_t bit;
	struct slot *slot;
	PGresult *res;
	bool known;
	int id = stmt_id(stmt);

	if (!id)
		return 0;
	bit = UINT64_C(1) << (id - 1);
	pthread_mutex_lock(&pool->lock);
	slot = slot_of(pool, conn);
	known = slot && (slot->prepared & bit);
	pthread_mutex_unlock(&pool->lock);
	if (!slot)
		return 0;
	snprintf(name, 32, "comb_stmt_%d", id);
	if (known)
		return 1;
	res = PQprepare(conn, name, stmt->sql, stmt->nparams, NULL);
	/* 42P05: conn has it already (the pool lost track): note it. Inside
	 * a transaction that error has aborted it, which the execution then
	 * reports. */
	if (PQresultStatus(res) != PGRES_COMMAND_OK &&
	    !comb_db_is_error(res, "42P05")) {
		*failed = res;
		return -1;
	}
	PQclear(res);
	/* Only the borrower touches its slot's bits, but other slots share
	 * the lock. */
	pthread_mutex_lock(&pool->lock);
	slot->prepared |= bit;
	pthread_mutex_unlock(&pool->lock);
	return 1;
}

PGresult *comb_db_exec_stmt(struct comb_db_pool *pool, PGconn *conn,
			    struct comb_db_stmt *stmt,
			    const char *const *params)
{
	PGresult *failed = NULL;
	char name[32];

	switch (prepare_once(pool, conn, stmt, name, &failed)) {
	case 1:
		return PQexecPrepared(conn, name, stmt->nparams, params, NULL,
				      NULL, 0);
	case 0:
		return PQexecParams(conn, stmt->sql, stmt->nparams, NULL, params,
				    NULL, NULL, 0);
	default:
		return failed;
	}
}

/* Queues step (its statement prepared as prepared says, named name) on
 * conn in pipeline mode. Returns libpq's answer (1 queued). */
static int send_step(PGconn *conn, const struct comb_db_step *step,
		     int prepared, const char *name)
{
	if (!step->stmt)
		return PQsendQueryParams(conn, step->sql, 0, NULL, NULL, NULL,
					 NULL, 0);
	if (prepared == 1)
		return PQsendQueryPrepared(conn, name, step->stmt->nparams,
					   step->params, NULL, NULL, 0);
	return PQsendQueryParams(conn, step->stmt->sql, step->stmt->nparams,
				 NULL, step->params, NULL, NULL, 0);
}

int comb_db_exec_together(struct comb_db_pool *pool, PGconn *conn,
			  const struct comb_db_step *steps, size_t count,
			  PGresult **results)
{
	char names[COMB_DB_MAX_STEPS][32];
	int prepared[COMB_DB_MAX_STEPS];
	bool ok = count <= COMB_DB_MAX_STEPS;
	size_t i, sent = 0;
	PGresult *res;

	for (i = 0; i < count; i++)
		results[i] = NULL;
	for (i = 0; ok && i < count; i++) {
		prepared[i] = steps[i].stmt ?
			prepare_once(pool, conn, steps[i].stmt, names[i], &results[i]) : 0;
		ok = prepared[i] >= 0;
	}
	if (!ok || !PQenterPipelineMode(conn))
		return COMB_EUNAVAIL;
	while (sent < count && send_step(conn, &steps[sent], prepared[sent], names[sent]))
		sent++;
	ok = sent == count;
	if (sent > 0 && PQpipelineSync(conn)) {
		/* Each queued step answers with its result and a NULL; the
		 * sync's result ends the lot. */
		for (i = 0; i < sent && (results[i] = PQgetResult(conn)); i++) {
			ok = ok && PQresultStatus(results[i]) != PGRES_FATAL_ERROR &&
			     PQresultStatus(results[i]) != PGRES_PIPELINE_ABORTED;
			while ((res = PQgetResult(conn)) != NULL)
				PQclear(res);
		}
		res = i == sent ? PQgetResult(conn) : NULL;
		ok = ok && PQresultStatus(res) == PGRES_PIPELINE_SYNC;
		PQclear(res);
	} else {
		ok = false;
	}
	if (!PQexitPipelineMode(conn))
		ok = false;
	return ok ? 0 : COMB_EUNAVAIL;
}
