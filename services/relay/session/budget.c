/*
 * The byte budget of a connection's subscriptions, and the node's ceiling
 * over all of them (session.h, "budget.c").
 */
#include "session.h"

#include "metrics/metrics.h"

/* Bytes held by every connection of the node. */
static atomic_size_t node_held;

void ws_session_budget_init(struct ws_session *s)
{
	const struct comb_config *cfg = &s->relay->cfg;
	struct ws_outbox_limits limits;
	size_t total = (size_t)cfg->max_connection_bytes, outbox;

	ws_outbox_default_limits(&limits);
	outbox = limits.max_bytes + limits.reserve_bytes;
	/* COMB_MAX_CONNECTION_BYTES is at least 2 MiB, the outbox 1 MiB and
	 * 64 KiB: the subscriptions keep what the outbox leaves. */
	s->held_limit = total > outbox ? total - outbox : 0;
	atomic_init(&s->held, 0);
}

bool ws_session_hold(struct ws_session *s, size_t bytes)
{
	size_t node_limit = (size_t)s->relay->cfg.node_connection_mib << 20;
	size_t now = atomic_load(&s->held);

	do {
		if (bytes > s->held_limit || now > s->held_limit - bytes)
			return false;
	} while (!atomic_compare_exchange_weak(&s->held, &now, now + bytes));
	now = atomic_fetch_add(&node_held, bytes);
	if (now + bytes > node_limit) {
		atomic_fetch_sub(&node_held, bytes);
		atomic_fetch_sub(&s->held, bytes);
		return false;
	}
	metrics_add(METRIC_WS_HELD_BYTES, (long)bytes);
	return true;
}

size_t ws_session_room(struct ws_session *s)
{
	size_t held = atomic_load(&s->held);

	return held < s->held_limit ? s->held_limit - held : 0;
}

void ws_session_unhold(struct ws_session *s, size_t bytes)
{
	if (!bytes)
		return;
	atomic_fetch_sub(&s->held, bytes);
	atomic_fetch_sub(&node_held, bytes);
	metrics_add(METRIC_WS_HELD_BYTES, -(long)bytes);
}
