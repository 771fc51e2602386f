/*
 * Unit tests for NIP-98 verification (shared/src/nip98.c) and the strict
 * base64 codec it relies on (shared/src/base64.c). Every token is a real
 * event signed with a fixed secret key, then changed in exactly one way per
 * rejection case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comb/base64.h"
#include "comb/buf.h"
#include "comb/error.h"
#include "comb/event.h"
#include "comb/nip98.h"

#define NOW  1700000000
#define HOST "relay.example.com"
#define PATH "/events"
#define BODY "{\"kind\":1,\"content\":\"hi\"}"
/* sha256 of the empty string, from sha256sum */
#define EMPTY_SHA                                                              \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

#define TOKEN_MAX (COMB_NIP98_MAX_HEADER + 64)

static const unsigned char seckey[32] = {
    0x3c, 0x9e, 0x11, 0x52, 0x80, 0x07, 0xa1, 0x6b, 0x2d, 0x44, 0x90,
    0xe3, 0x5f, 0x18, 0x7a, 0x0c, 0x61, 0xd2, 0x0b, 0x39, 0x8e, 0x45,
    0xf7, 0x23, 0x9a, 0x6e, 0x14, 0xc8, 0x02, 0x5b, 0x77, 0x31,
};

/* lowercase hex sha256 of BODY, from sha256sum */
static const char body_sha[] =
    "509584d615bf200309d7901c7b756d1311aa40c119f306b790c9d2331050f784";

enum tamper {
	TAMPER_NONE,
	TAMPER_SIG,	/* flip one signature digit */
	TAMPER_CONTENT, /* change content after signing: the id no longer
			   matches */
};

/* Signs an event of kind with tags (stolen) and content, writes it as JSON
 * into json (a buffer the caller releases). Fills id_out when not NULL. */
static void sign_event_json(struct comb_buf *json, int kind, int64_t created_at,
			    json_t *tags, const char *content, enum tamper t,
			    char id_out[65])
{
	struct comb_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.created_at = created_at;
	ev.tags = tags;
	ev.content = strdup(content);
	assert_non_null(ev.content);
	ev.content_len = strlen(content);
	assert_int_equal(comb_event_sign(&ev, seckey), 0);
	if (id_out)
		memcpy(id_out, ev.id, 65);
	if (t == TAMPER_SIG)
		ev.sig[70] = ev.sig[70] == 'a' ? 'b' : 'a';
	if (t == TAMPER_CONTENT) {
		free(ev.content);
		ev.content = strdup("changed");
		assert_non_null(ev.content);
		ev.content_len = strlen(ev.content);
	}
	comb_buf_init(json, 65536);
	assert_int_equal(comb_event_to_json(&ev, json), 0);
	comb_event_release(&ev);
}

/* Writes "<scheme> <base64 of data>" into out (TOKEN_MAX bytes). */
static void make_header(char *out, const char *scheme, const void *data,
			size_t len)
{
	size_t sl = strlen(scheme);

	assert_true(sl + 1 + COMB_BASE64_ENCODED_LEN(len) + 1 <= TOKEN_MAX);
	memcpy(out, scheme, sl);
	out[sl] = ' ';
	assert_int_equal(
	    comb_base64_encode(data, len, out + sl + 1, TOKEN_MAX - sl - 1), 0);
}

/* Builds tags u, method, payload; a NULL value leaves that tag out. */
static json_t *tags3(const char *u, const char *method, const char *payload)
{
	json_t *tags = json_array();

	assert_non_null(tags);
	if (u)
		json_array_append_new(tags, json_pack("[ss]", "u", u));
	if (method)
		json_array_append_new(tags,
				      json_pack("[ss]", "method", method));
	if (payload)
		json_array_append_new(tags,
				      json_pack("[ss]", "payload", payload));
	return tags;
}

/* A complete token header for the given fields. */
static void token(char *out, int kind, int64_t created_at, json_t *tags,
		  enum tamper t, char id_out[65])
{
	struct comb_buf json;

	sign_event_json(&json, kind, created_at, tags, "", t, id_out);
	make_header(out, "Nostr", json.data, json.len);
	comb_buf_release(&json);
}

/* The default request: POST https://HOST/events with BODY at NOW. */
static struct comb_nip98_request request(const char *authorization)
{
	struct comb_nip98_request req;

	memset(&req, 0, sizeof(req));
	req.authorization = authorization;
	req.method = "POST";
	req.host = HOST;
	req.path_and_query = PATH;
	req.body = BODY;
	req.body_len = strlen(BODY);
	req.now = NOW;
	return req;
}

static int verify(const struct comb_nip98_request *req, char *errbuf,
		  size_t errlen)
{
	char pubkey[65], id[65];
	int64_t created_at;

	errbuf[0] = '\0';
	return comb_nip98_verify(req, pubkey, id, &created_at, errbuf, errlen);
}

static void expect_reject(const struct comb_nip98_request *req,
			  const char *reason)
{
	char err[256];

	assert_int_equal(verify(req, err, sizeof(err)), COMB_EAUTH);
	assert_string_equal(err, reason);
}

static void expect_accept(const struct comb_nip98_request *req)
{
	char err[256];

	assert_int_equal(verify(req, err, sizeof(err)), 0);
}

/* A header whose only change from a valid one is in the tags. */
static void expect_tags(const char *u, const char *method, const char *payload,
			const char *reason)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;

	assert_non_null(hdr);
	token(hdr, COMB_NIP98_KIND, NOW, tags3(u, method, payload), TAMPER_NONE,
	      NULL);
	req = request(hdr);
	if (reason)
		expect_reject(&req, reason);
	else
		expect_accept(&req);
	free(hdr);
}

static void test_accept(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	char pubkey[65], id[65], want_pub[65], want_id[65], err[256];
	struct comb_nip98_request req;
	int64_t created_at = 0;

	(void)state;
	assert_non_null(hdr);
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE,
	      want_id);
	req = request(hdr);
	assert_int_equal(comb_nip98_verify(&req, pubkey, id, &created_at, err,
					   sizeof(err)), 0);
	assert_int_equal(created_at, NOW);
	assert_int_equal(comb_key_public(seckey, want_pub), 0);
	assert_string_equal(pubkey, want_pub);
	assert_string_equal(id, want_id);
	free(hdr);
}

static void test_accept_variants(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;
	struct comb_buf json;
	json_t *tags;

	(void)state;
	assert_non_null(hdr);
	/* http scheme */
	expect_tags("http://" HOST PATH, "POST", body_sha, NULL);
	/* host compared case-insensitively, both ways */
	expect_tags("https://Relay.EXAMPLE.com" PATH, "POST", body_sha, NULL);
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	req = request(hdr);
	req.host = "RELAY.example.COM";
	expect_accept(&req);

	/* created_at exactly at both edges of the window */
	token(hdr, COMB_NIP98_KIND, NOW - COMB_NIP98_MAX_SKEW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	req = request(hdr);
	expect_accept(&req);
	token(hdr, COMB_NIP98_KIND, NOW + COMB_NIP98_MAX_SKEW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	req = request(hdr);
	expect_accept(&req);

	/* extra tags and non-empty content are ignored */
	tags = tags3("https://" HOST PATH, "POST", body_sha);
	json_array_append_new(tags, json_pack("[ss]", "nonce", "42"));
	json_array_append_new(tags, json_pack("[sss]", "x", "y", "z"));
	sign_event_json(&json, COMB_NIP98_KIND, NOW, tags, "hello", TAMPER_NONE,
			NULL);
	make_header(hdr, "Nostr", json.data, json.len);
	comb_buf_release(&json);
	req = request(hdr);
	expect_accept(&req);

	/* the scheme word in any case, with extra spaces around the token */
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	memcpy(hdr, "nOSTR", 5);
	req = request(hdr);
	expect_accept(&req);
	{
		size_t n = strlen(hdr);
		char *spaced = malloc(n + 8);

		assert_non_null(spaced);
		memcpy(spaced, "Nostr   ", 8);
		memcpy(spaced + 8, hdr + 6, n - 6);
		memcpy(spaced + 8 + n - 6, " ", 2);
		req = request(spaced);
		expect_accept(&req);
		free(spaced);
	}

	/* empty body: payload is the hash of the empty string */
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST "/query?kinds=1&x=%20", "POST", EMPTY_SHA),
	      TAMPER_NONE, NULL);
	req = request(hdr);
	req.path_and_query = "/query?kinds=1&x=%20";
	req.body = NULL;
	req.body_len = 0;
	expect_accept(&req);
	free(hdr);
}

static void test_missing_header(void **state)
{
	struct comb_nip98_request req = request(NULL);

	(void)state;
	expect_reject(&req, "missing authorization");
	req = request("");
	expect_reject(&req, "missing authorization");
}

static void test_wrong_scheme(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;

	(void)state;
	assert_non_null(hdr);
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	memcpy(hdr, "Basic", 5);
	req = request(hdr);
	expect_reject(&req, "unsupported authorization scheme");
	req = request("Bearer abcd");
	expect_reject(&req, "unsupported authorization scheme");
	req = request("NostrAAAA");
	expect_reject(&req, "unsupported authorization scheme");
	req = request("Nost");
	expect_reject(&req, "unsupported authorization scheme");
	req = request("Nostr");
	expect_reject(&req, "malformed authorization");
	req = request("Nostr   ");
	expect_reject(&req, "malformed authorization");
	free(hdr);
}

static void test_bad_base64(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;
	size_t n;

	(void)state;
	assert_non_null(hdr);
	req = request("Nostr !!!!");
	expect_reject(&req, "malformed authorization");
	req = request("Nostr abc");
	expect_reject(&req, "malformed authorization");
	req = request("Nostr ab=c");
	expect_reject(&req, "malformed authorization");
	req = request("Nostr a===");
	expect_reject(&req, "malformed authorization");

	/* a valid token made invalid: a space inside, a dropped pad */
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	n = strlen(hdr);
	hdr[20] = ' ';
	req = request(hdr);
	expect_reject(&req, "malformed authorization");
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	hdr[n - 1] = '\0'; /* one character short of a multiple of four */
	req = request(hdr);
	expect_reject(&req, "malformed authorization");
	free(hdr);
}

static void test_not_an_event(void **state)
{
	char hdr[512];
	struct comb_nip98_request req;
	const char *bodies[] = {
	    "hello world",
	    "{}",
	    "[]",
	    "{\"kind\":27235}",
	    "{\"id\":\"a\",\"id\":\"b\"}",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		make_header(hdr, "Nostr", bodies[i], strlen(bodies[i]));
		req = request(hdr);
		expect_reject(&req, "invalid authorization event");
	}
}

static void test_wrong_kind(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;

	(void)state;
	assert_non_null(hdr);
	token(hdr, 27236, NOW, tags3("https://" HOST PATH, "POST", body_sha),
	      TAMPER_NONE, NULL);
	req = request(hdr);
	expect_reject(&req, "wrong kind");
	token(hdr, 22242, NOW, tags3("https://" HOST PATH, "POST", body_sha),
	      TAMPER_NONE, NULL);
	req = request(hdr);
	expect_reject(&req, "wrong kind");
	free(hdr);
}

static void test_clock(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;

	(void)state;
	assert_non_null(hdr);
	token(hdr, COMB_NIP98_KIND, NOW - COMB_NIP98_MAX_SKEW - 1,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	req = request(hdr);
	expect_reject(&req, "stale authorization");
	token(hdr, COMB_NIP98_KIND, NOW + COMB_NIP98_MAX_SKEW + 1,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	req = request(hdr);
	expect_reject(&req, "authorization from the future");
	token(hdr, COMB_NIP98_KIND, 0,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	req = request(hdr);
	expect_reject(&req, "stale authorization");
	free(hdr);
}

static void test_url(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;
	json_t *tags;

	(void)state;
	assert_non_null(hdr);
	expect_tags("https://other.example.com" PATH, "POST", body_sha,
		    "url mismatch");
	expect_tags("https://relay.example.com.evil.org" PATH, "POST", body_sha,
		    "url mismatch");
	expect_tags("https://" HOST ":443" PATH, "POST", body_sha,
		    "url mismatch");
	expect_tags("https://" HOST "/query", "POST", body_sha, "url mismatch");
	expect_tags("https://" HOST "/Events", "POST", body_sha,
		    "url mismatch");
	expect_tags("https://" HOST PATH "/", "POST", body_sha, "url mismatch");
	expect_tags("https://" HOST PATH "?x=1", "POST", body_sha,
		    "url mismatch");
	expect_tags("wss://" HOST PATH, "POST", body_sha, "url mismatch");
	expect_tags("HTTPS://" HOST PATH, "POST", body_sha, "url mismatch");
	expect_tags("//" HOST PATH, "POST", body_sha, "url mismatch");
	expect_tags(HOST PATH, "POST", body_sha, "url mismatch");
	expect_tags(NULL, "POST", body_sha, "missing u tag");

	/* the query is part of the URL: other query, missing query */
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST "/query?a=1", "POST", body_sha),
	      TAMPER_NONE, NULL);
	req = request(hdr);
	req.path_and_query = "/query?a=2";
	expect_reject(&req, "url mismatch");
	req.path_and_query = "/query";
	expect_reject(&req, "url mismatch");
	req.path_and_query = "/query?a=1";
	expect_accept(&req);
	/* a Host header that is not a plain authority never matches */
	req.host = "";
	expect_reject(&req, "url mismatch");
	req.host = NULL;
	expect_reject(&req, "url mismatch");

	/* two u tags: refused even when the first one matches */
	tags = tags3("https://" HOST PATH, "POST", body_sha);
	json_array_append_new(tags, json_pack("[ss]", "u", "https://x/"));
	token(hdr, COMB_NIP98_KIND, NOW, tags, TAMPER_NONE, NULL);
	req = request(hdr);
	expect_reject(&req, "duplicate u tag");
	/* a u tag with only its name */
	tags = tags3(NULL, "POST", body_sha);
	json_array_append_new(tags, json_pack("[s]", "u"));
	token(hdr, COMB_NIP98_KIND, NOW, tags, TAMPER_NONE, NULL);
	req = request(hdr);
	expect_reject(&req, "missing u tag");
	free(hdr);
}

static void test_method(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;

	(void)state;
	assert_non_null(hdr);
	expect_tags("https://" HOST PATH, "GET", body_sha, "method mismatch");
	expect_tags("https://" HOST PATH, "post", body_sha, "method mismatch");
	expect_tags("https://" HOST PATH, "", body_sha, "method mismatch");
	expect_tags("https://" HOST PATH, NULL, body_sha, "missing method tag");
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "PUT", body_sha), TAMPER_NONE, NULL);
	req = request(hdr);
	req.method = "PUT";
	expect_accept(&req);
	free(hdr);
}

static void test_payload(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	char upper[65];
	struct comb_nip98_request req;
	size_t i;

	(void)state;
	assert_non_null(hdr);
	/* the hash of another body */
	expect_tags("https://" HOST PATH, "POST", EMPTY_SHA,
		    "payload mismatch");
	for (i = 0; i < 65; i++)
		upper[i] = (char)(body_sha[i] >= 'a' && body_sha[i] <= 'f'
				      ? body_sha[i] - 32
				      : body_sha[i]);
	expect_tags("https://" HOST PATH, "POST", upper, "payload mismatch");
	expect_tags("https://" HOST PATH, "POST", "", "payload mismatch");
	expect_tags("https://" HOST PATH, "POST", NULL, "missing payload tag");

	/* required for an empty body too */
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", NULL), TAMPER_NONE, NULL);
	req = request(hdr);
	req.body = "";
	req.body_len = 0;
	expect_reject(&req, "missing payload tag");

	/* a body changed after signing */
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_NONE, NULL);
	req = request(hdr);
	req.body = BODY " ";
	req.body_len = strlen(BODY " ");
	expect_reject(&req, "payload mismatch");
	req.body_len = strlen(BODY) - 1;
	expect_reject(&req, "payload mismatch");
	free(hdr);
}

static void test_signature(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;

	(void)state;
	assert_non_null(hdr);
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_SIG, NULL);
	req = request(hdr);
	expect_reject(&req, "bad signature");
	token(hdr, COMB_NIP98_KIND, NOW,
	      tags3("https://" HOST PATH, "POST", body_sha), TAMPER_CONTENT,
	      NULL);
	req = request(hdr);
	expect_reject(&req, "bad event id");
	free(hdr);
}

static void test_oversize(void **state)
{
	char *hdr = malloc(TOKEN_MAX);
	struct comb_nip98_request req;

	(void)state;
	assert_non_null(hdr);
	/* one byte over the limit */
	memset(hdr, 'A', COMB_NIP98_MAX_HEADER + 1);
	memcpy(hdr, "Nostr ", 6);
	hdr[COMB_NIP98_MAX_HEADER + 1] = '\0';
	req = request(hdr);
	expect_reject(&req, "authorization too large");
	/* far over it, and a header that is not even the right scheme */
	memset(hdr, 'A', TOKEN_MAX - 1);
	hdr[TOKEN_MAX - 1] = '\0';
	req = request(hdr);
	expect_reject(&req, "authorization too large");
	/* at the limit exactly (a token of 16376 characters and two trailing
	 * spaces) it is decoded, and found not to be JSON */
	memset(hdr, 'A', COMB_NIP98_MAX_HEADER);
	memcpy(hdr, "Nostr ", 6);
	memcpy(hdr + COMB_NIP98_MAX_HEADER - 2, "  ", 2);
	hdr[COMB_NIP98_MAX_HEADER] = '\0';
	req = request(hdr);
	expect_reject(&req, "invalid authorization event");
	free(hdr);
}

static void test_base64_codec(void **state)
{
	unsigned char out[16];
	char enc[32];
	size_t n;

	(void)state;
	/* RFC 4648 section 10 vectors */
	assert_int_equal(comb_base64_encode("", 0, enc, sizeof(enc)), 0);
	assert_string_equal(enc, "");
	assert_int_equal(comb_base64_encode("f", 1, enc, sizeof(enc)), 0);
	assert_string_equal(enc, "Zg==");
	assert_int_equal(comb_base64_encode("fo", 2, enc, sizeof(enc)), 0);
	assert_string_equal(enc, "Zm8=");
	assert_int_equal(comb_base64_encode("foo", 3, enc, sizeof(enc)), 0);
	assert_string_equal(enc, "Zm9v");
	assert_int_equal(comb_base64_encode("foobar", 6, enc, sizeof(enc)), 0);
	assert_string_equal(enc, "Zm9vYmFy");
	assert_int_equal(comb_base64_encode("\xfb\xff", 2, enc, sizeof(enc)),
			 0);
	assert_string_equal(enc, "+/8=");
	assert_int_equal(comb_base64_encode("foo", 3, enc, 4), COMB_ETOOBIG);

	assert_int_equal(
	    comb_base64_decode("Zm9vYg==", 8, out, sizeof(out), &n), 0);
	assert_int_equal(n, 4);
	assert_memory_equal(out, "foob", 4);
	assert_int_equal(
	    comb_base64_decode("Zm9vYmE=", 8, out, sizeof(out), &n), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(out, "fooba", 5);
	assert_int_equal(comb_base64_decode("+/8=", 4, out, sizeof(out), &n),
			 0);
	assert_int_equal(n, 2);
	assert_memory_equal(out, "\xfb\xff", 2);
	assert_int_equal(comb_base64_decode("", 0, out, sizeof(out), &n), 0);
	assert_int_equal(n, 0);

	/* strictness */
	assert_int_equal(comb_base64_decode("Zm9vYg", 6, out, sizeof(out), &n),
			 COMB_EINVAL);
	assert_int_equal(
	    comb_base64_decode("Zm9vYh==", 8, out, sizeof(out), &n),
	    COMB_EINVAL); /* non-zero unused bits */
	assert_int_equal(
	    comb_base64_decode("Zm9vYmF=", 8, out, sizeof(out), &n),
	    COMB_EINVAL);
	assert_int_equal(
	    comb_base64_decode("Zg==Zg==", 8, out, sizeof(out), &n),
	    COMB_EINVAL);
	assert_int_equal(
	    comb_base64_decode("Zm9v\nYmFy", 9, out, sizeof(out), &n),
	    COMB_EINVAL);
	assert_int_equal(comb_base64_decode("Zm-_", 4, out, sizeof(out), &n),
			 COMB_EINVAL); /* URL-safe alphabet */
	assert_int_equal(comb_base64_decode("====", 4, out, sizeof(out), &n),
			 COMB_EINVAL);
	assert_int_equal(comb_base64_decode("Z===", 4, out, sizeof(out), &n),
			 COMB_EINVAL);
	assert_int_equal(comb_base64_decode("Zm9vYmFy", 8, out, 5, &n),
			 COMB_ETOOBIG);
	assert_int_equal(comb_base64_decode("Zm9vYmFy", 8, out, 6, &n), 0);
	assert_int_equal(n, 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_base64_codec),
	    cmocka_unit_test(test_accept),
	    cmocka_unit_test(test_accept_variants),
	    cmocka_unit_test(test_missing_header),
	    cmocka_unit_test(test_wrong_scheme),
	    cmocka_unit_test(test_bad_base64),
	    cmocka_unit_test(test_not_an_event),
	    cmocka_unit_test(test_wrong_kind),
	    cmocka_unit_test(test_clock),
	    cmocka_unit_test(test_url),
	    cmocka_unit_test(test_method),
	    cmocka_unit_test(test_payload),
	    cmocka_unit_test(test_signature),
	    cmocka_unit_test(test_oversize),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
