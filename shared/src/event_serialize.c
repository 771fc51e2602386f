/*
 * Event output: the NIP-01 id serialization [0,pubkey,created_at,kind,tags,
 * content], the event id (its SHA-256) and the event as a JSON object. All
 * strings go through comb_buf_json_string so the bytes match JavaScript's
 * JSON.stringify, which is what nostr-tools hashes; jansson's own dump
 * cannot be used since it escapes in uppercase hex.
 */
#include "comb/event.h"

#include "comb/error.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <string.h>

/* The largest serialization hashed for an id. Parsed events are bounded by
 * their input (the serialization is never longer than the JSON it came
 * from); this only stops runaway events built in process. */
#define EVENT_SERIALIZE_MAX (16u * 1024 * 1024)

/* Appends a NUL-terminated string field of at most cap bytes. */
static int put_field(struct comb_buf *out, const char *s, size_t cap)
{
	return comb_buf_json_string(out, s, strnlen(s, cap));
}

/* Appends tags as an array of arrays of strings; NULL tags count as an
 * empty array. Anything else in tags is COMB_EINVAL. */
static int put_tags(struct comb_buf *out, const json_t *tags)
{
	size_t i, j;
	int rc;

	if (tags == NULL)
		return comb_buf_puts(out, "[]");
	if (!json_is_array(tags))
		return COMB_EINVAL;
	rc = comb_buf_putc(out, '[');
	for (i = 0; rc == 0 && i < json_array_size(tags); i++) {
		const json_t *tag = json_array_get(tags, i);

		if (!json_is_array(tag))
			return COMB_EINVAL;
		if (i > 0)
			rc = comb_buf_putc(out, ',');
		if (rc == 0)
			rc = comb_buf_putc(out, '[');
		for (j = 0; rc == 0 && j < json_array_size(tag); j++) {
			const json_t *s = json_array_get(tag, j);

			if (!json_is_string(s))
				return COMB_EINVAL;
			if (j > 0)
				rc = comb_buf_putc(out, ',');
			if (rc == 0)
				rc = comb_buf_json_string(
				    out, json_string_value(s),
				    json_string_length(s));
		}
		if (rc == 0)
			rc = comb_buf_putc(out, ']');
	}
	if (rc == 0)
		rc = comb_buf_putc(out, ']');
	return rc;
}

/* Appends the content string, NULL counting as empty. */
static int put_content(struct comb_buf *out, const struct comb_event *ev)
{
	if (ev->content == NULL)
		return comb_buf_json_string(out, "", 0);
	return comb_buf_json_string(out, ev->content, ev->content_len);
}

/* Drops whatever a failed serialization appended after start. */
static int rollback(struct comb_buf *out, size_t start, int rc)
{
	if (rc < 0 && out->len > start) {
		out->len = start;
		out->data[start] = '\0';
	}
	return rc;
}

int comb_event_serialize(const struct comb_event *ev, struct comb_buf *out)
{
	size_t start = out->len;
	int rc;

	rc = comb_buf_puts(out, "[0,");
	if (rc == 0)
		rc = put_field(out, ev->pubkey, sizeof(ev->pubkey) - 1);
	if (rc == 0)
		rc = comb_buf_printf(out, ",%" PRId64 ",%d,", ev->created_at,
				     ev->kind);
	if (rc == 0)
		rc = put_tags(out, ev->tags);
	if (rc == 0)
		rc = comb_buf_putc(out, ',');
	if (rc == 0)
		rc = put_content(out, ev);
	if (rc == 0)
		rc = comb_buf_putc(out, ']');
	return rollback(out, start, rc);
}

int comb_event_compute_id(const struct comb_event *ev, unsigned char id32[32])
{
	struct comb_buf b;
	unsigned int mdlen = 0;
	int rc;

	comb_buf_init(&b, EVENT_SERIALIZE_MAX);
	rc = comb_event_serialize(ev, &b);
	if (rc < 0)
		goto out;
	if (!EVP_Digest(b.data, b.len, id32, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != 32)
		rc = COMB_ENOMEM;
out:
	comb_buf_release(&b);
	return rc;
}

int comb_event_to_json(const struct comb_event *ev, struct comb_buf *out)
{
	size_t start = out->len;
	int rc;

	rc = comb_buf_puts(out, "{\"id\":");
	if (rc == 0)
		rc = put_field(out, ev->id, sizeof(ev->id) - 1);
	if (rc == 0)
		rc = comb_buf_puts(out, ",\"pubkey\":");
	if (rc == 0)
		rc = put_field(out, ev->pubkey, sizeof(ev->pubkey) - 1);
	if (rc == 0)
		rc = comb_buf_printf(
		    out, ",\"created_at\":%" PRId64 ",\"kind\":%d,\"tags\":",
		    ev->created_at, ev->kind);
	if (rc == 0)
		rc = put_tags(out, ev->tags);
	if (rc == 0)
		rc = comb_buf_puts(out, ",\"content\":");
	if (rc == 0)
		rc = put_content(out, ev);
	if (rc == 0)
		rc = comb_buf_puts(out, ",\"sig\":");
	if (rc == 0)
		rc = put_field(out, ev->sig, sizeof(ev->sig) - 1);
	if (rc == 0)
		rc = comb_buf_putc(out, '}');
	return rollback(out, start, rc);
}
