/*
 * Nostr events: parsing with every structural rule of NIP-01 as comb
 * applies it (exactly seven keys, lowercase hex of the right lengths,
 * integer created_at and kind, bounded tags of strings without NUL), the
 * release of what an event owns, and tag lookups. Serialization lives in
 * event_serialize.c, signatures in key.c.
 */
#include "comb/event.h"

#include "comb/error.h"
#include "comb/hex.h"
#include "comb/json.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The keys of an event object, all required, no others allowed. */
static const char *const event_keys[] = {
    "id", "pubkey", "created_at", "kind", "tags", "content", "sig",
};
#define EVENT_NKEYS (sizeof(event_keys) / sizeof(event_keys[0]))

/* Checks a lowercase hex string member of exactly len digits. */
static bool hex_member(const json_t *v, size_t len)
{
	return json_is_string(v) && json_string_length(v) == len &&
	       comb_hex_is_lower(json_string_value(v), len);
}

/* Checks the tags array: at most COMB_EVENT_MAX_TAGS non-empty arrays of
 * strings without NUL. */
static int check_tags(const json_t *tags, char *errbuf, size_t errlen)
{
	size_t i, j;

	if (!json_is_array(tags))
		return comb_fail(errbuf, errlen, COMB_EINVAL, "bad tags");
	if (json_array_size(tags) > COMB_EVENT_MAX_TAGS)
		return comb_fail(errbuf, errlen, COMB_EINVAL, "too many tags");
	for (i = 0; i < json_array_size(tags); i++) {
		const json_t *tag = json_array_get(tags, i);

		if (!json_is_array(tag) || json_array_size(tag) == 0)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "bad tag");
		for (j = 0; j < json_array_size(tag); j++) {
			const json_t *s = json_array_get(tag, j);

			if (!json_is_string(s))
				return comb_fail(errbuf, errlen, COMB_EINVAL,
						 "bad tag");
			if (memchr(json_string_value(s), '\0',
				   json_string_length(s)) != NULL)
				return comb_fail(errbuf, errlen, COMB_EINVAL,
						 "tag contains nul");
		}
	}
	return 0;
}

/*
 * Checks obj and fills ev. The tags are shared with obj (one more
 * reference) when share_tags is set, deep-copied otherwise, so that a
 * borrowed obj is never touched.
 */
static int event_load(struct comb_event *ev, const json_t *obj, bool share_tags,
		      char *errbuf, size_t errlen)
{
	const json_t *v[EVENT_NKEYS];
	const char *content;
	json_int_t n;
	size_t i, clen;
	int rc;

	memset(ev, 0, sizeof(*ev));
	if (!json_is_object(obj))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "event is not an object");
	for (i = 0; i < EVENT_NKEYS; i++) {
		v[i] = json_object_get(obj, event_keys[i]);
		if (v[i] == NULL)
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "missing %s", event_keys[i]);
	}
	if (json_object_size(obj) != EVENT_NKEYS)
		return comb_fail(errbuf, errlen, COMB_EINVAL, "unknown key");

	if (!hex_member(v[0], 64))
		return comb_fail(errbuf, errlen, COMB_EINVAL, "malformed id");
	if (!hex_member(v[1], 64))
		return comb_fail(errbuf, errlen, COMB_EINVAL,
				 "malformed pubkey");
	if (!json_is_integer(v[2]) || json_integer_value(v[2]) < 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL, "bad created_at");
	n = json_is_integer(v[3]) ? json_integer_value(v[3]) : -1;
	if (n < 0 || n > 65535)
		return comb_fail(errbuf, errlen, COMB_EINVAL, "bad kind");
	rc = check_tags(v[4], errbuf, errlen);
	if (rc < 0)
		return rc;
	if (!json_is_string(v[5]))
		return comb_fail(errbuf, errlen, COMB_EINVAL, "bad content");
	if (!hex_member(v[6], 128))
		return comb_fail(errbuf, errlen, COMB_EINVAL, "malformed sig");

	content = json_string_value(v[5]);
	clen = json_string_length(v[5]);
	ev->content = malloc(clen + 1);
	if (ev->content == NULL)
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	memcpy(ev->content, content, clen);
	ev->content[clen] = '\0';
	ev->content_len = clen;
	if (share_tags)
		ev->tags = json_incref((json_t *)v[4]);
	else
		ev->tags = json_deep_copy(v[4]);
	if (ev->tags == NULL) {
		comb_event_release(ev);
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	}
	memcpy(ev->id, json_string_value(v[0]), 65);
	memcpy(ev->pubkey, json_string_value(v[1]), 65);
	memcpy(ev->sig, json_string_value(v[6]), 129);
	ev->created_at = (int64_t)json_integer_value(v[2]);
	ev->kind = (int)n;
	return 0;
}

int comb_event_parse(struct comb_event *ev, const char *buf, size_t len,
		     size_t max, char *errbuf, size_t errlen)
{
	json_t *obj;
	int rc;

	memset(ev, 0, sizeof(*ev));
	if (len > max)
		return comb_fail(errbuf, errlen, COMB_ETOOBIG,
				 "event too large");
	obj = comb_json_parse(buf, len, max, errbuf, errlen);
	if (obj == NULL)
		return COMB_EINVAL;
	rc = event_load(ev, obj, true, errbuf, errlen);
	json_decref(obj);
	return rc;
}

int comb_event_from_json(struct comb_event *ev, const json_t *obj, char *errbuf,
			 size_t errlen)
{
	return event_load(ev, obj, false, errbuf, errlen);
}

void comb_event_release(struct comb_event *ev)
{
	json_decref(ev->tags);
	free(ev->content);
	memset(ev, 0, sizeof(*ev));
}

/* True when tag is an array whose first element is the string name. */
static bool tag_is(const json_t *tag, const char *name)
{
	const char *s = json_string_value(json_array_get(tag, 0));

	return s != NULL && strcmp(s, name) == 0;
}

json_t *comb_event_tag(const struct comb_event *ev, const char *name)
{
	size_t i;

	for (i = 0; i < json_array_size(ev->tags); i++) {
		json_t *tag = json_array_get(ev->tags, i);

		if (tag_is(tag, name))
			return tag;
	}
	return NULL;
}

const char *comb_event_tag_value(const struct comb_event *ev, const char *name)
{
	return json_string_value(json_array_get(comb_event_tag(ev, name), 1));
}

size_t comb_event_tag_count(const struct comb_event *ev, const char *name)
{
	size_t i, count = 0;

	for (i = 0; i < json_array_size(ev->tags); i++) {
		if (tag_is(json_array_get(ev->tags, i), name))
			count++;
	}
	return count;
}

const char *comb_event_single_tag(const struct comb_event *ev,
				  const char *name, char *errbuf,
				  size_t errlen)
{
	const char *v;

	if (comb_event_tag_count(ev, name) > 1) {
		comb_fail(errbuf, errlen, COMB_EINVAL, "duplicate %s tag", name);
		return NULL;
	}
	v = comb_event_tag_value(ev, name);
	if (v == NULL)
		comb_fail(errbuf, errlen, COMB_EINVAL, "missing %s tag", name);
	return v;
}
