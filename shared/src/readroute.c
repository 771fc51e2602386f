/*
 * The read router (comb/readroute.h): one pool per standby, a monitor
 * thread per server, and the choice of a server for each read.
 *
 * The primary's monitor keeps a ring of the primary's WAL insert
 * positions, one entry each time the position was seen to move, with the
 * time it was first seen there. A standby's lag is then how long ago the
 * primary first passed the standby's replay position (0 when the standby
 * has replayed the last position sampled), which reads as time whether
 * or not anything is being written.
 *
 * Every field shared between threads is read and written under
 * router->lock; the monitors' database calls run outside it, each with
 * a bounded wait, so that a hung server holds up only its own monitor.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comb/clock.h"
#include "comb/error.h"
#include "comb/log.h"
#include "comb/readroute.h"

/* How often a monitor samples its server, and how often while a reader
 * waits for a standby to catch up. */
#define SAMPLE_IDLE_MS 50
#define SAMPLE_HURRY_MS 2
/* How long a monitor waits for its server's answer. */
#define SAMPLE_TIMEOUT_MS 1000
#define RING 4096

struct ring_entry {
	int64_t first_seen_ms;  /* monotonic */
	comb_lsn lsn;
};

struct standby {
	struct comb_read_router *router;
	char *url;
	char name[128];
	struct comb_db_pool *pool;
	pthread_t thread;
	bool started;
	comb_lsn replayed;      /* at its last sample */
	int64_t sampled_ms;     /* monotonic time of its last good sample */
	long long lag_ms;
	bool reachable;
	bool in_rotation;
	long served;
};

struct comb_read_router {
	struct comb_db_pool *primary;
	char *primary_conninfo;
	int wait_ms;
	int max_lag_ms;
	pthread_mutex_t lock;
	pthread_cond_t updated;  /* a sample was taken (monotonic clock) */
	pthread_cond_t hurry;    /* a reader started waiting, or stopping */
	bool stopping;
	int waiting;             /* readers waiting for a standby */
	pthread_t primary_thread;
	bool primary_started;
	struct ring_entry ring[RING];
	int ring_head, ring_len; /* oldest entry, entries held */
	unsigned next;           /* round robin */
	long primary_served, waits, fallbacks;
	int n;
	struct standby sb[COMB_READ_MAX_STANDBYS];
};

void comb_lsn_format(comb_lsn lsn, char *out, size_t outlen)
{
	snprintf(out, outlen, "%" PRIX32 "/%" PRIX32, (uint32_t)(lsn >> 32),
		 (uint32_t)lsn);
}

int comb_lsn_parse(const char *text, comb_lsn *out)
{
	unsigned long long hi, lo;
	char *end;

	*out = 0;
	if (!text || !*text)
		return COMB_EINVAL;
	errno = 0;
	hi = strtoull(text, &end, 16);
	if (errno || end == text || *end != '/' || hi > UINT32_MAX)
		return COMB_EINVAL;
	text = end + 1;
	lo = strtoull(text, &end, 16);
	if (errno || end == text || *end || lo > UINT32_MAX)
		return COMB_EINVAL;
	*out = (comb_lsn)hi << 32 | (comb_lsn)lo;
	return 0;
}

/* Waits on cond (a monotonic-clock condition) for up to ms. Call with
 * r->lock held. */
static void wait_ms_on(struct comb_read_router *r, pthread_cond_t *cond, int ms)
{
	struct timespec deadline;

	comb_deadline_in(&deadline, CLOCK_MONOTONIC, ms);
	pthread_cond_timedwait(cond, &r->lock, &deadline);
}

/* Writes host:port/dbname of a conninfo URL (no user, no password) into
 * out; other forms of conninfo are named "standby N". */
static void name_of(const char *url, int index, char *out, size_t outlen)
{
	PQconninfoOption *opts = PQconninfoParse(url, NULL);
	const char *host = NULL, *port = NULL, *db = NULL;

	for (PQconninfoOption *o = opts; o && o->keyword; o++) {
		if (!o->val)
			continue;
		if (!strcmp(o->keyword, "host"))
			host = o->val;
		else if (!strcmp(o->keyword, "port"))
			port = o->val;
		else if (!strcmp(o->keyword, "dbname"))
			db = o->val;
	}
	if (host)
		snprintf(out, outlen, "%s:%s/%s", host, port ? port : "5432",
			 db ? db : "");
	else
		snprintf(out, outlen, "standby %d", index);
	PQconninfoFree(opts);
}

/* Connects to conninfo for a monitor (blocking, at most a few seconds). */
static PGconn *monitor_connect(const char *conninfo)
{
	const char *keys[] = {"dbname", "application_name", "connect_timeout", NULL};
	const char *values[] = {conninfo, "comb-read-monitor", "2", NULL};
	PGconn *conn = PQconnectdbParams(keys, values, 1);

	if (PQstatus(conn) != CONNECTION_OK) {
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/*
 * Samples the position of the server behind *conn (connecting first when
 * there is none), waiting at most SAMPLE_TIMEOUT_MS for the answer.
 * Returns 0 with *out set, or COMB_EUNAVAIL (*conn then closed and NULL).
 */
static int sample(PGconn **conn, const char *conninfo, comb_lsn *out)
{
	int64_t deadline = comb_monotonic_ms() + SAMPLE_TIMEOUT_MS;
	PGresult *res, *extra;
	int rc = COMB_EUNAVAIL;

	if (!*conn && !(*conn = monitor_connect(conninfo)))
		return COMB_EUNAVAIL;
	if (!PQsendQuery(*conn, "SELECT " COMB_READ_POSITION_SQL))
		goto fail;
	while (PQisBusy(*conn)) {
		struct pollfd p = {.fd = PQsocket(*conn), .events = POLLIN};
		int64_t left = deadline - comb_monotonic_ms();

		if (left <= 0 || poll(&p, 1, (int)left) <= 0 || !PQconsumeInput(*conn))
			goto fail;
	}
	res = PQgetResult(*conn);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	    !comb_lsn_parse(PQgetvalue(res, 0, 0), out))
		rc = 0;
	PQclear(res);
	while ((extra = PQgetResult(*conn)) != NULL)
		PQclear(extra);
	if (rc == 0)
		return 0;
fail:
	PQfinish(*conn);
	*conn = NULL;
	return COMB_EUNAVAIL;
}

/* Waits until the next sample is due (sooner while a reader waits).
 * Returns false once the router stops. Call with r->lock held. */
static bool monitor_pause(struct comb_read_router *r)
{
	if (!r->stopping)
		wait_ms_on(r, &r->hurry, r->waiting ? SAMPLE_HURRY_MS : SAMPLE_IDLE_MS);
	return !r->stopping;
}

/* The primary's monitor: keeps the ring of its positions. */
static void *primary_main(void *arg)
{
	struct comb_read_router *r = arg;
	PGconn *conn = NULL;
	comb_lsn lsn;
	bool go = true;

	while (go) {
		int rc = sample(&conn, r->primary_conninfo, &lsn);

		pthread_mutex_lock(&r->lock);
		if (rc == 0) {
			int last = (r->ring_head + r->ring_len - 1) % RING;

			if (r->ring_len == 0 || r->ring[last].lsn < lsn) {
				if (r->ring_len == RING)
					r->ring_head = (r->ring_head + 1) % RING;
				else
					r->ring_len++;
				last = (r->ring_head + r->ring_len - 1) % RING;
				r->ring[last] = (struct ring_entry){comb_monotonic_ms(), lsn};
			}
		}
		go = monitor_pause(r);
		pthread_mutex_unlock(&r->lock);
	}
	PQfinish(conn);
	return NULL;
}

/* How long ago the primary first passed lsn (0: it has not, as far as
 * its samples go). Call with r->lock held. */
static long long lag_of(const struct comb_read_router *r, comb_lsn lsn, int64_t now)
{
	int i;

	for (i = 0; i < r->ring_len; i++) {
		const struct ring_entry *e = &r->ring[(r->ring_head + i) % RING];

		if (e->lsn > lsn)
			return now - e->first_seen_ms;
	}
	return 0;
}

/* Records one sample of standby s (rc 0: it replayed lsn) and moves it
 * in or out of the rotation. Call with r->lock held. */
static void standby_sampled(struct standby *s, int rc, comb_lsn lsn)
{
	struct comb_read_router *r = s->router;
	int64_t now = comb_monotonic_ms();

	if (rc) {
		if (s->reachable || s->in_rotation)
			comb_warn("read routing: standby %s cannot be reached; out of rotation",
				  s->name);
		s->reachable = false;
		s->in_rotation = false;
		return;
	}
	s->reachable = true;
	s->replayed = lsn;
	s->sampled_ms = now;
	s->lag_ms = lag_of(r, lsn, now);
	if (s->in_rotation && s->lag_ms > r->max_lag_ms) {
		comb_warn("read routing: standby %s lags %lld ms; out of rotation",
			  s->name, s->lag_ms);
		s->in_rotation = false;
	} else if (!s->in_rotation && s->lag_ms <= r->max_lag_ms / 2) {
		comb_info("read routing: standby %s in rotation (lag %lld ms)",
			  s->name, s->lag_ms);
		s->in_rotation = true;
	}
}

/* A standby's monitor. */
static void *standby_main(void *arg)
{
	struct standby *s = arg;
	struct comb_read_router *r = s->router;
	PGconn *conn = NULL;
	comb_lsn lsn = 0;
	bool go = true;

	while (go) {
		int rc = sample(&conn, s->url, &lsn);

		pthread_mutex_lock(&r->lock);
		standby_sampled(s, rc, lsn);
		pthread_cond_broadcast(&r->updated);
		go = monitor_pause(r);
		pthread_mutex_unlock(&r->lock);
	}
	PQfinish(conn);
	return NULL;
}

/* Splits the comma-separated urls into r's standbys. */
static int parse_urls(struct comb_read_router *r, const char *urls,
		      char *errbuf, size_t errlen)
{
	const char *p = urls;

	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		struct standby *s;

		while (len && (*p == ' ' || p[len - 1] == ' ')) {
			if (*p == ' ') {
				p++;
				len--;
			} else {
				len--;
			}
		}
		if (len == 0)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "COMB_READ_DATABASE_URLS: an entry is empty");
		if (r->n == COMB_READ_MAX_STANDBYS)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "COMB_READ_DATABASE_URLS: more than %d standbys",
					 COMB_READ_MAX_STANDBYS);
		s = &r->sb[r->n];
		s->router = r;
		s->url = strndup(p, len);
		if (!s->url)
			return COMB_ENOMEM;
		name_of(s->url, r->n, s->name, sizeof(s->name));
		r->n++;
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

/* Creates the standbys' pools and starts the monitors. */
static int start(struct comb_read_router *r, const struct comb_read_options *opts)
{
	int i;

	for (i = 0; i < r->n; i++) {
		struct standby *s = &r->sb[i];

		s->pool = comb_db_pool_new(s->url, opts->pool_size,
					   opts->statement_timeout_ms);
		if (!s->pool || (opts->warm_sql && comb_db_pool_warm(s->pool, opts->warm_sql)) ||
		    comb_db_pool_open_all(s->pool))
			return COMB_ENOMEM;
	}
	if (pthread_create(&r->primary_thread, NULL, primary_main, r))
		return COMB_ENOMEM;
	r->primary_started = true;
	for (i = 0; i < r->n; i++) {
		if (pthread_create(&r->sb[i].thread, NULL, standby_main, &r->sb[i]))
			return COMB_ENOMEM;
		r->sb[i].started = true;
	}
	return 0;
}

int comb_read_router_new(struct comb_db_pool *primary,
			 const struct comb_read_options *opts,
			 struct comb_read_router **out, char *errbuf,
			 size_t errlen)
{
	struct comb_read_router *r = calloc(1, sizeof(*r));
	pthread_condattr_t attr;
	int rc;

	*out = NULL;
	if (!r)
		return COMB_ENOMEM;
	r->primary = primary;
	r->wait_ms = opts->wait_ms;
	r->max_lag_ms = opts->max_lag_ms;
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&r->updated, &attr);
	pthread_cond_init(&r->hurry, &attr);
	pthread_condattr_destroy(&attr);
	r->primary_conninfo = strdup(opts->primary_conninfo);
	rc = r->primary_conninfo ? 0 : COMB_ENOMEM;
	if (!rc)
		rc = parse_urls(r, opts->standby_urls ? opts->standby_urls : "",
				errbuf, errlen);
	if (!rc && r->n > 0)
		rc = start(r, opts);
	if (rc) {
		comb_read_router_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void comb_read_router_free(struct comb_read_router *r)
{
	int i;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true;
	pthread_cond_broadcast(&r->hurry);
	pthread_mutex_unlock(&r->lock);
	if (r->primary_started)
		pthread_join(r->primary_thread, NULL);
	for (i = 0; i < r->n; i++) {
		if (r->sb[i].started)
			pthread_join(r->sb[i].thread, NULL);
		comb_db_pool_free(r->sb[i].pool);
		free(r->sb[i].url);
	}
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->updated);
	pthread_cond_destroy(&r->hurry);
	free(r->primary_conninfo);
	free(r);
}

int comb_read_standbys(const struct comb_read_router *r)
{
	return r->n;
}

/* A standby that may serve a read at position at_least now, in round
 * robin order, or -1; *any tells whether any standby is in rotation at
 * all. Call with r->lock held. */
static int choose(struct comb_read_router *r, comb_lsn at_least, bool *any)
{
	int64_t now = comb_monotonic_ms();
	int i;

	*any = false;
	for (i = 0; i < r->n; i++) {
		int k = (int)((r->next + (unsigned)i) % (unsigned)r->n);
		struct standby *s = &r->sb[k];

		/* A monitor that has not sampled for longer than the lag
		 * allowed cannot vouch for its standby. */
		if (!s->in_rotation || now - s->sampled_ms > r->max_lag_ms)
			continue;
		*any = true;
		if (s->replayed >= at_least) {
			r->next = (unsigned)k + 1;
			return k;
		}
	}
	return -1;
}

int comb_read_acquire(struct comb_read_router *r, comb_lsn at_least,
		      int pool_wait_ms, struct comb_read_lease *out)
{
	int64_t deadline = comb_monotonic_ms() + r->wait_ms;
	bool waited = false, any;
	int k = -1;

	*out = (struct comb_read_lease){.server = -1};
	pthread_mutex_lock(&r->lock);
	while (r->n > 0 && at_least != COMB_READ_PRIMARY) {
		int64_t left = deadline - comb_monotonic_ms();

		k = choose(r, at_least, &any);
		if (k >= 0 || !any || left <= 0)
			break;
		if (!waited) {
			r->waits++;
			/* once: while a reader waits, the monitors sample
			 * every SAMPLE_HURRY_MS by themselves */
			pthread_cond_broadcast(&r->hurry);
		}
		waited = true;
		r->waiting++;
		wait_ms_on(r, &r->updated, (int)left);
		r->waiting--;
	}
	pthread_mutex_unlock(&r->lock);

	if (k >= 0) {
		/* A standby's pool is given what is left of the bounded wait. */
		PGconn *conn = comb_db_acquire(r->sb[k].pool, r->wait_ms);

		pthread_mutex_lock(&r->lock);
		if (conn) {
			r->sb[k].served++;
		} else {
			/* Its monitor puts it back once it answers again. */
			r->sb[k].in_rotation = false;
		}
		pthread_mutex_unlock(&r->lock);
		if (conn) {
			*out = (struct comb_read_lease){conn, r->sb[k].pool, k};
			return 0;
		}
	}
	out->conn = comb_db_acquire(r->primary, pool_wait_ms);
	out->pool = r->primary;
	if (!out->conn)
		return COMB_EUNAVAIL;
	pthread_mutex_lock(&r->lock);
	r->primary_served++;
	if (r->n > 0)
		r->fallbacks++;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

void comb_read_release(struct comb_read_router *r, struct comb_read_lease *lease,
		       bool broken)
{
	if (!lease->conn)
		return;
	comb_db_release(lease->pool, lease->conn, broken);
	if (broken && lease->server >= 0) {
		pthread_mutex_lock(&r->lock);
		r->sb[lease->server].in_rotation = false;
		pthread_mutex_unlock(&r->lock);
	}
	*lease = (struct comb_read_lease){.server = -1};
}

void comb_read_stats(struct comb_read_router *r, struct comb_read_stats *out)
{
	int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&r->lock);
	out->standbys = r->n;
	out->primary_served = r->primary_served;
	out->waits = r->waits;
	out->fallbacks = r->fallbacks;
	for (i = 0; i < r->n; i++) {
		const struct standby *s = &r->sb[i];
		struct comb_read_standby_stats *o = &out->standby[i];

		snprintf(o->name, sizeof(o->name), "%s", s->name);
		o->in_rotation = s->in_rotation;
		o->reachable = s->reachable;
		o->lag_ms = s->lag_ms;
		o->replayed = s->replayed;
		o->served = s->served;
	}
	pthread_mutex_unlock(&r->lock);
}
