/*
 * The local feed (see feed.h): the events a write through this node
 * stored, kept on the writing thread until the write commits and then
 * queued for live delivery (live.c), while the capture feed does not
 * carry them (it is down, or was never up); feed_local_set turns
 * it off once capture delivers every event.
 */
#include "feed_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/buf.h"
#include "comb/log.h"

/* The largest event JSON kept. */
#define MAX_JSON (16 * 1024 * 1024)

static atomic_bool local_feed = true;

struct pending {
	struct pending *next;
	int64_t community_id;
	bool has_channel;
	char channel[37];
	char *json;
	size_t len;
};

static _Thread_local struct pending *pending_head, *pending_tail;

void feed_local_set(bool on)
{
	atomic_store(&local_feed, on);
}

static bool local_feed_on(void)
{
	return atomic_load(&local_feed);
}

static void pending_clear(void)
{
	struct pending *p = pending_head, *next;

	for (; p; p = next) {
		next = p->next;
		free(p->json);
		free(p);
	}
	pending_head = pending_tail = NULL;
}

void feed_local_begin(void)
{
	pending_clear();
}

/* Records ev for delivery when the write commits. */
static void pending_add(int64_t community_id, const struct comb_event *ev,
			const char *channel)
{
	struct pending *p = calloc(1, sizeof(*p));
	struct comb_buf json;

	comb_buf_init(&json, MAX_JSON);
	if (!p || comb_event_to_json(ev, &json) ||
	    !(p->json = comb_buf_detach(&json, &p->len))) {
		comb_warn("live delivery: out of memory, an event will not be delivered");
		comb_buf_release(&json);
		free(p);
		return;
	}
	p->community_id = community_id;
	p->has_channel = channel != NULL;
	snprintf(p->channel, sizeof(p->channel), "%s", channel ? channel : "");
	if (pending_tail)
		pending_tail->next = p;
	else
		pending_head = p;
	pending_tail = p;
}

void feed_local_stored(const struct community *c,
		       const struct comb_event *ev, const char *channel)
{
	if (local_feed_on())
		pending_add(c->id, ev, channel);
}

struct feed_local *feed_local_take(const struct community *c,
				   const struct comb_event *ev,
				   bool accepted)
{
	struct pending *p = NULL;

	if (accepted && local_feed_on() && ev->kind >= 20000 && ev->kind < 30000)
		pending_add(c->id, ev, comb_event_tag_value(ev, "h"));
	if (accepted && local_feed_on()) {
		p = pending_head;
		pending_head = pending_tail = NULL;
	}
	pending_clear();
	return (struct feed_local *)p;
}

void feed_local_deliver(struct feed_local *taken, bool committed)
{
	struct pending *p = (struct pending *)taken, *next;

	for (; p; p = next) {
		next = p->next;
		if (committed)
			feed_live_push_local(p->community_id,
					     p->has_channel ? p->channel : NULL,
					     p->json, p->len);
		free(p->json);
		free(p);
	}
}

void feed_local_end(const struct community *c, const struct comb_event *ev,
		    bool accepted)
{
	feed_local_deliver(feed_local_take(c, ev, accepted), true);
}
