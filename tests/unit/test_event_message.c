/*
 * Unit tests for comb_event_message_parse, the one-pass reading of
 * ["EVENT", <event>]: every nostr-tools vector (tests/vectors/events.json)
 * is read as the general way (comb_json_parse, comb_event_from_json) reads
 * it, with any JSON whitespace; everything it must leave to the general
 * way is declined with the event left empty, including every prefix of a
 * valid message.
 */
#include "test_util.h"

#include <stdlib.h>

#include "comb/buf.h"
#include "comb/error.h"
#include "comb/event.h"
#include "comb/json.h"

#define MAX COMB_EVENT_DEFAULT_MAX_LENGTH

static json_t *vectors;

static int load_vectors(void **state)
{
	(void)state;
	vectors = test_load_json("vectors/events.json");
	return vectors != NULL && json_array_size(vectors) >= 15 ? 0 : -1;
}

static int free_vectors(void **state)
{
	(void)state;
	json_decref(vectors);
	return 0;
}

/* The event the general way reads from message; fails the test when it
 * refuses the message. */
static void read_generally(const char *message, struct comb_event *ev)
{
	char err[128];
	json_t *msg = comb_json_parse(message, strlen(message), MAX, err, sizeof(err));

	if (!msg)
		fail_msg("the general way refused %s: %s", message, err);
	assert_int_equal(json_array_size(msg), 2);
	assert_string_equal(json_string_value(json_array_get(msg, 0)), "EVENT");
	if (comb_event_from_json(ev, json_array_get(msg, 1), err, sizeof(err)))
		fail_msg("the general way refused %s: %s", message, err);
	json_decref(msg);
}

static void assert_same_event(const struct comb_event *a, const struct comb_event *b)
{
	assert_string_equal(a->id, b->id);
	assert_string_equal(a->pubkey, b->pubkey);
	assert_string_equal(a->sig, b->sig);
	assert_int_equal(a->created_at, b->created_at);
	assert_int_equal(a->kind, b->kind);
	assert_bytes_equal(a->content, a->content_len, b->content, b->content_len);
	assert_true(json_equal(a->tags, b->tags));
}

static void assert_empty(const struct comb_event *ev)
{
	assert_null(ev->tags);
	assert_null(ev->content);
	assert_int_equal(ev->content_len, 0);
	assert_string_equal(ev->id, "");
	assert_string_equal(ev->sig, "");
}

/* Reads message in one pass and checks it against the general way. */
static void expect_read(const char *message)
{
	struct comb_event fast, general;

	if (comb_event_message_parse(&fast, message, strlen(message)) != 0)
		fail_msg("declined: %s", message);
	read_generally(message, &general);
	assert_same_event(&fast, &general);
	comb_event_release(&fast);
	comb_event_release(&general);
}

static void expect_declined(const char *message, size_t len)
{
	struct comb_event ev;

	if (comb_event_message_parse(&ev, message, len) != COMB_ENOTFOUND)
		fail_msg("read: %.*s", (int)len, message);
	assert_empty(&ev);
}

/* "[\"EVENT\"," + the vector's JSON.stringify text + "]" */
static char *vector_message(size_t i, const char *before, const char *after)
{
	const json_t *text = json_object_get(json_array_get(vectors, i), "json");
	size_t len = json_string_length(text) + 64;
	char *m = malloc(len);

	assert_non_null(m);
	snprintf(m, len, "[%s\"EVENT\"%s,%s%s%s]", before, after, before,
		 json_string_value(text), after);
	return m;
}

static void test_reads_every_vector(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < json_array_size(vectors); i++) {
		char *plain = vector_message(i, "", "");
		char *spaced = vector_message(i, " \t\r\n", "\n ");

		/* a vector with \u escapes is the general way's alone */
		if (strstr(plain, "\\u")) {
			expect_declined(plain, strlen(plain));
		} else {
			expect_read(plain);
			expect_read(spaced);
		}
		free(plain);
		free(spaced);
	}
}

/* A valid message with one member's text replaced (NULL: left out). */
static char *message_with(const char *key, const char *value)
{
	static const char *const keys[] = {
	    "id", "pubkey", "created_at", "kind", "tags", "content", "sig",
	};
	const json_t *ev = json_object_get(json_array_get(vectors, 0), "event");
	struct comb_buf b;
	size_t i;
	bool first = true;

	comb_buf_init(&b, 1 << 20);
	assert_int_equal(comb_buf_puts(&b, "[\"EVENT\",{"), 0);
	for (i = 0; i < 7; i++) {
		char *text = json_dumps(json_object_get(ev, keys[i]), JSON_ENCODE_ANY);

		if (!strcmp(keys[i], key) && !value) {
			free(text);
			continue;
		}
		assert_int_equal(comb_buf_printf(&b, "%s\"%s\":%s", first ? "" : ",",
						 keys[i], strcmp(keys[i], key) ? text : value), 0);
		first = false;
		free(text);
	}
	assert_int_equal(comb_buf_puts(&b, "}]"), 0);
	return comb_buf_detach(&b, NULL);
}

static void test_declines_the_unusual(void **state)
{
	static const char *const members[][2] = {
		{"content", "\"caf\\u00e9\""},       /* \u escape: valid, declined */
		{"content", "\"a\tb\""},             /* raw control character */
		{"content", "\"\xc3\""},             /* truncated UTF-8 */
		{"content", "\"\xed\xa0\x80\""},     /* encoded surrogate */
		{"content", "\"\\x\""},              /* unknown escape */
		{"content", "5"},
		{"created_at", "1.5"},
		{"created_at", "1e3"},
		{"created_at", "01"},
		{"created_at", "-1"},
		{"created_at", "1234567890123456789"},
		{"kind", "65536"},
		{"kind", "true"},
		{"id", "\"\\u0061\""},
		{"tags", "[[]]"},
		{"tags", "[[\"t\",1]]"},
		{"tags", "[\"t\"]"},
		{"tags", "{}"},
		{"tags", "[[\"a\\u0000\"]]"},
		{"sig", NULL},
	};
	static const char *const messages[] = {
		"",
		"[]",
		"[\"EVENT\"]",
		"[\"EVENTS\",{}]",
		"[\"REQ\",\"x\",{}]",
		"{\"EVENT\":1}",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
		char *m = message_with(members[i][0], members[i][1]);

		expect_declined(m, strlen(m));
		free(m);
	}
	for (i = 0; i < sizeof(messages) / sizeof(messages[0]); i++)
		expect_declined(messages[i], strlen(messages[i]));
}

static void test_declines_other_shapes(void **state)
{
	char *m = vector_message(0, "", ""), *e;
	size_t len = strlen(m), i;

	(void)state;
	expect_read(m);
	/* every prefix */
	for (i = 0; i < len; i++)
		expect_declined(m, i);
	/* one more element, trailing bytes, an extra or a repeated key */
	e = malloc(len + 64);
	assert_non_null(e);
	snprintf(e, len + 64, "%.*s,1]", (int)(len - 1), m);
	expect_declined(e, strlen(e));
	snprintf(e, len + 64, "%s x", m);
	expect_declined(e, strlen(e));
	snprintf(e, len + 64, "%.*s,\"extra\":1}]", (int)(len - 2), m);
	expect_declined(e, strlen(e));
	snprintf(e, len + 64, "%.*s,\"kind\":1}]", (int)(len - 2), m);
	expect_declined(e, strlen(e));
	/* the general way reads what is declined for its form alone */
	free(e);
	e = message_with("content", "\"caf\\u00e9\"");
	{
		struct comb_event ev;

		read_generally(e, &ev);
		assert_string_equal(ev.content, "caf\xc3\xa9");
		comb_event_release(&ev);
	}
	free(e);
	free(m);
}

static void test_reads_escapes_and_spacing(void **state)
{
	char *m;

	(void)state;
	m = message_with("content", "\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \xe2\x82\xac \xf0\x9f\x98\x80 end\"");
	expect_read(m);
	free(m);
	m = message_with("tags", " [ [ \"h\" , \"x\\ty\" ] , [\"\"] ] ");
	expect_read(m);
	free(m);
	m = message_with("tags", "[]");
	expect_read(m);
	free(m);
	m = message_with("created_at", "0");
	expect_read(m);
	free(m);
	m = message_with("kind", " 65535 ");
	expect_read(m);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reads_every_vector),
	    cmocka_unit_test(test_declines_the_unusual),
	    cmocka_unit_test(test_declines_other_shapes),
	    cmocka_unit_test(test_reads_escapes_and_spacing),
	};

	return cmocka_run_group_tests(tests, load_vectors, free_vectors);
}
