/*
 * Ephemeral events (kinds 20000-29999): checked like a chat message, never
 * stored, and published on Redis (on the channel comb/signal.h's
 * comb_signal_ephemeral_channel names) for comb-capture to fan out to
 * every relay node's live readers of the channel.
 */
#include <string.h>

#include "access/access.h"
#include "comb/signal.h"
#include "comb/uuid.h"
#include "write.h"
#include "write_int.h"

void write_ephemeral(struct writer *w, const struct comb_event *ev,
		     struct write_result *out)
{
	const char *h = comb_event_tag_value(ev, "h");
	char topic[COMB_SIGNAL_EPHEMERAL_CHANNEL_MAX];
	struct channel_row channel;
	struct actor actor;
	struct comb_buf raw;
	redisReply *reply;

	if (comb_event_tag_count(ev, "h") != 1 || !h) {
		write_refuse(out, 400, "invalid: ephemeral events need exactly one h tag");
		return;
	}
	if (!comb_uuid_is_canonical(h)) {
		write_refuse(out, 400, "invalid: h must be a canonical channel uuid");
		return;
	}
	if (!write_is_fresh(w, ev)) {
		write_refuse(out, 400, "invalid: created_at is too far from the relay's clock");
		return;
	}
	if (access_load_actor(w->relay->db, w->db, w->community, ev->pubkey, &actor) ||
	    access_load_channel(w->db, w->community, h, &actor, true,
				ACCESS_LOCK_NONE, &channel)) {
		write_db_failed(w, out);
		return;
	}
	if (!access_allows(w->relay, &actor, COMB_ACT_WRITE, &channel, NULL)) {
		write_refuse(out, 403, "restricted: not a channel member");
		return;
	}

	comb_buf_init(&raw, 4 * (size_t)w->relay->cfg.max_message_length + 4096);
	if (comb_event_to_json(ev, &raw)) {
		comb_buf_release(&raw);
		write_refuse(out, 503, "error: out of memory");
		return;
	}
	comb_signal_ephemeral_channel(comb_redis_pool_db(w->relay->redis), topic);
	reply = comb_redis_command(w->relay->redis, "PUBLISH %s %s:%s:%b", topic,
				   w->community->id_text, h, raw.data, raw.len);
	comb_buf_release(&raw);
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		if (reply)
			freeReplyObject(reply);
		write_refuse(out, 503, "error: ephemeral delivery unavailable");
		return;
	}
	freeReplyObject(reply);
}
