/*
 * ["EVENT", <event>] read in one pass without a JSON tree
 * (comb_event_message_parse, event.h): the message clients send most, and
 * the one carrying the longest strings. It reads only what it reads with
 * certainty and declines everything else, which the general way
 * (comb_json_parse, then comb_event_from_json) then reads and words:
 * \u escapes, numbers other than plain non-negative integers, hex members
 * with escapes, an unknown or repeated key, empty tags, control
 * characters, malformed UTF-8, and any input that is not exactly this
 * message. Whatever it accepts, the general way accepts too, as the same
 * event (tests/fuzz/fuzz_event_message.c checks both).
 */
#include "comb/event.h"

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/utf8.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct reader {
	const unsigned char *p, *end;
};

/* A string as it stands in the input: its bytes between the quotes and
 * how long it is once its escapes are decoded. */
struct span {
	const unsigned char *at;
	size_t raw_len, len;
};

static void skip_space(struct reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' ||
				 *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

/* Consumes c after any whitespace; false when something else comes. */
static bool take(struct reader *r, unsigned char c)
{
	skip_space(r);
	if (r->p == r->end || *r->p != c)
		return false;
	r->p++;
	return true;
}

/* The character a two-character escape \c stands for, or 0 when \c is not
 * one (a \u escape is not). */
static char unescaped(unsigned char c)
{
	switch (c) {
	case '"':
	case '\\':
	case '/':
		return (char)c;
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	default:
		return 0;
	}
}

/* Reads a string after any whitespace into *s: well-formed UTF-8 without
 * control characters, escapes of two characters only. */
static bool scan_string(struct reader *r, struct span *s)
{
	size_t escapes = 0, n;

	if (!take(r, '"'))
		return false;
	s->at = r->p;
	for (;;) {
		r->p += comb_json_plain_run(r->p, (size_t)(r->end - r->p));
		if (r->p == r->end)
			return false;
		if (*r->p == '"')
			break;
		if (*r->p == '\\') {
			if (r->end - r->p < 2 || !unescaped(r->p[1]))
				return false;
			r->p += 2;
			escapes++;
			continue;
		}
		if (*r->p < 0x80)
			return false;  /* a control character */
		n = comb_utf8_sequence(r->p, (size_t)(r->end - r->p));
		if (n == 0)
			return false;
		r->p += n;
	}
	s->raw_len = (size_t)(r->p - s->at);
	s->len = s->raw_len - escapes;
	r->p++;
	return true;
}

/* Writes s decoded to out (s->len bytes). */
static void decode(const struct span *s, char *out)
{
	const unsigned char *p = s->at, *end = s->at + s->raw_len;

	while (p < end) {
		if (*p == '\\') {
			*out++ = unescaped(p[1]);
			p += 2;
		} else {
			*out++ = (char)*p++;
		}
	}
}

/* Reads a string without escapes of exactly len bytes into out (len + 1
 * bytes, NUL-terminated). */
static bool read_exact(struct reader *r, char *out, size_t len)
{
	struct span s;

	if (!scan_string(r, &s) || s.raw_len != len || s.len != len)
		return false;
	memcpy(out, s.at, len);
	out[len] = '\0';
	return true;
}

/* Reads lowercase hex of exactly len digits into out (len + 1 bytes). */
static bool read_hex(struct reader *r, char *out, size_t len)
{
	return read_exact(r, out, len) && comb_hex_is_lower(out, len);
}

/* Reads a non-negative integer of at most 18 digits without a leading
 * zero; a fraction or an exponent after it fails the caller's next take. */
static bool read_integer(struct reader *r, int64_t *v)
{
	int digits = 0;

	skip_space(r);
	*v = 0;
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
		if (++digits > 18 || (digits == 2 && *v == 0))
			return false;
		*v = *v * 10 + (*r->p++ - '0');
	}
	return digits > 0;
}

/* Reads one tag: a non-empty array of strings. */
static json_t *read_tag(struct reader *r)
{
	json_t *tag = json_array(), *v;
	struct span s;
	char *text;

	if (!tag || !take(r, '['))
		goto fail;
	do {
		if (!scan_string(r, &s))
			goto fail;
		if (s.len == s.raw_len) {
			v = json_stringn_nocheck((const char *)s.at, s.len);
		} else {
			if (!(text = malloc(s.len)))
				goto fail;
			decode(&s, text);
			v = json_stringn_nocheck(text, s.len);
			free(text);
		}
		if (json_array_append_new(tag, v))
			goto fail;
	} while (take(r, ','));
	if (take(r, ']'))
		return tag;
fail:
	json_decref(tag);
	return NULL;
}

/* Reads the tags: an array of at most COMB_EVENT_MAX_TAGS tags. */
static json_t *read_tags(struct reader *r)
{
	json_t *tags = json_array(), *tag;

	if (!tags || !take(r, '['))
		goto fail;
	if (take(r, ']'))
		return tags;
	do {
		if (json_array_size(tags) == COMB_EVENT_MAX_TAGS ||
		    !(tag = read_tag(r)) || json_array_append_new(tags, tag))
			goto fail;
	} while (take(r, ','));
	if (take(r, ']'))
		return tags;
fail:
	json_decref(tags);
	return NULL;
}

static bool read_content(struct reader *r, struct comb_event *ev)
{
	struct span s;

	if (!scan_string(r, &s) || !(ev->content = malloc(s.len + 1)))
		return false;
	decode(&s, ev->content);
	ev->content[s.len] = '\0';
	ev->content_len = s.len;
	return true;
}

enum member { M_ID, M_PUBKEY, M_CREATED_AT, M_KIND, M_TAGS, M_CONTENT, M_SIG, M_COUNT };

static const char *const member_names[M_COUNT] = {
	"id", "pubkey", "created_at", "kind", "tags", "content", "sig",
};

/* Reads a member's key and the colon after it; M_COUNT when the key is
 * not an event's. */
static enum member read_key(struct reader *r)
{
	struct span s;
	int m;

	if (!scan_string(r, &s) || s.len != s.raw_len || !take(r, ':'))
		return M_COUNT;
	for (m = 0; m < M_COUNT; m++) {
		if (strlen(member_names[m]) == s.len &&
		    !memcmp(member_names[m], s.at, s.len))
			return (enum member)m;
	}
	return M_COUNT;
}

static bool read_member(struct reader *r, enum member m, struct comb_event *ev)
{
	int64_t v;

	switch (m) {
	case M_ID:
		return read_hex(r, ev->id, 64);
	case M_PUBKEY:
		return read_hex(r, ev->pubkey, 64);
	case M_SIG:
		return read_hex(r, ev->sig, 128);
	case M_CREATED_AT:
		return read_integer(r, &ev->created_at);
	case M_KIND:
		if (!read_integer(r, &v) || v > 65535)
			return false;
		ev->kind = (int)v;
		return true;
	case M_TAGS:
		return (ev->tags = read_tags(r)) != NULL;
	case M_CONTENT:
		return read_content(r, ev);
	default:
		return false;
	}
}

/* Reads the event object: each of the seven members once, no other. */
static bool read_event(struct reader *r, struct comb_event *ev)
{
	unsigned seen = 0;
	enum member m;

	if (!take(r, '{'))
		return false;
	do {
		m = read_key(r);
		if (m == M_COUNT || (seen & (1u << m)) || !read_member(r, m, ev))
			return false;
		seen |= 1u << m;
	} while (take(r, ','));
	return take(r, '}') && seen == (1u << M_COUNT) - 1;
}

int comb_event_message_parse(struct comb_event *ev, const char *buf, size_t len)
{
	struct reader r = {(const unsigned char *)buf, (const unsigned char *)buf + len};
	char type[6];

	memset(ev, 0, sizeof(*ev));
	if (buf && take(&r, '[') && read_exact(&r, type, 5) &&
	    !strcmp(type, "EVENT") && take(&r, ',') && read_event(&r, ev) &&
	    take(&r, ']')) {
		skip_space(&r);
		if (r.p == r.end)
			return 0;
	}
	comb_event_release(ev);
	return COMB_ENOTFOUND;
}
