/*
 * Configuration from COMB_* environment variables. The table below is the
 * single list of variables: their defaults, their checks and the words the
 * README's configuration table is printed from (`comb-admin config-table`).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/config.h"
#include "comb/error.h"
#include "comb/log.h"

/* SETTING_LOG_LEVEL is a string that must name a level of comb/log.h. */
enum setting_type { SETTING_STRING, SETTING_INT, SETTING_BOOL, SETTING_LOG_LEVEL };

struct setting {
	const char *name;
	enum setting_type type;
	const char *default_value;
	size_t offset;
	long min;
	long max;
	const char *doc;
};

#define STR(field, name, def, doc)                                         \
	{ name, SETTING_STRING, def, offsetof(struct comb_config, field), 0, 0, doc }
#define INT(field, name, def, lo, hi, doc)                                 \
	{ name, SETTING_INT, def, offsetof(struct comb_config, field), lo, hi, doc }
#define LEVEL(field, name, def, doc)                                       \
	{ name, SETTING_LOG_LEVEL, def, offsetof(struct comb_config, field), 0, 0, doc }
#define BOOL(field, name, def, doc)                                        \
	{ name, SETTING_BOOL, def, offsetof(struct comb_config, field), 0, 1, doc }

static const struct setting settings[] = {
	STR(listen, "COMB_LISTEN", "127.0.0.1:7447",
	    "address and port the relay listens on (HTTP and WebSocket)"),
	STR(database_url, "COMB_DATABASE_URL", "",
	    "PostgreSQL connection string (libpq URL or key=value)"),
	STR(redis_url, "COMB_REDIS_URL", "redis://127.0.0.1:6379/0",
	    "Redis URL shared by every relay node and capture: `redis://[[user]:password@]host[:port][/db]`, user and password percent-encoded; deployments sharing a Redis server each need a database of their own"),
	STR(redis_password_file, "COMB_REDIS_PASSWORD_FILE", "",
	    "file whose first line is the Redis password (AUTH; with the URL's user name, if any); the URL must then carry no password"),
	STR(relay_secret_key, "COMB_RELAY_SECRET_KEY", "",
	    "relay secret key, 64 hex; signs removal markers and derives the cursor key; every node must share it"),
	STR(relay_secret_key_file, "COMB_RELAY_SECRET_KEY_FILE", "",
	    "file holding the relay secret key in hex (used when COMB_RELAY_SECRET_KEY is empty)"),
	STR(policy_plugin, "COMB_POLICY_PLUGIN", "",
	    "colon-separated policy plugin paths, in decision order (default: policy_default.so beside the binaries)"),
	STR(policy_config, "COMB_POLICY_CONFIG", "",
	    "text passed to every policy plugin's init (auditor: `auditors=<hex>,<hex>`)"),
	STR(capture_endpoint, "COMB_CAPTURE_ENDPOINT", "tcp://127.0.0.1:7450",
	    "comma-separated ZeroMQ endpoints of the capture instances (at most 8): relays connect to every one, each capture binds the first it can"),
	STR(capture_metrics_listen, "COMB_CAPTURE_METRICS_LISTEN", "",
	    "address and port of capture's HTTP endpoint (GET /metrics, GET /healthz), for example `127.0.0.1:7451`; empty: none"),
	INT(capture_heartbeat_ms, "COMB_CAPTURE_HEARTBEAT_MS", "500", 50, 60000,
	    "interval of capture's heartbeats; relays treat three missed intervals as a feed interruption"),
	STR(relay_name, "COMB_RELAY_NAME", "comb", "NIP-11 name"),
	STR(relay_description, "COMB_RELAY_DESCRIPTION",
	    "artifacts kept in sync between PostgreSQL and every client",
	    "NIP-11 description"),
	LEVEL(log_level, "COMB_LOG_LEVEL", "info", "debug, info, warn or error"),
	BOOL(incremental_enabled, "COMB_INCREMENTAL_ENABLED", "false",
	     "serve incremental reads (section 8 of the protocol)"),
	BOOL(access_log, "COMB_ACCESS_LOG", "false",
	     "log one line per HTTP request: client address, method, path, status, milliseconds"),
	INT(num_threads, "COMB_NUM_THREADS", "1200", 2, 20000,
	    "civetweb worker threads, one per open connection: a node holds this minus an eighth as WebSockets (1,050 by default; NIP-11 `limitation.max_connections`)"),
	INT(max_connections_per_ip, "COMB_MAX_CONNECTIONS_PER_IP", "16", 1,
	    100000, "WebSocket connections one client address may hold on a relay node (NIP-11 `limitation.max_connections_per_ip`)"),
	INT(max_http_connections_per_ip, "COMB_MAX_HTTP_CONNECTIONS_PER_IP", "16", 1,
	    100000, "HTTP requests one client address may have in progress on a relay node; a peer that is not a trusted proxy may also hold at most this many connections besides its WebSockets, each sending its request line and headers within 10 s"),
	STR(trusted_proxies, "COMB_TRUSTED_PROXIES", "",
	    "comma-separated addresses and CIDR ranges of the proxies in front of the relay (for example `10.0.0.0/8,::1`): only from these is the client address taken from `X-Forwarded-For` (its last entry that is not a trusted proxy); empty: the TCP peer is always the client"),
	INT(db_pool_size, "COMB_DB_POOL_SIZE", "8", 1, 1000,
	    "PostgreSQL connections per relay node"),
	STR(read_database_urls, "COMB_READ_DATABASE_URLS", "",
	    "comma-separated PostgreSQL connection strings of streaming standbys of the primary that serve reads (at most 8; each gets COMB_DB_POOL_SIZE connections); empty: every read goes to the primary. Every relay node of a deployment with standbys sets it"),
	INT(read_wait_ms, "COMB_READ_WAIT_MS", "100", 0, 10000,
	    "how long a read waits for a standby to replay the position it needs (its cursor, the reader's last acknowledged write) before it goes to the primary, in milliseconds"),
	INT(read_max_lag_ms, "COMB_READ_MAX_LAG_MS", "2000", 10, 3600000,
	    "a standby lagging the primary by more than this leaves the read rotation; it returns once it lags no more than half of it, in milliseconds"),
	INT(max_message_length, "COMB_MAX_MESSAGE_LENGTH", "65536", 1024,
	    16777216, "largest event, request body or WebSocket message in bytes"),
	INT(max_subscriptions, "COMB_MAX_SUBSCRIPTIONS", "64", 1, 100000,
	    "open subscriptions per WebSocket connection"),
	INT(max_connection_bytes, "COMB_MAX_CONNECTION_BYTES", "4194304", 2097152,
	    1073741824, "bytes one WebSocket connection's subscriptions and unwritten frames may hold"),
	INT(node_connection_mib, "COMB_NODE_CONNECTION_MIB", "1024", 16, 1048576,
	    "MiB all WebSocket connections of a node may hold together"),
	INT(max_filters, "COMB_MAX_FILTERS", "10", 1, 1000,
	    "filters per REQ"),
	INT(max_limit, "COMB_MAX_LIMIT", "1000", 1, 100000,
	    "largest `limit` of a query"),
	INT(created_at_lower_limit, "COMB_CREATED_AT_LOWER_LIMIT", "900", 1,
	    INT_MAX, "how far in the past an event's created_at may be, in seconds"),
	INT(created_at_upper_limit, "COMB_CREATED_AT_UPPER_LIMIT", "900", 1,
	    INT_MAX, "how far in the future an event's created_at may be, in seconds"),
	INT(query_timeout_ms, "COMB_QUERY_TIMEOUT_MS", "2000", 10, 600000,
	    "execution budget of one query (PostgreSQL statement_timeout)"),
	INT(sync_max_events, "COMB_SYNC_MAX_EVENTS", "4096", 1, 10000000,
	    "largest artifact set one sync may hold"),
	INT(sync_quiet_ms, "COMB_SYNC_QUIET_MS", "30000", 100, 3600000,
	    "quiet time after which a resumable sync sends an empty CHANGES with a newer cursor, in milliseconds (the protocol's 30 s; lower only in tests)"),
	INT(revision_cache_mb, "COMB_REVISION_CACHE_MB", "256", 0, 1048576,
	    "bytes of stored events (artifact revisions, messages) each relay node keeps in memory for reads, in MiB (0: no cache)"),
	INT(revision_cache_warm_mb, "COMB_REVISION_CACHE_WARM_MB", "64", 0, 1048576,
	    "bytes of the newest stored events a relay node reads into its revision cache when it starts, in the background, in MiB (at most half of COMB_REVISION_CACHE_MB; 0: none)"),
	INT(incremental_max_concurrent, "COMB_INCREMENTAL_MAX_CONCURRENT", "32",
	    1, 100000, "incremental reads running at once across all relay nodes"),
	INT(write_rate, "COMB_WRITE_RATE", "600", 0, 6000000,
	    "events one pubkey may write per minute, shared by every relay node through Redis (0: no limit)"),
	INT(write_burst, "COMB_WRITE_BURST", "1200", 1, 6000000,
	    "events one pubkey may write at once after a quiet period (the write budget's capacity)"),
	INT(write_inflight_per_connection, "COMB_WRITE_INFLIGHT_PER_CONNECTION",
	    "64", 1, 100000,
	    "EVENTs one WebSocket connection may have waiting for their OK; beyond it the relay stops reading that connection"),
	INT(write_inflight_per_node, "COMB_WRITE_INFLIGHT_PER_NODE", "1024", 1,
	    1000000,
	    "writes one relay node holds waiting for their commit; beyond it writers wait"),
	INT(write_inflight_per_ip, "COMB_WRITE_INFLIGHT_PER_IP", "256", 1, 1000000,
	    "writes one client address may have among those a relay node holds waiting for their commit; beyond it that address's writers wait, leaving the rest of the node's queue to other addresses"),
	INT(write_batch_max, "COMB_WRITE_BATCH_MAX", "64", 1, 10000,
	    "most chat messages and artifact writes committed in one transaction (group commit; 1: one transaction per write)"),
	INT(write_batch_wait_us, "COMB_WRITE_BATCH_WAIT_US", "200", 0, 100000,
	    "how long a batch that is not full waits for enough writes to fill it, in microseconds"),
	INT(shutdown_grace_ms, "COMB_SHUTDOWN_GRACE_MS", "10000", 0, 600000,
	    "on SIGTERM or SIGINT, how long the relay waits for requests in progress and WebSocket closes before it stops, in milliseconds"),
};

static int parse_setting(const struct setting *s, const char *value, void *field,
			 char *errbuf, size_t errlen)
{
	char *end;
	long n;

	enum comb_log_level level;

	switch (s->type) {
	case SETTING_LOG_LEVEL:
		if (comb_log_level_parse(value, &level))
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "%s: expected debug, info, warn or error, not \"%.40s\"",
					 s->name, value);
		/* fall through */
	case SETTING_STRING:
		*(char **)field = strdup(value);
		return *(char **)field ? 0 : COMB_ENOMEM;
	case SETTING_BOOL:
		if (!strcmp(value, "true") || !strcmp(value, "1")) {
			*(bool *)field = true;
			return 0;
		}
		if (!strcmp(value, "false") || !strcmp(value, "0")) {
			*(bool *)field = false;
			return 0;
		}
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "%s: expected true or false", s->name);
	case SETTING_INT:
		errno = 0;
		n = strtol(value, &end, 10);
		if (errno || end == value || *end || n < s->min || n > s->max)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "%s: expected an integer from %ld to %ld",
					 s->name, s->min, s->max);
		*(int *)field = (int)n;
		return 0;
	}
	return COMB_EINVAL;
}

/* Appends the percent-encoding of s to out (outlen bytes); returns the
 * new length, or outlen when it does not fit. */
static size_t append_encoded(char *out, size_t len, size_t outlen,
			     const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s && len + 4 <= outlen; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
		    c == '~') {
			out[len++] = (char)c;
		} else {
			out[len++] = '%';
			out[len++] = hex[c >> 4];
			out[len++] = hex[c & 15];
		}
	}
	if (*s)
		return outlen;
	out[len] = '\0';
	return len;
}

/*
 * Folds the password of COMB_REDIS_PASSWORD_FILE into cfg->redis_url
 * ("redis://[user]:<password>@host..."), so that every user of the URL
 * authenticates the same way. The URL must not carry a password itself.
 */
static int redis_password_from_file(struct comb_config *cfg, char *errbuf,
				    size_t errlen)
{
	char pw[COMB_CONFIG_REDIS_PASSWORD_MAX + 2], *url = NULL;
	const char *rest, *at;
	size_t n, len, cap;
	FILE *f;
	int rc = COMB_EINVAL;

	if (!*cfg->redis_password_file)
		return 0;
	if (strncmp(cfg->redis_url, "redis://", 8) != 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "COMB_REDIS_URL must start with redis://");
	rest = cfg->redis_url + 8;
	at = strrchr(rest, '@');
	if (at && memchr(rest, ':', (size_t)(at - rest)))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "COMB_REDIS_URL carries a password and COMB_REDIS_PASSWORD_FILE is set: give it in one place");
	f = fopen(cfg->redis_password_file, "r");
	if (!f)
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "COMB_REDIS_PASSWORD_FILE: cannot open %s: %s",
				 cfg->redis_password_file, strerror(errno));
	n = fread(pw, 1, sizeof(pw) - 1, f);
	fclose(f);
	pw[n] = '\0';
	pw[strcspn(pw, "\r\n")] = '\0';
	if (!pw[0] || strlen(pw) > COMB_CONFIG_REDIS_PASSWORD_MAX) {
		rc = comb_fail(errbuf, errlen, COMB_EINVAL,
			       "COMB_REDIS_PASSWORD_FILE: the first line must be a password of 1 to %d bytes",
			       COMB_CONFIG_REDIS_PASSWORD_MAX);
		goto out;
	}
	cap = strlen(cfg->redis_url) + 3 * strlen(pw) + 4;
	url = malloc(cap);
	if (!url) {
		rc = COMB_ENOMEM;
		goto out;
	}
	/* "redis://" and the user name, if any, then ":<password>@" */
	len = (size_t)snprintf(url, cap, "redis://%.*s:", at ? (int)(at - rest) : 0,
			       rest);
	len = append_encoded(url, len, cap, pw);
	if (len >= cap - 1) {
		rc = COMB_ENOMEM;
		goto out;
	}
	snprintf(url + len, cap - len, "@%s", at ? at + 1 : rest);
	free(cfg->redis_url);
	cfg->redis_url = url;
	url = NULL;
	rc = 0;
out:
	if (url)
		memset(url, 0, cap);
	free(url);
	memset(pw, 0, sizeof(pw));
	return rc;
}

int comb_config_load(struct comb_config *cfg, char *errbuf, size_t errlen)
{
	size_t i;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		const struct setting *s = &settings[i];
		const char *value = getenv(s->name);

		if (!value)
			value = s->default_value;
		rc = parse_setting(s, value, (char *)cfg + s->offset, errbuf,
				   errlen);
		if (rc) {
			comb_config_release(cfg);
			return rc;
		}
	}
	rc = redis_password_from_file(cfg, errbuf, errlen);
	if (rc)
		comb_config_release(cfg);
	return rc;
}

void comb_config_release(struct comb_config *cfg)
{
	size_t i;

	for (i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		if (settings[i].type == SETTING_STRING ||
		    settings[i].type == SETTING_LOG_LEVEL) {
			char **field = (char **)((char *)cfg + settings[i].offset);

			free(*field);
			*field = NULL;
		}
	}
}

void comb_config_print_markdown(void)
{
	size_t i;

	printf("| Variable | Default | Meaning |\n| --- | --- | --- |\n");
	for (i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		printf("| `%s` | %s%s%s | %s |\n", settings[i].name,
		       *settings[i].default_value ? "`" : "",
		       *settings[i].default_value ? settings[i].default_value : "(empty)",
		       *settings[i].default_value ? "`" : "", settings[i].doc);
}
