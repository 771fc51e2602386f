/*
 * libFuzzer target for the envelope of artifact revisions
 * (services/relay/proto/artifact_envelope.c, PROTOCOL.md section 5). The
 * input is an event's JSON; whatever comb_event_parse accepts (the
 * signature plays no part in the envelope) goes through
 * artifact_envelope_check. Besides memory errors it traps when the verdict
 * differs from a reference model written here from the protocol's envelope
 * rules (ar = 1; d and h canonical uuids; type dot-separated lowercase
 * components of at most 128 bytes; op one of five; root and prev 64
 * lowercase hex, prev exactly when op is not create; each envelope tag and
 * title at most once with exactly two elements; a title that is not blank
 * and at most 512 bytes, except on delete, which has no title, empty
 * content and only envelope tags; tag names at most 128 bytes, values
 * 4096, all tags 65536), on a refusal without a reason, and on an accepted
 * envelope whose fields are not the event's own tag values.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "comb/error.h"
#include "comb/uuid.h"
#include "fuzz_check.h"
#include "proto/proto.h"

#define FUZZ_MAX_INPUT (2 * COMB_EVENT_DEFAULT_MAX_LENGTH)

static const char *const names[] = {"ar", "d", "h", "type", "op", "root",
				    "prev", "title"};
enum { AR, D, H, TYPE, OP, ROOT, PREV, TITLE, NNAMES };
static const char *const ops[] = {"create", "update", "move", "delete",
				  "restore"};

static bool hex64(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

static bool model_type(const char *s)
{
	size_t len = strlen(s), i;
	bool start = true, dot = false;

	if (len == 0 || len > 128)
		return false;
	for (i = 0; i < len; i++) {
		char c = s[i];

		if (start) {
			if (c < 'a' || c > 'z')
				return false;
			start = false;
		} else if (c == '.') {
			dot = true;
			start = true;
		} else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			     c == '_' || c == '-')) {
			return false;
		}
	}
	return dot && !start;
}

static bool blank(const char *s)
{
	return strspn(s, " \t\n\r\f\v") == strlen(s);
}

/* The model's verdict; fills v[] with the envelope values it found. */
static bool model(const struct comb_event *ev, const char *v[NNAMES])
{
	size_t i, j, k, total = 0;
	bool others = false;
	int op = -1;

	memset(v, 0, NNAMES * sizeof(*v));
	for (i = 0; i < json_array_size(ev->tags); i++) {
		const json_t *tag = json_array_get(ev->tags, i);
		const char *name = json_string_value(json_array_get(tag, 0));

		for (j = 0; j < json_array_size(tag); j++) {
			size_t len = json_string_length(json_array_get(tag, j));

			if (len > (j == 0 ? 128u : 4096u))
				return false;
			total += len;
		}
		for (k = 0; k < NNAMES && strcmp(name, names[k]); k++)
			;
		if (k == NNAMES) {
			others = true;
			continue;
		}
		if (v[k] || json_array_size(tag) != 2)
			return false;
		v[k] = json_string_value(json_array_get(tag, 1));
	}
	if (total > 65536)
		return false;
	if (!v[AR] || strcmp(v[AR], "1") || !v[D] || !comb_uuid_is_canonical(v[D]) ||
	    !v[H] || !comb_uuid_is_canonical(v[H]) || !v[TYPE] ||
	    !model_type(v[TYPE]) || !v[OP])
		return false;
	for (k = 0; k < 5; k++)
		if (!strcmp(v[OP], ops[k]))
			op = (int)k;
	if (op < 0)
		return false;
	if ((v[ROOT] && !hex64(v[ROOT])) || (v[PREV] && !hex64(v[PREV])))
		return false;
	if ((op == ARTIFACT_CREATE) != (v[PREV] == NULL))
		return false;
	if (op == ARTIFACT_DELETE)
		return !v[TITLE] && ev->content_len == 0 && !others;
	return v[TITLE] && !blank(v[TITLE]) && strlen(v[TITLE]) <= 512;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct artifact_envelope env;
	const char *v[NNAMES];
	struct comb_event ev;
	char err[160];
	bool want;
	int rc;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (comb_event_parse(&ev, (const char *)data, size, FUZZ_MAX_INPUT, err,
			     sizeof(err)))
		return 0;
	want = model(&ev, v);
	memset(err, 'x', sizeof(err));
	rc = artifact_envelope_check(&ev, &env, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == COMB_EINVAL);
	if (rc) {
		fuzz_check_reason(err, sizeof(err));
		if (want)
			fprintf(stderr, "fuzz_artifact_envelope: refused (%s), model accepts\n", err);
		FUZZ_CHECK(!want);
	} else {
		FUZZ_CHECK(want);
		FUZZ_CHECK(env.d == v[D] && env.h == v[H] && env.type == v[TYPE]);
		FUZZ_CHECK(!strcmp(artifact_op_name(env.op), v[OP]));
		FUZZ_CHECK(env.root == v[ROOT] && env.prev == v[PREV]);
		FUZZ_CHECK(env.title == (env.op == ARTIFACT_DELETE ? NULL : v[TITLE]));
	}
	comb_event_release(&ev);
	return 0;
}
