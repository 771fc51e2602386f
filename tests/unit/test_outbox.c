/*
 * Unit tests for the WebSocket outbound queue
 * (services/relay/session/outbox.c) with a fake connection that records
 * frames and can be held like a client that stopped reading: order and
 * opcodes, the byte bound and its reserve, waiting pushes, the oversized
 * first frame, close frames queued and answered, write failures, the
 * writer thread leaving when idle and coming back, freeing while a
 * write is blocked, and frames written at once by the pushing thread
 * (write_now) while nothing waits, in order with the ones that wait,
 * frames pushed together (one write_now, one bound), streams written by
 * their own thread while nothing is queued, in order with the rest, and
 * waiting frames of one opcode written together by the writer.
 *
 * The queue is compiled into this test directly: it depends on nothing
 * but libcomb and pthreads.
 */
#include "test_util.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "comb/error.h"
#include "session/outbox_int.h"

#define MAX_FRAMES 64

/* A fake client: records frames; `held` blocks writes until released. */
struct fake {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool held;
	bool fail;
	bool room;            /* write_now takes frames */
	bool now_held;        /* write_now blocks until released */
	int now_waiting;      /* write_now calls blocked right now */
	int now_calls;        /* write_now calls in all */
	int writing;          /* writes blocked right now */
	int write_calls;      /* write and write_now calls that wrote */
	int count;
	int opcodes[MAX_FRAMES];
	char *data[MAX_FRAMES];
	size_t len[MAX_FRAMES];
	pthread_t threads[MAX_FRAMES]; /* the thread of each write */
};

/* Records count frames (or fails them all when `fail`), after waiting
 * while `held`. */
static int fake_write_frames(struct fake *f, int opcode,
			     const struct iovec *payloads, int count)
{
	int rc = 1, i;

	pthread_mutex_lock(&f->mu);
	f->writing++;
	f->write_calls++;
	pthread_cond_broadcast(&f->cond);
	while (f->held)
		pthread_cond_wait(&f->cond, &f->mu);
	f->writing--;
	for (i = 0; i < count; i++) {
		size_t len = payloads[i].iov_len;

		if (f->fail) {
			rc = -1;
			break;
		}
		if (f->count == MAX_FRAMES)
			continue;
		f->opcodes[f->count] = opcode;
		f->data[f->count] = malloc(len + 1);
		memcpy(f->data[f->count], payloads[i].iov_base, len);
		f->data[f->count][len] = '\0';
		f->len[f->count] = len;
		f->threads[f->count] = pthread_self();
		f->count++;
	}
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/* write of the fake (it waits as long as `held`). */
static int fake_write(void *conn, int opcode, const struct iovec *payloads,
		      int count)
{
	return fake_write_frames(conn, opcode, payloads, count);
}

/* write_now of the fake: records the frames when `room`, else writes
 * nothing; `fail` fails it; `now_held` blocks it first. Counts its calls
 * in now_calls. */
static int fake_write_now(void *conn, int opcode, const struct iovec *payloads,
			  int count)
{
	struct fake *f = conn;
	bool room;

	pthread_mutex_lock(&f->mu);
	f->now_waiting++;
	f->now_calls++;
	pthread_cond_broadcast(&f->cond);
	while (f->now_held)
		pthread_cond_wait(&f->cond, &f->mu);
	f->now_waiting--;
	room = f->room;
	if (f->fail) {
		pthread_mutex_unlock(&f->mu);
		return -1;
	}
	pthread_mutex_unlock(&f->mu);
	if (room)
		fake_write_frames(f, opcode, payloads, count);
	return room ? 1 : 0;
}

static void fake_init(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cond, NULL);
}

static void fake_release(struct fake *f)
{
	int i;

	for (i = 0; i < f->count; i++)
		free(f->data[i]);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->mu);
}

static void fake_hold(struct fake *f, bool held)
{
	pthread_mutex_lock(&f->mu);
	f->held = held;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->mu);
}

/* Waits until a write is blocked in the fake (the writer took a frame). */
static void fake_wait_writing(struct fake *f)
{
	pthread_mutex_lock(&f->mu);
	while (!f->writing)
		pthread_cond_wait(&f->cond, &f->mu);
	pthread_mutex_unlock(&f->mu);
}

static int fake_count(struct fake *f)
{
	int n;

	pthread_mutex_lock(&f->mu);
	n = f->count;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* An outbox on f, with write_now when with_now. */
static struct ws_outbox *outbox_on(struct fake *f, bool with_now, size_t max,
				   size_t reserve, int linger_ms)
{
	struct ws_transport t = {
		.write = fake_write,
		.write_now = with_now ? fake_write_now : NULL,
		.conn = f,
	};
	struct ws_outbox_limits l;
	struct ws_outbox *ob;

	ws_outbox_default_limits(&l);
	l.max_bytes = max;
	l.reserve_bytes = reserve;
	l.linger_ms = linger_ms;
	ob = ws_outbox_new(&t, &l);
	assert_non_null(ob);
	return ob;
}

/* An outbox on f whose every frame goes through the writer thread. */
static struct ws_outbox *outbox(struct fake *f, size_t max, size_t reserve,
				int linger_ms)
{
	return outbox_on(f, false, max, reserve, linger_ms);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void test_order_and_opcodes(void **state)
{
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	fake_init(&f);
	ob = outbox(&f, 4096, 0, 1000);
	assert_int_equal(ws_outbox_push_text(ob, "one", 0), 0);
	assert_int_equal(ws_outbox_push(ob, WS_OP_PONG, "p", 1, 0), 0);
	assert_int_equal(ws_outbox_push_text(ob, "three", WS_PUSH_WAIT), 0);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(f.count, 3);
	assert_string_equal(f.data[0], "one");
	assert_int_equal(f.opcodes[0], WS_OP_TEXT);
	assert_string_equal(f.data[1], "p");
	assert_int_equal(f.opcodes[1], WS_OP_PONG);
	assert_string_equal(f.data[2], "three");
	assert_int_equal(ws_outbox_queued(ob), 0);
	/* The writer is a thread of its own, never the pusher. */
	assert_false(pthread_equal(f.threads[0], pthread_self()));
	ws_outbox_free(ob);
	fake_release(&f);
}

static void test_bound_and_reserve(void **state)
{
	size_t frame = 100, cost = frame + WS_OUTBOX_FRAME_COST;
	char payload[100];
	struct fake f;
	struct ws_outbox *ob;
	int i;

	(void)state;
	memset(payload, 'x', sizeof(payload));
	fake_init(&f);
	/* Room for four frames, and one more in the reserve. */
	ob = outbox(&f, 4 * cost, cost, 1000);
	fake_hold(&f, true);
	assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, payload, frame, 0), 0);
	fake_wait_writing(&f);  /* the first frame is being written: still counted */
	for (i = 1; i < 4; i++)
		assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, payload, frame, 0), 0);
	assert_int_equal(ws_outbox_queued(ob), 4 * cost);
	assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, payload, frame, 0), COMB_ETOOBIG);
	assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, payload, frame, WS_PUSH_RESERVED), 0);
	assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, payload, frame, WS_PUSH_RESERVED),
			 COMB_ETOOBIG);
	fake_hold(&f, false);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(f.count, 5);
	assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, payload, frame, 0), 0);
	ws_outbox_free(ob);
	fake_release(&f);
}

struct waiter {
	struct ws_outbox *ob;
	int rc;
	bool done;
};

static void *push_waiting(void *arg)
{
	struct waiter *w = arg;

	w->rc = ws_outbox_push_text(w->ob, "waited", WS_PUSH_WAIT);
	__atomic_store_n(&w->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

static void test_waiting_push(void **state)
{
	char payload[200];
	struct waiter w = {0};
	struct fake f;
	pthread_t t;

	(void)state;
	memset(payload, 'y', sizeof(payload));
	fake_init(&f);
	w.ob = outbox(&f, 300, 0, 1000);
	fake_hold(&f, true);
	assert_int_equal(ws_outbox_push(w.ob, WS_OP_TEXT, payload, sizeof(payload), 0), 0);
	fake_wait_writing(&f);
	pthread_create(&t, NULL, push_waiting, &w);
	sleep_ms(100);
	assert_false(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST));
	fake_hold(&f, false);
	pthread_join(t, NULL);
	assert_int_equal(w.rc, 0);
	assert_true(ws_outbox_drain(w.ob, 2000));
	assert_int_equal(f.count, 2);
	assert_string_equal(f.data[1], "waited");
	ws_outbox_free(w.ob);
	fake_release(&f);
}

static void test_oversized_frame_fits_an_empty_queue(void **state)
{
	char *big = malloc(10000);
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	memset(big, 'z', 10000);
	fake_init(&f);
	ob = outbox(&f, 1000, 0, 1000);
	fake_hold(&f, true);
	assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, big, 10000, 0), 0);
	fake_wait_writing(&f);
	assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, "a", 1, 0), COMB_ETOOBIG);
	fake_hold(&f, false);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(f.len[0], 10000);
	ws_outbox_free(ob);
	fake_release(&f);
	free(big);
}

static void test_close_after_queued_frames(void **state)
{
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	fake_init(&f);
	ob = outbox(&f, 4096, 0, 1000);
	fake_hold(&f, true);
	assert_int_equal(ws_outbox_push_text(ob, "last words", 0), 0);
	assert_int_equal(ws_outbox_close(ob, WS_CLOSE_TOO_BIG, "too big"), 0);
	assert_true(ws_outbox_closed(ob));
	assert_int_equal(ws_outbox_push_text(ob, "after", 0), COMB_EIO);
	assert_int_equal(ws_outbox_close(ob, WS_CLOSE_NORMAL, "again"), 0);
	fake_hold(&f, false);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(f.count, 2);
	assert_string_equal(f.data[0], "last words");
	assert_int_equal(f.opcodes[1], WS_OP_CLOSE);
	assert_bytes_equal(f.data[1], f.len[1], "\x03\xf1too big", 9);
	/* The client's answer is not echoed again. */
	ws_outbox_close_now(ob, "\x03\xf1", 2);
	assert_int_equal(f.count, 2);
	ws_outbox_free(ob);
	fake_release(&f);
}

struct closer {
	struct ws_outbox *ob;
	bool done;
};

static void *close_now(void *arg)
{
	struct closer *c = arg;

	ws_outbox_close_now(c->ob, "\x0f\xa1", 2);
	__atomic_store_n(&c->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

static void test_close_now_echoes_after_the_write_in_progress(void **state)
{
	struct closer c = {0};
	struct fake f;
	pthread_t t;

	(void)state;
	fake_init(&f);
	c.ob = outbox(&f, 4096, 0, 1000);
	fake_hold(&f, true);
	assert_int_equal(ws_outbox_push_text(c.ob, "in flight", 0), 0);
	fake_wait_writing(&f);
	assert_int_equal(ws_outbox_push_text(c.ob, "dropped", 0), 0);
	pthread_create(&t, NULL, close_now, &c);
	sleep_ms(100);
	assert_false(__atomic_load_n(&c.done, __ATOMIC_SEQ_CST));
	fake_hold(&f, false);
	pthread_join(t, NULL);
	assert_int_equal(f.count, 2);
	assert_string_equal(f.data[0], "in flight");
	assert_int_equal(f.opcodes[1], WS_OP_CLOSE);
	assert_bytes_equal(f.data[1], f.len[1], "\x0f\xa1", 2);
	/* Written by the thread that answered the close. */
	assert_true(pthread_equal(f.threads[1], t));
	assert_int_equal(ws_outbox_push_text(c.ob, "after", 0), COMB_EIO);
	ws_outbox_free(c.ob);
	fake_release(&f);
}

static void test_write_failure_closes_the_queue(void **state)
{
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	fake_init(&f);
	f.fail = true;
	ob = outbox(&f, 4096, 0, 1000);
	assert_int_equal(ws_outbox_push_text(ob, "lost", 0), 0);
	ws_outbox_drain(ob, 2000);
	assert_true(ws_outbox_closed(ob));
	assert_int_equal(ws_outbox_push_text(ob, "more", WS_PUSH_WAIT), COMB_EIO);
	assert_int_equal(ws_outbox_queued(ob), 0);
	ws_outbox_free(ob);
	fake_release(&f);
}

static void test_writer_leaves_when_idle_and_comes_back(void **state)
{
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	fake_init(&f);
	ob = outbox(&f, 4096, 0, 20);
	assert_int_equal(ws_outbox_push_text(ob, "a", 0), 0);
	assert_true(ws_outbox_drain(ob, 2000));
	sleep_ms(200);
	pthread_mutex_lock(&ob->mu);
	assert_false(ob->thread_running);
	pthread_mutex_unlock(&ob->mu);
	assert_int_equal(ws_outbox_push_text(ob, "b", 0), 0);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(fake_count(&f), 2);
	assert_string_equal(f.data[1], "b");
	ws_outbox_free(ob);
	fake_release(&f);
}

struct releaser {
	struct fake *f;
};

static void *release_later(void *arg)
{
	struct releaser *r = arg;

	sleep_ms(150);
	fake_hold(r->f, false);
	return NULL;
}

static void test_free_waits_for_a_blocked_write(void **state)
{
	struct releaser r;
	struct fake f;
	struct ws_outbox *ob;
	pthread_t t;

	(void)state;
	fake_init(&f);
	r.f = &f;
	ob = outbox(&f, 4096, 0, 1000);
	fake_hold(&f, true);
	assert_int_equal(ws_outbox_push_text(ob, "blocked", 0), 0);
	fake_wait_writing(&f);
	assert_int_equal(ws_outbox_push_text(ob, "never", 0), 0);
	pthread_create(&t, NULL, release_later, &r);
	ws_outbox_free(ob);
	/* The blocked write finished before free returned; nothing after it. */
	assert_int_equal(fake_count(&f), 1);
	assert_string_equal(f.data[0], "blocked");
	pthread_join(t, NULL);
	fake_release(&f);
}

static void test_write_now_from_the_pushing_thread(void **state)
{
	struct fake f;
	struct ws_outbox *ob;
	int i;

	(void)state;
	fake_init(&f);
	f.room = true;
	ob = outbox_on(&f, true, 4096, 0, 1000);
	assert_int_equal(ws_outbox_push_text(ob, "one", 0), 0);
	assert_int_equal(ws_outbox_push_text(ob, "two", 0), 0);
	assert_int_equal(ws_outbox_close(ob, WS_CLOSE_NORMAL, "bye"), 0);
	/* All written before the pushes returned, by this thread: no writer
	 * thread was ever started. */
	assert_int_equal(fake_count(&f), 3);
	for (i = 0; i < 3; i++)
		assert_true(pthread_equal(f.threads[i], pthread_self()));
	assert_string_equal(f.data[0], "one");
	assert_string_equal(f.data[1], "two");
	assert_int_equal(f.opcodes[2], WS_OP_CLOSE);
	pthread_mutex_lock(&ob->mu);
	assert_false(ob->thread_started);
	assert_true(ob->close_sent);
	assert_int_equal(ob->queued, 0);
	pthread_mutex_unlock(&ob->mu);
	ws_outbox_free(ob);
	fake_release(&f);
}

struct pusher {
	struct ws_outbox *ob;
	const char *text;
	int rc;
};

static void *push_in_thread(void *arg)
{
	struct pusher *p = arg;

	p->rc = ws_outbox_push_text(p->ob, p->text, 0);
	return NULL;
}

static void test_a_frame_the_socket_cannot_take_keeps_its_place(void **state)
{
	struct pusher first, second;
	struct fake f;
	struct ws_outbox *ob;
	pthread_t t;

	(void)state;
	fake_init(&f);
	f.room = false;
	f.now_held = true;
	ob = outbox_on(&f, true, 4096, 0, 1000);
	/* "first" is in write_now when "second" is pushed... */
	first = (struct pusher){ob, "first", -1};
	pthread_create(&t, NULL, push_in_thread, &first);
	pthread_mutex_lock(&f.mu);
	while (!f.now_waiting)
		pthread_cond_wait(&f.cond, &f.mu);
	pthread_mutex_unlock(&f.mu);
	second = (struct pusher){ob, "second", -1};
	push_in_thread(&second);
	assert_int_equal(second.rc, 0);
	/* ...which waits: nothing is written while write_now runs. */
	sleep_ms(50);
	assert_int_equal(fake_count(&f), 0);
	/* The socket does not take "first": it is queued before "second". */
	pthread_mutex_lock(&f.mu);
	f.now_held = false;
	pthread_cond_broadcast(&f.cond);
	pthread_mutex_unlock(&f.mu);
	pthread_join(t, NULL);
	assert_int_equal(first.rc, 0);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(fake_count(&f), 2);
	assert_string_equal(f.data[0], "first");
	assert_string_equal(f.data[1], "second");
	assert_false(pthread_equal(f.threads[0], pthread_self()));
	/* Once the queue is empty again, a frame that fits goes at once. */
	f.room = true;
	assert_int_equal(ws_outbox_push_text(ob, "third", 0), 0);
	assert_int_equal(fake_count(&f), 3);
	assert_true(pthread_equal(f.threads[2], pthread_self()));
	ws_outbox_free(ob);
	fake_release(&f);
}

static void test_write_now_failure_closes_the_queue(void **state)
{
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	fake_init(&f);
	f.fail = true;
	ob = outbox_on(&f, true, 4096, 0, 1000);
	assert_int_equal(ws_outbox_push_text(ob, "lost", 0), COMB_EIO);
	assert_true(ws_outbox_closed(ob));
	assert_int_equal(ws_outbox_push_text(ob, "after", 0), COMB_EIO);
	assert_int_equal(fake_count(&f), 0);
	ws_outbox_free(ob);
	fake_release(&f);
}

static void test_frames_pushed_together(void **state)
{
	struct iovec three[3] = {
		{.iov_base = "a", .iov_len = 1},
		{.iov_base = "bb", .iov_len = 2},
		{.iov_base = "ccc", .iov_len = 3},
	};
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	fake_init(&f);
	f.room = true;
	ob = outbox_on(&f, true, 4096, 0, 1000);
	/* written by this thread with one write_now */
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, three, 3, 0), 0);
	assert_int_equal(fake_count(&f), 3);
	assert_int_equal(f.now_calls, 1);
	assert_string_equal(f.data[0], "a");
	assert_string_equal(f.data[2], "ccc");
	assert_true(pthread_equal(f.threads[2], pthread_self()));
	/* when the socket has no room, all of them wait, in order, after
	 * nothing and before what follows */
	f.room = false;
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, three, 3, 0), 0);
	assert_int_equal(ws_outbox_push_text(ob, "after", 0), 0);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(fake_count(&f), 7);
	assert_string_equal(f.data[3], "a");
	assert_string_equal(f.data[4], "bb");
	assert_string_equal(f.data[5], "ccc");
	assert_string_equal(f.data[6], "after");
	/* no count of 0, none beyond the batch size */
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, three, 0, 0), COMB_EINVAL);
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, three,
					     WS_OUTBOX_MAX_BATCH + 1, 0), COMB_EINVAL);
	ws_outbox_free(ob);
	fake_release(&f);
}

static void test_frames_pushed_together_are_bounded_together(void **state)
{
	char payload[100];
	struct iovec two[2] = {
		{.iov_base = payload, .iov_len = sizeof(payload)},
		{.iov_base = payload, .iov_len = sizeof(payload)},
	};
	size_t cost = sizeof(payload) + WS_OUTBOX_FRAME_COST;
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	memset(payload, 'x', sizeof(payload));
	fake_init(&f);
	fake_hold(&f, true);
	/* room for three frames: one queued, then two together fit... */
	ob = outbox_on(&f, false, 3 * cost, 0, 1000);
	assert_int_equal(ws_outbox_push(ob, WS_OP_TEXT, payload, sizeof(payload), 0), 0);
	fake_wait_writing(&f);
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, two, 2, 0), 0);
	/* ...but not two more: neither of them is taken */
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, two, 2, 0), COMB_ETOOBIG);
	assert_int_equal(ws_outbox_queued(ob), 3 * cost);
	fake_hold(&f, false);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(fake_count(&f), 3);
	ws_outbox_free(ob);
	fake_release(&f);
}

static const struct iovec stream3[3] = {
	{.iov_base = "a", .iov_len = 1},
	{.iov_base = "bb", .iov_len = 2},
	{.iov_base = "ccc", .iov_len = 3},
};

static void test_a_stream_is_written_by_its_thread(void **state)
{
	struct fake f;
	struct ws_outbox *ob;
	int i;

	(void)state;
	fake_init(&f);
	f.room = false;  /* the socket is full: write_now takes nothing */
	ob = outbox_on(&f, true, 4096, 0, 1000);
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, stream3, 3,
					     WS_PUSH_WAIT | WS_PUSH_STREAM), 0);
	/* written by this thread in one write, nothing copied or queued, no
	 * writer thread */
	assert_int_equal(fake_count(&f), 3);
	assert_int_equal(f.write_calls, 1);
	for (i = 0; i < 3; i++)
		assert_true(pthread_equal(f.threads[i], pthread_self()));
	assert_string_equal(f.data[2], "ccc");
	pthread_mutex_lock(&ob->mu);
	assert_false(ob->thread_started);
	assert_int_equal(ob->queued, 0);
	pthread_mutex_unlock(&ob->mu);
	ws_outbox_free(ob);
	fake_release(&f);
}

/* An outbox on a fresh f (no write_now) whose writer thread is blocked
 * writing "first". */
static struct ws_outbox *writer_held_on_first(struct fake *f)
{
	struct ws_outbox *ob;

	fake_init(f);
	fake_hold(f, true);
	ob = outbox(f, 4096, 0, 1000);
	assert_int_equal(ws_outbox_push_text(ob, "first", 0), 0);
	fake_wait_writing(f);
	return ob;
}

static void test_a_stream_waits_behind_queued_frames(void **state)
{
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	/* the writer thread is writing "first" when the stream comes: the
	 * stream queues behind it, as any push would */
	ob = writer_held_on_first(&f);
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, stream3, 3,
					     WS_PUSH_WAIT | WS_PUSH_STREAM), 0);
	fake_hold(&f, false);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(fake_count(&f), 4);
	assert_string_equal(f.data[0], "first");
	assert_string_equal(f.data[1], "a");
	assert_string_equal(f.data[3], "ccc");
	assert_false(pthread_equal(f.threads[1], pthread_self()));
	ws_outbox_free(ob);
	fake_release(&f);
}

struct streamer {
	struct ws_outbox *ob;
	int rc;
};

static void *stream_in_thread(void *arg)
{
	struct streamer *st = arg;

	st->rc = ws_outbox_push_many(st->ob, WS_OP_TEXT, stream3, 3,
				     WS_PUSH_WAIT | WS_PUSH_STREAM);
	return NULL;
}

static void test_frames_pushed_during_a_stream_follow_it(void **state)
{
	struct streamer st;
	struct fake f;
	struct ws_outbox *ob;
	pthread_t t;

	(void)state;
	fake_init(&f);
	fake_hold(&f, true);  /* the client reads nothing for now */
	ob = outbox_on(&f, true, 4096, 0, 1000);
	st = (struct streamer){ob, -1};
	pthread_create(&t, NULL, stream_in_thread, &st);
	fake_wait_writing(&f);
	/* the stream's thread waits for the client; a frame pushed now by
	 * another thread is queued, and leaves after the stream */
	assert_int_equal(ws_outbox_push_text(ob, "after", 0), 0);
	assert_int_equal(fake_count(&f), 0);
	fake_hold(&f, false);
	pthread_join(t, NULL);
	assert_int_equal(st.rc, 0);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(fake_count(&f), 4);
	assert_string_equal(f.data[0], "a");
	assert_string_equal(f.data[2], "ccc");
	assert_string_equal(f.data[3], "after");
	assert_true(pthread_equal(f.threads[0], t));
	assert_false(pthread_equal(f.threads[3], t));
	ws_outbox_free(ob);
	fake_release(&f);
}

static void test_a_failed_stream_closes_the_queue(void **state)
{
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	fake_init(&f);
	f.fail = true;
	ob = outbox(&f, 4096, 0, 1000);
	assert_int_equal(ws_outbox_push_many(ob, WS_OP_TEXT, stream3, 3,
					     WS_PUSH_WAIT | WS_PUSH_STREAM), COMB_EIO);
	assert_true(ws_outbox_closed(ob));
	assert_int_equal(ws_outbox_push_text(ob, "after", 0), COMB_EIO);
	ws_outbox_free(ob);
	fake_release(&f);
}

static void test_the_writer_writes_waiting_frames_together(void **state)
{
	struct fake f;
	struct ws_outbox *ob;

	(void)state;
	/* while the writer is held on "first", three frames of one opcode
	 * and a ping wait: the three leave in one write, the ping in its own */
	ob = writer_held_on_first(&f);
	assert_int_equal(ws_outbox_push_text(ob, "a", 0), 0);
	assert_int_equal(ws_outbox_push_text(ob, "b", 0), 0);
	assert_int_equal(ws_outbox_push_text(ob, "c", 0), 0);
	assert_int_equal(ws_outbox_push(ob, WS_OP_PING, "p", 1, 0), 0);
	fake_hold(&f, false);
	assert_true(ws_outbox_drain(ob, 2000));
	assert_int_equal(fake_count(&f), 5);
	assert_int_equal(f.write_calls, 3);
	assert_string_equal(f.data[1], "a");
	assert_string_equal(f.data[3], "c");
	assert_int_equal(f.opcodes[4], WS_OP_PING);
	assert_int_equal(ws_outbox_queued(ob), 0);
	ws_outbox_free(ob);
	fake_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_opcodes),
		cmocka_unit_test(test_bound_and_reserve),
		cmocka_unit_test(test_waiting_push),
		cmocka_unit_test(test_oversized_frame_fits_an_empty_queue),
		cmocka_unit_test(test_close_after_queued_frames),
		cmocka_unit_test(test_close_now_echoes_after_the_write_in_progress),
		cmocka_unit_test(test_write_failure_closes_the_queue),
		cmocka_unit_test(test_writer_leaves_when_idle_and_comes_back),
		cmocka_unit_test(test_free_waits_for_a_blocked_write),
		cmocka_unit_test(test_write_now_from_the_pushing_thread),
		cmocka_unit_test(test_a_frame_the_socket_cannot_take_keeps_its_place),
		cmocka_unit_test(test_write_now_failure_closes_the_queue),
		cmocka_unit_test(test_frames_pushed_together),
		cmocka_unit_test(test_frames_pushed_together_are_bounded_together),
		cmocka_unit_test(test_a_stream_is_written_by_its_thread),
		cmocka_unit_test(test_a_stream_waits_behind_queued_frames),
		cmocka_unit_test(test_frames_pushed_during_a_stream_follow_it),
		cmocka_unit_test(test_a_failed_stream_closes_the_queue),
		cmocka_unit_test(test_the_writer_writes_waiting_frames_together),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
