/*
 * Nostr events (NIP-01): parsing with every structural rule, the id
 * serialization byte-identical to nostr-tools' serializeEvent, BIP-340
 * Schnorr verification and signing.
 */
#ifndef COMB_EVENT_H
#define COMB_EVENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/buf.h"

#define COMB_EVENT_MAX_TAGS 256
#define COMB_EVENT_DEFAULT_MAX_LENGTH 65536

struct comb_event {
	char id[65];          /* lowercase hex */
	char pubkey[65];      /* lowercase hex, x-only key */
	char sig[129];        /* lowercase hex */
	int64_t created_at;
	int kind;             /* 0..65535 */
	json_t *tags;         /* owned: array of arrays of strings, each
	                         tag with at least one element */
	char *content;        /* owned; may contain NUL */
	size_t content_len;
};

/*
 * Parses one event object from len bytes of buf (at most max bytes).
 * Checks the shape only: exactly the seven keys, lowercase hex of the right
 * lengths, integer created_at >= 0 and kind in 0..65535, tags an array of
 * non-empty arrays of strings, at most COMB_EVENT_MAX_TAGS tags, no NUL in
 * tag strings. Does not check the id or the signature (comb_event_verify).
 * On success ev is filled (release with comb_event_release); on failure ev
 * is left empty and errbuf says why. Returns COMB_ETOOBIG for oversized
 * input, COMB_EINVAL otherwise.
 */
int comb_event_parse(struct comb_event *ev, const char *buf, size_t len,
		     size_t max, char *errbuf, size_t errlen);

/* Same as comb_event_parse, from an already parsed JSON object (borrowed). */
int comb_event_from_json(struct comb_event *ev, const json_t *obj,
			 char *errbuf, size_t errlen);

/*
 * Reads the message ["EVENT", <event>] of len bytes at buf in one pass,
 * without a JSON tree. Returns 0 with ev filled (release with
 * comb_event_release) only when buf is exactly that message and the event
 * passes every rule of comb_event_parse; then the general way
 * (comb_json_parse, comb_event_from_json of its second element) reads the
 * same event. Returns COMB_ENOTFOUND, ev left empty, for anything else,
 * valid or not: unusual forms (a \u escape, a number with a fraction) are
 * left to the general way, which also words every refusal. The caller
 * checks len against its message limit first.
 */
int comb_event_message_parse(struct comb_event *ev, const char *buf,
			     size_t len);

/* Frees what ev owns and leaves it empty. Safe on an empty event. */
void comb_event_release(struct comb_event *ev);

/*
 * Appends the NIP-01 id serialization [0,pubkey,created_at,kind,tags,content]
 * exactly as JSON.stringify would write it.
 */
int comb_event_serialize(const struct comb_event *ev, struct comb_buf *out);

/* Computes the SHA-256 of the serialization into id32. */
int comb_event_compute_id(const struct comb_event *ev, unsigned char id32[32]);

/*
 * Checks that ev->id is the hash of its serialization and that ev->sig is a
 * valid BIP-340 signature by ev->pubkey over it. Returns 0, or COMB_EINVAL
 * with "bad event id" or "bad signature" in errbuf.
 */
int comb_event_verify(const struct comb_event *ev, char *errbuf, size_t errlen);

/*
 * Sets pubkey from seckey32, then computes id and sig. created_at, kind,
 * tags and content must already be set.
 */
int comb_event_sign(struct comb_event *ev, const unsigned char seckey32[32]);

/* Derives the x-only public key (64 lowercase hex + NUL) of seckey32.
 * Returns COMB_EINVAL for an invalid secret key. */
int comb_key_public(const unsigned char seckey32[32], char pubkey_hex[65]);

/* Fills seckey32 with a new random valid secret key. */
int comb_key_generate(unsigned char seckey32[32]);

/* Appends the event as a JSON object (keys id, pubkey, created_at, kind,
 * tags, content, sig) with JSON.stringify escaping. */
int comb_event_to_json(const struct comb_event *ev, struct comb_buf *out);

/* Returns the first tag whose name is name (borrowed), or NULL. */
json_t *comb_event_tag(const struct comb_event *ev, const char *name);

/* Returns the second element of the first tag named name (borrowed), or
 * NULL when there is no such tag or it has only a name. */
const char *comb_event_tag_value(const struct comb_event *ev, const char *name);

/* Counts the tags named name. */
size_t comb_event_tag_count(const struct comb_event *ev, const char *name);

/*
 * Returns the value of the only tag named name, or NULL with "missing
 * <name> tag" or "duplicate <name> tag" in errbuf when it is absent, has no
 * value or appears more than once (two would leave open which one was
 * meant).
 */
const char *comb_event_single_tag(const struct comb_event *ev,
				  const char *name, char *errbuf,
				  size_t errlen);

#endif
