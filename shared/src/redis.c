/*
 * A bounded pool of hiredis 0.14 connections shared by a service's threads.
 * hiredis contexts are blocking and not thread-safe, and a context is dead
 * for good after any I/O error or timeout, so a thread takes a context out
 * of the pool for one command and gives it back only when the command
 * completed at the connection level; otherwise the context is freed and a
 * new one is connected on a later use. Connections are opened lazily, so a
 * pool can be created while Redis is still down.
 */
#include "comb/redis.h"
#include "comb/clock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "comb/error.h"
#include "comb/log.h"

#define REDIS_DEFAULT_PORT 6379
#define REDIS_MAX_DB	   1000000

struct comb_redis_pool {
	char host[256]; /* without IPv6 brackets */
	int port;
	int db;	  /* selected on connect when > 0 */
	int size; /* at most this many contexts exist */
	int timeout_ms;
	pthread_mutex_t lock;
	pthread_cond_t returned; /* a context was returned or dropped */
	redisContext **idle;	 /* size slots, nidle used */
	int nidle;
	int nopen; /* idle + in use + being connected */
	bool down; /* the last connection attempt failed */
};

/* Parses a decimal integer in [min, max] from exactly len characters. */
static int parse_uint(const char *s, size_t len, long min, long max, int *out)
{
	long v = 0;
	size_t i;

	if (len == 0 || len > 9)
		return COMB_EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return COMB_EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	if (v < min || v > max)
		return COMB_EINVAL;
	*out = (int)v;
	return 0;
}

/* Splits "redis://host[:port][/[db]]" into the pool's fields. */
static int parse_url(struct comb_redis_pool *pool, const char *url,
		     char *errbuf, size_t errlen)
{
	const char *p, *host, *end;
	size_t hlen;

	if (url == NULL || strncasecmp(url, "redis://", 8) != 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url must start with redis://");
	p = url + 8;
	if (strchr(p, '@') != NULL)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url credentials are not supported");
	if (*p == '[') {
		host = p + 1;
		end = strchr(host, ']');
		if (end == NULL)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "redis url has an unclosed [");
		hlen = (size_t)(end - host);
		p = end + 1;
	} else {
		host = p;
		hlen = strcspn(p, ":/");
		p += hlen;
	}
	if (hlen == 0 || hlen >= sizeof(pool->host))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url has no usable host");
	memcpy(pool->host, host, hlen);
	pool->host[hlen] = '\0';

	pool->port = REDIS_DEFAULT_PORT;
	if (*p == ':') {
		size_t n = strcspn(p + 1, "/");

		if (parse_uint(p + 1, n, 1, 65535, &pool->port) < 0)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "redis url has a bad port");
		p += 1 + n;
	}
	pool->db = 0;
	if (*p == '/') {
		p++;
		if (*p != '\0' &&
		    parse_uint(p, strlen(p), 0, REDIS_MAX_DB, &pool->db) < 0)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "redis url has a bad database number");
		p += strlen(p);
	}
	if (*p != '\0')
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url has trailing characters");
	return 0;
}

struct comb_redis_pool *comb_redis_pool_new(const char *url, int size,
					    int timeout_ms, char *errbuf,
					    size_t errlen)
{
	struct comb_redis_pool *pool;
	pthread_condattr_t attr;

	if (size <= 0 || timeout_ms <= 0) {
		comb_fail(errbuf, errlen, COMB_EINVAL,
			  "redis pool size and timeout must be positive");
		return NULL;
	}
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL) {
		comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
		return NULL;
	}
	if (parse_url(pool, url, errbuf, errlen) < 0) {
		free(pool);
		return NULL;
	}
	pool->idle = calloc((size_t)size, sizeof(*pool->idle));
	if (pool->idle == NULL) {
		free(pool);
		comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
		return NULL;
	}
	pool->size = size;
	pool->timeout_ms = timeout_ms;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&pool->returned, &attr);
	pthread_condattr_destroy(&attr);
	return pool;
}

void comb_redis_pool_free(struct comb_redis_pool *pool)
{
	int i;

	if (pool == NULL)
		return;
	for (i = 0; i < pool->nidle; i++)
		redisFree(pool->idle[i]);
	pthread_cond_destroy(&pool->returned);
	pthread_mutex_destroy(&pool->lock);
	free(pool->idle);
	free(pool);
}

/* Logs a change between reachable and unreachable, once per change. */
static void note_state(struct comb_redis_pool *pool, bool up, const char *why)
{
	bool changed;

	pthread_mutex_lock(&pool->lock);
	changed = pool->down == up;
	pool->down = !up;
	pthread_mutex_unlock(&pool->lock);
	if (!changed)
		return;
	if (up)
		comb_info("redis %s:%d reachable", pool->host, pool->port);
	else
		comb_warn("redis %s:%d unreachable: %s", pool->host, pool->port,
			  why);
}

/* Opens, configures and selects the database of a new context. */
static redisContext *pool_connect(struct comb_redis_pool *pool)
{
	struct timeval tv;
	redisContext *c;
	redisReply *r;
	char why[160];

	tv.tv_sec = pool->timeout_ms / 1000;
	tv.tv_usec = (pool->timeout_ms % 1000) * 1000;
	c = redisConnectWithTimeout(pool->host, pool->port, tv);
	if (c == NULL) {
		note_state(pool, false, "out of memory");
		return NULL;
	}
	if (c->err) {
		snprintf(why, sizeof(why), "%s", c->errstr);
		goto fail;
	}
	if (redisSetTimeout(c, tv) != REDIS_OK) {
		snprintf(why, sizeof(why), "cannot set timeout: %s", c->errstr);
		goto fail;
	}
	if (pool->db > 0) {
		r = redisCommand(c, "SELECT %d", pool->db);
		if (r == NULL) {
			snprintf(why, sizeof(why), "select: %s", c->errstr);
			goto fail;
		}
		if (r->type != REDIS_REPLY_STATUS) {
			snprintf(why, sizeof(why), "select %d refused: %s",
				 pool->db,
				 r->type == REDIS_REPLY_ERROR ? r->str : "?");
			freeReplyObject(r);
			goto fail;
		}
		freeReplyObject(r);
	}
	note_state(pool, true, NULL);
	return c;
fail:
	redisFree(c);
	note_state(pool, false, why);
	return NULL;
}

/*
 * True when an idle context still looks usable: no error recorded and
 * nothing to read. A pooled connection has no reply outstanding, so
 * readable means the server closed it (restart, idle timeout, CLIENT KILL)
 * or sent something we cannot match to a command.
 */
static bool idle_usable(redisContext *c)
{
	struct pollfd pfd;
	int n;

	if (c->err || c->fd < 0)
		return false;
	pfd.fd = c->fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	do
		n = poll(&pfd, 1, 0);
	while (n < 0 && errno == EINTR);
	return n == 0;
}

/*
 * Takes a usable context out of the pool, connecting a new one when no idle
 * one is left and fewer than size exist. Waits at most timeout_ms for
 * another thread to return one. Returns NULL when Redis is unreachable or
 * the pool stayed exhausted.
 */
static redisContext *pool_get(struct comb_redis_pool *pool)
{
	struct timespec deadline;
	redisContext *c = NULL;

	comb_deadline_in(&deadline, CLOCK_MONOTONIC, pool->timeout_ms);

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (pool->nidle > 0) {
			c = pool->idle[--pool->nidle];
			if (idle_usable(c))
				break;
			redisFree(c);
			c = NULL;
			pool->nopen--;
		}
		if (c != NULL || pool->nopen < pool->size)
			break;
		if (pthread_cond_timedwait(&pool->returned, &pool->lock,
					   &deadline) == ETIMEDOUT) {
			pthread_mutex_unlock(&pool->lock);
			comb_warn("redis pool exhausted for %d ms",
				  pool->timeout_ms);
			return NULL;
		}
	}
	if (c == NULL)
		pool->nopen++; /* reserve the slot while connecting */
	pthread_mutex_unlock(&pool->lock);
	if (c != NULL)
		return c;

	c = pool_connect(pool);
	if (c == NULL) {
		pthread_mutex_lock(&pool->lock);
		pool->nopen--;
		pthread_cond_signal(&pool->returned);
		pthread_mutex_unlock(&pool->lock);
	}
	return c;
}

/* Gives c back, or frees it (and its slot) when it is no longer usable. */
static void pool_put(struct comb_redis_pool *pool, redisContext *c, bool ok)
{
	pthread_mutex_lock(&pool->lock);
	if (ok) {
		pool->idle[pool->nidle++] = c;
	} else {
		redisFree(c);
		pool->nopen--;
	}
	pthread_cond_signal(&pool->returned);
	pthread_mutex_unlock(&pool->lock);
}

redisReply *comb_redis_command(struct comb_redis_pool *pool, const char *fmt,
			       ...)
{
	redisContext *c;
	redisReply *r;
	va_list ap;
	int saved_errno;
	bool ok;

	c = pool_get(pool);
	if (c == NULL)
		return NULL;
	va_start(ap, fmt);
	errno = 0;
	r = redisvCommand(c, fmt, ap);
	saved_errno = errno;
	va_end(ap);
	ok = r != NULL && c->err == 0;
	if (!ok && c->err == REDIS_ERR_IO &&
	    (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK))
		comb_warn("redis %s:%d command timed out after %d ms",
			  pool->host, pool->port, pool->timeout_ms);
	else if (!ok)
		comb_warn("redis %s:%d command failed: %s", pool->host,
			  pool->port, c->err ? c->errstr : "no reply");
	if (!ok && r != NULL) {
		freeReplyObject(r);
		r = NULL;
	}
	pool_put(pool, c, ok);
	return r;
}

bool comb_redis_ping(struct comb_redis_pool *pool)
{
	redisReply *r = comb_redis_command(pool, "PING");
	bool ok;

	ok = r != NULL && r->type == REDIS_REPLY_STATUS &&
	     strcmp(r->str, "PONG") == 0;
	if (r != NULL)
		freeReplyObject(r);
	return ok;
}
