/*
 * A small pool of hiredis connections shared by a service's threads.
 * A connection that failed (hiredis contexts die after an error or a
 * timeout) is dropped and reconnected on next use, so callers never see a
 * dead context twice.
 * hiredis writes with write(2): a process using this pool must ignore
 * SIGPIPE, or a write to a connection Redis closed kills it.
 */
#ifndef COMB_REDIS_H
#define COMB_REDIS_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

struct comb_redis_pool;

/* The longest user name and password a Redis URL may carry. */
#define COMB_REDIS_USER_MAX 128
#define COMB_REDIS_PASSWORD_MAX 512

/* A parsed "redis://[[user]:password@]host[:port][/db]". */
struct comb_redis_url {
	char host[256];     /* without IPv6 brackets */
	int port;           /* 6379 when absent */
	int db;             /* selected on connect when > 0 */
	char user[COMB_REDIS_USER_MAX + 1];         /* ACL user, or "" */
	char password[COMB_REDIS_PASSWORD_MAX + 1]; /* "" when no AUTH */
};

/*
 * Parses url into out. The user name and password are percent-decoded
 * ("%40" for "@"); "user:password@" authenticates as an ACL user
 * (AUTH user password), ":password@" with the password alone (AUTH
 * password, the requirepass form). Returns 0, or COMB_EINVAL with the
 * reason in errbuf (which never repeats the password).
 */
int comb_redis_url_parse(const char *url, struct comb_redis_url *out,
			 char *errbuf, size_t errlen);

/*
 * Opens a connection to u with timeout_ms for the connect and for every
 * command, authenticates when u has a password and selects u's database.
 * Returns the context (the caller frees it with redisFree), or NULL with
 * the reason in errbuf.
 */
redisContext *comb_redis_connect(const struct comb_redis_url *u, int timeout_ms,
				 char *errbuf, size_t errlen);

/*
 * Creates a pool for url (as comb_redis_url_parse reads it) holding at most size
 * connections, each with a timeout of timeout_ms for connect and commands.
 * Does not connect yet. Returns NULL with a reason in errbuf for a bad URL.
 */
struct comb_redis_pool *comb_redis_pool_new(const char *url, int size,
					    int timeout_ms, char *errbuf,
					    size_t errlen);
/* The Redis database the pool's connections select (0 when the URL names
 * none). */
int comb_redis_pool_db(const struct comb_redis_pool *pool);

/* Closes the idle connections and frees the pool (NULL is ignored). No
 * command may still be running on it. */
void comb_redis_pool_free(struct comb_redis_pool *pool);

/*
 * Runs one command (hiredis format string) on a pooled connection and
 * returns its reply (caller frees with freeReplyObject), or NULL when Redis
 * is unreachable or the command failed at the connection level.
 */
redisReply *comb_redis_command(struct comb_redis_pool *pool, const char *fmt, ...);

/*
 * Sends one command (hiredis format string) on a pooled connection
 * without waiting for its reply, which the connection's next user reads
 * and drops. For commands whose loss costs nothing lasting (Redis being
 * unreachable only logs): a lease given back early, say.
 */
void comb_redis_send(struct comb_redis_pool *pool, const char *fmt, ...);

/*
 * Runs the Lua script text with nkeys keys and nargs arguments (keys
 * first in args) on a pooled connection: by its SHA-1 (EVALSHA), and
 * with EVAL when Redis does not know it yet (after a restart, say).
 * Returns the reply as comb_redis_command does.
 */
redisReply *comb_redis_script(struct comb_redis_pool *pool, const char *text,
			      int nkeys, const char *const *args, int nargs);

/* True when a PING answers now. */
bool comb_redis_ping(struct comb_redis_pool *pool);

#endif
