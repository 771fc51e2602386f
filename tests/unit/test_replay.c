/*
 * Unit tests for the NIP-98 replay store (shared/src/replay.c) and the
 * Redis pool under it (shared/src/redis.c), against a private redis-server
 * started on a free loopback port: single use, two pools standing for two
 * relay nodes, database selection, expiry, many threads on a small pool,
 * command timeouts, and failing closed while Redis is down then recovering
 * with the same pool. The server is killed on every path (group teardown,
 * atexit, and PR_SET_PDEATHSIG if this process dies).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/redis.h"
#include "comb/replay.h"

#define TIMEOUT_MS 500

static pid_t server_pid;
static int server_port;
static char server_url[64];

/* Returns a loopback TCP port that was free a moment ago. */
static int free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd, port;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void server_stop(void)
{
	if (server_pid > 0) {
		kill(server_pid, SIGKILL);
		while (waitpid(server_pid, NULL, 0) < 0 && errno == EINTR)
			;
		server_pid = 0;
	}
}

/* True when a direct connection to the server answers PING. */
static bool server_answers(void)
{
	struct timeval tv = {0, 200000};
	redisContext *c = redisConnectWithTimeout("127.0.0.1", server_port, tv);
	redisReply *r = NULL;
	bool ok = false;

	if (c != NULL && c->err == 0) {
		redisSetTimeout(c, tv);
		r = redisCommand(c, "PING");
		ok = r != NULL && r->type == REDIS_REPLY_STATUS;
	}
	if (r != NULL)
		freeReplyObject(r);
	if (c != NULL)
		redisFree(c);
	return ok;
}

/* Starts redis-server on server_port and waits until it answers. Returns
 * 0, or -1 when it exited or did not answer within 10 seconds. */
static int server_start(void)
{
	char port[16];
	pid_t parent = getpid();
	double deadline;
	int status;

	snprintf(port, sizeof(port), "%d", server_port);
	server_pid = fork();
	if (server_pid < 0) {
		server_pid = 0;
		return -1;
	}
	if (server_pid == 0) {
		int devnull = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		if (devnull >= 0) {
			dup2(devnull, STDIN_FILENO);
			dup2(devnull, STDOUT_FILENO);
		}
		execlp("redis-server", "redis-server", "--port", port, "--bind",
		       "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
		       "/tmp", "--loglevel", "warning", (char *)NULL);
		fprintf(stderr, "cannot run redis-server: %s\n",
			strerror(errno));
		_exit(127);
	}
	deadline = now_seconds() + 10;
	while (now_seconds() < deadline) {
		if (waitpid(server_pid, &status, WNOHANG) == server_pid) {
			server_pid = 0;
			return -1;
		}
		if (server_answers())
			return 0;
		sleep_ms(20);
	}
	server_stop();
	return -1;
}

static int group_setup(void **state)
{
	int tries;

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	atexit(server_stop);
	for (tries = 0; tries < 5; tries++) {
		server_port = free_port();
		snprintf(server_url, sizeof(server_url), "redis://127.0.0.1:%d",
			 server_port);
		if (server_start() == 0)
			return 0;
	}
	fprintf(stderr, "cannot start a private redis-server\n");
	return -1;
}

static int group_teardown(void **state)
{
	(void)state;
	server_stop();
	return 0;
}

/* Every test leaves a running server behind for the next one. */
static int ensure_server(void **state)
{
	(void)state;
	if (server_pid > 0 && server_answers())
		return 0;
	server_stop();
	return server_start();
}

/* A fresh random token id (64 lowercase hex). */
static void new_id(char id[65])
{
	unsigned char raw[32];

	assert_int_equal(getrandom(raw, sizeof(raw), 0), (ssize_t)sizeof(raw));
	comb_hex_encode(raw, sizeof(raw), id);
}

static struct comb_redis_pool *pool_for(const char *url, int size,
					int timeout_ms)
{
	char err[256] = "";
	struct comb_redis_pool *pool;

	pool = comb_redis_pool_new(url, size, timeout_ms, err, sizeof(err));
	if (pool == NULL)
		fail_msg("pool for %s: %s", url, err);
	return pool;
}

static void expect_bad_url(const char *url, int size, int timeout_ms)
{
	char err[256] = "";
	struct comb_redis_pool *pool;

	pool = comb_redis_pool_new(url, size, timeout_ms, err, sizeof(err));
	if (pool != NULL) {
		comb_redis_pool_free(pool);
		fail_msg("accepted %s", url ? url : "(null)");
	}
	assert_true(err[0] != '\0');
}

static void test_url(void **state)
{
	const char *good[] = {
	    "redis://localhost",
	    "redis://127.0.0.1:6379",
	    "redis://127.0.0.1:6379/",
	    "redis://127.0.0.1:6379/15",
	    "redis://cache.internal/2",
	    "redis://[::1]:6379/1",
	    "REDIS://h:1",
	    "redis://:secret@h:1/2",
	    "redis://comb:p%40ss:w/rd@[::1]:6379",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		comb_redis_pool_free(pool_for(good[i], 1, 100));
	expect_bad_url(NULL, 1, 100);
	expect_bad_url("", 1, 100);
	expect_bad_url("http://h:1", 1, 100);
	expect_bad_url("redis://", 1, 100);
	expect_bad_url("redis://:6379", 1, 100);
	expect_bad_url("redis://h:", 1, 100);
	expect_bad_url("redis://h:0", 1, 100);
	expect_bad_url("redis://h:65536", 1, 100);
	expect_bad_url("redis://h:12ab", 1, 100);
	expect_bad_url("redis://h:-1", 1, 100);
	expect_bad_url("redis://h:1/x", 1, 100);
	expect_bad_url("redis://h:1/-1", 1, 100);
	expect_bad_url("redis://h:1/2/3", 1, 100);
	expect_bad_url("redis://h:1?db=2", 1, 100);
	expect_bad_url("redis://user@h:1", 1, 100);
	expect_bad_url("redis://user:@h:1", 1, 100);
	expect_bad_url("redis://:p%4@h:1", 1, 100);
	expect_bad_url("redis://[::1", 1, 100);
	expect_bad_url("redis://[::1]x", 1, 100);
	expect_bad_url("redis://h:1", 0, 100);
	expect_bad_url("redis://h:1", 1, 0);
	comb_redis_pool_free(NULL);
}

/* The unix time seconds from now: when a claim made now expires. */
static int64_t in_seconds(int seconds)
{
	return (int64_t)time(NULL) + seconds;
}

static void test_claim_once(void **state)
{
	struct comb_redis_pool *pool = pool_for(server_url, 2, TIMEOUT_MS);
	int64_t until = (int64_t)time(NULL) + 120;
	char id[65], upper[65];
	redisReply *r;

	(void)state;
	assert_true(comb_redis_ping(pool));
	new_id(id);
	assert_int_equal(comb_replay_claim(pool, id, until), 0);
	assert_int_equal(comb_replay_claim(pool, id, until), COMB_EREPLAY);
	assert_int_equal(comb_replay_claim(pool, id, until + 60), COMB_EREPLAY);

	/* the key is the documented one and expires at the given time */
	r = comb_redis_command(pool, "EXPIRETIME comb:nip98:%s", id);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	assert_int_equal(r->integer, until);
	freeReplyObject(r);

	/* a command error is a reply, not a dead connection */
	r = comb_redis_command(pool, "NOSUCHCOMMAND");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ERROR);
	freeReplyObject(r);
	assert_true(comb_redis_ping(pool));

	/* malformed input never reaches Redis */
	memcpy(upper, id, sizeof(upper));
	upper[0] = 'A';
	assert_int_equal(comb_replay_claim(pool, upper, until), COMB_EINVAL);
	assert_int_equal(comb_replay_claim(pool, "abc", until), COMB_EINVAL);
	assert_int_equal(comb_replay_claim(pool, NULL, until), COMB_EINVAL);
	new_id(id);
	assert_int_equal(comb_replay_claim(pool, id, 0), COMB_EINVAL);
	assert_int_equal(comb_replay_claim(pool, id, until), 0);
	comb_redis_pool_free(pool);
}

static void test_two_nodes(void **state)
{
	struct comb_redis_pool *a = pool_for(server_url, 2, TIMEOUT_MS);
	struct comb_redis_pool *b = pool_for(server_url, 2, TIMEOUT_MS);
	char id1[65], id2[65];

	(void)state;
	new_id(id1);
	new_id(id2);
	assert_int_equal(comb_replay_claim(a, id1, in_seconds(120)), 0);
	assert_int_equal(comb_replay_claim(b, id1, in_seconds(120)), COMB_EREPLAY);
	assert_int_equal(comb_replay_claim(b, id2, in_seconds(120)), 0);
	assert_int_equal(comb_replay_claim(a, id2, in_seconds(120)), COMB_EREPLAY);
	comb_redis_pool_free(a);
	comb_redis_pool_free(b);
}

static void test_database(void **state)
{
	char url3[80];
	struct comb_redis_pool *d0 = pool_for(server_url, 1, TIMEOUT_MS);
	struct comb_redis_pool *d3;
	char id[65];
	redisReply *r;

	(void)state;
	snprintf(url3, sizeof(url3), "%s/3", server_url);
	d3 = pool_for(url3, 1, TIMEOUT_MS);
	new_id(id);
	assert_int_equal(comb_replay_claim(d3, id, in_seconds(120)), 0);
	assert_int_equal(comb_replay_claim(d3, id, in_seconds(120)), COMB_EREPLAY);
	/* database 0 does not see database 3's keys */
	assert_int_equal(comb_replay_claim(d0, id, in_seconds(120)), 0);
	r = comb_redis_command(d3, "EXISTS comb:nip98:%s", id);
	assert_non_null(r);
	assert_int_equal(r->integer, 1);
	freeReplyObject(r);
	comb_redis_pool_free(d0);
	comb_redis_pool_free(d3);

	/* a database the server does not have: unusable, never a crash */
	snprintf(url3, sizeof(url3), "%s/999", server_url);
	d3 = pool_for(url3, 1, TIMEOUT_MS);
	assert_false(comb_redis_ping(d3));
	assert_int_equal(comb_replay_claim(d3, id, in_seconds(120)), COMB_EUNAVAIL);
	comb_redis_pool_free(d3);
}

static void test_expiry(void **state)
{
	struct comb_redis_pool *pool = pool_for(server_url, 1, TIMEOUT_MS);
	char id[65];

	(void)state;
	new_id(id);
	assert_int_equal(comb_replay_claim(pool, id, in_seconds(2)), 0);
	assert_int_equal(comb_replay_claim(pool, id, in_seconds(2)), COMB_EREPLAY);
	sleep_ms(3100);
	assert_int_equal(comb_replay_claim(pool, id, in_seconds(2)), 0);
	comb_redis_pool_free(pool);
}

#define THREADS	   6
#define PER_THREAD 40

struct worker {
	pthread_t thread;
	struct comb_redis_pool *pool;
	char ids[PER_THREAD][65];
	int fresh, replayed, other;
};

/* Claims every id twice: the first claim must win, the second must not. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int i, rc;

	for (i = 0; i < PER_THREAD; i++) {
		rc = comb_replay_claim(w->pool, w->ids[i], in_seconds(60));
		if (rc == 0)
			w->fresh++;
		else
			w->other++;
		rc = comb_replay_claim(w->pool, w->ids[i], in_seconds(60));
		if (rc == COMB_EREPLAY)
			w->replayed++;
		else
			w->other++;
	}
	return NULL;
}

static void test_threads(void **state)
{
	/* fewer connections than threads: threads wait for each other */
	struct comb_redis_pool *pool = pool_for(server_url, 2, 5000);
	struct worker *w = calloc(THREADS, sizeof(*w));
	int i, j;

	(void)state;
	assert_non_null(w);
	for (i = 0; i < THREADS; i++) {
		w[i].pool = pool;
		for (j = 0; j < PER_THREAD; j++)
			new_id(w[i].ids[j]);
		assert_int_equal(
		    pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].fresh, PER_THREAD);
		assert_int_equal(w[i].replayed, PER_THREAD);
		assert_int_equal(w[i].other, 0);
	}
	/* every id is now taken, from any thread */
	for (i = 0; i < THREADS; i++)
		assert_int_equal(comb_replay_claim(pool, w[i].ids[0], in_seconds(60)),
				 COMB_EREPLAY);
	free(w);
	comb_redis_pool_free(pool);
}

static void test_fail_closed_and_recover(void **state)
{
	struct comb_redis_pool *pool = pool_for(server_url, 2, TIMEOUT_MS);
	char id1[65], id2[65], id3[65];
	double t0;
	int i;

	(void)state;
	new_id(id1);
	new_id(id2);
	new_id(id3);
	assert_int_equal(comb_replay_claim(pool, id1, in_seconds(120)), 0);

	/* Redis dies: the pooled connection is dead, and every claim fails
	 * closed promptly instead of hanging or being accepted */
	server_stop();
	t0 = now_seconds();
	for (i = 0; i < 3; i++) {
		assert_int_equal(comb_replay_claim(pool, id2, in_seconds(120)),
				 COMB_EUNAVAIL);
		assert_int_equal(comb_replay_claim(pool, id1, in_seconds(120)),
				 COMB_EUNAVAIL);
	}
	assert_false(comb_redis_ping(pool));
	assert_true(now_seconds() - t0 < 3 * TIMEOUT_MS / 1000.0 + 2);

	/* Redis is back on the same address: the same pool recovers */
	assert_int_equal(server_start(), 0);
	assert_true(comb_redis_ping(pool));
	assert_int_equal(comb_replay_claim(pool, id3, in_seconds(120)), 0);
	assert_int_equal(comb_replay_claim(pool, id3, in_seconds(120)), COMB_EREPLAY);
	assert_int_equal(comb_replay_claim(pool, id2, in_seconds(120)), 0);
	assert_int_equal(comb_replay_claim(pool, id2, in_seconds(120)), COMB_EREPLAY);

	/* and again with connections idle in the pool while it restarts */
	server_stop();
	assert_int_equal(server_start(), 0);
	new_id(id1);
	assert_int_equal(comb_replay_claim(pool, id1, in_seconds(120)), 0);
	assert_int_equal(comb_replay_claim(pool, id1, in_seconds(120)), COMB_EREPLAY);
	comb_redis_pool_free(pool);
}

static void test_unreachable(void **state)
{
	char url[64];
	struct comb_redis_pool *pool;
	char id[65];
	double t0;

	(void)state;
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", free_port());
	pool = pool_for(url, 1, TIMEOUT_MS);
	new_id(id);
	t0 = now_seconds();
	assert_int_equal(comb_replay_claim(pool, id, in_seconds(120)), COMB_EUNAVAIL);
	assert_false(comb_redis_ping(pool));
	assert_true(now_seconds() - t0 < 2.0);
	comb_redis_pool_free(pool);
}

/* A server that accepts connections but never answers: each command times
 * out, the context is dropped, and the pool keeps failing closed. */
static void test_silent_server(void **state)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	struct comb_redis_pool *pool;
	char url[64], id[65];
	double t0;
	int fd, i;

	(void)state;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", ntohs(sa.sin_port));

	pool = pool_for(url, 1, 200);
	new_id(id);
	t0 = now_seconds();
	for (i = 0; i < 3; i++)
		assert_int_equal(comb_replay_claim(pool, id, in_seconds(120)),
				 COMB_EUNAVAIL);
	assert_true(now_seconds() - t0 < 3.0);
	comb_redis_pool_free(pool);
	close(fd);
}

/*
 * A command that times out on a live server: its late reply must never be
 * taken for the reply to the next command, so the timed-out connection has
 * to be dropped.
 */
static void test_timeout_then_recover(void **state)
{
	struct comb_redis_pool *pool = pool_for(server_url, 1, 200);
	struct timeval tv = {2, 0};
	redisContext *admin;
	redisReply *r;
	char id1[65], id2[65];

	(void)state;
	new_id(id1);
	new_id(id2);
	assert_int_equal(comb_replay_claim(pool, id1, in_seconds(120)), 0);

	admin = redisConnectWithTimeout("127.0.0.1", server_port, tv);
	assert_non_null(admin);
	assert_int_equal(admin->err, 0);
	r = redisCommand(admin, "CLIENT PAUSE 800 ALL");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	redisFree(admin);

	/* paused: the claim times out and fails closed */
	assert_int_equal(comb_replay_claim(pool, id2, in_seconds(120)), COMB_EUNAVAIL);
	sleep_ms(1000);
	/* the next answers are the right ones */
	assert_int_equal(comb_replay_claim(pool, id1, in_seconds(120)), COMB_EREPLAY);
	r = comb_redis_command(pool, "ECHO %s", "marker");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_string_equal(r->str, "marker");
	freeReplyObject(r);
	comb_redis_pool_free(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url),
	    cmocka_unit_test(test_unreachable),
	    cmocka_unit_test(test_silent_server),
	    cmocka_unit_test_setup(test_claim_once, ensure_server),
	    cmocka_unit_test_setup(test_two_nodes, ensure_server),
	    cmocka_unit_test_setup(test_database, ensure_server),
	    cmocka_unit_test_setup(test_expiry, ensure_server),
	    cmocka_unit_test_setup(test_threads, ensure_server),
	    cmocka_unit_test_setup(test_timeout_then_recover, ensure_server),
	    cmocka_unit_test_setup(test_fail_closed_and_recover, ensure_server),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
