/*
 * comb-relay: reads its configuration, loads the relay key and the policy
 * plugins, opens the PostgreSQL and Redis pools, starts live delivery, the
 * sync workers and the capture feed, and serves HTTP (and WebSocket) with
 * civetweb until SIGINT or SIGTERM.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comb/error.h"
#include "comb/event.h"
#include "comb/hex.h"
#include "comb/log.h"
#include "feed/feed.h"
#include "http/http.h"
#include "protocol_limits.h"
#include "revcache.h"
#include "sync/sync.h"
#include "write/write.h"
#include "ws/ws.h"

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
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

static int start_http(struct relay *relay, char *errbuf, size_t errlen)
{
	char threads[16], max_message[16];
	const char *options[] = {
		"listening_ports", relay->cfg.listen,
		"num_threads", threads,
		"tcp_nodelay", "1",
		"enable_keep_alive", "yes",
		"request_timeout_ms", COMB_BODY_DEADLINE_TEXT,
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
	callbacks.begin_request = ws_begin_request;
	callbacks.end_request = ws_end_request;
	relay->http = mg_start(&callbacks, relay, options);
	if (!relay->http)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot listen on %s", relay->cfg.listen);
	mg_set_request_handler(relay->http, "/", http_handler, relay);
	ws_register(relay->http, relay);
	return 0;
}

int main(void)
{
	static struct relay relay;
	enum comb_log_level level;
	char err[512], plugin[PATH_MAX + 32];
	struct sigaction sa = {0};
	int rc = 1;

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
	if (!relay.db || !relay.redis || !relay.revisions) {
		comb_error("cannot set up connection pools: %s",
			   relay.redis ? "out of memory" : err);
		goto out;
	}

	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	mg_init_library(0);
	if (write_batch_start(&relay, err, sizeof(err))) {
		comb_error("write: %s", err);
		goto out;
	}
	if (ws_start(&relay, err, sizeof(err))) {
		comb_error("websocket: %s", err);
		goto out;
	}
	if (ws_sync_start(&relay, err, sizeof(err))) {
		comb_error("sync: %s", err);
		goto out;
	}
	if (ws_resume_start(&relay, err, sizeof(err))) {
		comb_error("resumable sync: %s", err);
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
	while (!stopping)
		sleep(1);
	comb_info("stopping");
	mg_stop(relay.http);
	rc = 0;
out:
	write_batch_stop();
	feed_stop();
	ws_sync_stop();
	ws_resume_stop();
	ws_stop();
	comb_policy_set_free(relay.policy);
	comb_db_pool_free(relay.db);
	revcache_free(relay.revisions);
	comb_redis_pool_free(relay.redis);
	comb_config_release(&relay.cfg);
	memset(relay.secret_key, 0, sizeof(relay.secret_key));
	return rc;
}
