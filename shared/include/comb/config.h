/*
 * Configuration from COMB_* environment variables. One table in config.c
 * names every variable, its default and its documentation; the README's
 * configuration table is generated from the same words.
 */
#ifndef COMB_CONFIG_H
#define COMB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* The longest password COMB_REDIS_PASSWORD_FILE may hold. */
#define COMB_CONFIG_REDIS_PASSWORD_MAX 512

struct comb_config {
	char *listen;               /* COMB_LISTEN, host:port */
	char *database_url;         /* COMB_DATABASE_URL */
	char *redis_url;            /* COMB_REDIS_URL, with the password of
				     * COMB_REDIS_PASSWORD_FILE folded in */
	char *redis_password_file;  /* COMB_REDIS_PASSWORD_FILE */
	char *relay_secret_key;     /* COMB_RELAY_SECRET_KEY, 64 hex */
	char *relay_secret_key_file;/* COMB_RELAY_SECRET_KEY_FILE */
	char *policy_plugin;        /* COMB_POLICY_PLUGIN, colon-separated paths */
	char *policy_config;        /* COMB_POLICY_CONFIG */
	char *capture_endpoint;     /* COMB_CAPTURE_ENDPOINT, ZeroMQ */
	char *capture_metrics_listen; /* COMB_CAPTURE_METRICS_LISTEN, host:port */
	char *relay_name;           /* COMB_RELAY_NAME */
	char *relay_description;    /* COMB_RELAY_DESCRIPTION */
	char *log_level;            /* COMB_LOG_LEVEL */
	bool incremental_enabled;   /* COMB_INCREMENTAL_ENABLED */
	bool access_log;            /* COMB_ACCESS_LOG */
	int num_threads;            /* COMB_NUM_THREADS */
	int max_connections_per_ip; /* COMB_MAX_CONNECTIONS_PER_IP */
	int max_http_connections_per_ip; /* COMB_MAX_HTTP_CONNECTIONS_PER_IP */
	char *trusted_proxies;      /* COMB_TRUSTED_PROXIES, comb/netaddr.h */
	int db_pool_size;           /* COMB_DB_POOL_SIZE */
	char *read_database_urls;   /* COMB_READ_DATABASE_URLS, comma-separated */
	int read_wait_ms;           /* COMB_READ_WAIT_MS */
	int read_max_lag_ms;        /* COMB_READ_MAX_LAG_MS */
	int max_message_length;     /* COMB_MAX_MESSAGE_LENGTH */
	int max_subscriptions;      /* COMB_MAX_SUBSCRIPTIONS */
	int max_connection_bytes;   /* COMB_MAX_CONNECTION_BYTES */
	int node_connection_mib;    /* COMB_NODE_CONNECTION_MIB */
	int max_filters;            /* COMB_MAX_FILTERS */
	int max_limit;              /* COMB_MAX_LIMIT */
	int created_at_lower_limit; /* COMB_CREATED_AT_LOWER_LIMIT */
	int created_at_upper_limit; /* COMB_CREATED_AT_UPPER_LIMIT */
	int query_timeout_ms;       /* COMB_QUERY_TIMEOUT_MS */
	int sync_max_events;        /* COMB_SYNC_MAX_EVENTS */
	int sync_quiet_ms;          /* COMB_SYNC_QUIET_MS */
	int revision_cache_mb;      /* COMB_REVISION_CACHE_MB */
	int revision_cache_warm_mb; /* COMB_REVISION_CACHE_WARM_MB */
	int incremental_max_concurrent; /* COMB_INCREMENTAL_MAX_CONCURRENT */
	int capture_heartbeat_ms;   /* COMB_CAPTURE_HEARTBEAT_MS */
	int write_rate;             /* COMB_WRITE_RATE, per minute; 0: no limit */
	int write_burst;            /* COMB_WRITE_BURST */
	int write_inflight_per_connection; /* COMB_WRITE_INFLIGHT_PER_CONNECTION */
	int write_inflight_per_node;       /* COMB_WRITE_INFLIGHT_PER_NODE */
	int write_inflight_per_ip;         /* COMB_WRITE_INFLIGHT_PER_IP */
	int write_batch_max;               /* COMB_WRITE_BATCH_MAX */
	int write_batch_wait_us;           /* COMB_WRITE_BATCH_WAIT_US */
	int shutdown_grace_ms;      /* COMB_SHUTDOWN_GRACE_MS */
};

/*
 * Fills cfg from the environment, applying defaults for unset variables.
 * The password read from COMB_REDIS_PASSWORD_FILE is percent-encoded into
 * cfg->redis_url, so every user of the URL authenticates.
 * Returns COMB_EINVAL with the variable's name in errbuf when a value does
 * not parse or is out of range.
 */
int comb_config_load(struct comb_config *cfg, char *errbuf, size_t errlen);

/* Frees the strings cfg owns. */
void comb_config_release(struct comb_config *cfg);

/* Writes the configuration table as Markdown (for the README) to stdout. */
void comb_config_print_markdown(void);

#endif
