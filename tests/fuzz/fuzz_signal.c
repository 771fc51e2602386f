/*
 * libFuzzer target for the signal codec. The first input byte picks what
 * the rest is:
 *   0 (and anything else): msgpack bytes for comb_signal_decode,
 *   1: NOTIFY text for comb_signal_parse_notify,
 *   2: a Redis ephemeral-channel message for comb_signal_parse_ephemeral.
 * The seeds in corpus/signal/ are valid signals of every type, NOTIFY
 * lines and ephemeral messages. Besides memory errors and undefined behaviour it traps on broken
 * contracts: an unexpected return code, a failure without a reason or that
 * leaves fields set, an accepted signal that fails comb_signal_check, has
 * no topic or does not re-encode and decode to the same fields, and a
 * payload pointer outside the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/buf.h"
#include "comb/error.h"
#include "comb/signal.h"

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "fuzz_signal: check failed: %s\n",     \
				#cond);                                        \
			__builtin_trap();                                      \
		}                                                              \
	} while (0)

static void check_reason(const char *err, size_t len)
{
	CHECK(memchr(err, '\0', len) != NULL);
	CHECK(err[0] != '\0');
}

static void check_cleared(const struct comb_signal *s)
{
	CHECK(s->epoch == 0 && s->seq == 0 && s->community == 0 && s->type == 0);
	CHECK(s->xid == 0 && s->kind == 0 && s->payload == NULL &&
	      s->payload_len == 0);
	CHECK(!s->channel[0] && !s->d[0] && !s->pubkey[0] && !s->id[0]);
}

static int same(const struct comb_signal *a, const struct comb_signal *b)
{
	return a->epoch == b->epoch && a->seq == b->seq &&
	       a->community == b->community && a->type == b->type &&
	       a->xid == b->xid && a->kind == b->kind &&
	       !strcmp(a->channel, b->channel) && !strcmp(a->d, b->d) &&
	       !strcmp(a->pubkey, b->pubkey) && !strcmp(a->id, b->id) &&
	       a->payload_len == b->payload_len &&
	       (a->payload_len == 0 ||
		!memcmp(a->payload, b->payload, a->payload_len));
}

static void check_accepted(const struct comb_signal *s)
{
	char topic[COMB_SIGNAL_TOPIC_MAX], err[128];
	struct comb_signal back;
	struct comb_buf buf;
	size_t tlen;

	CHECK(comb_signal_check(s, err, sizeof(err)) == 0);
	CHECK(comb_signal_topic(s, topic, sizeof(topic), &tlen) == 0);
	CHECK(tlen >= 3 && tlen <= sizeof(topic) && topic[tlen - 1] == '\0');
	CHECK(memchr(topic, '\0', tlen - 1) == NULL);

	comb_buf_init(&buf, COMB_SIGNAL_MAX_SIZE);
	CHECK(comb_signal_encode(s, &buf, err, sizeof(err)) == 0);
	CHECK(comb_signal_decode(buf.data, buf.len, &back, err, sizeof(err)) == 0);
	CHECK(same(s, &back));
	comb_buf_release(&buf);
}

static void fuzz_decode(const uint8_t *data, size_t size)
{
	struct comb_signal s;
	char err[128];
	int rc;

	memset(err, 'x', sizeof(err));
	rc = comb_signal_decode(data, size, &s, err, sizeof(err));
	CHECK(rc == 0 || rc == COMB_EINVAL || rc == COMB_ETOOBIG);
	if (rc) {
		check_reason(err, sizeof(err));
		check_cleared(&s);
		return;
	}
	if (s.payload_len)
		CHECK(s.payload >= data && s.payload + s.payload_len <= data + size);
	check_accepted(&s);
}

static void fuzz_notify(const uint8_t *data, size_t size)
{
	struct comb_signal s;
	char *text, err[128];
	int rc;

	text = malloc(size + 1);
	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(err, 'x', sizeof(err));
	rc = comb_signal_parse_notify(text, &s, err, sizeof(err));
	CHECK(rc == 0 || rc == COMB_EINVAL);
	if (rc) {
		check_reason(err, sizeof(err));
		check_cleared(&s);
	} else {
		CHECK(s.type != COMB_SIGNAL_HEARTBEAT &&
		      s.type != COMB_SIGNAL_EPHEMERAL && s.community > 0);
		s.epoch = 1;
		s.seq = 1;
		check_accepted(&s);
	}
	free(text);
}

static void fuzz_ephemeral(const uint8_t *data, size_t size)
{
	struct comb_signal s;
	char err[128];
	int rc;

	memset(err, 'x', sizeof(err));
	rc = comb_signal_parse_ephemeral(data, size, &s, err, sizeof(err));
	CHECK(rc == 0 || rc == COMB_EINVAL || rc == COMB_ETOOBIG);
	if (rc) {
		check_reason(err, sizeof(err));
		check_cleared(&s);
		return;
	}
	CHECK(s.type == COMB_SIGNAL_EPHEMERAL && s.community > 0);
	CHECK(s.payload > data && s.payload + s.payload_len == data + size);
	s.epoch = 1;
	s.seq = 1;
	check_accepted(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] == 1)
		fuzz_notify(data + 1, size - 1);
	else if (data[0] == 2)
		fuzz_ephemeral(data + 1, size - 1);
	else
		fuzz_decode(data + 1, size - 1);
	return 0;
}
