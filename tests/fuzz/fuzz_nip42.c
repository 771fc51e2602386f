/*
 * libFuzzer target for NIP-42 authentication (shared/src/nip42.c,
 * PROTOCOL.md sections 7 and 10). The first input byte picks what the
 * rest is:
 *   even: an AUTH event's JSON, checked against a fixed challenge, host
 *         and clock (only seeds carry valid signatures);
 *   odd:  a flags byte, a 16-bit clock skew, then NUL-separated fields
 *         (challenge value, relay value, Host header, an extra tag name)
 *         from which a kind-22242 event is built and signed here, so the
 *         fuzzer explores the tag and relay rules behind a valid
 *         signature.
 * Besides memory errors it traps when the answer differs from a reference
 * model written here from the protocol's words: kind 22242; created_at
 * within 600 s; exactly one challenge tag, with a value equal to the
 * challenge; exactly one relay tag, ws:// or wss:// (any case) then the
 * Host header (ASCII case-insensitive) then nothing or a path, query or
 * fragment; a valid id and signature; checked in that order, each failure
 * with its own reason, every answer COMB_EAUTH or 0.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/event.h"
#include "comb/nip42.h"
#include "fuzz_check.h"

#define FUZZ_NOW 1700000000
#define FUZZ_MAX_INPUT 8192
#define FUZZ_CHALLENGE "5c1b3a0e7f2d4c6b8a9e0f1d2c3b4a5968778695a4b3c2d1e0f1a2b3c4d5e6f7"
#define FUZZ_HOST "relay.example.com:7447"

static const unsigned char seckey[32] = {0x42, 0x42, 0x42, 0x42, 1};

enum {
	F_CHALLENGE = 1 << 0,     /* add a challenge tag */
	F_CHALLENGE_TWICE = 1 << 1,
	F_RIGHT_CHALLENGE = 1 << 2, /* its value is the relay's challenge */
	F_RELAY = 1 << 3,         /* add a relay tag */
	F_RELAY_TWICE = 1 << 4,
	F_WRONG_KIND = 1 << 5,
	F_BAD_SIG = 1 << 6,
	F_NO_VALUE = 1 << 7,      /* the challenge tag has only its name */
};

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool prefix_nocase(const char *s, const char *prefix)
{
	for (; *prefix; s++, prefix++)
		if (lower(*s) != *prefix)
			return false;
	return true;
}

static bool model_relay_ok(const char *relay, const char *host)
{
	size_t n, i;

	if (host[0] == '\0')
		return false;
	if (prefix_nocase(relay, "wss://"))
		relay += 6;
	else if (prefix_nocase(relay, "ws://"))
		relay += 5;
	else
		return false;
	for (n = 0; relay[n] && relay[n] != '/' && relay[n] != '?' &&
		    relay[n] != '#'; n++)
		;
	if (n != strlen(host))
		return false;
	for (i = 0; i < n; i++)
		if (lower(relay[i]) != lower(host[i]))
			return false;
	return true;
}

/* The value of the only tag named name, or NULL with *why set. */
static const char *model_single(const struct comb_event *ev, const char *name,
				const char **why, const char *dup,
				const char *missing)
{
	const json_t *first = NULL;
	size_t i, count = 0;

	for (i = 0; i < json_array_size(ev->tags); i++) {
		const json_t *tag = json_array_get(ev->tags, i);

		if (!strcmp(json_string_value(json_array_get(tag, 0)), name)) {
			if (!first)
				first = tag;
			count++;
		}
	}
	if (count > 1) {
		*why = dup;
		return NULL;
	}
	if (!first || json_array_size(first) < 2) {
		*why = missing;
		return NULL;
	}
	return json_string_value(json_array_get(first, 1));
}

/* The reason the model expects, or NULL for acceptance. */
static const char *model(const struct comb_event *ev, const char *challenge,
			 const char *host)
{
	const char *why = NULL, *c, *relay;
	char err[64];

	if (ev->kind != COMB_NIP42_KIND)
		return "wrong kind";
	if (ev->created_at < FUZZ_NOW - 600)
		return "stale authentication";
	if (ev->created_at > FUZZ_NOW + 600)
		return "authentication from the future";
	c = model_single(ev, "challenge", &why, "duplicate challenge tag",
			 "missing challenge tag");
	if (!c)
		return why;
	if (strcmp(c, challenge))
		return "challenge mismatch";
	relay = model_single(ev, "relay", &why, "duplicate relay tag",
			     "missing relay tag");
	if (!relay)
		return why;
	if (!model_relay_ok(relay, host))
		return "relay mismatch";
	if (comb_event_verify(ev, err, sizeof(err)))
		return strcmp(err, "bad event id") ? "bad signature" : "bad event id";
	return NULL;
}

static void check(const struct comb_event *ev, const char *host)
{
	const char *want = model(ev, FUZZ_CHALLENGE, host);
	char err[128];
	int rc;

	memset(err, 'x', sizeof(err));
	rc = comb_nip42_verify(ev, FUZZ_CHALLENGE, host, FUZZ_NOW, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == COMB_EAUTH);
	if (want == NULL) {
		FUZZ_CHECK(rc == 0);
	} else {
		FUZZ_CHECK(rc == COMB_EAUTH);
		fuzz_check_reason(err, sizeof(err));
		if (strcmp(err, want)) {
			fprintf(stderr, "fuzz_nip42: reason '%s', model '%s'\n", err, want);
			__builtin_trap();
		}
	}
}

static bool is_utf8(const char *s)
{
	json_t *v = json_string(s);
	bool ok = v != NULL;

	json_decref(v);
	return ok;
}

static void add_tag(json_t *tags, const char *name, const char *value)
{
	json_t *tag = json_array();

	json_array_append_new(tag, json_string(name));
	if (value)
		json_array_append_new(tag, json_string(value));
	json_array_append_new(tags, tag);
}

/* Splits the fields and builds, signs and checks the event. */
static void check_built(const uint8_t *p, size_t left)
{
	const char *field[4] = {"", "", "", ""};
	struct comb_event ev;
	char *text = NULL;
	uint8_t flags;
	int16_t skew;
	size_t i, n;

	if (left < 3)
		return;
	flags = p[0];
	skew = (int16_t)((uint16_t)p[1] | (uint16_t)p[2] << 8);
	p += 3;
	left -= 3;
	text = malloc(left + 1);
	if (text == NULL)
		return;
	memcpy(text, p, left);
	text[left] = '\0';
	for (i = 0, n = 0; n < 4; n++) {
		field[n] = text + i;
		i += strlen(text + i) + 1;
		if (i > left)
			break;
	}
	for (n = 0; n < 4; n++)
		if (!is_utf8(field[n])) {
			/* no event can carry it */
			free(text);
			return;
		}

	memset(&ev, 0, sizeof(ev));
	ev.kind = flags & F_WRONG_KIND ? 22243 : COMB_NIP42_KIND;
	ev.created_at = FUZZ_NOW + skew;
	ev.content = strdup("");
	ev.tags = json_array();
	if (*field[3])
		add_tag(ev.tags, field[3], "x");
	if (flags & F_CHALLENGE)
		add_tag(ev.tags, "challenge", flags & F_NO_VALUE ? NULL :
			flags & F_RIGHT_CHALLENGE ? FUZZ_CHALLENGE : field[0]);
	if (flags & F_RELAY)
		add_tag(ev.tags, "relay", field[1]);
	if (flags & F_CHALLENGE_TWICE)
		add_tag(ev.tags, "challenge", FUZZ_CHALLENGE);
	if (flags & F_RELAY_TWICE)
		add_tag(ev.tags, "relay", field[1]);
	if (ev.content && ev.tags && comb_event_sign(&ev, seckey) == 0) {
		if (flags & F_BAD_SIG)
			ev.sig[7] = ev.sig[7] == '0' ? '1' : '0';
		check(&ev, field[2]);
	}
	comb_event_release(&ev);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct comb_event ev;
	char err[128];

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	if (data[0] % 2) {
		check_built(data + 1, size - 1);
		return 0;
	}
	if (comb_event_parse(&ev, (const char *)data + 1, size - 1,
			     FUZZ_MAX_INPUT, err, sizeof(err)) == 0)
		check(&ev, FUZZ_HOST);
	comb_event_release(&ev);
	return 0;
}
