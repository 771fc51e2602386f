/*
 * A minimal HTTP/1.1 client for comb-bench: one keep-alive TCP connection,
 * requests written in one go, answers read by Content-Length or, for
 * comb-relay's streamed answers (large /query answers and incremental
 * pages), chunked transfer encoding. NIP-98 tokens are signed here with libcomb,
 * each with a random nonce tag because the relay accepts a token once.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "comb/base64.h"
#include "comb/error.h"

#define MAX_ANSWER (256u << 20)

int bench_dial(const char *addr)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd, one = 1;

	if (!colon || (size_t)(colon - addr) >= sizeof(host))
		return -1;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	sa.sin_port = htons((uint16_t)strtol(colon + 1, NULL, 10));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int bench_http_open(struct bench_http *c, const char *addr, const char *host)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	snprintf(c->host, sizeof(c->host), "%s", host);
	comb_buf_init(&c->in, MAX_ANSWER);
	c->fd = bench_dial(addr);
	return c->fd < 0 ? COMB_EIO : 0;
}

void bench_http_close(struct bench_http *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	comb_buf_release(&c->in);
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return COMB_EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads more bytes into c->in; 0, or COMB_EIO at EOF or error. */
static int fill(struct bench_http *c)
{
	char tmp[65536];
	ssize_t n;

	do {
		n = read(c->fd, tmp, sizeof(tmp));
	} while (n < 0 && errno == EINTR);
	if (n <= 0)
		return COMB_EIO;
	return comb_buf_append(&c->in, tmp, (size_t)n);
}

/* Reads a chunked body whose first bytes are at c->in[at] into resp
 * (comb-relay sends no trailers). */
static int read_chunked(struct bench_http *c, size_t at, struct comb_buf *resp)
{
	const char *eol;
	size_t size;
	int rc = 0;

	for (;;) {
		while (!(eol = memmem(c->in.data + at, c->in.len - at, "\r\n", 2)))
			if ((rc = fill(c)))
				return rc;
		size = (size_t)strtoul(c->in.data + at, NULL, 16);
		at = (size_t)(eol - c->in.data) + 2;
		while (c->in.len - at < size + 2)
			if ((rc = fill(c)))
				return rc;
		if (size == 0)
			return 0;
		rc = comb_buf_append(resp, c->in.data + at, size);
		if (rc)
			return rc;
		at += size + 2;
		/* Keep only what is not read yet: c->in stays about a chunk
		 * instead of growing (and faulting in) the whole answer again. */
		memmove(c->in.data, c->in.data + at, c->in.len - at + 1);
		c->in.len -= at;
		at = 0;
	}
}

/* Reads one answer; leaves nothing else in c->in. */
static int read_answer(struct bench_http *c, int *status, struct comb_buf *resp)
{
	char *end = NULL, *cl;
	size_t head, body_len = 0;
	bool chunked;
	int rc;

	comb_buf_reset(&c->in);
	while (!(c->in.data && (end = strstr(c->in.data, "\r\n\r\n")))) {
		rc = fill(c);
		if (rc)
			return rc;
	}
	head = (size_t)(end - c->in.data) + 4;
	if (sscanf(c->in.data, "HTTP/1.%*d %d", status) != 1)
		return COMB_EINVAL;
	*end = '\0';
	cl = strcasestr(c->in.data, "\r\ncontent-length:");
	if (cl)
		body_len = (size_t)strtoul(cl + 17, NULL, 10);
	chunked = strcasestr(c->in.data, "\r\ntransfer-encoding: chunked") != NULL;
	*end = '\r';
	comb_buf_reset(resp);
	if (chunked) {
		rc = read_chunked(c, head, resp);
		if (rc == 0 && !resp->data)
			rc = comb_buf_append(resp, "", 0);
		return rc;
	}
	/* Bulk reads straight into resp once the head is known. */
	rc = comb_buf_append(resp, c->in.data + head,
			     c->in.len - head < body_len ? c->in.len - head : body_len);
	while (rc == 0 && resp->len < body_len) {
		char tmp[262144];
		size_t want = body_len - resp->len;
		ssize_t n;

		n = read(c->fd, tmp, want < sizeof(tmp) ? want : sizeof(tmp));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return COMB_EIO;
		rc = comb_buf_append(resp, tmp, (size_t)n);
	}
	if (rc == 0 && !resp->data)
		rc = comb_buf_append(resp, "", 0);
	return rc;
}

int bench_http_request(struct bench_http *c, const char *method,
		       const char *path, const char *body, size_t blen,
		       const char *auth, int *status, struct comb_buf *resp)
{
	struct comb_buf req;
	int attempt, rc = COMB_EIO;

	comb_buf_init(&req, MAX_ANSWER);
	rc = comb_buf_printf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\n"
			     "Content-Type: application/json\r\n"
			     "Content-Length: %zu\r\n", method, path, c->host,
			     body ? blen : 0);
	if (rc == 0 && auth)
		rc = comb_buf_printf(&req, "Authorization: %s\r\n", auth);
	if (rc == 0)
		rc = comb_buf_puts(&req, "\r\n");
	if (rc == 0 && body)
		rc = comb_buf_append(&req, body, blen);
	for (attempt = 0; rc == 0 && attempt < 2; attempt++) {
		if (c->fd < 0)
			c->fd = bench_dial(c->addr);
		if (c->fd < 0) {
			rc = COMB_EIO;
			break;
		}
		rc = write_all(c->fd, req.data, req.len);
		if (rc == 0)
			rc = read_answer(c, status, resp);
		if (rc == 0)
			break;
		/* The server may have closed an idle keep-alive connection. */
		close(c->fd);
		c->fd = -1;
		if (attempt == 0)
			rc = 0;
	}
	comb_buf_release(&req);
	return rc;
}

char *bench_nip98(const unsigned char sk[32], const char *url,
		  const char *method, const char *body, size_t blen)
{
	struct comb_event ev = {0};
	struct comb_buf json;
	char payload[65], nonce[33], *out = NULL;
	size_t cap;

	comb_buf_init(&json, 65536);
	bench_sha256_hex(body ? body : "", body ? blen : 0, payload);
	bench_random_hex(nonce, 16);
	ev.kind = 27235;
	ev.created_at = bench_unix_time();
	ev.tags = json_pack("[[ss][ss][ss][ss]]", "u", url, "method", method,
			    "payload", payload, "nonce", nonce);
	ev.content = calloc(1, 1);
	if (!ev.tags || !ev.content || bench_sign_json(&ev, sk, &json))
		goto out;
	cap = 6 + COMB_BASE64_ENCODED_LEN(json.len) + 1;
	out = malloc(cap);
	if (!out)
		goto out;
	memcpy(out, "Nostr ", 6);
	if (comb_base64_encode(json.data, json.len, out + 6, cap - 6)) {
		free(out);
		out = NULL;
	}
out:
	comb_event_release(&ev);
	comb_buf_release(&json);
	return out;
}

int bench_http_publish(struct bench_http *c, struct comb_event *ev,
		       const unsigned char sk[32], bool *accepted,
		       char *message, size_t msglen)
{
	struct comb_buf body, resp;
	char url[256], *auth = NULL;
	json_t *answer = NULL;
	int status = 0, rc;

	*accepted = false;
	comb_buf_init(&body, 1 << 20);
	comb_buf_init(&resp, 1 << 20);
	rc = bench_sign_json(ev, sk, &body);
	if (rc)
		goto out;
	snprintf(url, sizeof(url), "http://%s/events", c->host);
	auth = bench_nip98(sk, url, "POST", body.data, body.len);
	if (!auth) {
		rc = COMB_ENOMEM;
		goto out;
	}
	rc = bench_http_request(c, "POST", "/events", body.data, body.len, auth,
				&status, &resp);
	if (rc)
		goto out;
	answer = json_loadb(resp.data, resp.len, 0, NULL);
	*accepted = status == 200 && json_is_true(json_object_get(answer, "accepted"));
	snprintf(message, msglen, "%d %s", status,
		 json_string_value(json_object_get(answer, "message")) ?
		 json_string_value(json_object_get(answer, "message")) : resp.data);
out:
	json_decref(answer);
	free(auth);
	comb_buf_release(&body);
	comb_buf_release(&resp);
	return rc;
}
