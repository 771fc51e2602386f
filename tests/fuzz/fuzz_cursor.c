/*
 * libFuzzer target for incremental-read cursor tokens (shared/src/cursor.c,
 * PROTOCOL.md section 8: opaque, authenticated by the relay key). The first
 * input byte picks what the rest is:
 *   even: a cursor text as a client sends it, decoded with a fixed key;
 *   odd:  the fields of a cursor (community, epoch, system id, scope,
 *         phase, horizon, position) followed by two bytes that pick one
 *         character of its token to change and what to change it to, so
 *         that the fuzzer reaches valid tokens without forging HMACs.
 * Besides memory errors it traps on broken contracts:
 *   - decode answering other than 0 or COMB_EINVAL;
 *   - an accepted text that does not re-encode to itself (one spelling per
 *     cursor), that another key accepts, or whose phase is unknown;
 *   - encode then decode not giving back every field;
 *   - a token with one character changed, truncated or extended that
 *     still decodes (authentication), or one signed with another key.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comb/cursor.h"
#include "comb/error.h"
#include "fuzz_check.h"

#define FUZZ_MAX_INPUT (4 * COMB_CURSOR_MAX_TEXT)

static const unsigned char secret[32] = {0x63, 0x6f, 0x6d, 0x62, 1, 2, 3, 4};
static const unsigned char other_secret[32] = {0x63, 0x6f, 0x6d, 0x62, 9};

struct keys {
	unsigned char key[32];
	unsigned char other[32];
};

static const struct keys *keys(void)
{
	static struct keys k;
	static int ready;

	if (!ready) {
		FUZZ_CHECK(comb_cursor_key(secret, k.key) == 0);
		FUZZ_CHECK(comb_cursor_key(other_secret, k.other) == 0);
		FUZZ_CHECK(memcmp(k.key, k.other, 32) != 0);
		ready = 1;
	}
	return &k;
}

static uint64_t take(const uint8_t **p, size_t *left, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n && *left > 0; i++, (*left)--)
		v |= (uint64_t)*(*p)++ << (8 * i);
	return v;
}

static void same_cursor(const struct comb_cursor *a, const struct comb_cursor *b)
{
	FUZZ_CHECK(a->community == b->community);
	FUZZ_CHECK(a->epoch == b->epoch);
	FUZZ_CHECK(a->system_id == b->system_id);
	FUZZ_CHECK(memcmp(a->scope, b->scope, COMB_CURSOR_SCOPE_LEN) == 0);
	FUZZ_CHECK(a->phase == b->phase);
	FUZZ_CHECK(a->horizon == b->horizon);
	FUZZ_CHECK(a->after.xid == b->after.xid);
	FUZZ_CHECK(a->after.source == b->after.source);
	FUZZ_CHECK(strcmp(a->after.key, b->after.key) == 0);
	FUZZ_CHECK(a->lsn == b->lsn);
}

static void check_text(const char *text)
{
	const struct keys *k = keys();
	char again[COMB_CURSOR_MAX_TEXT];
	struct comb_cursor c, c2;
	int rc;

	rc = comb_cursor_decode(text, k->key, &c);
	FUZZ_CHECK(rc == 0 || rc == COMB_EINVAL);
	if (rc != 0)
		return;
	FUZZ_CHECK(c.phase <= COMB_CURSOR_CHANGES);
	FUZZ_CHECK(strlen(c.after.key) <= 36);
	FUZZ_CHECK(comb_cursor_encode(&c, k->key, again, sizeof(again)) == 0);
	/* A version 1 cursor (no position) is issued again as version 2 with
	 * position 0: other text, the same fields. */
	if (strcmp(again, text) != 0) {
		FUZZ_CHECK(c.lsn == 0);
		FUZZ_CHECK(comb_cursor_decode(again, k->key, &c2) == 0);
		same_cursor(&c, &c2);
	}
	FUZZ_CHECK(comb_cursor_decode(text, k->other, &c2) == COMB_EINVAL);
}

static void check_fields(const uint8_t *p, size_t left)
{
	const struct keys *k = keys();
	char text[COMB_CURSOR_MAX_TEXT], tampered[COMB_CURSOR_MAX_TEXT + 1];
	struct comb_cursor c, d;
	size_t keylen, len, pos;
	uint8_t repl;
	int rc;

	memset(&c, 0, sizeof(c));
	c.community = (int64_t)take(&p, &left, 8);
	c.epoch = (int32_t)take(&p, &left, 4);
	c.system_id = take(&p, &left, 8);
	for (pos = 0; pos < COMB_CURSOR_SCOPE_LEN; pos++)
		c.scope[pos] = (unsigned char)take(&p, &left, 1);
	c.phase = (uint8_t)take(&p, &left, 1);
	c.horizon = take(&p, &left, 8);
	c.after.xid = take(&p, &left, 8);
	c.after.source = (uint8_t)take(&p, &left, 1);
	pos = (size_t)take(&p, &left, 1);
	repl = (uint8_t)take(&p, &left, 1);
	keylen = left < 36 ? left : 36;
	memcpy(c.after.key, p, keylen);
	c.after.key[keylen] = '\0';

	rc = comb_cursor_encode(&c, k->key, text, sizeof(text));
	FUZZ_CHECK(rc == 0);
	len = strlen(text);
	FUZZ_CHECK(len > 0 && len < COMB_CURSOR_MAX_TEXT);

	rc = comb_cursor_decode(text, k->key, &d);
	if (c.phase > COMB_CURSOR_CHANGES) {
		FUZZ_CHECK(rc == COMB_EINVAL);
		return;
	}
	FUZZ_CHECK(rc == 0);
	same_cursor(&c, &d);
	check_text(text);
	FUZZ_CHECK(comb_cursor_decode(text, k->other, &d) == COMB_EINVAL);

	/* one character changed */
	pos %= len;
	if ((char)repl != text[pos]) {
		memcpy(tampered, text, len + 1);
		tampered[pos] = (char)repl;
		FUZZ_CHECK(comb_cursor_decode(tampered, k->key, &d) == COMB_EINVAL);
	}
	/* truncated, and extended by one character */
	memcpy(tampered, text, len + 1);
	tampered[pos] = '\0';
	FUZZ_CHECK(comb_cursor_decode(tampered, k->key, &d) == COMB_EINVAL);
	memcpy(tampered, text, len);
	tampered[len] = repl ? (char)repl : 'A';
	tampered[len + 1] = '\0';
	FUZZ_CHECK(comb_cursor_decode(tampered, k->key, &d) == COMB_EINVAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	if (data[0] % 2) {
		check_fields(data + 1, size - 1);
		return 0;
	}
	text = malloc(size);
	if (text == NULL)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	check_text(text);
	free(text);
	return 0;
}
