/*
 * Test-only policy plugin: its descriptor carries the wrong magic number, so
 * the loader must refuse it before calling anything in it.
 */
#include <stddef.h>

#include "comb/policy.h"

const struct comb_policy *comb_policy_entry(void);

static int plain_init(const struct comb_policy_host *host, const char *config,
		      void **state)
{
	(void)config;
	/* Tests look for this line to prove whether init ran. */
	host->log(COMB_POLICY_LOG_INFO, "test plugin bad_magic: init called");
	*state = NULL;
	return 0;
}

static int deny_decide(void *state, const struct comb_policy_request *r)
{
	(void)state;
	(void)r;
	return COMB_DENY;
}

static const struct comb_policy descriptor = {
	.magic = UINT64_C(0x0123456789abcdef),
	.abi_major = COMB_POLICY_ABI_MAJOR,
	.abi_minor = COMB_POLICY_ABI_MINOR,
	.size = sizeof(struct comb_policy),
	.name = "bad_magic",
	.version = "0.1",
	.init = plain_init,
	.decide = deny_decide,
	.destroy = NULL,
};

/* Returns the static descriptor. */
const struct comb_policy *comb_policy_entry(void)
{
	return &descriptor;
}
