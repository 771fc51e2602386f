/*
 * The single-use store for NIP-98 tokens, kept in Redis so that every relay
 * node sees every use.
 */
#ifndef COMB_REPLAY_H
#define COMB_REPLAY_H

#include <stdint.h>

#include "comb/redis.h"

/*
 * Records token_id (64 hex) as used until expires_at (unix seconds, Redis's
 * clock). Returns 0 when this is its first use, COMB_EREPLAY when it was
 * used before, COMB_EUNAVAIL when Redis cannot be asked (callers fail
 * closed), COMB_EINVAL when token_id is not 64 lowercase hex digits or
 * expires_at is not positive.
 */
int comb_replay_claim(struct comb_redis_pool *pool, const char *token_id,
		      int64_t expires_at);

#endif
