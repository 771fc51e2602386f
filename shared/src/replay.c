/*
 * The NIP-98 single-use store: one Redis key per token id, set only if
 * absent and expiring at an absolute time (Redis's clock) after which no
 * relay node could accept the token any more. Every relay node talks to the same Redis, so a token replayed to
 * another node is refused too. When Redis cannot answer, the caller refuses
 * the request (fail closed): accepting it would allow replays.
 */
#include "comb/replay.h"

#include <stdio.h>
#include <string.h>

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/log.h"

int comb_replay_key(const char *token_id, char key[COMB_REPLAY_KEY_LEN])
{
	if (token_id == NULL || strlen(token_id) != 64 ||
	    !comb_hex_is_lower(token_id, 64))
		return COMB_EINVAL;
	snprintf(key, COMB_REPLAY_KEY_LEN, "comb:nip98:%s", token_id);
	return 0;
}

int comb_replay_claim(struct comb_redis_pool *pool, const char *token_id,
		      int64_t expires_at)
{
	char key[COMB_REPLAY_KEY_LEN];
	redisReply *r;
	int rc;

	if (comb_replay_key(token_id, key) || expires_at <= 0)
		return COMB_EINVAL;
	r = comb_redis_command(pool, "SET %s 1 NX EXAT %lld", key,
			       (long long)expires_at);
	if (r == NULL)
		return COMB_EUNAVAIL;
	if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) {
		rc = 0;
	} else if (r->type == REDIS_REPLY_NIL) {
		rc = COMB_EREPLAY;
	} else {
		comb_warn("replay store refused a claim: %s",
			  r->type == REDIS_REPLY_ERROR ? r->str
						       : "unexpected reply");
		rc = COMB_EUNAVAIL;
	}
	freeReplyObject(r);
	return rc;
}
