/*
 * A bounded pool of hiredis 0.14 connections shared by a service's threads.
 * hiredis contexts are blocking and not thread-safe, and a context is dead
 * for good after any I/O error or timeout, so a thread takes a context out
 * of the pool for one command and gives it back only when the command
 * completed at the connection level; otherwise the context is freed and a
 * new one is connected on a later use. A command sent without waiting
 * for its reply (comb_redis_send) leaves the reply to the context's next
 * user, who reads it before its own. Connections are opened lazily, so a
 * pool can be created while Redis is still down. Every connection
 * authenticates (AUTH) when the URL carries a password, then selects the
 * URL's database.
 */
#include "comb/redis.h"
#include "comb/clock.h"

#include <errno.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/log.h"

#define REDIS_DEFAULT_PORT 6379
#define REDIS_MAX_DB	   1000000

/* A connection waiting in the pool, with the replies of commands sent
 * by comb_redis_send that nobody has read yet. */
struct idle_context {
	redisContext *c;
	int pending;
};

struct comb_redis_pool {
	struct comb_redis_url url;
	int size; /* at most this many contexts exist */
	int timeout_ms;
	pthread_mutex_t lock;
	pthread_cond_t returned; /* a context was returned or dropped */
	struct idle_context *idle; /* size slots, nidle used */
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

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes len characters of s into out (outlen bytes, with the
 * NUL). Returns 0 or COMB_EINVAL (bad escape, NUL, too long). */
static int decode_part(const char *s, size_t len, char *out, size_t outlen)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int hi = i + 2 < len ? hex_digit(s[i + 1]) : -1;
			int lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;

			if (lo < 0)
				return COMB_EINVAL;
			c = hi * 16 + lo;
			i += 2;
		}
		if (c == 0 || n + 1 >= outlen)
			return COMB_EINVAL;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return 0;
}

/* Reads "[user]:password" (len characters at p) into u. */
static int parse_userinfo(struct comb_redis_url *u, const char *p, size_t len,
			  char *errbuf, size_t errlen)
{
	const char *colon = memchr(p, ':', len);

	if (colon == NULL)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url credentials must be user:password@ or :password@");
	if (decode_part(p, (size_t)(colon - p), u->user, sizeof(u->user)) < 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url has an unusable user name");
	if (decode_part(colon + 1, len - (size_t)(colon + 1 - p), u->password,
			sizeof(u->password)) < 0 || u->password[0] == '\0')
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url has an empty or unusable password");
	return 0;
}

int comb_redis_url_parse(const char *url, struct comb_redis_url *u,
			 char *errbuf, size_t errlen)
{
	const char *p, *host, *end, *at;
	size_t hlen;
	int rc;

	memset(u, 0, sizeof(*u));
	if (url == NULL || strncasecmp(url, "redis://", 8) != 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url must start with redis://");
	p = url + 8;
	/* The host, port and database hold no '@': the last one ends the
	 * credentials, whatever they contain. */
	at = strrchr(p, '@');
	if (at != NULL) {
		rc = parse_userinfo(u, p, (size_t)(at - p), errbuf, errlen);
		if (rc < 0)
			return rc;
		p = at + 1;
	}
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
	if (hlen == 0 || hlen >= sizeof(u->host))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url has no usable host");
	memcpy(u->host, host, hlen);
	u->host[hlen] = '\0';

	u->port = REDIS_DEFAULT_PORT;
	if (*p == ':') {
		size_t n = strcspn(p + 1, "/");

		if (parse_uint(p + 1, n, 1, 65535, &u->port) < 0)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "redis url has a bad port");
		p += 1 + n;
	}
	if (*p == '/') {
		p++;
		if (*p != '\0' &&
		    parse_uint(p, strlen(p), 0, REDIS_MAX_DB, &u->db) < 0)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "redis url has a bad database number");
		p += strlen(p);
	}
	if (*p != '\0')
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "redis url has trailing characters");
	return 0;
}

/* Runs one setup command on c; returns 0, or -1 with the reason (what
 * names the command for humans) in errbuf. */
static int setup_command(redisContext *c, const char *what, char *errbuf,
			 size_t errlen, redisReply *r)
{
	int rc = -1;

	if (r == NULL)
		comb_fail(errbuf, errlen, COMB_EIO, "%s: %s", what, c->errstr);
	else if (r->type == REDIS_REPLY_ERROR)
		comb_fail(errbuf, errlen, COMB_EIO, "%s refused: %s", what, r->str);
	else
		rc = 0;
	if (r != NULL)
		freeReplyObject(r);
	return rc;
}

redisContext *comb_redis_connect(const struct comb_redis_url *u, int timeout_ms,
				 char *errbuf, size_t errlen)
{
	struct timeval tv;
	redisContext *c;
	redisReply *r;

	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	c = redisConnectWithTimeout(u->host, u->port, tv);
	if (c == NULL) {
		comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
		return NULL;
	}
	if (c->err) {
		comb_fail(errbuf, errlen, COMB_EIO, "%s", c->errstr);
		goto fail;
	}
	if (redisSetTimeout(c, tv) != REDIS_OK) {
		comb_fail(errbuf, errlen, COMB_EIO, "cannot set timeout: %s",
			  c->errstr);
		goto fail;
	}
	if (u->password[0] != '\0') {
		r = u->user[0] != '\0' ?
			redisCommand(c, "AUTH %s %s", u->user, u->password) :
			redisCommand(c, "AUTH %s", u->password);
		if (setup_command(c, "auth", errbuf, errlen, r) < 0)
			goto fail;
	}
	if (u->db > 0) {
		r = redisCommand(c, "SELECT %d", u->db);
		if (setup_command(c, "select", errbuf, errlen, r) < 0)
			goto fail;
	}
	return c;
fail:
	redisFree(c);
	return NULL;
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
	if (comb_redis_url_parse(url, &pool->url, errbuf, errlen) < 0) {
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

int comb_redis_pool_db(const struct comb_redis_pool *pool)
{
	return pool->url.db;
}

void comb_redis_pool_free(struct comb_redis_pool *pool)
{
	int i;

	if (pool == NULL)
		return;
	for (i = 0; i < pool->nidle; i++)
		redisFree(pool->idle[i].c);
	pthread_cond_destroy(&pool->returned);
	pthread_mutex_destroy(&pool->lock);
	free(pool->idle);
	memset(&pool->url, 0, sizeof(pool->url));
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
		comb_info("redis %s:%d reachable", pool->url.host, pool->url.port);
	else
		comb_warn("redis %s:%d unreachable: %s", pool->url.host, pool->url.port,
			  why);
}

/* Opens, authenticates and selects the database of a new context. */
static redisContext *pool_connect(struct comb_redis_pool *pool)
{
	char why[160] = "";
	redisContext *c = comb_redis_connect(&pool->url, pool->timeout_ms, why,
					     sizeof(why));

	note_state(pool, c != NULL, why);
	return c;
}

/*
 * True when an idle context still looks usable: no error recorded and
 * nothing to read. A pooled connection whose pending replies were read
 * has no reply outstanding, so readable means the server closed it
 * (restart, idle timeout, CLIENT KILL) or sent something we cannot match
 * to a command.
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

/* Reads and drops the pending replies of c; true when c is usable
 * afterwards (nothing more to read). */
static bool drain_pending(redisContext *c, int pending)
{
	void *reply;

	while (pending-- > 0) {
		if (redisGetReply(c, &reply) != REDIS_OK)
			return false;
		freeReplyObject(reply);
	}
	return idle_usable(c);
}

/* Gives c back with pending replies nobody read yet, or frees it (and its
 * slot) when it is no longer usable. */
static void pool_put_pending(struct comb_redis_pool *pool, redisContext *c,
			     bool ok, int pending)
{
	pthread_mutex_lock(&pool->lock);
	if (ok) {
		pool->idle[pool->nidle++] = (struct idle_context){c, pending};
	} else {
		redisFree(c);
		pool->nopen--;
	}
	pthread_cond_signal(&pool->returned);
	pthread_mutex_unlock(&pool->lock);
}

/* Gives c back, or frees it (and its slot) when it is no longer usable. */
static void pool_put(struct comb_redis_pool *pool, redisContext *c, bool ok)
{
	pool_put_pending(pool, c, ok, 0);
}

/*
 * Takes a usable context out of the pool (its pending replies read
 * first), connecting a new one when no idle one is left and fewer than
 * size exist. Waits at most timeout_ms for another thread to return one.
 * Returns NULL when Redis is unreachable or the pool stayed exhausted.
 */
static redisContext *pool_get(struct comb_redis_pool *pool)
{
	struct timespec deadline;
	redisContext *c;
	int pending;

	comb_deadline_in(&deadline, CLOCK_MONOTONIC, pool->timeout_ms);
again:
	c = NULL;
	pending = 0;
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (pool->nidle > 0) {
			c = pool->idle[--pool->nidle].c;
			pending = pool->idle[pool->nidle].pending;
			if (pending || idle_usable(c))
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
	if (c != NULL) {
		if (pending && !drain_pending(c, pending)) {
			pool_put(pool, c, false);  /* dropped with its slot */
			goto again;
		}
		return c;
	}

	c = pool_connect(pool);
	if (c == NULL) {
		pthread_mutex_lock(&pool->lock);
		pool->nopen--;
		pthread_cond_signal(&pool->returned);
		pthread_mutex_unlock(&pool->lock);
	}
	return c;
}

/* Ends a command run on c (from pool_get) that gave r, errno being
 * saved_errno after it: logs a failure, gives c back (dropped when it
 * failed) and returns r, or NULL when the command failed. */
static redisReply *command_done(struct comb_redis_pool *pool, redisContext *c,
				redisReply *r, int saved_errno)
{
	bool ok = r != NULL && c->err == 0;

	if (!ok && c->err == REDIS_ERR_IO &&
	    (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK))
		comb_warn("redis %s:%d command timed out after %d ms",
			  pool->url.host, pool->url.port, pool->timeout_ms);
	else if (!ok)
		comb_warn("redis %s:%d command failed: %s", pool->url.host,
			  pool->url.port, c->err ? c->errstr : "no reply");
	if (!ok && r != NULL) {
		freeReplyObject(r);
		r = NULL;
	}
	pool_put(pool, c, ok);
	return r;
}

redisReply *comb_redis_command(struct comb_redis_pool *pool, const char *fmt,
			       ...)
{
	redisContext *c;
	redisReply *r;
	va_list ap;

	c = pool_get(pool);
	if (c == NULL)
		return NULL;
	va_start(ap, fmt);
	errno = 0;
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	return command_done(pool, c, r, errno);
}

void comb_redis_send(struct comb_redis_pool *pool, const char *fmt, ...)
{
	redisContext *c = pool_get(pool);
	int rc, done = 0;
	va_list ap;

	if (c == NULL)
		return;
	va_start(ap, fmt);
	rc = redisvAppendCommand(c, fmt, ap);
	va_end(ap);
	while (rc == REDIS_OK && !done)
		rc = redisBufferWrite(c, &done);
	if (rc != REDIS_OK)
		comb_warn("redis %s:%d command not sent: %s", pool->url.host,
			  pool->url.port, c->err ? c->errstr : "out of memory");
	pool_put_pending(pool, c, rc == REDIS_OK, 1);
}

/* Runs one command given as argv on a pooled connection; as
 * comb_redis_command. */
static redisReply *command_argv(struct comb_redis_pool *pool, int argc,
				const char **argv)
{
	redisContext *c = pool_get(pool);
	redisReply *r;

	if (c == NULL)
		return NULL;
	errno = 0;
	r = redisCommandArgv(c, argc, argv, NULL);
	return command_done(pool, c, r, errno);
}

#define SCRIPT_MAX_ARGS 16

redisReply *comb_redis_script(struct comb_redis_pool *pool, const char *text,
			      int nkeys, const char *const *args, int nargs)
{
	const char *argv[SCRIPT_MAX_ARGS + 3];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char sha[41], nkeys_s[16];
	redisReply *r;

	if (nargs < nkeys || nargs > SCRIPT_MAX_ARGS)
		COMB_BUG("comb_redis_script: bad argument count");
	if (!EVP_Digest(text, strlen(text), md, &mdlen, EVP_sha1(), NULL) ||
	    mdlen != 20)
		COMB_BUG("sha-1 unavailable");
	comb_hex_encode(md, 20, sha);
	snprintf(nkeys_s, sizeof(nkeys_s), "%d", nkeys);
	argv[0] = "EVALSHA";
	argv[1] = sha;
	argv[2] = nkeys_s;
	memcpy(argv + 3, args, (size_t)nargs * sizeof(*args));
	r = command_argv(pool, nargs + 3, argv);
	if (r && r->type == REDIS_REPLY_ERROR &&
	    strncasecmp(r->str, "NOSCRIPT", 8) == 0) {
		freeReplyObject(r);
		argv[0] = "EVAL";
		argv[1] = text;
		r = command_argv(pool, nargs + 3, argv);
	}
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
