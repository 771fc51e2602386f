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

/*
 * Creates a pool for url ("redis://host:port[/db]") holding at most size
 * connections, each with a timeout of timeout_ms for connect and commands.
 * Does not connect yet. Returns NULL with a reason in errbuf for a bad URL.
 */
struct comb_redis_pool *comb_redis_pool_new(const char *url, int size,
					    int timeout_ms, char *errbuf,
					    size_t errlen);
/* Closes the idle connections and frees the pool (NULL is ignored). No
 * command may still be running on it. */
void comb_redis_pool_free(struct comb_redis_pool *pool);

/*
 * Runs one command (hiredis format string) on a pooled connection and
 * returns its reply (caller frees with freeReplyObject), or NULL when Redis
 * is unreachable or the command failed at the connection level.
 */
redisReply *comb_redis_command(struct comb_redis_pool *pool, const char *fmt, ...);

/* True when a PING answers now. */
bool comb_redis_ping(struct comb_redis_pool *pool);

#endif
