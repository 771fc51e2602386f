/*
 * libFuzzer target for event parsing and output. Every input goes through
 * comb_json_parse and comb_event_parse; besides memory errors and undefined
 * behaviour it traps on broken contracts: an unexpected return code, a
 * failure without a reason or with a non-empty event, comb_event_from_json
 * disagreeing with comb_event_parse, a parsed event that cannot be written
 * out, output longer than its input, or output that does not parse back to
 * the same bytes (serialization and to_json must be a fixed point).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/buf.h"
#include "comb/error.h"
#include "comb/event.h"
#include "comb/json.h"

#define FUZZ_MAX COMB_EVENT_DEFAULT_MAX_LENGTH

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "fuzz_event: check failed: %s\n",      \
				#cond);                                        \
			__builtin_trap();                                      \
		}                                                              \
	} while (0)

static int is_empty(const struct comb_event *ev)
{
	return ev->tags == NULL && ev->content == NULL &&
	       ev->content_len == 0 && ev->id[0] == '\0' && ev->sig[0] == '\0';
}

/* A failure must say why in a NUL-terminated, non-empty reason. */
static void check_reason(const char *err, size_t len)
{
	CHECK(memchr(err, '\0', len) != NULL);
	CHECK(err[0] != '\0');
}

/* Exercises what a caller does with an accepted event. */
static void check_event(const struct comb_event *ev, size_t insize)
{
	struct comb_buf ser, out, ser2, out2;
	struct comb_event back;
	unsigned char id[32];
	char err[128];
	int rc;

	comb_buf_init(&ser, 8 * FUZZ_MAX);
	comb_buf_init(&out, 8 * FUZZ_MAX);
	comb_buf_init(&ser2, 8 * FUZZ_MAX);
	comb_buf_init(&out2, 8 * FUZZ_MAX);

	CHECK(comb_event_serialize(ev, &ser) == 0);
	CHECK(comb_event_to_json(ev, &out) == 0);
	/* JSON.stringify form never needs more bytes than any valid input. */
	CHECK(out.len <= insize);
	CHECK(comb_event_compute_id(ev, id) == 0);

	memset(err, 'x', sizeof(err));
	rc = comb_event_verify(ev, err, sizeof(err));
	CHECK(rc == 0 || rc == COMB_EINVAL);
	if (rc != 0) {
		check_reason(err, sizeof(err));
		CHECK(strcmp(err, "bad event id") == 0 ||
		      strcmp(err, "bad signature") == 0);
	}

	memset(err, 'x', sizeof(err));
	rc = comb_event_parse(&back, out.data, out.len, FUZZ_MAX, err,
			      sizeof(err));
	CHECK(rc == 0);
	CHECK(comb_event_serialize(&back, &ser2) == 0);
	CHECK(comb_event_to_json(&back, &out2) == 0);
	CHECK(ser.len == ser2.len && memcmp(ser.data, ser2.data, ser.len) == 0);
	CHECK(out.len == out2.len && memcmp(out.data, out2.data, out.len) == 0);
	CHECK(back.content_len == ev->content_len);
	CHECK(json_equal(back.tags, ev->tags));

	comb_event_tag_count(ev, "e");
	comb_event_tag_value(ev, "h");
	comb_event_tag(ev, "");

	comb_event_release(&back);
	comb_buf_release(&ser);
	comb_buf_release(&out);
	comb_buf_release(&ser2);
	comb_buf_release(&out2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct comb_event ev, ev2;
	char err[128], err2[128];
	json_t *v;
	int rc, rc2;

	memset(err, 'x', sizeof(err));
	v = comb_json_parse(buf, size, FUZZ_MAX, err, sizeof(err));
	if (v == NULL)
		check_reason(err, sizeof(err));

	memset(err, 'x', sizeof(err));
	rc = comb_event_parse(&ev, buf, size, FUZZ_MAX, err, sizeof(err));
	CHECK(rc == 0 || rc == COMB_EINVAL || rc == COMB_ETOOBIG);
	CHECK((rc == COMB_ETOOBIG) == (size > FUZZ_MAX));
	if (rc != 0) {
		check_reason(err, sizeof(err));
		CHECK(is_empty(&ev));
	}
	/* The same rules hold from an already parsed value. */
	if (v != NULL) {
		memset(err2, 'x', sizeof(err2));
		rc2 = comb_event_from_json(&ev2, v, err2, sizeof(err2));
		CHECK(rc2 == rc);
		if (rc2 != 0)
			CHECK(strcmp(err, err2) == 0);
		comb_event_release(&ev2);
	} else {
		CHECK(rc != 0);
	}
	if (rc == 0)
		check_event(&ev, size);
	comb_event_release(&ev);
	json_decref(v);
	return 0;
}
