/*
 * comb-relay: reads its configuration, loads the relay key and the policy
 * plugins, opens the PostgreSQL and Redis pools, starts live delivery, the
 * sync workers and the capture feed, and serves HTTP (and WebSocket) with
 * civetweb until SIGINT or SIGTERM.
 *
 * A stop is graceful (docs/operations.md, "Stopping a relay node"):
 * /readyz turns 503 at once, the listening sockets close (new connections
 * are refused), every WebSocket gets the close 1001 "going away" once the
 * message it is handling is answered, and requests in progress finish;
 * after COMB_SHUTDOWN_GRACE_MS at most, civetweb stops and the process
 * exits 0. The steps after the grace period are bounded by STOP_TAIL_MS:
 * past it a watchdog ends the process with status 1.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client_addr/client_addr.h"
#include "comb/error.h"
#include "comb/event.h"
#include "comb/hex.h"
#include "comb/log.h"
#include "feed/feed.h"
#include "http/http.h"
#include "hub/hub.h"
#include "protocol_limits.h"
#include "read/read.h"
#include "revcache/revcache.h"
#include "sync/sync.h"
#include "write/write.h"
#include "ws/ws.h"

/* The hub's ear on the capture feed (hub/hub.h): the one listener. */
static const struct feed_listener hub_listener = {
	.signal = hub_signal,
	.interrupt = hub_interrupt,
};

/* civetweb requests in progress; a WebSocket connection is one request
 * for as long as it lasts. */
static atomic_int requests_in_flight;

/* How long the steps after the grace period (civetweb's stop, the write
 * batchers, the feed and the pools) may take before the process gives up
 * on a clean exit: each of them waits at most a few seconds for the
 * database (connect_timeout, statement_timeout, a pool's wait). */
#define STOP_TAIL_MS 5000

/* The stop watchdog: ends the process, status 1, when the graceful stop
 * has not ended by the deadline (arg: COMB_SHUTDOWN_GRACE_MS +
 * STOP_TAIL_MS), so that a stop never waits on a step without a bound. */
static void *stop_watchdog(void *arg)
{
	int ms = *(int *)arg;
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&t, &t) && errno == EINTR)
		;
	comb_error("stopping: not stopped %d ms after the signal; exiting now", ms);
	_exit(1);
	return NULL;
}

/* Starts the stop watchdog for a stop with grace_ms of grace. */
static void start_stop_watchdog(int grace_ms)
{
	static int limit_ms;
	pthread_attr_t attr;
	pthread_t t;

	limit_ms = grace_ms + STOP_TAIL_MS;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, stop_watchdog, &limit_ms))
		comb_warn("stopping: cannot start the stop watchdog");
	pthread_attr_destroy(&attr);
}

static int load_secret_key(struct relay *relay, char *errbuf, size_t errlen)
{
	const struct comb_config *cfg = &relay->cfg;
	char text[130] = "";

	if (*cfg->relay_secret_key) {
		snprintf(text, sizeof(text), "%s", cfg->relay_secret_key);
	} else if (*cfg->relay_secret_key_file) {
		FILE *f = fopen(cfg->relay_secret_key_file, "r");

		if (!f)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "cannot open %s: %s",
					 cfg->relay_secret_key_file, strerror(errno));
		if (!fgets(text, sizeof(text), f))
			text[0] = '\0';
		fclose(f);
		text[strcspn(text, "\r\n")] = '\0';
	} else {
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "COMB_RELAY_SECRET_KEY or COMB_RELAY_SECRET_KEY_FILE is required");
	}
	if (comb_hex_decode(text, relay->secret_key, 32) ||
	    comb_key_public(relay->secret_key, relay->pubkey))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "the relay secret key must be 64 lowercase hex digits of a valid key");
	memset(text, 0, sizeof(text));
	return 0;
}

/* The default plugin path: lib/policy_default.so beside bin/. */
static void default_plugin_path(char *out, size_t outlen)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n < 0)
		n = 0;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(out, outlen, "%s/../lib/policy_default.so", exe);
}

/* civetweb's begin_request: an upgrade is admitted by ws/ws.c, any other
 * request counts against its client address's HTTP requests. Returns 0
 * to go on, else the status already sent. */
static int begin_request(struct mg_connection *conn)
{
	atomic_fetch_add(&requests_in_flight, 1);
	if (ws_is_upgrade(conn))
		return ws_begin_request(conn);
	return client_addr_request_begin(conn) ? 0 : 503;
}

/* civetweb's end_request: gives back what begin_request claimed. */
static void end_request(const struct mg_connection *conn, int status)
{
	ws_end_request(conn, status);
	client_addr_request_end();
	atomic_fetch_sub(&requests_in_flight, 1);
}

/*
 * Closes civetweb's listening sockets, so that new connections are refused
 * while the ones it serves go on. civetweb 1.15 has no call for this, and
 * its accept loop polls the sockets until mg_stop, so each one (found
 * among the process's descriptors: a listening socket on one of the
 * server's ports) is replaced with dup2() by the read end of a pipe whose
 * write end stays open: never readable, so the loop never accepts on it,
 * and closed by civetweb in mg_stop like the socket it replaced. The
 * socket is shut down first, so that the kernel refuses new connections at
 * once (the loop's poll may hold it a little longer; its failed accept
 * does nothing). Returns the pipe's write end (close it after mg_stop), or
 * -1.
 */
static int stop_listening(struct mg_context *ctx)
{
	struct mg_server_port ports[8];
	int nports = mg_get_server_ports(ctx, 8, ports);
	int quiet[2], closed = 0, i;
	struct dirent *e;
	DIR *dir;

	if (nports <= 0 || pipe(quiet))
		return -1;
	dir = opendir("/proc/self/fd");
	while (dir && (e = readdir(dir))) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(int);
		int fd = (int)strtol(e->d_name, NULL, 10), listening = 0, port;

		if (fd <= 2 || fd == quiet[0] || fd == quiet[1] || fd == dirfd(dir) ||
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) ||
		    !listening)
			continue;
		len = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &len))
			continue;
		if (ss.ss_family == AF_INET)
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		else
			continue;
		for (i = 0; i < nports && ports[i].port != port; i++)
			;
		if (i < nports && shutdown(fd, SHUT_RDWR) == 0 &&
		    dup2(quiet[0], fd) == fd)
			closed++;
	}
	if (dir)
		closedir(dir);
	close(quiet[0]);
	if (closed == 0)
		comb_warn("stopping: no listening socket found; new connections are still accepted");
	return quiet[1];
}

/* Waits until no civetweb request is in progress, or until deadline
 * (CLOCK_MONOTONIC). Returns the requests left. */
static int wait_requests(const struct timespec *deadline)
{
	struct timespec now;
	int n;

	for (;;) {
		n = atomic_load(&requests_in_flight);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (n == 0 || now.tv_sec > deadline->tv_sec ||
		    (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
			return n;
		usleep(20000);
	}
}

/* The graceful stop described at the top of this file. */
static void drain(struct relay *relay)
{
	int grace = relay->cfg.shutdown_grace_ms, sockets, requests, quiet;
	struct timespec deadline;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += grace / 1000;
	deadline.tv_nsec += (long)(grace % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	atomic_store(&relay->draining, true);
	start_stop_watchdog(grace);
	comb_info("stopping: not ready, refusing new connections, closing %d WebSocket connections (grace %d ms)",
		  ws_connections(), grace);
	quiet = stop_listening(relay->http);
	sockets = ws_drain(grace);
	requests = wait_requests(&deadline);
	if (sockets || requests)
		comb_warn("stopping: grace period over with %d WebSocket connections and %d requests left",
			  sockets, requests);
	else
		comb_info("stopping: every connection closed");
	mg_stop(relay->http);
	if (quiet >= 0)
		close(quiet);
}

/* Raises the soft limit of open files to the hard limit: every connection
 * holds a socket, and the pools and the feed hold more. Logs what was
 * obtained, and warns when it is below what num_threads may need. */
static void raise_open_files(const struct comb_config *cfg)
{
	struct rlimit rl;
	rlim_t wanted = (rlim_t)cfg->num_threads + (rlim_t)cfg->db_pool_size * 2 + 64;

	/* and the standbys' pools and monitors */
	if (*cfg->read_database_urls)
		wanted += ((rlim_t)cfg->db_pool_size + 1) * COMB_READ_MAX_STANDBYS + 1;
	rlim_t before;

	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		comb_warn("open files: cannot read the limit: %s", strerror(errno));
		return;
	}
	before = rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			rl.rlim_cur = before;
	}
	if (rl.rlim_cur == before)
		comb_info("open files: limit %llu (the hard limit)",
			  (unsigned long long)rl.rlim_cur);
	else
		comb_info("open files: limit raised from %llu to %llu (the hard limit)",
			  (unsigned long long)before, (unsigned long long)rl.rlim_cur);
	if (rl.rlim_cur < wanted)
		comb_warn("open files: limit %llu is below the %llu that COMB_NUM_THREADS %d may need; raise the hard limit (ulimit -Hn, LimitNOFILE=, --ulimit nofile=)",
			  (unsigned long long)rl.rlim_cur, (unsigned long long)wanted,
			  cfg->num_threads);
}

static int start_http(struct relay *relay, char *errbuf, size_t errlen)
{
	char threads[16], max_message[16];
	const char *options[] = {
		"listening_ports", relay->cfg.listen,
		"num_threads", threads,
		"tcp_nodelay", "1",
		"enable_keep_alive", "yes",
		/* every read and write, WebSocket frames to a slow reader
		 * included; a request body's next bytes are awaited for at
		 * most the body deadline (comb's civetweb patch) */
		"request_timeout_ms", "30000",
		"request_body_timeout_ms", COMB_BODY_DEADLINE_TEXT,
		/* a connection's request line and headers (client_addr.h) */
		"request_header_timeout_ms", COMB_HEADER_DEADLINE_TEXT,
		/* civetweb answers CORS preflights itself unless this is
		 * empty; http.c answers them as PROTOCOL.md section 10 says */
		"access_control_allow_methods", "",
		"enable_websocket_ping_pong", "yes",
		"websocket_timeout_ms", WS_PING_INTERVAL_TEXT,
		"websocket_max_message_size", max_message,
		"websocket_message_timeout_ms", WS_MESSAGE_TIMEOUT_TEXT,
		NULL,
	};
	struct mg_callbacks callbacks = {0};

	snprintf(threads, sizeof(threads), "%d", relay->cfg.num_threads);
	snprintf(max_message, sizeof(max_message), "%d",
		 relay->cfg.max_message_length);
	callbacks.begin_request = begin_request;
	callbacks.end_request = end_request;
	callbacks.init_connection = client_addr_connection_open;
	callbacks.connection_close = client_addr_connection_close;
	relay->http = mg_start(&callbacks, relay, options);
	if (!relay->http)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot listen on %s", relay->cfg.listen);
	mg_set_request_handler(relay->http, "/", http_handler, relay);
	ws_register(relay->http, relay);
	return 0;
}

/* Freed memory an arena keeps at its top before giving it back to the
 * kernel, and the size from which an allocation gets a mapping of its own. */
#define KEEP_FREED_BYTES (32 * 1024 * 1024)
#define OWN_MAPPING_BYTES (32 * 1024 * 1024)

/*
 * Lets memory freed by one answer serve the next instead of going back to
 * the kernel at once. Reads build and drop megabytes at a time (batches of
 * stored events, libpq results, pages, catch-up frames); by default glibc
 * maps each such buffer on its own and unmaps it when freed, and trims an
 * arena's free top past a few times that, so the next read touches every
 * page afresh: a page fault per 4 KiB, which costs 10 to 20 us on some
 * virtual machines (docs/benchmarks-history.md). What is kept counts in the
 * relay's resident memory: at most KEEP_FREED_BYTES free at the top of
 * each of glibc's arenas, besides what is free inside them anyway.
 */
static void keep_freed_memory(void)
{
	mallopt(M_MMAP_THRESHOLD, OWN_MAPPING_BYTES);
	mallopt(M_TRIM_THRESHOLD, KEEP_FREED_BYTES);
}

/* Sets up read routing over the primary's pool and the standbys of
 * COMB_READ_DATABASE_URLS. Returns 0, or an error with errbuf set. */
static int start_reads(struct relay *relay, char *errbuf, size_t errlen)
{
	const struct comb_read_options opts = {
		.primary_conninfo = relay->cfg.database_url,
		.standby_urls = relay->cfg.read_database_urls,
		.pool_size = relay->cfg.db_pool_size,
		.statement_timeout_ms = relay->cfg.query_timeout_ms,
		.warm_sql = read_warm_sql,
		.wait_ms = relay->cfg.read_wait_ms,
		.max_lag_ms = relay->cfg.read_max_lag_ms,
	};
	int rc = comb_read_router_new(relay->db, &opts, &relay->reads, errbuf, errlen);

	if (rc == COMB_ENOMEM)
		snprintf(errbuf, errlen, "out of memory");
	else if (!rc && comb_read_standbys(relay->reads) > 0)
		comb_info("reads: %d standby(s), wait %d ms, max lag %d ms",
			  comb_read_standbys(relay->reads), relay->cfg.read_wait_ms,
			  relay->cfg.read_max_lag_ms);
	return rc;
}

int main(void)
{
	static struct relay relay;
	enum comb_log_level level;
	char err[512], plugin[PATH_MAX + 32];
	sigset_t stop_signals;
	int rc = 1, sig;

	/* SIGINT and SIGTERM are blocked in every thread (all inherit this
	 * mask) and taken by the main thread alone with sigwait: delivered
	 * to another thread, a signal would interrupt whatever system call
	 * it was in (a database or Redis round trip, a ZeroMQ poll) and wait
	 * for the main thread's next look at a flag. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	keep_freed_memory();
	comb_log_init("comb-relay", COMB_LOG_INFO);
	if (comb_config_load(&relay.cfg, err, sizeof(err))) {
		comb_error("configuration: %s", err);
		return 1;
	}
	if (comb_log_level_parse(relay.cfg.log_level, &level) == 0)
		comb_log_init("comb-relay", level);
	if (load_secret_key(&relay, err, sizeof(err))) {
		comb_error("relay key: %s", err);
		goto out;
	}
	if (*relay.cfg.policy_plugin)
		snprintf(plugin, sizeof(plugin), "%s", relay.cfg.policy_plugin);
	else
		default_plugin_path(plugin, sizeof(plugin));
	relay.policy = comb_policy_set_load(plugin, relay.cfg.policy_config,
					    err, sizeof(err));
	if (!relay.policy) {
		comb_error("policy: %s", err);
		goto out;
	}
	relay.db = comb_db_pool_new(relay.cfg.database_url, relay.cfg.db_pool_size,
				    relay.cfg.query_timeout_ms);
	relay.redis = comb_redis_pool_new(relay.cfg.redis_url, relay.cfg.db_pool_size,
					  1000, err, sizeof(err));
	relay.revisions = revcache_new((size_t)relay.cfg.revision_cache_mb << 20);
	if (!relay.db || !relay.redis || !relay.revisions ||
	    comb_db_pool_warm(relay.db, read_warm_sql) ||
	    comb_db_pool_open_all(relay.db)) {
		comb_error("cannot set up connection pools: %s",
			   relay.redis ? "out of memory" : err);
		goto out;
	}
	if (start_reads(&relay, err, sizeof(err))) {
		comb_error("read standbys: %s", err);
		goto out;
	}
	/* in the background: readiness and clients do not wait for it */
	if (revcache_warm_start(&relay, err, sizeof(err))) {
		comb_error("revision cache: %s", err);
		goto out;
	}

	raise_open_files(&relay.cfg);
	signal(SIGPIPE, SIG_IGN);

	mg_init_library(0);
	if (client_addr_start(&relay, err, sizeof(err))) {
		comb_error("client addresses: %s", err);
		goto out;
	}
	if (write_batch_start(&relay, err, sizeof(err))) {
		comb_error("write: %s", err);
		goto out;
	}
	/* the hub hears access changes before anyone hears what follows them */
	feed_listen(&hub_listener);
	if (ws_start(&relay, err, sizeof(err))) {
		comb_error("websocket: %s", err);
		goto out;
	}
	if (ws_sync_start(&relay, err, sizeof(err))) {
		comb_error("sync: %s", err);
		goto out;
	}
	if (hub_workers_start(sync_kinds, SYNC_KINDS, err, sizeof(err))) {
		comb_error("hub: %s", err);
		goto out;
	}
	if (feed_start(&relay, err, sizeof(err))) {
		comb_error("feed: %s", err);
		goto out;
	}
	if (start_http(&relay, err, sizeof(err))) {
		comb_error("http: %s", err);
		goto out;
	}
	comb_info("relay %s listening on %s", relay.pubkey, relay.cfg.listen);
	while (sigwait(&stop_signals, &sig))
		;
	comb_info("stopping: %s received", sig == SIGINT ? "SIGINT" : "SIGTERM");
	drain(&relay);
	rc = 0;
out:
	revcache_warm_stop();
	write_batch_stop();
	feed_stop();
	hub_workers_stop();
	hub_stop();
	ws_sync_stop();
	ws_stop();
	comb_policy_set_free(relay.policy);
	comb_read_router_free(relay.reads);
	comb_db_pool_free(relay.db);
	revcache_free(relay.revisions);
	comb_redis_pool_free(relay.redis);
	comb_config_release(&relay.cfg);
	memset(relay.secret_key, 0, sizeof(relay.secret_key));
	return rc;
}
