/*
 * The read-only auditor policy, meant to be chained in front of another
 * policy: COMB_POLICY_PLUGIN=auditor.so:default.so.
 *
 * COMB_POLICY_CONFIG names the auditors, strictly as
 * `auditors=<hex>,<hex>,...` (each 64 lowercase hex characters, at least one,
 * no duplicates, no spaces); anything else makes init fail, so the relay
 * refuses to start. For an auditor the plugin decides everything: READ is
 * allowed on every channel that is neither a DM nor deleted, and every other
 * request is denied (auditors never write, join, leave or moderate, and DMs
 * stay for their participants). For everyone else it abstains, so the next
 * plugin in the chain decides exactly as if the auditor plugin were absent.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/policy.h"

const struct comb_policy *comb_policy_entry(void);

#define AUDITOR_KEY_LEN 64
#define AUDITOR_MAX	256
#define AUDITOR_PREFIX	"auditors="

#define REQUEST_V1_0_SIZE                                                      \
	(offsetof(struct comb_policy_request, is_dm) + sizeof(int))

struct auditor_state {
	size_t count;
	char (*keys)[AUDITOR_KEY_LEN + 1]; /* sorted, for bsearch */
};

static int cmp_key(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

static int is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int config_error(const struct comb_policy_host *host, const char *why)
{
	char msg[256];

	if (host && host->log) {
		snprintf(msg, sizeof(msg),
			 "auditor: bad config (want auditors=<hex>,...): %s",
			 why);
		host->log(COMB_POLICY_LOG_ERROR, msg);
	}
	return -1;
}

static int auditor_init(const struct comb_policy_host *host, const char *config,
			void **state)
{
	struct auditor_state *st = NULL;
	const char *s;
	size_t n = 0, len;
	char msg[128];
	int rc;

	*state = NULL;
	if (!config ||
	    strncmp(config, AUDITOR_PREFIX, sizeof(AUDITOR_PREFIX) - 1) != 0) {
		rc = config_error(host, "missing auditors= prefix");
		goto out;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		rc = config_error(host, "out of memory");
		goto out;
	}
	st->keys = calloc(AUDITOR_MAX, sizeof(*st->keys));
	if (!st->keys) {
		rc = config_error(host, "out of memory");
		goto out;
	}
	s = config + sizeof(AUDITOR_PREFIX) - 1;
	for (;;) {
		len = strcspn(s, ",");
		if (len != AUDITOR_KEY_LEN) {
			rc = config_error(host,
					  "a key is not 64 hex characters");
			goto out;
		}
		for (size_t i = 0; i < len; i++) {
			if (!is_lower_hex(s[i])) {
				rc = config_error(host,
						  "a key is not lowercase hex");
				goto out;
			}
		}
		if (n == AUDITOR_MAX) {
			rc = config_error(host, "more than 256 auditors");
			goto out;
		}
		memcpy(st->keys[n], s, len);
		st->keys[n][len] = '\0';
		n++;
		s += len;
		if (*s == '\0')
			break;
		s++; /* the comma; an empty key after it fails above */
	}
	qsort(st->keys, n, sizeof(*st->keys), cmp_key);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(st->keys[i - 1], st->keys[i]) == 0) {
			rc = config_error(host, "a key is listed twice");
			goto out;
		}
	}
	st->count = n;
	if (host && host->log) {
		snprintf(msg, sizeof(msg), "auditor: %zu auditor%s configured",
			 n, n == 1 ? "" : "s");
		host->log(COMB_POLICY_LOG_INFO, msg);
	}
	*state = st;
	st = NULL;
	rc = 0;
out:
	if (st) {
		free(st->keys);
		free(st);
	}
	return rc;
}

static int is_auditor(const struct auditor_state *st, const char *pubkey)
{
	if (!pubkey || strlen(pubkey) != AUDITOR_KEY_LEN)
		return 0;
	return bsearch(pubkey, st->keys, st->count, sizeof(*st->keys),
		       cmp_key) != NULL;
}

static int auditor_decide(void *state, const struct comb_policy_request *r)
{
	const struct auditor_state *st = state;

	if (!st || !r || r->size < REQUEST_V1_0_SIZE || !r->actor)
		return COMB_DENY;
	if (!is_auditor(st, r->actor->pubkey))
		return COMB_ABSTAIN;
	if (r->action == COMB_ACT_READ && r->channel && !r->channel->is_dm &&
	    !r->channel->deleted)
		return COMB_ALLOW;
	return COMB_DENY;
}

static void auditor_destroy(void *state)
{
	struct auditor_state *st = state;

	if (!st)
		return;
	free(st->keys);
	free(st);
}

static const struct comb_policy descriptor = {
	.magic = COMB_POLICY_MAGIC,
	.abi_major = COMB_POLICY_ABI_MAJOR,
	.abi_minor = COMB_POLICY_ABI_MINOR,
	.size = sizeof(struct comb_policy),
	.name = "auditor",
	.version = "1.0",
	.init = auditor_init,
	.decide = auditor_decide,
	.destroy = auditor_destroy,
};

/* The plugin's entry point: returns its static descriptor. */
const struct comb_policy *comb_policy_entry(void)
{
	return &descriptor;
}
