/*
 * The subscriptions of this node (hub.h, "Subscriptions"): their registry,
 * the signals and interruptions handed to them, and the one pool of
 * workers that serves their turns, fair per connection, with timers.
 *
 * One mutex guards all of it. A signal is handed to the subscriptions it
 * may concern under it, so a subscription's kind sees the signals in the
 * feed's order; a worker holds it only to take and put back turns.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comb/clock.h"
#include "comb/error.h"
#include "comb/log.h"
#include "hub.h"
#include "hub_int.h"

/* Kinds of subscription hub_workers_start accepts. */
#define MAX_KINDS 4
/* How far ahead the timers are looked at when none is due sooner. */
#define SCAN_MS 60000.0

static struct {
	pthread_mutex_t mu;
	pthread_cond_t work;            /* a turn is queued or a timer due, or stop */
	pthread_cond_t idle;            /* a subscription stopped running */
	struct hub_registry registry;   /* of hub_sub */
	struct hub_queue run;           /* fair per connection (turns.c) */
	struct hub_sub *timed;          /* the subscriptions with a due time */
	double next_scan;               /* no timer is due before this */
	size_t woken;                   /* turns queued by the signal being handed on */
	const struct hub_kind *kinds[MAX_KINDS];
	size_t nkinds;
	atomic_long event_subs;         /* registered subs that take events */
	pthread_t threads[HUB_WORKERS];
	int nthreads;
	bool stop;
	atomic_bool running;
} hub = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER,
};

double hub_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void hub_lock(void)
{
	pthread_mutex_lock(&hub.mu);
}

void hub_unlock(void)
{
	pthread_mutex_unlock(&hub.mu);
}

static struct hub_sub *sub_of_turn(const struct hub_turn *t)
{
	return (struct hub_sub *)(void *)((char *)t - offsetof(struct hub_sub, turn));
}

/* ------------------------------------------------------------------ */
/* scheduling (hub.mu held) */

/* Queues sub unless it is queued, running, not runnable yet or removed;
 * returns whether it did (the caller wakes a worker). */
static bool enqueue_locked(struct hub_sub *sub)
{
	if (sub->scheduled || sub->running || !sub->runnable || sub->released)
		return false;
	sub->scheduled = true;
	hub_queue_push(&hub.run, &sub->turn);
	return true;
}

void hub_wake_locked(struct hub_sub *sub)
{
	sub->woken = true;
	if (enqueue_locked(sub))
		hub.woken++;
}

/* Wakes one worker when turns were queued; a worker that leaves turns
 * behind when it takes its own wakes the next (worker_main), so a signal
 * that queues many turns of one batch wakes one thread, not all. */
static void wake_workers_locked(size_t queued)
{
	if (queued)
		pthread_cond_signal(&hub.work);
}

static void timed_remove_locked(struct hub_sub *sub)
{
	if (sub->timed_prev)
		sub->timed_prev->timed_next = sub->timed_next;
	else if (hub.timed == sub)
		hub.timed = sub->timed_next;
	if (sub->timed_next)
		sub->timed_next->timed_prev = sub->timed_prev;
	sub->timed_prev = sub->timed_next = NULL;
	sub->due = 0;
}

/* Makes sub run at due (0: untimed), waking a worker when that is sooner
 * than every other timer. */
static void set_due_locked(struct hub_sub *sub, double due)
{
	if (sub->due > 0)
		timed_remove_locked(sub);
	if (due <= 0)
		return;
	sub->due = due;
	sub->timed_next = hub.timed;
	if (hub.timed)
		hub.timed->timed_prev = sub;
	hub.timed = sub;
	if (due < hub.next_scan) {
		hub.next_scan = due;
		pthread_cond_signal(&hub.work);
	}
}

/* Queues every subscription whose time came and finds the next time. */
static void scan_timers_locked(double now)
{
	struct hub_sub *sub, *next;
	double soonest = now + SCAN_MS;

	for (sub = hub.timed; sub; sub = next) {
		next = sub->timed_next;
		if (sub->due <= now) {
			timed_remove_locked(sub);
			enqueue_locked(sub);
		} else if (sub->due < soonest) {
			soonest = sub->due;
		}
	}
	hub.next_scan = soonest;
}

/* ------------------------------------------------------------------ */
/* registration */

int hub_sub_add(struct hub_sub *sub)
{
	int rc;

	pthread_mutex_lock(&hub.mu);
	rc = hub_registry_add(&hub.registry, sub->community, sub->channels,
			      sub->nchannels, sub);
	sub->registered = rc == 0;
	if (rc == 0 && sub->kind->match)
		atomic_fetch_add(&hub.event_subs, 1);
	pthread_mutex_unlock(&hub.mu);
	return rc;
}

void hub_sub_start(struct hub_sub *sub, bool run_now)
{
	pthread_mutex_lock(&hub.mu);
	sub->runnable = true;
	if ((run_now || sub->woken) && enqueue_locked(sub))
		pthread_cond_signal(&hub.work);
	pthread_mutex_unlock(&hub.mu);
}

void hub_sub_remove(struct hub_sub *sub)
{
	pthread_mutex_lock(&hub.mu);
	if (sub->registered) {
		hub_registry_remove(&hub.registry, sub->community, sub->channels,
				    sub->nchannels, sub);
		if (sub->kind->match)
			atomic_fetch_sub(&hub.event_subs, 1);
	}
	sub->registered = false;
	sub->released = true;
	if (sub->scheduled)
		hub_queue_remove(&hub.run, &sub->turn);
	sub->scheduled = false;
	set_due_locked(sub, 0);
	while (sub->running)
		pthread_cond_wait(&hub.idle, &hub.mu);
	pthread_mutex_unlock(&hub.mu);
}

/* ------------------------------------------------------------------ */
/* signals and interruptions */

/* Hands signal ctx to member (a hub_sub). */
static void signal_member(void *member, void *ctx)
{
	struct hub_sub *sub = member;

	if (sub->kind->signal)
		sub->kind->signal(sub, ctx);
}

static void signal_slot(const struct hub_slot *slot, const struct comb_signal *s)
{
	size_t i;

	for (i = 0; slot && i < slot->n; i++)
		signal_member(slot->members[i], (void *)s);
}

void hub_signal(const struct comb_signal *s)
{
	readers_apply_admin(s);
	pthread_mutex_lock(&hub.mu);
	hub.woken = 0;
	if (s->channel[0]) {
		signal_slot(hub_registry_find(&hub.registry, s->community, ""), s);
		signal_slot(hub_registry_find(&hub.registry, s->community, s->channel), s);
	} else {
		hub_registry_each(&hub.registry, s->community, signal_member, (void *)s);
	}
	wake_workers_locked(hub.woken);
	pthread_mutex_unlock(&hub.mu);
}

/* Hands interruption reason ctx to member (a hub_sub). */
static void interrupt_member(void *member, void *ctx)
{
	struct hub_sub *sub = member;

	sub->kind->interrupt(sub, ctx);
}

/* Same, for members that take events. */
static void interrupt_event_member(void *member, void *ctx)
{
	struct hub_sub *sub = member;

	if (sub->kind->match)
		sub->kind->interrupt(sub, ctx);
}

void hub_interrupt(int64_t community, const char *reason)
{
	pthread_mutex_lock(&hub.mu);
	hub_registry_each(&hub.registry, community, interrupt_member, (void *)reason);
	pthread_mutex_unlock(&hub.mu);
}

void hub_interrupt_events(int64_t community, const char *reason)
{
	if (atomic_load(&hub.event_subs) == 0)
		return;
	pthread_mutex_lock(&hub.mu);
	hub_registry_each(&hub.registry, community, interrupt_event_member, (void *)reason);
	pthread_mutex_unlock(&hub.mu);
}

/* ------------------------------------------------------------------ */
/* live events */

/* Adds the members of slot (may be NULL) that want ev to *out, once
 * each, marking them running. Returns 0 or COMB_ENOMEM. */
static int gather(const struct hub_slot *slot, const struct hub_event *ev,
		  struct hub_sub ***out, size_t *cap, size_t *n)
{
	size_t i;

	for (i = 0; slot && i < slot->n; i++) {
		struct hub_sub *sub = slot->members[i];
		bool named = false;

		if (!sub->kind->match || !sub->kind->match(sub, ev, &named))
			continue;
		if (sub->running) {
			/* met in the other slot already */
			sub->named = sub->named || named;
			continue;
		}
		if (*n == *cap) {
			size_t room = *cap ? 2 * *cap : 64;
			struct hub_sub **grown = realloc(*out, room * sizeof(*grown));

			if (!grown)
				return COMB_ENOMEM;
			*out = grown;
			*cap = room;
		}
		sub->running = true;
		sub->named = named;
		(*out)[(*n)++] = sub;
	}
	return 0;
}

long hub_candidates(const struct hub_event *ev, struct hub_sub ***out, size_t *cap)
{
	size_t n = 0, i;
	int rc;

	pthread_mutex_lock(&hub.mu);
	rc = gather(hub_registry_find(&hub.registry, ev->community, ""), ev, out, cap, &n);
	if (rc == 0 && ev->channel)
		rc = gather(hub_registry_find(&hub.registry, ev->community, ev->channel),
			    ev, out, cap, &n);
	if (rc) {
		for (i = 0; i < n; i++)
			(*out)[i]->running = false;
		pthread_cond_broadcast(&hub.idle);
	}
	pthread_mutex_unlock(&hub.mu);
	return rc ? -1 : (long)n;
}

void hub_candidates_done(struct hub_sub **subs, size_t n)
{
	size_t i;

	if (n == 0)
		return;
	pthread_mutex_lock(&hub.mu);
	for (i = 0; i < n; i++)
		subs[i]->running = false;
	pthread_cond_broadcast(&hub.idle);
	pthread_mutex_unlock(&hub.mu);
}

/* True when a member of slot (may be NULL) takes events. */
static bool takes_events(const struct hub_slot *slot)
{
	size_t i;

	for (i = 0; slot && i < slot->n; i++)
		if (((const struct hub_sub *)slot->members[i])->kind->match)
			return true;
	return false;
}

bool hub_wanted(int64_t community, const char *channel)
{
	bool wanted;

	if (atomic_load(&hub.event_subs) == 0)
		return false;
	/* never wait behind the hub: when busy, let live delivery find out */
	if (pthread_mutex_trylock(&hub.mu))
		return true;
	wanted = takes_events(hub_registry_find(&hub.registry, community, "")) ||
		 (channel && takes_events(hub_registry_find(&hub.registry, community, channel)));
	pthread_mutex_unlock(&hub.mu);
	return wanted;
}

long hub_event_subs(void)
{
	return atomic_load(&hub.event_subs);
}

/* ------------------------------------------------------------------ */
/* the workers */

/* True when the subscription of turn t is served by the run of ctx (the
 * first subscription taken). */
static bool together(const struct hub_turn *t, const void *ctx)
{
	const struct hub_sub *sub = sub_of_turn(t), *first = ctx;

	return sub->kind == first->kind &&
	       (!first->kind->together || first->kind->together(sub, first));
}

/* Takes the next turn and the turns its kind serves with it into subs
 * (room for most of any kind). Returns how many. */
static size_t take_locked(struct hub_sub **subs, struct hub_turn **turns)
{
	struct hub_sub *first = sub_of_turn(hub_queue_pop(&hub.run));
	size_t n = 1, i, k = 0;

	subs[0] = first;
	if (first->kind->most > 1)
		k = hub_queue_take_if(&hub.run, together, first, turns,
				      first->kind->most - 1);
	for (i = 0; i < k; i++)
		subs[n++] = sub_of_turn(turns[i]);
	for (i = 0; i < n; i++) {
		subs[i]->scheduled = false;
		subs[i]->running = true;
		subs[i]->woken = false;
		set_due_locked(subs[i], 0);
		if (subs[i]->kind->take)
			subs[i]->kind->take(subs[i]);
	}
	return n;
}

/* After its run: sub's next turn, as its kind says, or at once when a
 * signal woke it meanwhile. */
static void put_back_locked(struct hub_sub *sub, double now)
{
	double due;

	sub->running = false;
	if (sub->released)
		return;
	due = sub->kind->next(sub, now);
	if (due < 0) {
		sub->runnable = false;  /* closed: it never runs again */
		return;
	}
	if (sub->woken)
		enqueue_locked(sub);
	else
		set_due_locked(sub, due);
}

/* Waits until a turn is queued (queuing those whose time came) or the
 * workers stop. */
static void wait_for_work_locked(void)
{
	while (!hub.stop && hub_queue_empty(&hub.run)) {
		struct timespec until;
		double now = hub_now_ms(), wait_ms;

		if (now >= hub.next_scan) {
			scan_timers_locked(now);
			continue;
		}
		/* the condition waits on CLOCK_REALTIME, its default; a
		 * millisecond more, so that the timer is due on waking */
		wait_ms = hub.next_scan - now;
		comb_deadline_in(&until, CLOCK_REALTIME, (int)wait_ms + 1);
		pthread_cond_timedwait(&hub.work, &hub.mu, &until);
	}
}

/* The scratch of kind among a worker's (one per kind, in hub.kinds'
 * order). */
static void *scratch_of(void **scratch, const struct hub_kind *kind)
{
	size_t i;

	for (i = 0; i < hub.nkinds; i++)
		if (hub.kinds[i] == kind)
			return scratch[i];
	return NULL;
}

static void *worker_main(void *arg)
{
	void *scratch[MAX_KINDS] = {0};
	size_t most = 1, n, i;
	struct hub_sub **subs;
	struct hub_turn **turns;
	const struct hub_kind *kind;

	(void)arg;
	for (i = 0; i < hub.nkinds; i++) {
		if (hub.kinds[i]->most > most)
			most = hub.kinds[i]->most;
		if (hub.kinds[i]->worker_new)
			scratch[i] = hub.kinds[i]->worker_new();
	}
	subs = calloc(most, sizeof(*subs));
	turns = calloc(most, sizeof(*turns));
	if (!subs || !turns) {
		comb_error("subscription worker: out of memory");
		goto out;
	}
	pthread_mutex_lock(&hub.mu);
	for (;;) {
		wait_for_work_locked();
		if (hub.stop)
			break;
		n = take_locked(subs, turns);
		if (!hub_queue_empty(&hub.run))
			pthread_cond_signal(&hub.work);
		kind = subs[0]->kind;
		pthread_mutex_unlock(&hub.mu);

		kind->run(scratch_of(scratch, kind), subs, n);

		pthread_mutex_lock(&hub.mu);
		for (i = 0; i < n; i++)
			put_back_locked(subs[i], hub_now_ms());
		pthread_cond_broadcast(&hub.idle);
	}
	pthread_mutex_unlock(&hub.mu);
out:
	for (i = 0; i < hub.nkinds; i++)
		if (hub.kinds[i]->worker_free)
			hub.kinds[i]->worker_free(scratch[i]);
	free(subs);
	free(turns);
	return NULL;
}

int hub_workers_start(const struct hub_kind *const *kinds, size_t n,
		      char *errbuf, size_t errlen)
{
	pthread_attr_t tattr;
	int err = 0, i;

	if (n > MAX_KINDS)
		return comb_fail(errbuf, errlen, COMB_EIO, "too many kinds of subscription");
	memcpy(hub.kinds, kinds, n * sizeof(*kinds));
	hub.nkinds = n;
	hub.stop = false;
	hub.next_scan = hub_now_ms() + SCAN_MS;
	pthread_attr_init(&tattr);
	pthread_attr_setstacksize(&tattr, 1024 * 1024);
	for (i = 0; i < HUB_WORKERS && !err; i++) {
		err = pthread_create(&hub.threads[i], &tattr, worker_main, NULL);
		if (!err)
			hub.nthreads++;
	}
	pthread_attr_destroy(&tattr);
	if (err) {
		hub_workers_stop();
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot start the subscription workers: %s", strerror(err));
	}
	atomic_store(&hub.running, true);
	return 0;
}

void hub_workers_stop(void)
{
	int i;

	atomic_store(&hub.running, false);
	pthread_mutex_lock(&hub.mu);
	hub.stop = true;
	pthread_cond_broadcast(&hub.work);
	pthread_mutex_unlock(&hub.mu);
	for (i = 0; i < hub.nthreads; i++)
		pthread_join(hub.threads[i], NULL);
	hub.nthreads = 0;
	hub.run = (struct hub_queue){0};
	hub.timed = NULL;
}

bool hub_running(void)
{
	return atomic_load(&hub.running);
}
