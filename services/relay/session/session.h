/*
 * session/: what one WebSocket connection is, below everything that
 * serves it: its protocol state (community, NIP-42 challenge and reader,
 * subscriptions), the NIP-01 frames it sends and the outbound queue they
 * go through. The messages themselves are handled above, in ws/; the
 * syncs (sync/) and plain REQs (ws/) add their subscriptions here. The
 * only public header of the folder.
 */
#ifndef COMB_SESSION_H
#define COMB_SESSION_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include "access/access.h"
#include "feed/feed.h"
#include "hub/hub.h"
#include "relay.h"

/*
 * outbox.c, the outbound queue of one WebSocket connection. Every frame
 * the relay sends on a connection goes through it, in order: answers to
 * the client's own messages, stored events, live events and sync
 * frames. A writer thread of the connection's own drains it, so a producer
 * on another thread (live delivery, the hub's workers) never blocks on a
 * slow client: when the queue is full its push fails at once and the
 * producer closes what it was feeding (`resync: slow consumer`).
 *
 * The queue knows nothing of civetweb: frames leave through the write
 * function given at creation, which makes it testable alone
 * (tests/unit/test_outbox.c).
 */

/* WebSocket opcodes (RFC 6455 section 5.2). */
enum ws_opcode {
	WS_OP_CONTINUATION = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xa,
};

/* Close status codes the relay sends (RFC 6455 section 7.4.1). */
enum ws_close_code {
	WS_CLOSE_NORMAL = 1000,
	WS_CLOSE_GOING_AWAY = 1001,
	WS_CLOSE_PROTOCOL = 1002,
	WS_CLOSE_UNSUPPORTED = 1003,
	WS_CLOSE_POLICY = 1008,
	WS_CLOSE_TOO_BIG = 1009,
	WS_CLOSE_INTERNAL = 1011,
};

/*
 * How an outbox reaches its client's socket (conn is the connection). Both
 * write count whole frames of one opcode (1 to WS_OUTBOX_MAX_BATCH;
 * payloads[i] is frame i's payload) together, in as few system calls as
 * the socket allows:
 *   write      waits for the client as long as it takes to read them (up
 *              to the connection's write timeout); returns a positive
 *              number on success, 0 or negative when the connection
 *              failed. Called from the writer thread, from
 *              ws_outbox_close_now(), and from a thread streaming frames
 *              to its own client (WS_PUSH_STREAM).
 *   write_now  (may be NULL) only if the socket takes all of them without
 *              waiting for the client; returns a positive number when
 *              written, 0 when none was (they are then queued for the
 *              writer), negative when the connection failed. Called from
 *              the pushing thread while the queue is empty and nothing
 *              else writes, so that frames that fit cost no thread
 *              wake-up, and several cost one system call.
 */
typedef int (*ws_outbox_write_fn)(void *conn, int opcode,
				  const struct iovec *payloads, int count);

struct ws_transport {
	ws_outbox_write_fn write;
	ws_outbox_write_fn write_now;
	void *conn;
};

/* The most frames one ws_outbox_push_many takes. */
#define WS_OUTBOX_MAX_BATCH 64

struct ws_outbox_limits {
	size_t max_bytes;     /* queued bytes (payload + WS_OUTBOX_FRAME_COST
	                         each) beyond which ordinary pushes fail */
	size_t reserve_bytes; /* extra room only WS_PUSH_RESERVED may use */
	int linger_ms;        /* an idle writer thread exits after this */
	size_t stack_bytes;   /* stack of the writer thread */
};

/* What each queued frame costs beyond its payload, so that many tiny
 * frames are bounded too. */
#define WS_OUTBOX_FRAME_COST 64

enum ws_push_flags {
	/* Wait until the frame fits instead of failing. Only the thread that
	 * serves the connection's own messages may wait (it then delays only
	 * its own client); a frame larger than max_bytes is taken once the
	 * queue is empty. */
	WS_PUSH_WAIT = 1 << 0,
	/* May use reserve_bytes: for the few small frames that must follow an
	 * overflow (CLOSED, NOTICE). */
	WS_PUSH_RESERVED = 1 << 1,
	/* With WS_PUSH_WAIT, for a stream of frames (a snapshot, stored
	 * events): when nothing is queued, the pushing thread writes them
	 * itself, waiting for the client as long as it reads (transport
	 * write), instead of copying them into the queue for the writer
	 * thread. */
	WS_PUSH_STREAM = 1 << 2,
};

struct ws_outbox;

/* Fills limits with the relay's defaults. */
void ws_outbox_default_limits(struct ws_outbox_limits *limits);

/*
 * Creates an empty queue writing through transport (copied; its conn is
 * borrowed and must stay valid until ws_outbox_free returns). No thread
 * runs until a frame has to wait. Returns NULL when out of memory.
 */
struct ws_outbox *ws_outbox_new(const struct ws_transport *transport,
				const struct ws_outbox_limits *limits);

/*
 * Stops the writer (waiting for a write in progress to finish), discards
 * what is still queued and frees the queue. Call once, when the connection
 * is gone, from its own thread; nobody may push afterwards.
 */
void ws_outbox_free(struct ws_outbox *ob);

/*
 * Sends one frame: written at once through write_now when the queue is
 * empty and the socket takes it, else queued (data copied) for the
 * writer thread. Returns 0; COMB_ETOOBIG when it does not fit (never
 * with WS_PUSH_WAIT, unless the queue closed while waiting); COMB_EIO
 * when the queue is closed or a write failed; COMB_ENOMEM.
 */
int ws_outbox_push(struct ws_outbox *ob, int opcode, const char *data,
		   size_t len, unsigned flags);

/*
 * Sends count frames of one opcode (1 to WS_OUTBOX_MAX_BATCH; payloads
 * borrowed) in order, as count ws_outbox_push calls would, but as one
 * unit: written together through write_now when the queue is empty and
 * the socket takes them all, else all queued; the bound applies to their
 * sum (with WS_PUSH_WAIT, it waits for room for all of them). Returns as
 * ws_outbox_push does.
 */
int ws_outbox_push_many(struct ws_outbox *ob, int opcode,
			const struct iovec *payloads, size_t count,
			unsigned flags);

/* Same as ws_outbox_push for a text frame holding the NUL-terminated s. */
int ws_outbox_push_text(struct ws_outbox *ob, const char *s, unsigned flags);

/*
 * Queues a close frame with code and reason (at most 123 bytes kept) after
 * everything already queued, then refuses further pushes. The frame goes
 * out once; later calls do nothing. Returns 0 or COMB_ENOMEM.
 */
int ws_outbox_close(struct ws_outbox *ob, uint16_t code, const char *reason);

/*
 * Answers a close frame from the client: refuses further pushes, drops
 * what is queued, waits for a write in progress and, unless a close frame
 * went out already, writes payload (the client's code, at most 125 bytes)
 * as the close frame from the calling thread.
 */
void ws_outbox_close_now(struct ws_outbox *ob, const char *payload, size_t len);

/*
 * Waits up to timeout_ms until everything queued has been written (or
 * the queue failed). Returns true when the queue is empty.
 */
bool ws_outbox_drain(struct ws_outbox *ob, int timeout_ms);

/* True once a write failed or the queue was closed. */
bool ws_outbox_closed(struct ws_outbox *ob);

/* Bytes queued now (payload plus frame costs). */
size_t ws_outbox_queued(struct ws_outbox *ob);

/*
 * session.c, one WebSocket connection's protocol state (PROTOCOL.md
 * section 7): its community, the NIP-42 challenge and the authenticated
 * pubkey with its read keys, the open subscriptions, and the outbound
 * queue every answer goes through. Knows nothing of civetweb (ws/ws.c is
 * the transport) nor of the messages (ws/ws_message.c).
 *
 * Threads: the connection's own thread calls everything here; live
 * delivery and the hub's workers only push to the outbox and
 * changes a subscription's delivery state under `mu`.
 */

/* The longest subscription id accepted (NIP-01 suggests 64). */
#define WS_SUB_ID_MAX 64
/* Seconds a connection may stay unauthenticated. */
#define WS_AUTH_TIMEOUT_S 30

struct ws_session;

/*
 * What every kind of subscription (plain REQ, `current` sync, resumable
 * sync) is to its connection and the hub (sub.c), so the session can
 * count, find, replace and close them alike. A subscription type embeds
 * it as its first member.
 */
struct ws_sub {
	struct ws_sub *next;
	char id[WS_SUB_ID_MAX + 1];
	/* Unregisters from everything that may still deliver to it and frees
	 * it. Called on the connection's thread, never under mu. */
	void (*release)(struct ws_session *s, struct ws_sub *sub);
	struct ws_session *session;      /* borrowed */
	struct hub_sub hub;              /* its registration (hub/) */
	/* guarded by the session's mu */
	bool dead;                       /* closed by the relay (CLOSED sent
					  * or owed); released at the next
					  * message, no longer counted */
	bool started;                    /* past its trust wait */
	bool live;                       /* past EOSE: a CLOSED goes out now */
	char dead_reason[300];           /* the CLOSED owed while not live */
};

/* The bytes of EVENT frames a ws_event_batch holds before it pushes them
 * (or WS_OUTBOX_MAX_BATCH frames, whichever comes first). */
#define WS_EVENT_BATCH_BYTES (128 * 1024)

/*
 * Frames of one connection pushed together, so that they leave in a few
 * large writes rather than one system call each: the EVENT frames of one
 * subscription (a snapshot, a stored result; frames.c below), or the OK
 * answers of writes (ws_session_write_answer). Frames keep their order;
 * the caller flushes before it pushes anything else on the connection
 * (EOSE, CLOSED).
 */
struct ws_event_batch {
	struct ws_session *s;
	const char *sub_id;                   /* borrowed */
	unsigned flags;                       /* of every push */
	struct comb_buf frames;               /* back to back */
	size_t ends[WS_OUTBOX_MAX_BATCH];     /* where each frame ends */
	size_t n;
};

struct ws_session {
	struct relay *relay;             /* borrowed */
	struct ws_outbox *outbox;        /* owned */
	struct community community;
	char host_header[264];           /* as sent: the NIP-42 relay tag names it */
	char challenge[65];
	struct timespec connected_at;    /* CLOCK_MONOTONIC */

	pthread_mutex_t mu;              /* guards authenticated, dead flags
	                                    and subscription delivery state */
	bool authenticated;
	char pubkey[65];                 /* constant once authenticated */
	/* what the reader may read now (registered with hub/ while
	 * authenticated) */
	struct reader_access access;
	/* its place in the subscriptions' run queue (hub/, "Turns") */
	struct hub_owner turns;

	struct ws_sub *subs;             /* connection thread only */

	/* Bytes the subscriptions hold beside the outbox (budget.c), and
	 * the most they may hold. */
	atomic_size_t held;
	size_t held_limit;

	/* EVENTs handed to the write path whose OK is not queued yet (under
	 * mu); writes_done is signalled whenever the count falls. */
	int writes_in_flight;
	pthread_cond_t writes_done;
	/* OKs gathered by ws_session_write_answer and how many writes they
	 * answer, under answers_mu (a batcher delivers a batch's answers
	 * while the connection's thread may answer a refused write). */
	pthread_mutex_t answers_mu;
	struct ws_event_batch answers;
	int answers_writes;
};

/*
 * Creates a session for a connection of community c whose Host header was
 * host_header (borrowed, copied), writing frames through transport
 * (see above). Returns NULL when out of memory.
 */
struct ws_session *ws_session_new(struct relay *relay,
				  const struct community *c,
				  const char *host_header,
				  const struct ws_transport *transport);

/* Closes every subscription, stops the outbox and frees the session. Call
 * from the connection's thread when the connection is gone. */
void ws_session_free(struct ws_session *s);


/* True once NIP-42 authentication succeeded. Any thread. */
bool ws_session_authenticated(struct ws_session *s);

/*
 * Makes pubkey (64 lowercase hex, verified by NIP-42 by the caller) the
 * reader of s: takes the read keys the policy plugins give it, registers
 * its access with the hub (which keeps its community admin status current
 * from then on), loads that status and marks s authenticated. Returns 0,
 * or COMB_EUNAVAIL when the database failed (s stays as it was).
 */
int ws_session_set_reader(struct ws_session *s, const char *pubkey);

/*
 * Makes s->access current before a subscription reads what it starts
 * with: loads the reader's community admin status again, so that a change
 * committed before the REQ applies to it even when its signal has not
 * reached this node yet (and one lost with an interrupted feed is
 * recovered), and stores in *primary_at the primary's WAL position of that
 * moment (hub_load_admin). A subscription registered for live changes
 * before it calls this reads its start at that position or later, on a
 * standby or the primary: whatever committed before the registration is
 * then in what it reads, whatever after reaches it live. Connection
 * thread. Returns 0 or COMB_EUNAVAIL.
 */
int ws_session_access_now(struct ws_session *s, comb_lsn *primary_at);

/*
 * frames.c, the NIP-01 frames, and the writes in flight they answer.
 * Frames other than EVENT are small: at most WS_SMALL_FRAME bytes.
 */
#define WS_SMALL_FRAME 4096

/*
 * The EVENT path's bound (pipelined EVENTs): waits, on the connection's
 * thread and so without reading its socket, until fewer than limit
 * writes are in flight and the outbox has room for their OKs, then counts
 * one more. Returns false when the connection is closing (nothing
 * counted).
 */
bool ws_session_write_begin(struct ws_session *s, int limit);

/* Sends ["AUTH",<challenge>]. Returns 0 or a negative COMB_E*. */
int ws_session_start(struct ws_session *s);

/* Frames. Each builds one NIP-01 message and pushes it with flags (see
 * ws_push_flags); returns what the push returned. */
int ws_send_notice(struct ws_session *s, const char *message, unsigned flags);
int ws_send_ok(struct ws_session *s, const char *event_id, bool accepted,
	       const char *message, unsigned flags);
/*
 * Answers a write counted by ws_session_write_begin with its OK, which may
 * use the outbox's reserve (write_begin kept room for it): gathered while
 * more answers follow at once (write_done_fn's more), then pushed with
 * those gathered before it, in one write when the socket takes them, and
 * their writes counted as answered. Any thread; the write path's answers
 * with more set come from one thread, followed by the one without.
 * Returns 0, or what the push returned (COMB_ETOOBIG: no room even in the
 * reserve).
 */
int ws_session_write_answer(struct ws_session *s, const char *event_id,
			    bool accepted, const char *message, bool more);
int ws_send_closed(struct ws_session *s, const char *sub_id,
		   const char *message, unsigned flags);
int ws_send_eose(struct ws_session *s, const char *sub_id, unsigned flags);
/* Appends ["EVENT",sub_id,<json>] to out (caller releases). */
int ws_format_event(struct comb_buf *out, const char *sub_id,
		    const char *json, size_t len);

void ws_event_batch_init(struct ws_event_batch *b, struct ws_session *s,
			 const char *sub_id, unsigned flags);
/* Adds ["EVENT",sub_id,<json>] to batch (a struct ws_event_batch),
 * pushing the batch when it is full; shaped as read_events_from's emit
 * (read/read.h). Returns 0, or COMB_EIO when the connection is closing or
 * COMB_ENOMEM, with the CLOSED message in why ("error: connection
 * closing", "error: out of memory"), as the two below. */
int ws_event_batch_add(void *batch, const char *json, size_t len, char *why,
		       size_t whylen);
/* Pushes what the batch holds. */
int ws_event_batch_flush(struct ws_event_batch *b, char *why, size_t whylen);
/* Pushes what the batch holds followed by ["EOSE",sub_id], in one write
 * when the socket takes them. */
int ws_event_batch_eose(struct ws_event_batch *b, char *why, size_t whylen);
/* Frees the batch's memory; what it still holds is dropped. */
void ws_event_batch_release(struct ws_event_batch *b);

/*
 * budget.c, what one connection holds (PROTOCOL.md section 10, "What one
 * connection holds is bounded in bytes"). A connection may hold
 * COMB_MAX_CONNECTION_BYTES in all: its outbox (at most its max_bytes
 * plus reserve_bytes of unwritten frames) and, in the rest, whatever its
 * subscriptions keep (filters, the ids already sent, events held while
 * stored ones are sent, pages being built), counted here by what is
 * actually held. The sum over every connection of the node is capped by
 * COMB_NODE_CONNECTION_MIB. A subscription whose next hold fails is
 * closed with WS_BUDGET_EXCEEDED; the connection stays usable.
 */
#define WS_BUDGET_EXCEEDED "error: connection memory budget exceeded"

/* Sets s's limit from the relay's configuration. */
void ws_session_budget_init(struct ws_session *s);

/* Counts bytes more as held by s, unless that would pass s's budget or
 * the node's ceiling (then nothing is counted and it returns false). Any
 * thread. */
bool ws_session_hold(struct ws_session *s, size_t bytes);

/* The bytes s may still hold now (others may take them meanwhile). */
size_t ws_session_room(struct ws_session *s);

/* Counts bytes held by s (by an earlier ws_session_hold) as given back. */
void ws_session_unhold(struct ws_session *s, size_t bytes);

/*
 * held_map.c, a map from fixed-size binary keys (a uuid's 16 bytes, an
 * event id's 32) to an int64 other than INT64_MIN, with a maximum number
 * of entries, whose memory counts against one connection's budget: what
 * a sync's client holds, the changes it waits to apply, the events a REQ
 * sent. Not locked: its user serializes every call.
 */
struct ws_held_map {
	unsigned char *slots;            /* cap slots of stride bytes; NULL while empty */
	size_t key_len, stride;
	size_t cap;                      /* a power of two, or 0 */
	size_t count, max;
	struct ws_session *budget;       /* NULL: counted against nobody */
	size_t held;                     /* what the slots count now */
};

/* Prepares an empty map of key_len-byte keys holding at most max
 * entries, its slots counted against budget's connection (NULL: none). */
void ws_held_map_init(struct ws_held_map *m, size_t key_len, size_t max,
		      struct ws_session *budget);
/* Frees the entries and gives their bytes back; m stays usable, empty. */
void ws_held_map_release(struct ws_held_map *m);
/* Forgets every entry. Slots up to keep_cap stay allocated (and counted)
 * for the next entries, so that a map filled and emptied over and over
 * allocates once; more are given back as by ws_held_map_release. */
void ws_held_map_clear(struct ws_held_map *m, size_t keep_cap);
/* Sets key to value. Returns 0, COMB_ETOOBIG when key is new and m holds
 * max entries already, COMB_EDENIED when the budget has no room for more
 * slots, or COMB_ENOMEM. */
int ws_held_map_put(struct ws_held_map *m, const unsigned char *key, int64_t value);
/* The value of key (changeable in place), or NULL. */
int64_t *ws_held_map_get(const struct ws_held_map *m, const unsigned char *key);
/* Removes key (nothing when absent). */
void ws_held_map_del(struct ws_held_map *m, const unsigned char *key);
/* Where a visit of a map's entries stands: WS_HELD_VISIT to start. */
struct ws_held_visit {
	size_t slot, seen;
};
#define WS_HELD_VISIT {0, 0}
/* The key of the next entry of the visit v, or NULL after the last. The
 * map may change only by ws_held_map_get's changes in place meanwhile. */
const unsigned char *ws_held_map_next(const struct ws_held_map *m,
				      struct ws_held_visit *v);

/*
 * sub.c, a connection's subscriptions and their life. Order of an
 * opening, on the connection's thread: ws_sub_open_begin registers the
 * subscription with the hub (from then on every signal of its scope
 * reaches it) and waits until its community's feed is trusted; the kind
 * reads and sends what it starts with; EOSE; ws_sub_go_live_locked (or
 * both in ws_sub_open_end). A subscription closed by the relay before it
 * is live owes its CLOSED to the opener, who sends it instead of EOSE (a
 * sync: what it sent is not exact) or after it (a plain REQ: its stored
 * events are); once live, whoever closes it sends it at once.
 */

/* Makes sub subscription id of s, of kind, for channels[0..n) of s's
 * community (borrowed; none: every channel). */
void ws_sub_init(struct ws_sub *sub, struct ws_session *s, const char *id,
		 const struct hub_kind *kind, const char (*channels)[37], size_t n,
		 void (*release)(struct ws_session *s, struct ws_sub *sub));

/* The subscription whose registration is hs. */
struct ws_sub *ws_sub_of(const struct hub_sub *hs);

/* Closes sub from the relay's side with reason (nothing when closed
 * already); the caller holds the session's mu. Once live the CLOSED is
 * pushed at once (using the outbox's reserve); before, it is owed. */
void ws_sub_close_locked(struct ws_sub *sub, const char *reason);

/* Same, taking the session's mu. */
void ws_sub_close(struct ws_sub *sub, const char *reason);

/* A kind's interrupt (hub.h): closes the subscription of hs with reason
 * once it is past its trust wait (one still waiting has read nothing). */
void ws_sub_interrupt(struct hub_sub *hs, const char *reason);

/* Drops sub from its session and sends CLOSED with message (the
 * connection's thread, while opening). */
void ws_sub_refuse(struct ws_sub *sub, const char *message);

/* Adds sub to its session, registers it with the hub and waits until
 * its community's feed is trusted, storing the feed's generation.
 * Returns false when sub was refused (and dropped). */
bool ws_sub_open_begin(struct ws_sub *sub, uint64_t *generation);

/* After EOSE, under the session's mu: makes sub live. Returns false when
 * it was closed meanwhile (its CLOSED is pushed now). */
bool ws_sub_go_live_locked(struct ws_sub *sub);

/* The end of a sync's opening: unless sub was closed meanwhile or the
 * feed was interrupted since generation, sends EOSE and makes it live;
 * one closed before is refused instead. Returns true when sub is live and
 * its turns are the caller's to start (hub_sub_start). */
bool ws_sub_open_end(struct ws_sub *sub, uint64_t generation);

/* On the connection's thread. */
struct ws_sub *ws_session_find_sub(struct ws_session *s, const char *id);
void ws_session_add_sub(struct ws_session *s, struct ws_sub *sub);
/* Unlinks sub and releases it. */
void ws_session_drop_sub(struct ws_session *s, struct ws_sub *sub);
/* Releases every dead subscription; returns how many stay open. */
int ws_session_prune(struct ws_session *s);

#endif
