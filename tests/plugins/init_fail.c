/*
 * Test-only policy plugin: passes every descriptor check but its init
 * returns an error, so the loader must refuse it and never call its destroy.
 */
#include <stddef.h>

#include "comb/policy.h"

const struct comb_policy *comb_policy_entry(void);

static const struct comb_policy_host *lent_host;

static int failing_init(const struct comb_policy_host *host, const char *config,
			void **state)
{
	(void)config;
	lent_host = host;
	host->log(COMB_POLICY_LOG_WARN, "test plugin init_fail: init called");
	*state = NULL;
	return 7;
}

static int allow_decide(void *state, const struct comb_policy_request *r)
{
	(void)state;
	(void)r;
	return COMB_ALLOW;
}

static void noisy_destroy(void *state)
{
	(void)state;
	if (lent_host)
		lent_host->log(COMB_POLICY_LOG_ERROR,
			       "test plugin init_fail: destroy called");
}

static const struct comb_policy descriptor = {
	.magic = COMB_POLICY_MAGIC,
	.abi_major = COMB_POLICY_ABI_MAJOR,
	.abi_minor = COMB_POLICY_ABI_MINOR,
	.size = sizeof(struct comb_policy),
	.name = "init_fail",
	.version = "0.1",
	.init = failing_init,
	.decide = allow_decide,
	.destroy = noisy_destroy,
};

/* Returns the static descriptor. */
const struct comb_policy *comb_policy_entry(void)
{
	return &descriptor;
}
