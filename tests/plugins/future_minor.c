/*
 * Test-only policy plugin: built as if against a later minor version of
 * ABI 1, with a larger descriptor that carries an extra field at the end.
 * The loader must accept it (size only has a lower bound) and ignore the
 * field it does not know. It allows every request.
 */
#include <stddef.h>

#include "comb/policy.h"

const struct comb_policy *comb_policy_entry(void);

/* A descriptor of a hypothetical ABI 1.9: 1.0's fields, then a new one. */
struct future_policy {
	struct comb_policy base;
	int (*decide_many)(void *state, const void *requests, int count);
};

static int plain_init(const struct comb_policy_host *host, const char *config,
		      void **state)
{
	(void)host;
	(void)config;
	*state = NULL;
	return 0;
}

static int allow_decide(void *state, const struct comb_policy_request *r)
{
	(void)state;
	(void)r;
	return COMB_ALLOW;
}

static const struct future_policy descriptor = {
	.base = {
		.magic = COMB_POLICY_MAGIC,
		.abi_major = COMB_POLICY_ABI_MAJOR,
		.abi_minor = 9,
		.size = sizeof(struct future_policy),
		.name = "future_minor",
		.version = "1.9",
		.init = plain_init,
		.decide = allow_decide,
		.destroy = NULL,
	},
	.decide_many = NULL,
};

/* Returns the base of the larger static descriptor. */
const struct comb_policy *comb_policy_entry(void)
{
	return &descriptor.base;
}
