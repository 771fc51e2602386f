/*
 * hub/: what every kind of subscription of this node is built on, and
 * the one place where the capture feed's signals and interruptions arrive
 * for all of them.
 *
 * - Readers (readers.c): each authenticated WebSocket registers its
 *   reader's access (struct reader_access, access.h) here; hub_signal
 *   applies a change of the reader's community admin status to that
 *   access first, on the feed's thread, before it hands the signal to any
 *   subscription and before the feed hands on any later signal or event.
 *   So a plain REQ's next delivery, a new REQ, a sync's access check and a
 *   resumable sync's next read all see the new status, and nothing
 *   written after the change reaches a reader who lost access
 *   (docs/protocol.md, "Access changes reach open connections").
 * - Subscriptions (subs.c): plain REQs, syncs and resumable syncs
 *   register a struct hub_sub, whose kind (struct hub_kind) says what a
 *   signal, an interruption, a live event and a turn of work mean to it.
 *   One lock guards their registry and their scheduling; one pool of
 *   workers serves their turns fairly per connection (turns.c), with
 *   timers; live delivery (feed/) finds in it who wants an event.
 * - Registry (registry.c): subscriptions by community and channel.
 *
 * The hub is the lowest layer of the relay's folders, below the feed and
 * the subscriptions (feed/, session/, sync/, ws/): it never names them,
 * they register what it needs. The only public header of the folder.
 */
#ifndef COMB_HUB_H
#define COMB_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access/access.h"
#include "comb/event.h"
#include "comb/readroute.h"
#include "comb/signal.h"
#include "relay.h"

/*
 * Takes one capture signal (borrowed): an admin signal first sets the
 * status of every registered reader it names; then every registered
 * subscription the signal may concern gets it through its kind's signal:
 * those of the signal's channel and the community-wide ones, or, for a
 * signal without a channel (an admin change), every one of its community.
 * main.c registers it, with hub_interrupt, as the capture feed's
 * listener, so that it runs before any later signal or event is handed
 * on. Only queues; any thread.
 */
void hub_signal(const struct comb_signal *s);

/* Changes of community (0: of every community) were lost: every
 * registered subscription of it gets reason (`resync: ...`) through its
 * kind's interrupt. Any thread that holds no session lock. */
void hub_interrupt(int64_t community, const char *reason);

/* Forgets every reader. Call after feed_stop and hub_workers_stop, once
 * every connection is closed. */
void hub_stop(void);

/*
 * Registers ra (borrowed until hub_remove_reader returns): from now on an
 * admin signal for ra's community and pubkey sets ra->admin and counts
 * ra->generation. Returns 0 or COMB_ENOMEM.
 */
int hub_add_reader(struct reader_access *ra);

/* Unregisters ra (nothing when it is not registered). */
void hub_remove_reader(struct reader_access *ra);

/*
 * Loads whether ra's pubkey is a community admin of c from the primary
 * and applies it, unless an admin signal arrived while it was loaded (the
 * signal is as new then); with primary_at, also stores the primary's WAL
 * position taken in the same statement: a read that must see everything
 * committed before now asks a standby for at least that (comb/readroute.h).
 * Call after hub_add_reader, from a thread that may wait for the database:
 * when the reader's status may have changed without a signal reaching this
 * node yet (at AUTH, when a subscription opens: the operator's change may
 * have committed a moment ago). Returns 0 or COMB_EUNAVAIL.
 */
int hub_load_admin(struct relay *relay, const struct community *c,
		   struct reader_access *ra, comb_lsn *primary_at);

/*
 * Registry (registry.c): the subscriptions of this node by community and
 * channel, so that a signal of one channel finds the subscriptions that
 * cover it without looking at the others. A registration names channels
 * (each registered once, whatever repeats) or none, for every channel of
 * its community (the community-wide slot, channel ""). The registry has no
 * lock of its own: its user serializes every call and every use of a
 * slot it found (the subscriptions' lock, subs.c).
 */
#define HUB_BUCKETS 4096

/* The subscriptions registered for one (community, channel). */
struct hub_slot {
	struct hub_slot *next;
	int64_t community;
	char channel[37];               /* "" for the community-wide slot */
	void **members;                 /* the registrations (borrowed) */
	size_t n, cap;
};

/* A registry; zeroed is empty. */
struct hub_registry {
	struct hub_slot *buckets[HUB_BUCKETS];
};

/* Registers member for channels[0..nchannels) of community, or with no
 * channel for the community-wide slot. All or nothing: returns 0 or
 * COMB_ENOMEM (nothing registered then). */
int hub_registry_add(struct hub_registry *r, int64_t community,
		     const char (*channels)[37], size_t nchannels, void *member);

/* Undoes hub_registry_add with the same arguments. */
void hub_registry_remove(struct hub_registry *r, int64_t community,
			 const char (*channels)[37], size_t nchannels,
			 const void *member);

/* The slot of (community, channel), "" for the community-wide one; NULL
 * when nothing is registered there. */
struct hub_slot *hub_registry_find(const struct hub_registry *r,
				   int64_t community, const char *channel);

/* Calls fn(member, ctx) for every registration of every slot of
 * community (0: of every community); a member registered for several
 * channels is met once per slot. */
void hub_registry_each(const struct hub_registry *r, int64_t community,
		       void (*fn)(void *member, void *ctx), void *ctx);

/*
 * Turns (turns.c): the run queue of the subscriptions' work (subs.c),
 * fair per connection. Each connection is an owner with its own FIFO of turns; the
 * queue serves the owners in rotation, one turn each, so one connection
 * with many subscriptions waiting delays another's next turn by at most
 * one turn of its own, however many it holds. The queue has no lock of
 * its own: its user serializes every call (the subscriptions' lock).
 */
struct hub_turn;

/* A connection's place in the run queue; embedded in its session,
 * zeroed. */
struct hub_owner {
	struct hub_owner *next;         /* the ring of owners with turns */
	struct hub_turn *head, *tail;   /* its turns, first in first out */
	bool linked;                    /* in the ring */
};

/* One unit of queued work; embedded in a subscription. Set owner before
 * the first push; the rest is the queue's. */
struct hub_turn {
	struct hub_turn *next;
	struct hub_owner *owner;
	bool queued;
};

/* A run queue; zeroed is empty. */
struct hub_queue {
	struct hub_owner *head, *tail;
};

/* Queues t (not queued yet) after its owner's other turns. */
void hub_queue_push(struct hub_queue *q, struct hub_turn *t);

/* Takes the next turn: the first of the owner whose turn it is, which then
 * goes behind every other owner. NULL when q is empty. */
struct hub_turn *hub_queue_pop(struct hub_queue *q);

/* Takes t out of q (nothing when it is not queued). */
void hub_queue_remove(struct hub_queue *q, struct hub_turn *t);

/* Takes out of q, in the queue's order, up to max turns for which like(t,
 * ctx) is true (work that one read serves together) into out. Returns how
 * many. */
size_t hub_queue_take_if(struct hub_queue *q,
			 bool (*like)(const struct hub_turn *t, const void *ctx),
			 const void *ctx, struct hub_turn **out, size_t max);

/* True when nothing is queued. */
bool hub_queue_empty(const struct hub_queue *q);

/*
 * Subscriptions (subs.c). A subscription embeds a struct hub_sub and
 * registers it with hub_sub_add; from then on the signals of its scope
 * reach its kind's signal, which notes what changed and calls
 * hub_wake_locked. Once hub_sub_start made it runnable, a woken
 * subscription gets a turn: a worker takes it (with others its kind
 * serves together), calls take under the lock, run without it, and next
 * under it again, which says when the subscription runs next if no
 * signal wakes it first. A subscription is taken by one worker at a time.
 *
 * Locks: the subscriptions' lock is taken before a session's mu, never
 * after it: kind callbacks called under it may take a session's mu, and
 * nobody holding a session's mu calls into this section.
 */

/* Workers serving every subscription's turns. */
#define HUB_WORKERS 4

struct hub_sub;

/* An event being delivered live (feed/); everything borrowed. */
struct hub_event {
	int64_t community;
	const char *channel;            /* canonical uuid, or NULL for none */
	const struct comb_event *ev;    /* parsed */
	const char *json;               /* the event as served */
	size_t json_len;
	comb_lsn at;                    /* a WAL position of the primary at or
					 * after its commit, when visible to
					 * new snapshots (its signal's), or 0
					 * when unknown */
};

/* What a kind of subscription does with what the hub hands it. signal,
 * match, take and next are called under the subscriptions' lock, run and
 * deliver without it, interrupt either way; none but run may wait on a
 * client or the database. */
struct hub_kind {
	/* Takes signal s (borrowed) of sub's community, of one of its
	 * channels or of none (an admin change): decides whether it concerns
	 * sub, and if so notes it and calls hub_wake_locked. NULL: signals
	 * are not this kind's. */
	void (*signal)(struct hub_sub *sub, const struct comb_signal *s);
	/* For a kind that takes live events (NULL otherwise): true when sub
	 * wants ev, setting *named when the filter that matched names the
	 * event's channel (it counts for unlisted ones). */
	bool (*match)(struct hub_sub *sub, const struct hub_event *ev, bool *named);
	/* Hands over an event sub's reader may read, holding no lock of the
	 * hub. Must not block: push without waiting and close the
	 * subscription when its connection cannot take it. */
	void (*deliver)(struct hub_sub *sub, const struct hub_event *ev);
	/* The changes (or events) of sub's community were lost: close sub
	 * with reason. */
	void (*interrupt)(struct hub_sub *sub, const char *reason);
	/* True when queued sub may be served by the run that serves first
	 * (of this kind); most is how many one run serves at the most. */
	bool (*together)(const struct hub_sub *sub, const struct hub_sub *first);
	size_t most;
	/* A worker took sub: move what signals noted into what run reads. */
	void (*take)(struct hub_sub *sub);
	/* Serves subs[0..n) (taken together), holding no lock. scratch is
	 * this worker's own, from worker_new (may be NULL). */
	void (*run)(void *scratch, struct hub_sub **subs, size_t n);
	/* After its run: when sub runs next unless a signal wakes it first
	 * (a CLOCK_MONOTONIC time in ms, hub_now_ms), 0 for not before a
	 * signal, or a negative number to never run it again (it was
	 * closed). */
	double (*next)(struct hub_sub *sub, double now);
	/* A worker's scratch for run, made when it starts and freed when it
	 * stops; both may be NULL. */
	void *(*worker_new)(void);
	void (*worker_free)(void *scratch);
};

/* A subscription as the hub knows it; embedded in the subscription.
 * Its owner sets kind, community, channels, reader, access and
 * turn.owner before hub_sub_add and keeps them unchanged until
 * hub_sub_remove returns; the rest is the hub's. */
struct hub_sub {
	const struct hub_kind *kind;
	int64_t community;
	const char (*channels)[37];     /* borrowed; none: every channel */
	size_t nchannels;
	const char *reader;             /* borrowed pubkey hex */
	const struct reader_access *access; /* borrowed: what reader may read */
	struct hub_turn turn;

	bool registered, runnable, woken, scheduled, running, released;
	bool named;                     /* hub_candidates: see match */
	double due;                     /* when next runs it; 0: not timed */
	struct hub_sub *timed_prev, *timed_next;
};

/* Starts the workers; kinds[0..n) (borrowed, static) are every kind that
 * will register. Call before feed_start. Returns 0, or COMB_EIO with
 * errbuf set. */
int hub_workers_start(const struct hub_kind *const *kinds, size_t n,
		      char *errbuf, size_t errlen);

/* Stops the workers. Every subscription must have been removed before
 * (all connections closed). Safe when hub_workers_start failed or never
 * ran. */
void hub_workers_stop(void);

/* True while the workers run. Any thread. */
bool hub_running(void);

/* Registers sub for the signals and interruptions of its scope. Returns
 * 0 or COMB_ENOMEM. */
int hub_sub_add(struct hub_sub *sub);

/* Lets sub run: at once when run_now or when a signal woke it since
 * hub_sub_add, else when one does. */
void hub_sub_start(struct hub_sub *sub, bool run_now);

/* Unregisters sub, takes it out of the queue and waits until no worker
 * runs it; it may then be freed. */
void hub_sub_remove(struct hub_sub *sub);

/*
 * Live events (feed/'s live delivery, one thread): finds the
 * subscriptions that want ev, those of its channel and the
 * community-wide ones whose kind takes events and matches it, each once
 * with its named flag, into *out (grown as needed; *cap its room), and
 * holds them: hub_sub_remove waits until hub_candidates_done. Returns how
 * many, or -1 when out of memory (nothing held).
 */
long hub_candidates(const struct hub_event *ev, struct hub_sub ***out, size_t *cap);
void hub_candidates_done(struct hub_sub **subs, size_t n);

/* True when a subscription that takes events may want those of
 * community in channel (NULL for none). Errs towards true when the hub is
 * busy. Any thread. */
bool hub_wanted(int64_t community, const char *channel);

/* Like hub_interrupt, for the subscriptions that take events only (their
 * events were lost, not the signals). */
void hub_interrupt_events(int64_t community, const char *reason);

/* Registered subscriptions that take events (for /health). */
long hub_event_subs(void);

/* Queues a turn for sub (at once once runnable); called by a kind's
 * signal, under the lock. */
void hub_wake_locked(struct hub_sub *sub);

/* The subscriptions' lock, for a kind's fields its callbacks share with
 * its other code (a sync's held changes). */
void hub_lock(void);
void hub_unlock(void);

/* Now on CLOCK_MONOTONIC, in milliseconds. */
double hub_now_ms(void);

#endif
