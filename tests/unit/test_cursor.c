/* Tests of incremental-read cursor tokens: round trip, forgery, binding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "comb/base64.h"
#include "comb/cursor.h"
#include "comb/error.h"

static const unsigned char secret[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

static struct comb_cursor sample(void)
{
	struct comb_cursor c = {
		.community = 42,
		.epoch = 3,
		.system_id = UINT64_C(7318264591728364512),
		.phase = COMB_CURSOR_CHANGES,
		.horizon = 1200,
		.after = {.xid = 1100, .source = 2,
			  .key = "0b6c8a4e-1f5d-4f0e-9a43-8d2f7c1e5b90"},
		.lsn = UINT64_C(0x16B374D848),
	};
	const char *h[] = {"a", "b"};

	comb_cursor_scope("reader", h, 2, NULL, 0, c.scope);
	return c;
}

static void round_trip(void **state)
{
	unsigned char key[32];
	struct comb_cursor c = sample(), d;
	char text[COMB_CURSOR_MAX_TEXT];

	(void)state;
	assert_int_equal(comb_cursor_key(secret, key), 0);
	assert_int_equal(comb_cursor_encode(&c, key, text, sizeof(text)), 0);
	assert_int_equal(comb_cursor_decode(text, key, &d), 0);
	assert_int_equal(d.community, 42);
	assert_int_equal(d.epoch, 3);
	assert_true(d.system_id == c.system_id);
	assert_memory_equal(d.scope, c.scope, COMB_CURSOR_SCOPE_LEN);
	assert_int_equal(d.phase, COMB_CURSOR_CHANGES);
	assert_int_equal(d.horizon, 1200);
	assert_int_equal(d.after.xid, 1100);
	assert_int_equal(d.after.source, 2);
	assert_string_equal(d.after.key, c.after.key);
	assert_true(d.lsn == c.lsn);
}

/* A cursor of version 1 (no WAL position), as relays issued before
 * positions were kept, still decodes, with position 0; the same bytes
 * with a forged tag do not. */
static void version_1_accepted(void **state)
{
	unsigned char key[32], raw[256], mac[EVP_MAX_MD_SIZE];
	struct comb_cursor c = sample(), d;
	char text[COMB_CURSOR_MAX_TEXT];
	unsigned int maclen = 0;
	size_t len = 0, body;

	(void)state;
	comb_cursor_key(secret, key);
	assert_int_equal(comb_cursor_encode(&c, key, text, sizeof(text)), 0);
	assert_int_equal(comb_base64_decode(text, strlen(text), raw, sizeof(raw), &len), 0);
	/* version 2 is version 1's body, then 8 bytes of position, then the tag */
	body = len - 16 - 8;
	raw[0] = 1;
	HMAC(EVP_sha256(), key, 32, raw, body, mac, &maclen);
	memcpy(raw + body, mac, 16);
	assert_int_equal(comb_base64_encode(raw, body + 16, text, sizeof(text)), 0);
	assert_int_equal(comb_cursor_decode(text, key, &d), 0);
	assert_true(d.lsn == 0);
	assert_int_equal(d.after.xid, 1100);
	assert_string_equal(d.after.key, c.after.key);

	raw[body] ^= 1;
	assert_int_equal(comb_base64_encode(raw, body + 16, text, sizeof(text)), 0);
	assert_int_equal(comb_cursor_decode(text, key, &d), COMB_EINVAL);
}

static void forged_and_foreign(void **state)
{
	unsigned char key[32], other_key[32], other_secret[32] = {9};
	struct comb_cursor c = sample(), d;
	char text[COMB_CURSOR_MAX_TEXT];
	size_t i;

	(void)state;
	comb_cursor_key(secret, key);
	comb_cursor_key(other_secret, other_key);
	comb_cursor_encode(&c, key, text, sizeof(text));
	/* another relay key */
	assert_int_equal(comb_cursor_decode(text, other_key, &d), COMB_EINVAL);
	/* every flipped character is refused */
	for (i = 0; i + 2 < strlen(text); i++) {
		char copy[COMB_CURSOR_MAX_TEXT];

		memcpy(copy, text, sizeof(copy));
		copy[i] = copy[i] == 'A' ? 'B' : 'A';
		assert_int_equal(comb_cursor_decode(copy, key, &d), COMB_EINVAL);
	}
	assert_int_equal(comb_cursor_decode("", key, &d), COMB_EINVAL);
	assert_int_equal(comb_cursor_decode("not base64!", key, &d), COMB_EINVAL);
	assert_int_equal(comb_cursor_decode("AAAA", key, &d), COMB_EINVAL);
}

static void scope_is_bound(void **state)
{
	unsigned char a[COMB_CURSOR_SCOPE_LEN], b[COMB_CURSOR_SCOPE_LEN];
	const char *h1[] = {"x"}, *h2[] = {"y"}, *t[] = {"demo.task"};

	(void)state;
	comb_cursor_scope("r1", h1, 1, NULL, 0, a);
	comb_cursor_scope("r2", h1, 1, NULL, 0, b);
	assert_memory_not_equal(a, b, sizeof(a));
	comb_cursor_scope("r1", h2, 1, NULL, 0, b);
	assert_memory_not_equal(a, b, sizeof(a));
	comb_cursor_scope("r1", h1, 1, t, 1, b);
	assert_memory_not_equal(a, b, sizeof(a));
	comb_cursor_scope("r1", h1, 1, NULL, 0, b);
	assert_memory_equal(a, b, sizeof(a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(version_1_accepted),
		cmocka_unit_test(forged_and_foreign),
		cmocka_unit_test(scope_is_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
