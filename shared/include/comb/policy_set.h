/*
 * The host side of policy plugins: loading, checking and asking them.
 * Several plugins may be chained; the first that does not abstain decides,
 * and when every plugin abstains (or any fails) the answer is deny.
 */
#ifndef COMB_POLICY_SET_H
#define COMB_POLICY_SET_H

#include <stdbool.h>
#include <stddef.h>

#include "comb/policy.h"

#define COMB_POLICY_MAX_PLUGINS 8
/* Number of distinct channel fact combinations (see comb_policy_read_key). */
#define COMB_POLICY_READ_KEYS 256

struct comb_policy_set;

/*
 * Loads the plugins named in paths (colon-separated .so paths, in decision
 * order) and initialises each with config. Every plugin is checked before
 * anything in it is called: the entry symbol, magic, ABI major version,
 * descriptor size, a unique name, and a successful init. Logs
 * `policy 'name' version loaded from path` for each. On any failure nothing
 * stays loaded, NULL is returned and errbuf says which rule failed.
 */
struct comb_policy_set *comb_policy_set_load(const char *paths,
					     const char *config, char *errbuf,
					     size_t errlen);

/* Destroys every plugin and frees the set. Never unloads code while in use:
 * call only at shutdown. */
void comb_policy_set_free(struct comb_policy_set *set);

/* Asks the chain; returns true only for an explicit allow. */
bool comb_policy_allows(const struct comb_policy_set *set,
			const struct comb_policy_request *request);

/* Encodes a channel's read-relevant facts as a number below
 * COMB_POLICY_READ_KEYS: visibility | is_dm<<2 | deleted<<3 |
 * archived<<4 | role<<5 | named<<7 (flags count as 0 or 1). The SQL
 * function comb_read_key() (migrations) computes the same number from a row.
 * Returns COMB_EINVAL for a visibility or role outside its enum. */
int comb_policy_read_key(const struct comb_policy_channel *channel);

/*
 * Writes into keys every read key for which actor may READ, in ascending
 * order, and their number into *count (keys holds COMB_POLICY_READ_KEYS
 * entries). Every valid combination (visibility 0..2) is asked through the
 * chain; visibility 3 is never readable. Queries then filter with
 * `comb_read_key(...) = ANY(keys)`.
 */
void comb_policy_read_keys(const struct comb_policy_set *set,
			   const struct comb_policy_actor *actor,
			   int keys[COMB_POLICY_READ_KEYS], int *count);

#endif
