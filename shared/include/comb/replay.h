/*
 * The single-use store for NIP-98 tokens, kept in Redis so that every relay
 * node sees every use.
 */
#ifndef COMB_REPLAY_H
#define COMB_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "comb/redis.h"

/* The Redis key recording a token as used: "comb:nip98:" and its id. */
#define COMB_REPLAY_KEY_LEN (sizeof("comb:nip98:") + 64)

/*
 * Writes the key of token_id into key. Returns 0, or COMB_EINVAL when
 * token_id is not 64 lowercase hex digits.
 */
int comb_replay_key(const char *token_id, char key[COMB_REPLAY_KEY_LEN]);

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
