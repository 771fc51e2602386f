/*
 * The per-pubkey write budget (PROTOCOL.md section 2, `429 rate-limited:`):
 * a token bucket per pubkey kept in Redis and updated by one Lua script,
 * so every relay node draws on the same budget atomically and with
 * Redis's clock, whatever the nodes' own clocks say. It is checked in
 * write_event(), which POST /events and WebSocket EVENT share; when Redis
 * cannot be asked the write is refused with 503 (fail closed).
 */
#ifndef COMB_RATE_LIMIT_INT_H
#define COMB_RATE_LIMIT_INT_H

#include <stdbool.h>

#include "comb/config.h"
#include "comb/redis.h"
#include "write.h"

/* Redis key of a pubkey's bucket: this prefix, then the 64-hex pubkey. */
#define RATE_LIMIT_KEY_PREFIX "comb:rate:"

/*
 * Takes one write from pubkey's bucket (pubkey: 64 lowercase hex), which
 * refills at per_minute tokens per minute up to burst. Returns 0 when the
 * write may go ahead; COMB_EDENIED when the bucket is empty, with
 * *wait_ms set to the milliseconds until it holds a token again (a
 * refused write takes nothing); COMB_EUNAVAIL when Redis cannot answer
 * (callers fail closed); COMB_EINVAL for a malformed pubkey or a
 * per_minute or burst below 1.
 */
int rate_limit_take(struct comb_redis_pool *pool, const char *pubkey,
		    int per_minute, int burst, long *wait_ms);

/*
 * The write path's gate: with cfg->write_rate 0 it always allows; else it
 * takes one write from w->auth_pubkey's budget. Returns true when the
 * write may go ahead, false after filling out with `429 rate-limited: ...`
 * or `503 error: ...`.
 */
bool rate_limit_allow_write(struct writer *w, struct write_result *out);

/*
 * Seconds a client refused with 429 should wait (the Retry-After value):
 * the time one token takes to come back at cfg->write_rate, rounded up,
 * at least 1. After that long a single write is always admitted again.
 */
int rate_limit_retry_after(const struct comb_config *cfg);

#endif
