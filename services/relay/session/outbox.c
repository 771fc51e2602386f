/*
 * The bounded outbound queue of one WebSocket connection (see
 * session.h). One mutex guards the queue. A frame pushed while the queue
 * is empty and nothing writes is written by the pushing thread itself
 * when the socket takes all of it at once (write_now): a live change
 * fanned out to many connections then wakes no thread per frame and is
 * never copied; so is a stream of frames (WS_PUSH_STREAM) while nothing
 * is queued, the pushing thread then waiting for the client itself. Every
 * other frame is copied into the queue and waits for the writer thread,
 * which takes the frames at the head under the mutex (up to
 * WS_OUTBOX_MAX_BATCH of one opcode, written together), writes without
 * it, and exits after linger_ms without work so that idle connections
 * cost no thread. `writing` keeps one writer at a time, so frames leave
 * in the order they were pushed. Queued bytes count the frames being
 * written until their write returns, so the bound covers every byte the
 * queue holds.
 */
#include "session.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comb/clock.h"
#include "comb/error.h"
#include "comb/log.h"
#include "outbox_int.h"

#if defined(__SANITIZE_ADDRESS__)
#define WRITER_STACK (1024 * 1024)
#else
#define WRITER_STACK (256 * 1024)
#endif

static size_t frame_cost(size_t len)
{
	return len + WS_OUTBOX_FRAME_COST;
}

void ws_outbox_default_limits(struct ws_outbox_limits *limits)
{
	limits->max_bytes = 1024 * 1024;
	limits->reserve_bytes = 64 * 1024;
	limits->linger_ms = 10000;
	limits->stack_bytes = WRITER_STACK;
}

/* Frees every queued frame; the caller holds mu. */
static void discard_locked(struct ws_outbox *ob)
{
	struct frame *f = ob->head, *next;

	while (f) {
		next = f->next;
		ob->queued -= frame_cost(f->len);
		free(f);
		f = next;
	}
	ob->head = ob->tail = NULL;
	pthread_cond_broadcast(&ob->room);
}

/*
 * Writes count frames (payloads borrowed) from the calling thread, as the
 * queue's one writer: through the transport's write, which waits for the
 * client (wait), or its write_now. The caller holds mu, which is released
 * during the write; frames pushed meanwhile are queued behind these. A
 * failed write fails the queue. Returns the transport's answer, a write
 * that waits counting 0 as a failure (-1).
 */
static int write_here_locked(struct ws_outbox *ob, bool wait, int opcode,
			     const struct iovec *payloads, size_t count)
{
	ws_outbox_write_fn fn = wait ? ob->transport.write : ob->transport.write_now;
	int n;

	ob->writing = true;
	pthread_mutex_unlock(&ob->mu);
	n = fn(ob->transport.conn, opcode, payloads, (int)count);
	pthread_mutex_lock(&ob->mu);
	ob->writing = false;
	if (wait && n == 0)
		n = -1;
	if (n > 0 && opcode == WS_OP_CLOSE)
		ob->close_sent = true;
	if (n < 0 && !ob->failed) {
		ob->failed = true;
		discard_locked(ob);
	}
	pthread_cond_broadcast(&ob->room);
	return n;
}

/* Takes the frames at the head of the queue that one write may carry:
 * up to WS_OUTBOX_MAX_BATCH of the first one's opcode, into run (their
 * payloads) and *taken (the chain, still linked). Returns how many. The
 * caller holds mu; the queue is not empty. */
static int take_run_locked(struct ws_outbox *ob, struct iovec *run,
			   struct frame **taken)
{
	struct frame *f = ob->head, *last = NULL;
	int n = 0;

	*taken = f;
	while (f && n < WS_OUTBOX_MAX_BATCH && f->opcode == ob->head->opcode) {
		run[n++] = (struct iovec){.iov_base = f->data, .iov_len = f->len};
		last = f;
		f = f->next;
	}
	ob->head = f;
	if (!f)
		ob->tail = NULL;
	last->next = NULL;
	return n;
}

static void *writer_main(void *arg)
{
	struct ws_outbox *ob = arg;
	struct iovec run[WS_OUTBOX_MAX_BATCH];
	struct timespec deadline;
	struct frame *taken, *f;
	int opcode, n;

	pthread_mutex_lock(&ob->mu);
	for (;;) {
		while (ob->writing && !ob->stopping)
			pthread_cond_wait(&ob->room, &ob->mu);
		if (!ob->head && !ob->stopping) {
			comb_deadline_in(&deadline, CLOCK_MONOTONIC, ob->limits.linger_ms);
			while (!ob->head && !ob->stopping) {
				if (pthread_cond_timedwait(&ob->work, &ob->mu,
							   &deadline) == ETIMEDOUT)
					break;
			}
		}
		if (ob->stopping || !ob->head)
			break;
		opcode = ob->head->opcode;
		n = take_run_locked(ob, run, &taken);
		write_here_locked(ob, true, opcode, run, (size_t)n);
		/* their bytes counted until the write returned */
		for (; taken; taken = f) {
			f = taken->next;
			ob->queued -= frame_cost(taken->len);
			free(taken);
		}
	}
	ob->thread_running = false;
	pthread_cond_broadcast(&ob->room);
	pthread_mutex_unlock(&ob->mu);
	return NULL;
}

/* Makes sure a writer runs; the caller holds mu. Returns 0 or COMB_EIO. */
static int ensure_writer_locked(struct ws_outbox *ob)
{
	pthread_attr_t attr;
	int err;

	if (ob->thread_running) {
		pthread_cond_signal(&ob->work);
		return 0;
	}
	/* The previous writer has left the loop; reap it before the next. */
	if (ob->thread_started)
		pthread_join(ob->thread, NULL);
	ob->thread_started = false;
	pthread_attr_init(&attr);
	if (ob->limits.stack_bytes)
		pthread_attr_setstacksize(&attr, ob->limits.stack_bytes);
	err = pthread_create(&ob->thread, &attr, writer_main, ob);
	pthread_attr_destroy(&attr);
	if (err) {
		comb_error("websocket writer thread: %s", strerror(err));
		ob->failed = true;
		discard_locked(ob);
		return COMB_EIO;
	}
	ob->thread_started = true;
	ob->thread_running = true;
	return 0;
}

struct ws_outbox *ws_outbox_new(const struct ws_transport *transport,
				const struct ws_outbox_limits *limits)
{
	struct ws_outbox *ob = calloc(1, sizeof(*ob));
	pthread_condattr_t ca;

	if (!ob)
		return NULL;
	ob->transport = *transport;
	if (limits)
		ob->limits = *limits;
	else
		ws_outbox_default_limits(&ob->limits);
	if (ob->limits.linger_ms <= 0)
		ob->limits.linger_ms = 1;
	pthread_mutex_init(&ob->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ob->work, &ca);
	pthread_cond_init(&ob->room, &ca);
	pthread_condattr_destroy(&ca);
	return ob;
}

void ws_outbox_free(struct ws_outbox *ob)
{
	if (!ob)
		return;
	pthread_mutex_lock(&ob->mu);
	ob->stopping = true;
	discard_locked(ob);
	pthread_cond_broadcast(&ob->work);
	/* a write in progress, by the writer or a pusher, ends first */
	while (ob->writing)
		pthread_cond_wait(&ob->room, &ob->mu);
	pthread_mutex_unlock(&ob->mu);
	if (ob->thread_started)
		pthread_join(ob->thread, NULL);
	pthread_cond_destroy(&ob->work);
	pthread_cond_destroy(&ob->room);
	pthread_mutex_destroy(&ob->mu);
	free(ob);
}

static struct frame *frame_new(int opcode, const char *data, size_t len)
{
	struct frame *f = malloc(sizeof(*f) + len + 1);

	if (!f)
		return NULL;
	f->next = NULL;
	f->opcode = opcode;
	f->len = len;
	if (len)
		memcpy(f->data, data, len);
	f->data[len] = '\0';
	return f;
}

enum write_now_outcome {
	NOT_TRIED,   /* something is queued or being written */
	WRITTEN,     /* or the connection failed: the queue failed too */
	NOT_WRITTEN, /* the socket could not take it all now */
};

/*
 * Writes count frames (payloads borrowed) from the pushing thread when
 * nothing is queued or being written and the socket takes all of them
 * now (write_here_locked). The caller holds mu; when NOT_WRITTEN, these
 * go before the frames pushed meanwhile.
 */
static enum write_now_outcome write_now_locked(struct ws_outbox *ob, int opcode,
					       const struct iovec *payloads,
					       size_t count)
{
	if (!ob->transport.write_now || ob->head || ob->writing)
		return NOT_TRIED;
	return write_here_locked(ob, false, opcode, payloads, count) != 0 ?
		       WRITTEN : NOT_WRITTEN;
}

/* Puts the chain first..last (count frames, bytes cost) at the head of
 * the queue (pushed before everything queued) or at its tail. */
static void enqueue_locked(struct ws_outbox *ob, struct frame *first,
			   struct frame *last, size_t cost, bool at_head)
{
	if (at_head) {
		last->next = ob->head;
		ob->head = first;
		if (!ob->tail)
			ob->tail = last;
	} else {
		if (ob->tail)
			ob->tail->next = first;
		else
			ob->head = first;
		ob->tail = last;
	}
	ob->queued += cost;
}

/*
 * Sends count frames (payloads borrowed): with WS_PUSH_STREAM in flags
 * and nothing queued or being written, written by this thread however
 * long the client takes; else written at once when they can be
 * (write_now), else copied into the queue in their place for the writer
 * thread; only frames that wait are copied. Returns 0, or COMB_EIO when
 * the queue failed or stopped meanwhile, or COMB_ENOMEM. The caller holds
 * mu.
 */
static int send_locked(struct ws_outbox *ob, int opcode,
		       const struct iovec *payloads, size_t count, unsigned flags)
{
	enum write_now_outcome outcome;
	struct frame *first = NULL, *last = NULL, *f;
	size_t i, cost = 0;

	if ((flags & WS_PUSH_STREAM) && !ob->head && !ob->writing) {
		write_here_locked(ob, true, opcode, payloads, count);
		return ob->failed ? COMB_EIO : 0;
	}
	outcome = write_now_locked(ob, opcode, payloads, count);
	if (outcome == WRITTEN)
		return ob->failed ? COMB_EIO : 0;
	if (ob->failed || ob->stopping)
		return COMB_EIO;
	for (i = 0; i < count; i++) {
		f = frame_new(opcode, payloads[i].iov_base, payloads[i].iov_len);
		if (!f) {
			for (; first; first = f) {
				f = first->next;
				free(first);
			}
			return COMB_ENOMEM;
		}
		if (last)
			last->next = f;
		else
			first = f;
		last = f;
		cost += frame_cost(f->len);
	}
	enqueue_locked(ob, first, last, cost, outcome == NOT_WRITTEN);
	return ensure_writer_locked(ob);
}

int ws_outbox_push_many(struct ws_outbox *ob, int opcode,
			const struct iovec *payloads, size_t count,
			unsigned flags)
{
	size_t limit = ob->limits.max_bytes, cost = 0, i;
	int rc = 0;

	if (count == 0 || count > WS_OUTBOX_MAX_BATCH)
		return COMB_EINVAL;
	for (i = 0; i < count; i++)
		cost += frame_cost(payloads[i].iov_len);
	if (flags & WS_PUSH_RESERVED)
		limit += ob->limits.reserve_bytes;
	pthread_mutex_lock(&ob->mu);
	for (;;) {
		if (ob->closing || ob->failed || ob->stopping) {
			rc = COMB_EIO;
			goto out;
		}
		if (ob->queued == 0 || ob->queued + cost <= limit)
			break;
		if (!(flags & WS_PUSH_WAIT)) {
			rc = COMB_ETOOBIG;
			goto out;
		}
		pthread_cond_wait(&ob->room, &ob->mu);
	}
	rc = send_locked(ob, opcode, payloads, count, flags);
out:
	pthread_mutex_unlock(&ob->mu);
	return rc;
}

int ws_outbox_push(struct ws_outbox *ob, int opcode, const char *data,
		   size_t len, unsigned flags)
{
	struct iovec payload = {.iov_base = (void *)data, .iov_len = len};

	return ws_outbox_push_many(ob, opcode, &payload, 1, flags);
}

int ws_outbox_push_text(struct ws_outbox *ob, const char *s, unsigned flags)
{
	return ws_outbox_push(ob, WS_OP_TEXT, s, strlen(s), flags);
}

int ws_outbox_close(struct ws_outbox *ob, uint16_t code, const char *reason)
{
	char payload[125];
	size_t rlen = reason ? strlen(reason) : 0;
	int rc = 0;

	if (rlen > sizeof(payload) - 2)
		rlen = sizeof(payload) - 2;
	payload[0] = (char)(code >> 8);
	payload[1] = (char)(code & 0xff);
	if (rlen)
		memcpy(payload + 2, reason, rlen);
	pthread_mutex_lock(&ob->mu);
	if (!(ob->closing || ob->failed || ob->stopping)) {
		ob->closing = true;
		pthread_cond_broadcast(&ob->room);
		rc = send_locked(ob, WS_OP_CLOSE,
				 &(struct iovec){.iov_base = payload, .iov_len = rlen + 2}, 1, 0);
	}
	pthread_mutex_unlock(&ob->mu);
	return rc == COMB_ENOMEM ? rc : 0;
}

void ws_outbox_close_now(struct ws_outbox *ob, const char *payload, size_t len)
{
	bool sent;

	if (len > 125)
		len = 125;
	pthread_mutex_lock(&ob->mu);
	ob->closing = true;
	discard_locked(ob);
	while (ob->writing)
		pthread_cond_wait(&ob->room, &ob->mu);
	sent = ob->close_sent || ob->failed;
	ob->close_sent = true;
	pthread_mutex_unlock(&ob->mu);
	if (!sent)
		ob->transport.write(ob->transport.conn, WS_OP_CLOSE,
				    &(struct iovec){.iov_base = (void *)payload, .iov_len = len},
				    1);
}

bool ws_outbox_drain(struct ws_outbox *ob, int timeout_ms)
{
	struct timespec deadline;
	bool empty;

	comb_deadline_in(&deadline, CLOCK_MONOTONIC, timeout_ms);
	pthread_mutex_lock(&ob->mu);
	while ((ob->head || ob->writing) && !ob->failed) {
		if (pthread_cond_timedwait(&ob->room, &ob->mu, &deadline) == ETIMEDOUT)
			break;
	}
	empty = !ob->head && !ob->writing;
	pthread_mutex_unlock(&ob->mu);
	return empty;
}

bool ws_outbox_closed(struct ws_outbox *ob)
{
	bool closed;

	pthread_mutex_lock(&ob->mu);
	closed = ob->closing || ob->failed || ob->stopping;
	pthread_mutex_unlock(&ob->mu);
	return closed;
}

size_t ws_outbox_queued(struct ws_outbox *ob)
{
	size_t n;

	pthread_mutex_lock(&ob->mu);
	n = ob->queued;
	pthread_mutex_unlock(&ob->mu);
	return n;
}
