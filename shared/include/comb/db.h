/*
 * A pool of PostgreSQL connections shared by a service's threads. A
 * connection found broken is dropped and replaced on next use, so a
 * restarted database is picked up without restarting the service.
 */
#ifndef COMB_DB_H
#define COMB_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

struct comb_db_pool;

struct comb_db_stats {
	int size;       /* connections allowed */
	int open;       /* connections established */
	int in_use;     /* connections lent out now */
	long waits;     /* acquisitions that had to wait for a free connection */
	long failures;  /* connection attempts that failed */
};

/*
 * Creates a pool of at most size connections to conninfo. Every
 * connection runs with statement_timeout = statement_timeout_ms. Does not
 * connect yet. Returns NULL only when out of memory.
 */
struct comb_db_pool *comb_db_pool_new(const char *conninfo, int size,
				      int statement_timeout_ms);
void comb_db_pool_free(struct comb_db_pool *pool);

/*
 * Sets sql (copied) to run on each connection the pool opens from now on,
 * before its first borrower gets it: a statement that loads and plans
 * what the first real statements would otherwise pay for (PL/pgSQL
 * functions are compiled and their queries planned once per connection).
 * Its failure is logged at debug level and ignored. Call before the pool
 * is shared. Returns 0 or COMB_ENOMEM.
 */
int comb_db_pool_warm(struct comb_db_pool *pool, const char *sql);

/*
 * Opens (and warms) every connection of the pool in a thread of its own,
 * one after the other, so that no reader pays for a connection, or for
 * warming it, while it is served; borrowers meanwhile take the open ones
 * or open their own as before. It stops at the first connection that
 * cannot be opened (the rest are opened on demand). Call at most once,
 * before the pool is shared; comb_db_pool_free waits for the thread.
 * Returns 0 or COMB_ENOMEM.
 */
int comb_db_pool_open_all(struct comb_db_pool *pool);

/*
 * Lends a live connection (waiting up to wait_ms for a free one). Returns
 * NULL when none is free in time or the database cannot be reached; the
 * caller answers 503. Give it back with comb_db_release.
 */
PGconn *comb_db_acquire(struct comb_db_pool *pool, int wait_ms);

/* Returns conn to the pool; broken drops it (it is reconnected later). A
 * connection left inside a transaction is rolled back first. */
void comb_db_release(struct comb_db_pool *pool, PGconn *conn, bool broken);

void comb_db_stats(struct comb_db_pool *pool, struct comb_db_stats *out);

/*
 * Runs sql (no parameters) and returns 0 when it succeeded, else
 * COMB_EUNAVAIL (connection lost) or COMB_EINVAL with the server's message
 * in errbuf.
 */
int comb_db_exec(PGconn *conn, const char *sql, char *errbuf, size_t errlen);

/* True when the result failed because the connection is gone (the caller
 * should release the connection as broken and answer 503). */
bool comb_db_conn_lost(PGconn *conn);

/* True when res failed with SQLSTATE code (five characters). */
bool comb_db_is_error(const PGresult *res, const char *sqlstate);

/* How many distinct statements comb_db_exec_stmt can prepare per process. */
#define COMB_DB_MAX_STMTS 64

/*
 * A statement that pooled connections prepare once and then run by name,
 * so that PostgreSQL parses and plans it once per connection rather than
 * on every call. Declare one static instance per statement text:
 *
 *     static struct comb_db_stmt stmt = COMB_DB_STMT("SELECT ...", 2);
 *
 * sql takes nparams text parameters ($1...). The pool numbers each
 * statement on its first use (at most COMB_DB_MAX_STMTS per process) and
 * remembers, per connection, which ones that connection has prepared; a
 * connection that is reopened starts with none. Nothing may DEALLOCATE
 * these statements (or DISCARD ALL) behind the pool's back.
 */
struct comb_db_stmt {
	const char *sql;
	int nparams;
	_Atomic int id; /* 0 until first used; the pool's to set */
};

#define COMB_DB_STMT(sql, nparams) { (sql), (nparams), 0 }

/*
 * Runs stmt on conn, which the caller borrowed from pool, with params
 * (stmt->nparams text values, NULL for SQL NULL; borrowed), preparing it
 * on conn first when this connection has not yet. Works inside or outside
 * a transaction: a prepared statement outlives a rollback. Returns the
 * result, which the caller PQclear()s; when preparing fails, the failed
 * result of the prepare. A connection the pool does not hold runs the
 * statement unprepared.
 */
PGresult *comb_db_exec_stmt(struct comb_db_pool *pool, PGconn *conn,
			    struct comb_db_stmt *stmt,
			    const char *const *params);

/* One statement of comb_db_exec_together: a pool statement (stmt) with
 * its params, or sql without parameters (stmt NULL). */
struct comb_db_step {
	struct comb_db_stmt *stmt;
	const char *sql;
	const char *const *params;
};

/* How many statements comb_db_exec_together sends at once. */
#define COMB_DB_MAX_STEPS 4

/*
 * Runs count steps (at most COMB_DB_MAX_STEPS) on conn, which the caller
 * borrowed from pool, in one round trip (libpq's pipeline mode), in
 * order and in whatever transaction conn is in; pool statements conn has
 * not prepared yet are prepared first. Every step is sent before any
 * answer is read, so only the last step may return more than a socket
 * buffer holds. results[i] gets step i's result (NULL when none came;
 * the caller clears each); a step after a failed one is not run
 * (PGRES_PIPELINE_ABORTED). Returns 0 when every step succeeded, else
 * COMB_EUNAVAIL (comb_db_conn_lost tells whether the connection broke).
 */
int comb_db_exec_together(struct comb_db_pool *pool, PGconn *conn,
			  const struct comb_db_step *steps, size_t count,
			  PGresult **results);

#endif
