/*
 * Unit tests for NIP-42 AUTH verification (shared/src/nip42.c): real
 * kind-22242 events signed with a fixed key, each changed in one way per
 * rejection case, and the relay-URL rules of PROTOCOL.md section 10.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comb/error.h"
#include "comb/event.h"
#include "comb/hex.h"
#include "comb/nip42.h"

#define NOW	  1700000000
#define HOST	  "relay.example.com"
#define CHALLENGE "c7f3a1b2-challenge"

static const unsigned char seckey[32] = {
    0x5a, 0x01, 0x9c, 0x44, 0x2e, 0x71, 0xb3, 0x08, 0xdd, 0x16, 0x6f,
    0x90, 0x3b, 0xe2, 0x27, 0x85, 0x4c, 0x0a, 0xf1, 0x68, 0x13, 0xbe,
    0x59, 0x2d, 0x07, 0xca, 0x3e, 0x94, 0x71, 0x1f, 0x66, 0x28,
};

/* Fills ev with a signed event of kind at created_at with tags (stolen). */
static void make_event(struct comb_event *ev, int kind, int64_t created_at,
		       json_t *tags)
{
	memset(ev, 0, sizeof(*ev));
	ev->kind = kind;
	ev->created_at = created_at;
	ev->tags = tags;
	ev->content = strdup("");
	assert_non_null(ev->content);
	ev->content_len = 0;
	assert_int_equal(comb_event_sign(ev, seckey), 0);
}

/* Tags relay and challenge; a NULL value leaves that tag out. */
static json_t *tags2(const char *relay, const char *challenge)
{
	json_t *tags = json_array();

	assert_non_null(tags);
	if (relay)
		json_array_append_new(tags, json_pack("[ss]", "relay", relay));
	if (challenge)
		json_array_append_new(
		    tags, json_pack("[ss]", "challenge", challenge));
	return tags;
}

/* Signs an AUTH event with the given relay tag and checks it against
 * host; reason NULL means it must be accepted. */
static void expect_relay(const char *relay, const char *host,
			 const char *reason)
{
	struct comb_event ev;
	char err[256] = "";
	int rc;

	make_event(&ev, COMB_NIP42_KIND, NOW, tags2(relay, CHALLENGE));
	rc = comb_nip42_verify(&ev, CHALLENGE, host, NOW, err, sizeof(err));
	if (reason == NULL) {
		assert_int_equal(rc, 0);
	} else {
		assert_int_equal(rc, COMB_EAUTH);
		assert_string_equal(err, reason);
	}
	comb_event_release(&ev);
}

static void expect_event(const struct comb_event *ev, const char *reason)
{
	char err[256] = "";
	int rc = comb_nip42_verify(ev, CHALLENGE, HOST, NOW, err, sizeof(err));

	if (reason == NULL) {
		assert_int_equal(rc, 0);
	} else {
		assert_int_equal(rc, COMB_EAUTH);
		assert_string_equal(err, reason);
	}
}

static void test_accept(void **state)
{
	struct comb_event ev;

	(void)state;
	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("wss://" HOST, CHALLENGE));
	expect_event(&ev, NULL);
	comb_event_release(&ev);

	/* both edges of the clock window */
	make_event(&ev, COMB_NIP42_KIND, NOW - COMB_NIP42_MAX_SKEW,
		   tags2("wss://" HOST, CHALLENGE));
	expect_event(&ev, NULL);
	comb_event_release(&ev);
	make_event(&ev, COMB_NIP42_KIND, NOW + COMB_NIP42_MAX_SKEW,
		   tags2("wss://" HOST, CHALLENGE));
	expect_event(&ev, NULL);
	comb_event_release(&ev);

	/* extra tags and content do not matter */
	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("ws://" HOST, CHALLENGE));
	json_array_append_new(ev.tags, json_pack("[ss]", "client", "x"));
	free(ev.content);
	ev.content = strdup("hello");
	assert_non_null(ev.content);
	ev.content_len = 5;
	assert_int_equal(comb_event_sign(&ev, seckey), 0);
	expect_event(&ev, NULL);
	comb_event_release(&ev);
}

static void test_relay_url(void **state)
{
	(void)state;
	expect_relay("wss://" HOST, HOST, NULL);
	expect_relay("ws://" HOST, HOST, NULL);
	/* a trailing slash, a path, a query: ignored */
	expect_relay("wss://" HOST "/", HOST, NULL);
	expect_relay("wss://" HOST "/ws/v1", HOST, NULL);
	expect_relay("wss://" HOST "?x=1", HOST, NULL);
	/* host and scheme in any case, both ways */
	expect_relay("WSS://Relay.Example.COM/", HOST, NULL);
	expect_relay("wss://" HOST, "RELAY.EXAMPLE.com", NULL);

	expect_relay("wss://other.example.com", HOST, "relay mismatch");
	expect_relay("wss://relay.example.com.evil.org", HOST,
		     "relay mismatch");
	expect_relay("wss://relay.example.co", HOST, "relay mismatch");
	expect_relay("wss://user@" HOST, HOST, "relay mismatch");
	expect_relay("https://" HOST, HOST, "relay mismatch");
	expect_relay("http://" HOST, HOST, "relay mismatch");
	expect_relay(HOST, HOST, "relay mismatch");
	expect_relay("wss://", HOST, "relay mismatch");
	expect_relay("", HOST, "relay mismatch");
	expect_relay("wss://" HOST, "", "relay mismatch");
	expect_relay("wss://" HOST, NULL, "relay mismatch");
}

static void test_relay_port(void **state)
{
	(void)state;
	/* the port is part of the match when the Host header has one */
	expect_relay("wss://" HOST ":7447", HOST ":7447", NULL);
	expect_relay("ws://localhost:7447/", "localhost:7447", NULL);
	expect_relay("wss://" HOST, HOST ":7447", "relay mismatch");
	expect_relay("wss://" HOST ":7448", HOST ":7447", "relay mismatch");
	/* and absent when it has none, even for the default port */
	expect_relay("wss://" HOST ":7447", HOST, "relay mismatch");
	expect_relay("wss://" HOST ":443", HOST, "relay mismatch");
	expect_relay("ws://[::1]:7447", "[::1]:7447", NULL);
}

static void test_missing_tags(void **state)
{
	struct comb_event ev;

	(void)state;
	make_event(&ev, COMB_NIP42_KIND, NOW, tags2(NULL, CHALLENGE));
	expect_event(&ev, "missing relay tag");
	comb_event_release(&ev);

	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("wss://" HOST, NULL));
	expect_event(&ev, "missing challenge tag");
	comb_event_release(&ev);

	/* a tag with only its name */
	make_event(&ev, COMB_NIP42_KIND, NOW, tags2(NULL, CHALLENGE));
	json_array_append_new(ev.tags, json_pack("[s]", "relay"));
	assert_int_equal(comb_event_sign(&ev, seckey), 0);
	expect_event(&ev, "missing relay tag");
	comb_event_release(&ev);

	/* two relay tags: refused even when the first one matches */
	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("wss://" HOST, CHALLENGE));
	json_array_append_new(ev.tags,
			      json_pack("[ss]", "relay", "wss://evil.org"));
	assert_int_equal(comb_event_sign(&ev, seckey), 0);
	expect_event(&ev, "duplicate relay tag");
	comb_event_release(&ev);
}

static void test_challenge(void **state)
{
	struct comb_event ev;
	char err[256];

	(void)state;
	make_event(&ev, COMB_NIP42_KIND, NOW,
		   tags2("wss://" HOST, CHALLENGE "x"));
	expect_event(&ev, "challenge mismatch");
	comb_event_release(&ev);

	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("wss://" HOST, ""));
	expect_event(&ev, "challenge mismatch");
	assert_int_equal(
	    comb_nip42_verify(&ev, "", HOST, NOW, err, sizeof(err)),
	    COMB_EAUTH);
	assert_string_equal(err, "challenge mismatch");
	comb_event_release(&ev);

	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("wss://" HOST, CHALLENGE));
	assert_int_equal(
	    comb_nip42_verify(&ev, "another", HOST, NOW, err, sizeof(err)),
	    COMB_EAUTH);
	assert_string_equal(err, "challenge mismatch");
	assert_int_equal(
	    comb_nip42_verify(&ev, NULL, HOST, NOW, err, sizeof(err)),
	    COMB_EAUTH);
	assert_string_equal(err, "challenge mismatch");
	comb_event_release(&ev);
}

static void test_kind_and_clock(void **state)
{
	struct comb_event ev;

	(void)state;
	make_event(&ev, 27235, NOW, tags2("wss://" HOST, CHALLENGE));
	expect_event(&ev, "wrong kind");
	comb_event_release(&ev);

	make_event(&ev, COMB_NIP42_KIND, NOW - COMB_NIP42_MAX_SKEW - 1,
		   tags2("wss://" HOST, CHALLENGE));
	expect_event(&ev, "stale authentication");
	comb_event_release(&ev);

	make_event(&ev, COMB_NIP42_KIND, NOW + COMB_NIP42_MAX_SKEW + 1,
		   tags2("wss://" HOST, CHALLENGE));
	expect_event(&ev, "authentication from the future");
	comb_event_release(&ev);
}

static void test_signature(void **state)
{
	struct comb_event ev;

	(void)state;
	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("wss://" HOST, CHALLENGE));
	ev.sig[100] = ev.sig[100] == 'a' ? 'b' : 'a';
	expect_event(&ev, "bad signature");
	comb_event_release(&ev);

	/* a field changed after signing: the id no longer matches */
	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("wss://" HOST, CHALLENGE));
	ev.created_at += 1;
	expect_event(&ev, "bad event id");
	comb_event_release(&ev);

	/* a valid id for another pubkey, with this key's signature */
	make_event(&ev, COMB_NIP42_KIND, NOW, tags2("wss://" HOST, CHALLENGE));
	{
		unsigned char other_key[32], id[32];

		memcpy(other_key, seckey, sizeof(other_key));
		other_key[31] ^= 0x01;
		assert_int_equal(comb_key_public(other_key, ev.pubkey), 0);
		assert_int_equal(comb_event_compute_id(&ev, id), 0);
		comb_hex_encode(id, sizeof(id), ev.id);
	}
	expect_event(&ev, "bad signature");
	comb_event_release(&ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_accept),
	    cmocka_unit_test(test_relay_url),
	    cmocka_unit_test(test_relay_port),
	    cmocka_unit_test(test_missing_tags),
	    cmocka_unit_test(test_challenge),
	    cmocka_unit_test(test_kind_and_clock),
	    cmocka_unit_test(test_signature),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
