/*
 * WebSocket clients for comb-bench: any number of connections on one epoll
 * loop in one thread, so that a scenario with a thousand subscribers costs
 * the machine one core at most and timestamps are taken the moment a
 * frame is read. The loop does the RFC 6455 handshake, masks what it
 * sends, answers pings, reassembles fragmented messages and performs
 * NIP-42 authentication with the connection's key; every other text
 * message goes to the scenario's callback.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bench.h"
#include "comb/error.h"

#define READ_CHUNK 262144
#define MAX_MESSAGE (64u << 20)

static uint64_t mask_rng = 0x6d61736bULL;

static void note_error(struct bench_loop *loop, const char *fmt, const char *detail)
{
	if (!loop->first_error[0])
		snprintf(loop->first_error, sizeof(loop->first_error), fmt, detail);
}

int bench_loop_init(struct bench_loop *loop, bench_ws_message_fn fn, void *ctx)
{
	memset(loop, 0, sizeof(*loop));
	loop->on_message = fn;
	loop->ctx = ctx;
	loop->ep = epoll_create1(EPOLL_CLOEXEC);
	loop->chunk = malloc(READ_CHUNK);
	if (!loop->chunk)
		return COMB_ENOMEM;
	return loop->ep < 0 ? COMB_EIO : 0;
}

static void ws_close(struct bench_loop *loop, struct bench_ws *ws, const char *why)
{
	if (ws->state == BENCH_WS_CLOSED)
		return;
	if (why && !ws->close_reason[0])
		snprintf(ws->close_reason, sizeof(ws->close_reason), "%s", why);
	if (why)
		note_error(loop, "a connection closed: %s", why);
	epoll_ctl(loop->ep, EPOLL_CTL_DEL, ws->fd, NULL);
	close(ws->fd);
	ws->fd = -1;
	ws->state = BENCH_WS_CLOSED;
	loop->closed++;
}

void bench_loop_close_all(struct bench_loop *loop)
{
	int i;

	for (i = 0; i < loop->n; i++)
		ws_close(loop, loop->conns[i], NULL);
}

void bench_loop_release(struct bench_loop *loop)
{
	int i;

	bench_loop_close_all(loop);
	for (i = 0; i < loop->n; i++) {
		free(loop->conns[i]->in);
		free(loop->conns[i]->frag);
		free(loop->conns[i]->out);
		free(loop->conns[i]);
	}
	free(loop->conns);
	free(loop->chunk);
	if (loop->ep >= 0)
		close(loop->ep);
	memset(loop, 0, sizeof(*loop));
	loop->ep = -1;
}

static int grow(char **p, size_t *cap, size_t need)
{
	size_t ncap = *cap ? *cap : 4096;
	char *q;

	if (need <= *cap)
		return 0;
	if (need > MAX_MESSAGE + 65536)
		return COMB_ETOOBIG;
	while (ncap < need)
		ncap *= 2;
	q = realloc(*p, ncap);
	if (!q)
		return COMB_ENOMEM;
	*p = q;
	*cap = ncap;
	return 0;
}

static void watch(struct bench_loop *loop, struct bench_ws *ws, bool out)
{
	struct epoll_event ev = {
		.events = EPOLLIN | (out ? EPOLLOUT : 0),
		.data.ptr = ws,
	};

	if (ws->want_out != out) {
		ws->want_out = out;
		epoll_ctl(loop->ep, EPOLL_CTL_MOD, ws->fd, &ev);
	}
}

static void flush(struct bench_loop *loop, struct bench_ws *ws)
{
	while (ws->state != BENCH_WS_CLOSED && ws->out_off < ws->out_len) {
		ssize_t n = write(ws->fd, ws->out + ws->out_off, ws->out_len - ws->out_off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			watch(loop, ws, true);
			return;
		}
		if (n <= 0) {
			ws_close(loop, ws, "write failed");
			return;
		}
		ws->out_off += (size_t)n;
	}
	ws->out_off = ws->out_len = 0;
	if (ws->state != BENCH_WS_CLOSED)
		watch(loop, ws, false);
}

static int queue_frame(struct bench_loop *loop, struct bench_ws *ws, int opcode,
		       const char *data, size_t len)
{
	unsigned char head[14];
	size_t hl = 0, i;
	uint64_t m = bench_rand64(&mask_rng);
	unsigned char mask[4] = {(unsigned char)m, (unsigned char)(m >> 8),
				 (unsigned char)(m >> 16), (unsigned char)(m >> 24)};
	char *dst;
	int rc;

	if (ws->state == BENCH_WS_CLOSED)
		return COMB_EIO;
	head[hl++] = (unsigned char)(0x80 | opcode);
	if (len < 126) {
		head[hl++] = (unsigned char)(0x80 | len);
	} else if (len < 65536) {
		head[hl++] = 0x80 | 126;
		head[hl++] = (unsigned char)(len >> 8);
		head[hl++] = (unsigned char)len;
	} else {
		head[hl++] = 0x80 | 127;
		for (i = 0; i < 8; i++)
			head[hl++] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
	}
	memcpy(head + hl, mask, 4);
	hl += 4;
	rc = grow(&ws->out, &ws->out_cap, ws->out_len + hl + len);
	if (rc)
		return rc;
	dst = ws->out + ws->out_len;
	memcpy(dst, head, hl);
	for (i = 0; i < len; i++)
		dst[hl + i] = (char)(data[i] ^ mask[i & 3]);
	ws->out_len += hl + len;
	flush(loop, ws);
	return ws->state == BENCH_WS_CLOSED ? COMB_EIO : 0;
}

int bench_ws_prefault(struct bench_ws *ws, size_t bytes)
{
	int rc = grow(&ws->in, &ws->in_cap, ws->in_len + bytes);

	if (rc == 0)
		memset(ws->in + ws->in_len, 0, bytes);
	return rc;
}

int bench_ws_send(struct bench_loop *loop, struct bench_ws *ws,
		  const char *data, size_t len)
{
	return queue_frame(loop, ws, 0x1, data, len);
}

/* A connected, non-blocking socket to addr, or -1 (errno says why when the
 * connect failed). */
static int dial_nonblocking(const char *addr)
{
	int fd = bench_dial(addr);

	if (fd >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

struct bench_ws *bench_ws_connect(struct bench_loop *loop, const char *addr,
				  const char *host, const unsigned char *sk,
				  int node)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct bench_ws *ws;
	char key[25], req[512];
	unsigned char raw[16];
	uint64_t a = bench_rand64(&mask_rng), b = bench_rand64(&mask_rng);
	int n;

	if (loop->n == loop->cap) {
		int ncap = loop->cap ? 2 * loop->cap : 64;
		struct bench_ws **p = realloc(loop->conns, (size_t)ncap * sizeof(*p));

		if (!p) {
			note_error(loop, "%s", "out of memory");
			return NULL;
		}
		loop->conns = p;
		loop->cap = ncap;
	}
	ws = calloc(1, sizeof(*ws));
	if (!ws) {
		note_error(loop, "%s", "out of memory");
		return NULL;
	}
	ws->fd = dial_nonblocking(addr);
	if (ws->fd < 0) {
		note_error(loop, "connect: %s", strerror(errno));
		free(ws);
		return NULL;
	}
	ws->index = loop->n;
	ws->node = node;
	ws->sk = sk;
	ws->t_connect = bench_now();
	snprintf(ws->host, sizeof(ws->host), "%s", host);
	memcpy(raw, &a, 8);
	memcpy(raw + 8, &b, 8);
	/* base64 of 16 bytes, written by hand to keep this file small */
	{
		static const char tbl[] =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		int i, o = 0;

		for (i = 0; i < 15; i += 3) {
			uint32_t v = (uint32_t)raw[i] << 16 | (uint32_t)raw[i + 1] << 8 | raw[i + 2];

			key[o++] = tbl[v >> 18 & 63];
			key[o++] = tbl[v >> 12 & 63];
			key[o++] = tbl[v >> 6 & 63];
			key[o++] = tbl[v & 63];
		}
		key[o++] = tbl[raw[15] >> 2];
		key[o++] = tbl[(raw[15] & 3) << 4];
		key[o++] = '=';
		key[o++] = '=';
		key[o] = '\0';
	}
	n = snprintf(req, sizeof(req),
		     "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
		     "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
		     "Sec-WebSocket-Version: 13\r\n\r\n", host, key);
	ws->state = BENCH_WS_HANDSHAKE;
	loop->conns[loop->n++] = ws;
	ev.data.ptr = ws;
	if (epoll_ctl(loop->ep, EPOLL_CTL_ADD, ws->fd, &ev) < 0) {
		ws_close(loop, ws, "epoll");
		return ws;
	}
	if (grow(&ws->out, &ws->out_cap, (size_t)n) == 0) {
		memcpy(ws->out, req, (size_t)n);
		ws->out_len = (size_t)n;
		flush(loop, ws);
	}
	return ws;
}

bool bench_event_id_of(const char *msg, size_t len, char id[65])
{
	const char *p;
	size_t span = len < 256 ? len : 256;

	if (len < 10 || memcmp(msg, "[\"EVENT\",", 9))
		return false;
	p = memmem(msg, span, "{\"id\":\"", 7);
	if (!p || (size_t)(p - msg) + 7 + 64 > len)
		return false;
	memcpy(id, p + 7, 64);
	id[64] = '\0';
	return true;
}

/* Answers ["AUTH",challenge] with a signed kind-22242 event. */
static void authenticate(struct bench_loop *loop, struct bench_ws *ws,
			 const char *msg, size_t len)
{
	json_t *arr = json_loadb(msg, len, 0, NULL), *out = NULL;
	const char *challenge = json_string_value(json_array_get(arr, 1));
	struct comb_event ev = {0};
	struct comb_buf json;
	char relay[160], *text = NULL;

	comb_buf_init(&json, 65536);
	if (!challenge) {
		ws_close(loop, ws, "bad AUTH message");
		goto out;
	}
	snprintf(relay, sizeof(relay), "ws://%s", ws->host);
	ev.kind = 22242;
	ev.created_at = bench_unix_time();
	ev.tags = json_pack("[[ss][ss]]", "relay", relay, "challenge", challenge);
	ev.content = calloc(1, 1);
	if (!ev.tags || !ev.content || bench_sign_json(&ev, ws->sk, &json)) {
		ws_close(loop, ws, "cannot sign AUTH");
		goto out;
	}
	memcpy(ws->auth_id, ev.id, 65);
	out = json_pack("[s,o]", "AUTH", json_loadb(json.data, json.len, 0, NULL));
	text = out ? json_dumps(out, JSON_COMPACT) : NULL;
	if (text)
		bench_ws_send(loop, ws, text, strlen(text));
out:
	free(text);
	json_decref(out);
	json_decref(arr);
	comb_event_release(&ev);
	comb_buf_release(&json);
}

static void on_text(struct bench_loop *loop, struct bench_ws *ws,
		    const char *msg, size_t len, double t)
{
	if (!ws->authed && ws->sk) {
		if (len > 8 && !memcmp(msg, "[\"AUTH\",", 8)) {
			authenticate(loop, ws, msg, len);
			return;
		}
		if (len > 72 && !memcmp(msg, "[\"OK\",\"", 7) && ws->auth_id[0] &&
		    !memcmp(msg + 7, ws->auth_id, 64)) {
			if (memmem(msg + 71, len - 71, "true", 4)) {
				ws->authed = true;
				ws->t_authed = t;
				loop->authed++;
			} else {
				char why[160];

				snprintf(why, sizeof(why), "AUTH refused: %.*s",
					 (int)(len < 120 ? len : 120), msg);
				ws_close(loop, ws, why);
			}
			return;
		}
	}
	if (loop->on_message)
		loop->on_message(loop, ws, msg, len, t);
}

/* Handles the frames at the head of data (len bytes, ws open), each as
 * read at t; returns the bytes they took (a partial frame stays), 0 also
 * when ws was closed. */
static size_t consume_frames(struct bench_loop *loop, struct bench_ws *ws,
			     const char *data, size_t len, double t)
{
	size_t off = 0;

	while (ws->state == BENCH_WS_OPEN && len - off >= 2) {
		const unsigned char *p = (const unsigned char *)data + off;
		size_t avail = len - off, hl = 2, plen = p[1] & 0x7f, i;
		int opcode = p[0] & 0x0f;
		bool fin = p[0] & 0x80;
		const char *payload;

		if (plen == 126) {
			if (avail < 4)
				break;
			plen = (size_t)p[2] << 8 | p[3];
			hl = 4;
		} else if (plen == 127) {
			if (avail < 10)
				break;
			plen = 0;
			for (i = 0; i < 8; i++)
				plen = plen << 8 | p[2 + i];
			hl = 10;
		}
		if (p[1] & 0x80) {
			ws_close(loop, ws, "masked frame from the server");
			return 0;
		}
		if (plen > MAX_MESSAGE) {
			ws_close(loop, ws, "frame too large");
			return 0;
		}
		if (avail < hl + plen)
			break;
		payload = (const char *)p + hl;
		off += hl + plen;
		switch (opcode) {
		case 0x0: /* continuation */
		case 0x1:
		case 0x2:
			if (!fin || ws->frag_len > 0 || opcode == 0) {
				if (grow(&ws->frag, &ws->frag_cap, ws->frag_len + plen + 1)) {
					ws_close(loop, ws, "message too large");
					return 0;
				}
				memcpy(ws->frag + ws->frag_len, payload, plen);
				ws->frag_len += plen;
				if (!fin)
					break;
				on_text(loop, ws, ws->frag, ws->frag_len, t);
				ws->frag_len = 0;
				break;
			}
			on_text(loop, ws, payload, plen, t);
			break;
		case 0x8: {
			char why[160];
			unsigned code = plen >= 2 ? (unsigned)((unsigned char)payload[0] << 8 |
						    (unsigned char)payload[1]) : 0;

			snprintf(why, sizeof(why), "closed by the relay (%u %.*s)", code,
				 (int)(plen > 2 ? (plen - 2 < 100 ? plen - 2 : 100) : 0),
				 payload + 2);
			queue_frame(loop, ws, 0x8, payload, plen >= 2 ? 2 : 0);
			ws_close(loop, ws, why);
			return 0;
		}
		case 0x9:
			queue_frame(loop, ws, 0xA, payload, plen);
			break;
		default:
			break;
		}
	}
	return ws->state == BENCH_WS_CLOSED ? 0 : off;
}

/* Handles what ws->in holds: the handshake answer, then frames. */
static void consume(struct bench_loop *loop, struct bench_ws *ws, double t)
{
	size_t off = 0;

	if (ws->state == BENCH_WS_HANDSHAKE) {
		char *end = ws->in_len >= 4 ? memmem(ws->in, ws->in_len, "\r\n\r\n", 4) : NULL;

		if (!end)
			return;
		if (ws->in_len < 12 || memcmp(ws->in, "HTTP/1.1 101", 12)) {
			char why[160];

			snprintf(why, sizeof(why), "upgrade refused: %.*s",
				 (int)(ws->in_len < 100 ? ws->in_len : 100), ws->in);
			ws_close(loop, ws, why);
			return;
		}
		ws->state = BENCH_WS_OPEN;
		off = (size_t)(end - ws->in) + 4;
	}
	off += consume_frames(loop, ws, ws->in + off, ws->in_len - off, t);
	if (ws->state == BENCH_WS_CLOSED)
		return;
	if (off > 0) {
		memmove(ws->in, ws->in + off, ws->in_len - off);
		ws->in_len -= off;
	}
}

/*
 * Reads what the socket holds, handling the frames of each read before the
 * next read and stamping them with the time that read returned: a buffer
 * that kept everything until the socket ran dry would grow with the
 * relay's speed (timing the client's own copies and page faults) and
 * stamp late frames with the time of the first read.
 */
static void readable(struct bench_loop *loop, struct bench_ws *ws)
{
	for (;;) {
		/* Nothing pending: read into the loop's one buffer, warm in
		 * the cache like the fan-out floor's, and keep only a
		 * partial frame's bytes in the connection's own. */
		bool shared = ws->in_len == 0 && ws->state == BENCH_WS_OPEN;
		size_t used;
		ssize_t n;

		if (!shared && grow(&ws->in, &ws->in_cap, ws->in_len + READ_CHUNK)) {
			ws_close(loop, ws, "out of memory");
			return;
		}
		n = shared ? read(ws->fd, loop->chunk, READ_CHUNK)
			   : read(ws->fd, ws->in + ws->in_len, ws->in_cap - ws->in_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			ws_close(loop, ws, n == 0 ? "connection closed by the relay"
						   : "read failed");
			return;
		}
		if (shared) {
			used = consume_frames(loop, ws, loop->chunk, (size_t)n, bench_now());
			if (ws->state == BENCH_WS_CLOSED)
				return;
			if (used < (size_t)n) {
				if (grow(&ws->in, &ws->in_cap, (size_t)n - used + READ_CHUNK)) {
					ws_close(loop, ws, "out of memory");
					return;
				}
				memcpy(ws->in, loop->chunk + used, (size_t)n - used);
				ws->in_len = (size_t)n - used;
			}
		} else {
			ws->in_len += (size_t)n;
			consume(loop, ws, bench_now());
			if (ws->state == BENCH_WS_CLOSED)
				return;
		}
		if ((size_t)n < READ_CHUNK)
			break;
	}
	/* Idle connections keep no large buffer. */
	if (ws->in_len == 0 && ws->in_cap > 4 * READ_CHUNK) {
		free(ws->in);
		ws->in = NULL;
		ws->in_cap = 0;
	}
}

int bench_loop_run(struct bench_loop *loop, bool (*done)(void *ctx),
		   double timeout_s)
{
	struct epoll_event evs[256];
	double deadline = bench_now() + timeout_s;

	for (;;) {
		double left;
		int n, i;

		if (done && done(loop->ctx))
			return 0;
		left = deadline - bench_now();
		if (left <= 0)
			return COMB_ETIMEOUT;
		n = epoll_wait(loop->ep, evs, 256, left > 0.05 ? 50 : (int)(left * 1000) + 1);
		if (n < 0 && errno != EINTR)
			return COMB_EIO;
		for (i = 0; i < n; i++) {
			struct bench_ws *ws = evs[i].data.ptr;

			if (ws->state == BENCH_WS_CLOSED)
				continue;
			if (evs[i].events & EPOLLOUT)
				flush(loop, ws);
			if (ws->state != BENCH_WS_CLOSED &&
			    evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				readable(loop, ws);
		}
	}
}
