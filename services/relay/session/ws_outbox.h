/*
 * The outbound queue of one WebSocket connection. Every frame the relay
 * sends on a connection goes through it, in order: answers to the client's
 * own messages, stored events, live events and (later) sync frames. A
 * writer thread of the connection's own drains it, so a producer on
 * another thread (the live dispatcher, the sync code) never blocks on a
 * slow client: when the queue is full its push fails at once and the
 * producer closes what it was feeding (`resync: slow consumer`).
 *
 * The queue knows nothing of civetweb: frames leave through the write
 * function given at creation, which makes it testable alone
 * (tests/unit/test_ws_outbox.c).
 */
#ifndef COMB_WS_OUTBOX_H
#define COMB_WS_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
 * Writes one whole frame to the client; returns a positive number on
 * success, 0 or negative when the connection failed. May block for as
 * long as the client takes to read. Called only from the writer thread
 * and from ws_outbox_close_now().
 */
typedef int (*ws_outbox_write_fn)(void *conn, int opcode, const char *data,
				  size_t len);

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
};

struct ws_outbox;

/* Fills limits with the relay's defaults. */
void ws_outbox_default_limits(struct ws_outbox_limits *limits);

/*
 * Creates an empty queue writing through write(conn, ...) (conn borrowed;
 * it must stay valid until ws_outbox_free returns). No thread runs until
 * the first push. Returns NULL when out of memory.
 */
struct ws_outbox *ws_outbox_new(ws_outbox_write_fn write, void *conn,
				const struct ws_outbox_limits *limits);

/*
 * Stops the writer (waiting for a write in progress to finish), discards
 * what is still queued and frees the queue. Call once, when the connection
 * is gone, from its own thread; nobody may push afterwards.
 */
void ws_outbox_free(struct ws_outbox *ob);

/*
 * Queues one frame (data copied). Returns 0; COMB_ETOOBIG when it does not
 * fit (never with WS_PUSH_WAIT, unless the queue closed while waiting);
 * COMB_EIO when the queue is closed or a write failed; COMB_ENOMEM.
 */
int ws_outbox_push(struct ws_outbox *ob, int opcode, const char *data,
		   size_t len, unsigned flags);

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

#endif
