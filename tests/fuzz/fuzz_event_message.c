/*
 * libFuzzer target for comb_event_message_parse, the one-pass reading of
 * ["EVENT", <event>], against the general way the relay reads every other
 * message (comb_json_parse, then comb_event_from_json of the second
 * element). Besides memory errors and undefined behaviour it traps when
 * the one-pass reading accepts what the general way refuses, reads a
 * different event, returns anything but 0 or COMB_ENOTFOUND, or declines
 * with a non-empty event.
 */
#include <stdint.h>
#include <string.h>

#include "comb/error.h"
#include "comb/event.h"
#include "fuzz_check.h"

#define FUZZ_MAX COMB_EVENT_DEFAULT_MAX_LENGTH

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct comb_event fast, general;
	char err[128];
	json_t *msg;
	int rc;

	if (size > FUZZ_MAX)
		return 0;  /* the relay checks its limit first */
	rc = comb_event_message_parse(&fast, buf, size);
	FUZZ_CHECK(rc == 0 || rc == COMB_ENOTFOUND);
	if (rc) {
		FUZZ_CHECK(fast.tags == NULL && fast.content == NULL &&
			   fast.id[0] == '\0' && fast.sig[0] == '\0');
		return 0;
	}
	msg = comb_json_parse(buf, size, FUZZ_MAX, err, sizeof(err));
	FUZZ_CHECK(msg != NULL);
	FUZZ_CHECK(json_is_array(msg) && json_array_size(msg) == 2);
	FUZZ_CHECK(strcmp(json_string_value(json_array_get(msg, 0)), "EVENT") == 0);
	FUZZ_CHECK(comb_event_from_json(&general, json_array_get(msg, 1), err,
					sizeof(err)) == 0);
	FUZZ_CHECK(strcmp(fast.id, general.id) == 0);
	FUZZ_CHECK(strcmp(fast.pubkey, general.pubkey) == 0);
	FUZZ_CHECK(strcmp(fast.sig, general.sig) == 0);
	FUZZ_CHECK(fast.created_at == general.created_at);
	FUZZ_CHECK(fast.kind == general.kind);
	FUZZ_CHECK(fast.content_len == general.content_len &&
		   memcmp(fast.content, general.content, fast.content_len) == 0);
	FUZZ_CHECK(json_equal(fast.tags, general.tags));
	comb_event_release(&general);
	comb_event_release(&fast);
	json_decref(msg);
	return 0;
}
