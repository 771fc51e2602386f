/*
 * The per-pubkey write budget in Redis (see rate_limit_int.h). One hash per
 * pubkey holds the tokens left (n, fractional) and when they were counted
 * (t, Redis milliseconds). The script refills by the time elapsed, takes
 * a token when one is there and answers {allowed, wait_ms}; Redis runs a
 * script alone, so two nodes never both spend the last token. The key
 * expires once a full bucket would have refilled, so idle pubkeys cost
 * nothing. The script runs by its SHA-1 (comb_redis_script).
 */
#include "rate_limit_int.h"

#include <stdio.h>
#include <string.h>

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/log.h"

static const char script[] =
	"local rate = tonumber(ARGV[1])\n"
	"local burst = tonumber(ARGV[2])\n"
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local s = redis.call('HMGET', KEYS[1], 'n', 't')\n"
	"local n = tonumber(s[1])\n"
	"local last = tonumber(s[2])\n"
	"if n == nil or last == nil then\n"
	"  n = burst\n"
	"  last = now\n"
	"elseif now > last then\n"
	"  n = n + (now - last) * rate / 60000\n"
	"  last = now\n"
	"end\n"
	"if n > burst then n = burst end\n"
	"local ok = 0\n"
	"local wait = 0\n"
	"if n >= 1 then\n"
	"  n = n - 1\n"
	"  ok = 1\n"
	"else\n"
	"  wait = math.ceil((1 - n) * 60000 / rate)\n"
	"end\n"
	"redis.call('HSET', KEYS[1], 'n', tostring(n), 't', tostring(last))\n"
	"redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 60000 / rate) + 1000)\n"
	"return {ok, wait}\n";

int rate_limit_take(struct comb_redis_pool *pool, const char *pubkey,
		    int per_minute, int burst, long *wait_ms)
{
	char key[sizeof(RATE_LIMIT_KEY_PREFIX) + 64], rate_s[16], burst_s[16];
	redisReply *r;
	int rc;

	*wait_ms = 0;
	if (pubkey == NULL || strlen(pubkey) != 64 ||
	    !comb_hex_is_lower(pubkey, 64) || per_minute < 1 || burst < 1)
		return COMB_EINVAL;
	snprintf(key, sizeof(key), "%s%s", RATE_LIMIT_KEY_PREFIX, pubkey);
	snprintf(rate_s, sizeof(rate_s), "%d", per_minute);
	snprintf(burst_s, sizeof(burst_s), "%d", burst);
	r = comb_redis_script(pool, script, 1,
			      (const char *const[]){key, rate_s, burst_s}, 3);
	if (r == NULL)
		return COMB_EUNAVAIL;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_INTEGER) {
		comb_warn("write budget script failed: %s",
			  r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
		rc = COMB_EUNAVAIL;
	} else if (r->element[0]->integer == 1) {
		rc = 0;
	} else {
		*wait_ms = (long)r->element[1]->integer;
		rc = COMB_EDENIED;
	}
	freeReplyObject(r);
	return rc;
}

bool rate_limit_allow_write(struct writer *w, struct write_result *out)
{
	const struct comb_config *cfg = &w->relay->cfg;
	long wait_ms;
	int rc;

	if (cfg->write_rate == 0)
		return true;
	rc = rate_limit_take(w->relay->redis, w->auth_pubkey, cfg->write_rate,
			     cfg->write_burst, &wait_ms);
	if (rc == 0)
		return true;
	if (rc == COMB_EDENIED)
		write_refuse(out, 429,
			     "rate-limited: write budget of %d events per minute exhausted",
			     cfg->write_rate);
	else
		write_refuse(out, 503, "error: rate limiter unavailable");
	return false;
}

int rate_limit_retry_after(const struct comb_config *cfg)
{
	if (cfg->write_rate <= 0)
		return 1;
	return (60 + cfg->write_rate - 1) / cfg->write_rate;
}
