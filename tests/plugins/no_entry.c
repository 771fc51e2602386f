/*
 * Test-only policy plugin: a well-formed descriptor that is not exported
 * under COMB_POLICY_ENTRY (the entry function has another name), so the
 * loader must refuse the module for its missing entry symbol.
 */
#include <stddef.h>

#include "comb/policy.h"

const struct comb_policy *not_the_policy_entry(void);

static int plain_init(const struct comb_policy_host *host, const char *config,
		      void **state)
{
	(void)config;
	host->log(COMB_POLICY_LOG_INFO, "test plugin no_entry: init called");
	*state = NULL;
	return 0;
}

static int allow_decide(void *state, const struct comb_policy_request *r)
{
	(void)state;
	(void)r;
	return COMB_ALLOW;
}

static const struct comb_policy descriptor = {
	.magic = COMB_POLICY_MAGIC,
	.abi_major = COMB_POLICY_ABI_MAJOR,
	.abi_minor = COMB_POLICY_ABI_MINOR,
	.size = sizeof(struct comb_policy),
	.name = "no_entry",
	.version = "0.1",
	.init = plain_init,
	.decide = allow_decide,
	.destroy = NULL,
};

/* Returns the descriptor, under a name the loader does not look for. */
const struct comb_policy *not_the_policy_entry(void)
{
	return &descriptor;
}
