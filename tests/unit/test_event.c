/*
 * Unit tests for events: the NIP-01 serialization, id and signatures
 * checked byte for byte against vectors produced by nostr-tools
 * (tests/vectors/events.json), re-signing with the vectors' keys, every
 * parsing rule with its message, tag lookups and concurrent verification;
 * and comb_event_message_parse, the one-pass reading of ["EVENT", <event>]:
 * every vector read as the general way (comb_json_parse,
 * comb_event_from_json) reads it, with any JSON whitespace, and everything
 * it must leave to the general way declined with the event left empty,
 * every prefix of a valid message included.
 */
#include "test_util.h"

#include <pthread.h>
#include <stdlib.h>

#include "comb/buf.h"
#include "comb/error.h"
#include "comb/event.h"
#include "comb/hex.h"
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

static const json_t *vector_named(const char *name)
{
	size_t i;

	for (i = 0; i < json_array_size(vectors); i++) {
		const json_t *v = json_array_get(vectors, i);

		if (strcmp(json_string_value(json_object_get(v, "name")),
			   name) == 0)
			return v;
	}
	fail_msg("no vector named %s", name);
	return NULL;
}

/* Returns the event of vector i as a field string (borrowed). */
static const char *vec_field(size_t i, const char *key)
{
	return json_string_value(json_object_get(
	    json_object_get(json_array_get(vectors, i), "event"), key));
}

/* Parses the JSON.stringify text of a vector into ev. */
static void parse_vector(const json_t *v, struct comb_event *ev)
{
	const json_t *text = json_object_get(v, "json");
	char err[128];
	int rc;

	rc = comb_event_parse(ev, json_string_value(text),
			      json_string_length(text), MAX, err, sizeof(err));
	if (rc != 0)
		fail_msg("vector %s: %s",
			 json_string_value(json_object_get(v, "name")), err);
}

static void assert_empty(const struct comb_event *ev)
{
	assert_null(ev->tags);
	assert_null(ev->content);
	assert_int_equal(ev->content_len, 0);
	assert_string_equal(ev->id, "");
	assert_string_equal(ev->sig, "");
}

static void test_vectors_serialize(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < json_array_size(vectors); i++) {
		const json_t *v = json_array_get(vectors, i);
		const json_t *evj = json_object_get(v, "event");
		const json_t *ser = json_object_get(v, "serialized");
		const json_t *text = json_object_get(v, "json");
		const json_t *content = json_object_get(evj, "content");
		struct comb_event ev;
		struct comb_buf b;
		unsigned char id[32];
		char idhex[65], err[128];

		parse_vector(v, &ev);
		assert_string_equal(
		    ev.id, json_string_value(json_object_get(evj, "id")));
		assert_string_equal(
		    ev.pubkey,
		    json_string_value(json_object_get(evj, "pubkey")));
		assert_string_equal(
		    ev.sig, json_string_value(json_object_get(evj, "sig")));
		assert_int_equal(
		    ev.created_at,
		    json_integer_value(json_object_get(evj, "created_at")));
		assert_int_equal(
		    ev.kind, json_integer_value(json_object_get(evj, "kind")));
		assert_bytes_equal(ev.content, ev.content_len,
				   json_string_value(content),
				   json_string_length(content));
		assert_true(json_equal(ev.tags, json_object_get(evj, "tags")));

		comb_buf_init(&b, 1 << 20);
		assert_int_equal(comb_event_serialize(&ev, &b), 0);
		assert_bytes_equal(b.data, b.len, json_string_value(ser),
				   json_string_length(ser));
		comb_buf_reset(&b);
		assert_int_equal(comb_event_to_json(&ev, &b), 0);
		assert_bytes_equal(b.data, b.len, json_string_value(text),
				   json_string_length(text));
		comb_buf_release(&b);

		assert_int_equal(comb_event_compute_id(&ev, id), 0);
		comb_hex_encode(id, sizeof(id), idhex);
		assert_string_equal(idhex, ev.id);
		if (comb_event_verify(&ev, err, sizeof(err)) != 0)
			fail_msg("vector %zu: %s", i, err);
		comb_event_release(&ev);
		assert_empty(&ev);
	}
}

static void test_vectors_from_json(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < json_array_size(vectors); i++) {
		const json_t *v = json_array_get(vectors, i);
		json_t *evj = json_deep_copy(json_object_get(v, "event"));
		const json_t *ser = json_object_get(v, "serialized");
		struct comb_event ev;
		struct comb_buf b;
		char err[128];

		assert_int_equal(
		    comb_event_from_json(&ev, evj, err, sizeof(err)), 0);
		/* The event owns its tags: changing the source does not leak
		 * in. */
		assert_ptr_not_equal(ev.tags, json_object_get(evj, "tags"));
		json_array_append_new(json_object_get(evj, "tags"),
				      json_pack("[s]", "late"));
		json_decref(evj);
		comb_buf_init(&b, 1 << 20);
		assert_int_equal(comb_event_serialize(&ev, &b), 0);
		assert_bytes_equal(b.data, b.len, json_string_value(ser),
				   json_string_length(ser));
		comb_buf_release(&b);
		assert_int_equal(comb_event_verify(&ev, err, sizeof(err)), 0);
		comb_event_release(&ev);
	}
}

static void test_vectors_resign(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < json_array_size(vectors); i++) {
		const json_t *v = json_array_get(vectors, i);
		unsigned char sk[32];
		char pub[65], err[128], oldsig[129];
		struct comb_event ev, back;
		struct comb_buf b;

		assert_int_equal(
		    comb_hex_decode(comb_json_get_string(v, "secret_key"), sk,
				    sizeof(sk)),
		    0);
		assert_int_equal(comb_key_public(sk, pub), 0);
		assert_string_equal(pub, vec_field(i, "pubkey"));

		parse_vector(v, &ev);
		memcpy(oldsig, ev.sig, sizeof(oldsig));
		memset(ev.pubkey, 0, sizeof(ev.pubkey));
		memset(ev.id, 0, sizeof(ev.id));
		memset(ev.sig, 0, sizeof(ev.sig));
		assert_int_equal(comb_event_sign(&ev, sk), 0);
		assert_string_equal(ev.pubkey, vec_field(i, "pubkey"));
		assert_string_equal(ev.id, vec_field(i, "id"));
		assert_true(comb_hex_is_lower(ev.sig, 128));
		/* Random auxiliary data: a new signature each time. */
		assert_string_not_equal(ev.sig, oldsig);
		if (comb_event_verify(&ev, err, sizeof(err)) != 0)
			fail_msg("re-signed vector %zu: %s", i, err);

		comb_buf_init(&b, 1 << 20);
		assert_int_equal(comb_event_to_json(&ev, &b), 0);
		assert_int_equal(comb_event_parse(&back, b.data, b.len, MAX,
						  err, sizeof(err)),
				 0);
		assert_int_equal(comb_event_verify(&back, err, sizeof(err)), 0);
		assert_string_equal(back.sig, ev.sig);
		comb_buf_release(&b);
		comb_event_release(&back);
		comb_event_release(&ev);
	}
}

static void expect_verify_fail(const struct comb_event *ev, const char *msg)
{
	char err[128] = "";

	assert_int_equal(comb_event_verify(ev, err, sizeof(err)), COMB_EINVAL);
	assert_string_equal(err, msg);
}

/* Recomputes ev->id from its current fields. */
static void reid(struct comb_event *ev)
{
	unsigned char id[32];

	assert_int_equal(comb_event_compute_id(ev, id), 0);
	comb_hex_encode(id, sizeof(id), ev->id);
}

static void test_verify_rejects(void **state)
{
	struct comb_event ev, other;
	char save;

	(void)state;
	parse_vector(json_array_get(vectors, 0), &ev);
	parse_vector(json_array_get(vectors, 1), &other);

	/* A wrong id, with everything else intact. */
	save = ev.id[10];
	ev.id[10] = save == '0' ? '1' : '0';
	expect_verify_fail(&ev, "bad event id");
	ev.id[10] = save;
	assert_int_equal(comb_event_verify(&ev, NULL, 0), 0);

	/* Content changed after signing. */
	ev.content[0] ^= 1;
	expect_verify_fail(&ev, "bad event id");
	ev.content[0] ^= 1;
	ev.created_at++;
	expect_verify_fail(&ev, "bad event id");
	ev.created_at--;

	/* A flipped signature digit. */
	save = ev.sig[5];
	ev.sig[5] = save == 'a' ? 'b' : 'a';
	expect_verify_fail(&ev, "bad signature");
	ev.sig[5] = save;

	/* A valid signature of another event. */
	memcpy(ev.sig, other.sig, sizeof(ev.sig));
	expect_verify_fail(&ev, "bad signature");
	comb_event_release(&other);
	parse_vector(json_array_get(vectors, 0), &other);
	memcpy(ev.sig, other.sig, sizeof(ev.sig));

	/* Another author's key with a matching id: the signature fails. */
	memcpy(ev.pubkey, vec_field(1, "pubkey"), sizeof(ev.pubkey));
	reid(&ev);
	expect_verify_fail(&ev, "bad signature");

	/* A pubkey that is not on the curve (x >= p). */
	memset(ev.pubkey, 'f', 64);
	reid(&ev);
	expect_verify_fail(&ev, "bad signature");
	comb_event_release(&other);
	comb_event_release(&ev);

	/* Two authors in turn on one thread, which keeps the key it parsed
	 * last: each verifies, a key parsed before changes nothing. */
	parse_vector(json_array_get(vectors, 0), &ev);
	parse_vector(json_array_get(vectors, 1), &other);
	assert_int_equal(comb_event_verify(&ev, NULL, 0), 0);
	assert_int_equal(comb_event_verify(&other, NULL, 0), 0);
	assert_int_equal(comb_event_verify(&ev, NULL, 0), 0);
	memcpy(ev.sig, other.sig, sizeof(ev.sig));
	expect_verify_fail(&ev, "bad signature");
	comb_event_release(&other);
	comb_event_release(&ev);
}

/* Parses text and expects a failure with rc and msg; ev must stay empty. */
static void expect_parse_fail_len(const char *text, size_t len, int rc,
				  const char *msg)
{
	struct comb_event ev;
	char err[128] = "";

	memset(&ev, 0x5a, sizeof(ev));
	if (comb_event_parse(&ev, text, len, MAX, err, sizeof(err)) != rc) {
		test_print_escaped("input", text, len < 300 ? len : 300);
		fail_msg("expected %s (%d), got \"%s\"", msg, rc, err);
	}
	assert_string_equal(err, msg);
	assert_empty(&ev);
	comb_event_release(&ev);
}

static void expect_parse_fail(const char *text, const char *msg)
{
	expect_parse_fail_len(text, strlen(text), COMB_EINVAL, msg);
}

/* Dumps obj (consumed) and expects parsing to fail with msg. */
static void expect_obj_fail(json_t *obj, const char *msg)
{
	char *text = json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY);

	assert_non_null(text);
	expect_parse_fail(text, msg);
	free(text);
	json_decref(obj);
}

/* A fresh copy of vector 0's event object (caller frees). */
static json_t *base(void)
{
	return json_deep_copy(
	    json_object_get(json_array_get(vectors, 0), "event"));
}

static json_t *with(const char *key, json_t *value)
{
	json_t *o = base();

	json_object_set_new(o, key, value);
	return o;
}

static json_t *without(const char *key)
{
	json_t *o = base();

	json_object_del(o, key);
	return o;
}

static void test_parse_rejects_shape(void **state)
{
	static const char *const keys[] = {
	    "id", "pubkey", "created_at", "kind", "tags", "content", "sig",
	};
	char upper[129], missing[32];
	size_t i;

	(void)state;
	/* Key set. */
	expect_obj_fail(with("extra", json_integer(1)), "unknown key");
	expect_obj_fail(with("ID", json_string(vec_field(0, "id"))),
			"unknown key");
	for (i = 0; i < 7; i++) {
		snprintf(missing, sizeof(missing), "missing %s", keys[i]);
		expect_obj_fail(without(keys[i]), missing);
	}
	expect_obj_fail(json_array(), "event is not an object");
	expect_obj_fail(json_string("event"), "event is not an object");

	/* Hex fields: uppercase, wrong length, wrong type. */
	snprintf(upper, sizeof(upper), "A%s", vec_field(0, "id") + 1);
	expect_obj_fail(with("id", json_string(upper)), "malformed id");
	expect_obj_fail(with("id", json_string(vec_field(0, "id") + 1)),
			"malformed id");
	expect_obj_fail(with("id", json_integer(1)), "malformed id");
	snprintf(upper, sizeof(upper), "%.63sF", vec_field(0, "pubkey"));
	expect_obj_fail(with("pubkey", json_string(upper)), "malformed pubkey");
	snprintf(upper, sizeof(upper), "%s0", vec_field(0, "pubkey"));
	expect_obj_fail(with("pubkey", json_string(upper)), "malformed pubkey");
	snprintf(upper, sizeof(upper), "%.127sE", vec_field(0, "sig"));
	expect_obj_fail(with("sig", json_string(upper)), "malformed sig");
	expect_obj_fail(with("sig", json_string(vec_field(0, "id"))),
			"malformed sig");
	expect_obj_fail(with("sig", json_null()), "malformed sig");

	/* Numbers. */
	expect_obj_fail(with("created_at", json_integer(-1)), "bad created_at");
	expect_obj_fail(with("created_at", json_real(1.5)), "bad created_at");
	expect_obj_fail(with("created_at", json_string("1764464523")),
			"bad created_at");
	expect_obj_fail(with("kind", json_integer(-1)), "bad kind");
	expect_obj_fail(with("kind", json_integer(65536)), "bad kind");
	expect_obj_fail(with("kind", json_real(1.0)), "bad kind");
	expect_obj_fail(with("kind", json_true()), "bad kind");

	/* Tags and content. */
	expect_obj_fail(with("tags", json_object()), "bad tags");
	expect_obj_fail(with("tags", json_null()), "bad tags");
	expect_obj_fail(with("tags", json_pack("[[]]")), "bad tag");
	expect_obj_fail(with("tags", json_pack("[s]", "t")), "bad tag");
	expect_obj_fail(with("tags", json_pack("[[i]]", 1)), "bad tag");
	expect_obj_fail(with("tags", json_pack("[[s,n]]", "t")), "bad tag");
	expect_obj_fail(with("tags", json_pack("[[s],[s,[s]]]", "a", "b", "c")),
			"bad tag");
	expect_obj_fail(with("tags", json_pack("[[s%]]", "t\0x", (size_t)3)),
			"tag contains nul");
	expect_obj_fail(
	    with("tags", json_pack("[[s,s%]]", "t", "a\0", (size_t)2)),
	    "tag contains nul");
	expect_obj_fail(with("content", json_integer(5)), "bad content");
	expect_obj_fail(with("content", json_null()), "bad content");
}

/* Formats an event text with vector 0's hex fields around the given
 * middle part (created_at, kind, tags and content). */
static void expect_text_fail(const char *middle, const char *msg)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "{\"id\":\"%s\",\"pubkey\":\"%s\",%s,\"sig\":\"%s\"}",
		 vec_field(0, "id"), vec_field(0, "pubkey"), middle,
		 vec_field(0, "sig"));
	expect_parse_fail(text, msg);
}

static void test_parse_rejects_text(void **state)
{
	char text[1024];

	(void)state;
	expect_text_fail("\"created_at\":1,\"kind\":1,\"kind\":1,\"tags\":[],"
			 "\"content\":\"\"",
			 "duplicate key");
	expect_text_fail("\"created_at\":1,\"kind\":1,\"tags\":[[\"t\",{\"a\":"
			 "1,\"a\":2}]],\"content\":\"\"",
			 "duplicate key");
	expect_text_fail(
	    "\"created_at\":1.0,\"kind\":1,\"tags\":[],\"content\":\"\"",
	    "bad created_at");
	expect_text_fail(
	    "\"created_at\":1e3,\"kind\":1,\"tags\":[],\"content\":\"\"",
	    "bad created_at");
	expect_text_fail(
	    "\"created_at\":1,\"kind\":1.0,\"tags\":[],\"content\":\"\"",
	    "bad kind");
	expect_text_fail(
	    "\"created_at\":1,\"kind\":1,\"tags\":[],\"content\":\"\xff\"",
	    "invalid utf-8");
	expect_text_fail("\"created_at\":1,\"kind\":1,\"tags\":[],\"content\":"
			 "\"\xed\xa0\x80\"",
			 "invalid utf-8");
	expect_text_fail("\"created_at\":1,\"kind\":1,\"tags\":[[\"t\",\"\xc3("
			 "\"]],\"content\":\"\"",
			 "invalid utf-8");
	expect_text_fail(
	    "\"created_at\":1,\"kind\":1,\"tags\":[],\"content\":\"\\ud800\"",
	    "invalid json");
	expect_text_fail("\"created_at\":1,\"kind\":1,\"tags\":[[\"t\","
			 "\"a\\u0000\"]],\"content\":\"\"",
			 "tag contains nul");
	expect_text_fail("\"created_at\":1,\"kind\":1,\"tags\":[[\"\\u0000\"]],"
			 "\"content\":\"\"",
			 "tag contains nul");
	expect_text_fail("\"created_at\":99999999999999999999,\"kind\":1,"
			 "\"tags\":[],\"content\":\"\"",
			 "invalid json");

	/* Not exactly one JSON value. */
	expect_parse_fail("", "invalid json");
	expect_parse_fail("{", "invalid json");
	snprintf(text, sizeof(text), "%s ",
		 comb_json_get_string(json_array_get(vectors, 0), "json"));
	{
		struct comb_event ev;

		assert_int_equal(
		    comb_event_parse(&ev, text, strlen(text), MAX, NULL, 0), 0);
		comb_event_release(&ev);
	}
	snprintf(text, sizeof(text), "%s x",
		 comb_json_get_string(json_array_get(vectors, 0), "json"));
	expect_parse_fail(text, "invalid json");
	snprintf(text, sizeof(text), "%s{}",
		 comb_json_get_string(json_array_get(vectors, 0), "json"));
	expect_parse_fail(text, "invalid json");
}

static void test_parse_accepts_nul_in_content(void **state)
{
	const json_t *v = vector_named("nul in content");
	struct comb_event ev;

	(void)state;
	parse_vector(v, &ev);
	assert_int_equal(ev.content_len, 4);
	assert_memory_equal(ev.content, "a\0b\0", 5);
	assert_int_equal(comb_event_verify(&ev, NULL, 0), 0);
	comb_event_release(&ev);
}

static void test_size_limits(void **state)
{
	const json_t *text =
	    json_object_get(json_array_get(vectors, 0), "json");
	const char *s = json_string_value(text);
	size_t len = json_string_length(text);
	struct comb_event ev;
	char err[128];

	(void)state;
	assert_int_equal(comb_event_parse(&ev, s, len, len, err, sizeof(err)),
			 0);
	comb_event_release(&ev);
	assert_int_equal(
	    comb_event_parse(&ev, s, len, len - 1, err, sizeof(err)),
	    COMB_ETOOBIG);
	assert_string_equal(err, "event too large");
	assert_empty(&ev);
	/* Oversize wins even over garbage. */
	expect_parse_fail_len("x", MAX + 1, COMB_ETOOBIG, "event too large");
}

static void test_tag_count_limit(void **state)
{
	const json_t *many = vector_named("many tags");
	json_t *tags, *o;
	struct comb_event ev;

	(void)state;
	parse_vector(many, &ev);
	assert_int_equal(json_array_size(ev.tags), COMB_EVENT_MAX_TAGS);
	assert_int_equal(comb_event_tag_count(&ev, "t"), COMB_EVENT_MAX_TAGS);
	assert_int_equal(comb_event_verify(&ev, NULL, 0), 0);
	comb_event_release(&ev);

	o = json_deep_copy(json_object_get(many, "event"));
	tags = json_object_get(o, "tags");
	json_array_append_new(tags, json_pack("[ss]", "t", "256"));
	assert_int_equal(json_array_size(tags), COMB_EVENT_MAX_TAGS + 1);
	expect_obj_fail(o, "too many tags");
}

static void test_tag_lookup(void **state)
{
	struct comb_event ev;
	json_t *tag;

	(void)state;
	parse_vector(vector_named("artifact revision"), &ev);
	tag = comb_event_tag(&ev, "d");
	assert_non_null(tag);
	assert_string_equal(json_string_value(json_array_get(tag, 0)), "d");
	assert_string_equal(comb_event_tag_value(&ev, "d"),
			    "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84");
	assert_string_equal(comb_event_tag_value(&ev, "type"), "demo.task");
	assert_null(comb_event_tag(&ev, "missing"));
	assert_null(comb_event_tag_value(&ev, "missing"));
	assert_int_equal(comb_event_tag_count(&ev, "h"), 1);
	assert_int_equal(comb_event_tag_count(&ev, "missing"), 0);
	comb_event_release(&ev);

	parse_vector(vector_named("empty tag strings"), &ev);
	/* ["x"] has only a name; ["e",""] has an empty value. */
	assert_non_null(comb_event_tag(&ev, "x"));
	assert_null(comb_event_tag_value(&ev, "x"));
	assert_string_equal(comb_event_tag_value(&ev, "e"), "");
	assert_int_equal(comb_event_tag_count(&ev, ""), 2);
	assert_string_equal(comb_event_tag_value(&ev, ""), "");
	comb_event_release(&ev);

	parse_vector(vector_named("empty tags"), &ev);
	assert_null(comb_event_tag(&ev, "t"));
	assert_int_equal(comb_event_tag_count(&ev, "t"), 0);
	comb_event_release(&ev);
}

static void test_sign_new_event(void **state)
{
	static const char content[] =
	    "new \"event\"\n\x01 \xf0\x9f\x8c\xb0 a\0b";
	unsigned char sk[32], sk2[32];
	char pub[65], err[128];
	struct comb_event ev, back;
	struct comb_buf b;

	(void)state;
	assert_int_equal(comb_key_generate(sk), 0);
	assert_int_equal(comb_key_generate(sk2), 0);
	assert_memory_not_equal(sk, sk2, 32);
	assert_int_equal(comb_key_public(sk, pub), 0);

	memset(&ev, 0, sizeof(ev));
	ev.created_at = 1764464523;
	ev.kind = 45010;
	ev.tags = json_pack("[[ss][ss][s]]", "d",
			    "5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84", "t",
			    "caf\xc3\xa9", "x");
	ev.content = malloc(sizeof(content));
	memcpy(ev.content, content, sizeof(content));
	ev.content_len = sizeof(content) - 1;
	assert_int_equal(comb_event_sign(&ev, sk), 0);
	assert_string_equal(ev.pubkey, pub);
	assert_int_equal(comb_event_verify(&ev, err, sizeof(err)), 0);

	comb_buf_init(&b, MAX);
	assert_int_equal(comb_event_to_json(&ev, &b), 0);
	assert_int_equal(
	    comb_event_parse(&back, b.data, b.len, MAX, err, sizeof(err)), 0);
	assert_int_equal(comb_event_verify(&back, err, sizeof(err)), 0);
	assert_string_equal(back.id, ev.id);
	assert_bytes_equal(back.content, back.content_len, content,
			   sizeof(content) - 1);
	assert_true(json_equal(back.tags, ev.tags));
	comb_event_release(&back);
	comb_buf_release(&b);
	comb_event_release(&ev);

	/* No tags and no content serialize as [] and "". */
	memset(&ev, 0, sizeof(ev));
	ev.kind = 1;
	assert_int_equal(comb_event_sign(&ev, sk), 0);
	assert_int_equal(comb_event_verify(&ev, err, sizeof(err)), 0);
	comb_buf_init(&b, MAX);
	assert_int_equal(comb_event_serialize(&ev, &b), 0);
	snprintf(err, sizeof(err), "[0,\"%.64s\",0,1,[],\"\"]", pub);
	assert_string_equal(b.data, err);
	comb_buf_release(&b);
	comb_event_release(&ev);
}

static void test_invalid_keys(void **state)
{
	/* The group order n: not a valid secret key, nor is zero. */
	static const char order[] =
	    "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";
	unsigned char zero[32] = {0}, n[32];
	char pub[65];
	struct comb_event ev;

	(void)state;
	assert_int_equal(comb_hex_decode(order, n, sizeof(n)), 0);
	assert_int_equal(comb_key_public(zero, pub), COMB_EINVAL);
	assert_int_equal(comb_key_public(n, pub), COMB_EINVAL);
	memset(&ev, 0, sizeof(ev));
	assert_int_equal(comb_event_sign(&ev, zero), COMB_EINVAL);
	assert_int_equal(comb_event_sign(&ev, n), COMB_EINVAL);
	n[31] = 0x40; /* n - 1 is valid */
	assert_int_equal(comb_key_public(n, pub), 0);
}

static void test_serialize_rejects(void **state)
{
	struct comb_event ev;
	struct comb_buf b;
	unsigned char id[32];

	(void)state;
	memset(&ev, 0, sizeof(ev));
	comb_buf_init(&b, MAX);
	assert_int_equal(comb_buf_puts(&b, "keep"), 0);

	ev.tags = json_pack("[[s,i]]", "t", 1);
	assert_int_equal(comb_event_serialize(&ev, &b), COMB_EINVAL);
	assert_int_equal(comb_event_to_json(&ev, &b), COMB_EINVAL);
	assert_string_equal(b.data, "keep");
	json_decref(ev.tags);
	ev.tags = json_pack("{}");
	assert_int_equal(comb_event_serialize(&ev, &b), COMB_EINVAL);
	json_decref(ev.tags);
	ev.tags = json_pack("[s]", "t");
	assert_int_equal(comb_event_serialize(&ev, &b), COMB_EINVAL);
	json_decref(ev.tags);
	ev.tags = NULL;

	/* Content that is not UTF-8 has no JSON.stringify form. */
	ev.content = strdup("bad \xff");
	ev.content_len = strlen(ev.content);
	assert_int_equal(comb_event_serialize(&ev, &b), COMB_EINVAL);
	assert_int_equal(comb_event_compute_id(&ev, id), COMB_EINVAL);
	assert_string_equal(b.data, "keep");

	/* Too small a buffer: nothing is left behind. */
	ev.content[4] = 'x';
	b.max = 20;
	assert_int_equal(comb_event_serialize(&ev, &b), COMB_ETOOBIG);
	assert_string_equal(b.data, "keep");
	comb_buf_release(&b);
	comb_event_release(&ev);
	comb_event_release(&ev); /* safe twice */
}

struct verify_job {
	int failures;
};

static void *verify_all(void *arg)
{
	struct verify_job *job = arg;
	int round;
	size_t i;

	for (round = 0; round < 5; round++) {
		for (i = 0; i < json_array_size(vectors); i++) {
			const json_t *text =
			    json_object_get(json_array_get(vectors, i), "json");
			struct comb_event ev;

			if (comb_event_parse(&ev, json_string_value(text),
					     json_string_length(text), MAX,
					     NULL, 0) != 0 ||
			    comb_event_verify(&ev, NULL, 0) != 0)
				job->failures++;
			comb_event_release(&ev);
		}
	}
	return NULL;
}

static void test_concurrent_verify(void **state)
{
	pthread_t t[4];
	struct verify_job jobs[4];
	int i;

	(void)state;
	memset(jobs, 0, sizeof(jobs));
	for (i = 0; i < 4; i++)
		assert_int_equal(
		    pthread_create(&t[i], NULL, verify_all, &jobs[i]), 0);
	for (i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(jobs[i].failures, 0);
	}
}

/* ---- comb_event_message_parse: ["EVENT", <event>] read in one pass ---- */

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

static void test_message_reads_every_vector(void **state)
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

static void test_message_declines_the_unusual(void **state)
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

static void test_message_declines_other_shapes(void **state)
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

static void test_message_reads_escapes_and_spacing(void **state)
{
	static const char *const members[][2] = {
		{"content", "\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \xe2\x82\xac \xf0\x9f\x98\x80 end\""},
		{"tags", " [ [ \"h\" , \"x\\ty\" ] , [\"\"] ] "},
		{"tags", "[]"},
		{"created_at", "0"},
		{"kind", " 65535 "},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
		char *m = message_with(members[i][0], members[i][1]);

		expect_read(m);
		free(m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors_serialize),
	    cmocka_unit_test(test_vectors_from_json),
	    cmocka_unit_test(test_vectors_resign),
	    cmocka_unit_test(test_verify_rejects),
	    cmocka_unit_test(test_parse_rejects_shape),
	    cmocka_unit_test(test_parse_rejects_text),
	    cmocka_unit_test(test_parse_accepts_nul_in_content),
	    cmocka_unit_test(test_size_limits),
	    cmocka_unit_test(test_tag_count_limit),
	    cmocka_unit_test(test_tag_lookup),
	    cmocka_unit_test(test_sign_new_event),
	    cmocka_unit_test(test_invalid_keys),
	    cmocka_unit_test(test_serialize_rejects),
	    cmocka_unit_test(test_concurrent_verify),
	    cmocka_unit_test(test_message_reads_every_vector),
	    cmocka_unit_test(test_message_declines_the_unusual),
	    cmocka_unit_test(test_message_declines_other_shapes),
	    cmocka_unit_test(test_message_reads_escapes_and_spacing),
	};

	return cmocka_run_group_tests(tests, load_vectors, free_vectors);
}
