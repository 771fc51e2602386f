/*
 * Test-only policy plugin: allows every request. Its init checks the host
 * services table (size, log, a plausible clock) and echoes the config it
 * was given; its destroy logs, so tests can see the loader tear it down.
 * It allocates its state so that a missed destroy shows up as a leak.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "comb/policy.h"

const struct comb_policy *comb_policy_entry(void);

struct allow_state {
	const struct comb_policy_host
	    *host; /* borrowed for the plugin's life */
};

static int allow_init(const struct comb_policy_host *host, const char *config,
		      void **state)
{
	struct allow_state *st;
	char msg[256];
	int64_t now;

	*state = NULL;
	if (!host || host->size < sizeof(*host) || !host->log || !host->now ||
	    !config)
		return -1;
	now = host->now();
	if (now < INT64_C(1600000000))
		return -2;
	st = malloc(sizeof(*st));
	if (!st)
		return -3;
	st->host = host;
	snprintf(msg, sizeof(msg),
		 "test plugin allow_all: init called, config '%.128s'", config);
	host->log(COMB_POLICY_LOG_INFO, msg);
	*state = st;
	return 0;
}

static int allow_decide(void *state, const struct comb_policy_request *r)
{
	(void)state;
	(void)r;
	return COMB_ALLOW;
}

static void allow_destroy(void *state)
{
	struct allow_state *st = state;

	st->host->log(COMB_POLICY_LOG_INFO,
		      "test plugin allow_all: destroy called");
	free(st);
}

static const struct comb_policy descriptor = {
	.magic = COMB_POLICY_MAGIC,
	.abi_major = COMB_POLICY_ABI_MAJOR,
	.abi_minor = COMB_POLICY_ABI_MINOR,
	.size = sizeof(struct comb_policy),
	.name = "allow_all",
	.version = "0.1",
	.init = allow_init,
	.decide = allow_decide,
	.destroy = allow_destroy,
};

/* Returns the static descriptor. */
const struct comb_policy *comb_policy_entry(void)
{
	return &descriptor;
}
