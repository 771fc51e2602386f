/*
 * A run queue with fair turns per connection (hub.h, "Turns").
 */
#include <stddef.h>

#include "hub.h"

/* Appends owner to q's ring of owners with work. */
static void ring_append(struct hub_queue *q, struct hub_owner *o)
{
	o->next = NULL;
	if (q->tail)
		q->tail->next = o;
	else
		q->head = o;
	q->tail = o;
	o->linked = true;
}

/* Unlinks o (prev is the owner before it, or NULL) from q's ring. */
static void ring_unlink(struct hub_queue *q, struct hub_owner *o,
			struct hub_owner *prev)
{
	if (prev)
		prev->next = o->next;
	else
		q->head = o->next;
	if (q->tail == o)
		q->tail = prev;
	o->next = NULL;
	o->linked = false;
}

/* Unlinks t (prev is the turn before it in its owner's list, or NULL). */
static void owner_unlink(struct hub_owner *o, struct hub_turn *t,
			 struct hub_turn *prev)
{
	if (prev)
		prev->next = t->next;
	else
		o->head = t->next;
	if (o->tail == t)
		o->tail = prev;
	t->next = NULL;
	t->queued = false;
}

void hub_queue_push(struct hub_queue *q, struct hub_turn *t)
{
	struct hub_owner *o = t->owner;

	t->next = NULL;
	t->queued = true;
	if (o->tail)
		o->tail->next = t;
	else
		o->head = t;
	o->tail = t;
	if (!o->linked)
		ring_append(q, o);
}

struct hub_turn *hub_queue_pop(struct hub_queue *q)
{
	struct hub_owner *o = q->head;
	struct hub_turn *t;

	if (!o)
		return NULL;
	t = o->head;
	owner_unlink(o, t, NULL);
	ring_unlink(q, o, NULL);
	/* the owner's next turn comes after every other owner's */
	if (o->head)
		ring_append(q, o);
	return t;
}

void hub_queue_remove(struct hub_queue *q, struct hub_turn *t)
{
	struct hub_owner *o = t->owner, *op = NULL, *x;
	struct hub_turn *prev = NULL, *y;

	if (!t->queued)
		return;
	for (y = o->head; y && y != t; y = y->next)
		prev = y;
	owner_unlink(o, t, prev);
	if (o->head)
		return;
	for (x = q->head; x && x != o; x = x->next)
		op = x;
	if (x)
		ring_unlink(q, o, op);
}

size_t hub_queue_take_if(struct hub_queue *q,
			 bool (*like)(const struct hub_turn *t, const void *ctx),
			 const void *ctx, struct hub_turn **out, size_t max)
{
	struct hub_owner *o = q->head, *op = NULL, *next_o;
	size_t n = 0;

	for (; o && n < max; o = next_o) {
		struct hub_turn *t = o->head, *tp = NULL, *next_t;

		next_o = o->next;
		for (; t && n < max; t = next_t) {
			next_t = t->next;
			if (!like(t, ctx)) {
				tp = t;
				continue;
			}
			owner_unlink(o, t, tp);
			out[n++] = t;
		}
		if (!o->head)
			ring_unlink(q, o, op);
		else
			op = o;
	}
	return n;
}

bool hub_queue_empty(const struct hub_queue *q)
{
	return q->head == NULL;
}
