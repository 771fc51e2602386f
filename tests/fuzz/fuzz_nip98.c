/*
 * libFuzzer target for NIP-98 verification and the strict base64 decoder.
 * The first input byte picks what the rest is:
 *   0: the raw Authorization header value,
 *   1: the token's JSON, base64-encoded behind "Nostr " here so that the
 *      fuzzer reaches the event and tag checks without guessing base64,
 *   2: base64 text for the decoder alone.
 * The request is fixed (POST https://relay.example.com/events, body FUZZ_BODY,
 * clock FUZZ_NOW), matching the seeds in corpus/nip98/. Besides memory
 * errors it traps on broken contracts: an unexpected return code, a
 * non-terminated reason, a malformed signer or token id, or a decoded
 * buffer that does not re-encode to the same text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comb/base64.h"
#include "comb/error.h"
#include "comb/hex.h"
#include "comb/nip98.h"

#define FUZZ_NOW       1700000000
#define FUZZ_HOST      "relay.example.com"
#define FUZZ_PATH      "/events"
#define FUZZ_BODY      "{\"kind\":1}"
#define FUZZ_MAX_INPUT (2 * COMB_NIP98_MAX_HEADER)

static void check_verify(const char *header)
{
	struct comb_nip98_request req;
	char pubkey[65], id[65], err[128];
	int64_t created_at;
	int rc;

	memset(&req, 0, sizeof(req));
	req.authorization = header;
	req.method = "POST";
	req.host = FUZZ_HOST;
	req.path_and_query = FUZZ_PATH;
	req.body = FUZZ_BODY;
	req.body_len = strlen(FUZZ_BODY);
	req.now = FUZZ_NOW;
	memset(err, 'x', sizeof(err));
	rc = comb_nip98_verify(&req, pubkey, id, &created_at, err, sizeof(err));
	if (rc != 0 && rc != COMB_EAUTH)
		__builtin_trap();
	if (rc == COMB_EAUTH &&
	    (memchr(err, '\0', sizeof(err)) == NULL || err[0] == '\0'))
		__builtin_trap();
	if (rc == 0 && (!comb_hex_is_lower(pubkey, 64) || pubkey[64] != '\0' ||
			!comb_hex_is_lower(id, 64) || id[64] != '\0'))
		__builtin_trap();
}

static void check_base64(const uint8_t *data, size_t size)
{
	size_t max = COMB_BASE64_DECODED_MAX(size), n = 0;
	unsigned char *out = malloc(max + 1);
	char *again = malloc(size + 1);
	int rc;

	if (out == NULL || again == NULL)
		goto out;
	rc = comb_base64_decode((const char *)data, size, out, max, &n);
	if (rc != 0 && rc != COMB_EINVAL)
		__builtin_trap();
	if (rc == 0) {
		/* canonical: exactly one accepted spelling per byte string */
		if (comb_base64_encode(out, n, again, size + 1) != 0 ||
		    memcmp(again, data, size) != 0)
			__builtin_trap();
		/* and the limit is enforced */
		if (n > 0 && comb_base64_decode((const char *)data, size, out,
						n - 1, &n) != COMB_ETOOBIG)
			__builtin_trap();
	}
out:
	free(out);
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *header;
	uint8_t mode;

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	mode = data[0] % 3;
	data++;
	size--;

	if (mode == 0) {
		header = malloc(size + 1);
		if (header == NULL)
			return 0;
		memcpy(header, data, size);
		header[size] = '\0';
		check_verify(header);
		free(header);
	} else if (mode == 1) {
		size_t hlen = 6 + COMB_BASE64_ENCODED_LEN(size) + 1;

		header = malloc(hlen);
		if (header == NULL)
			return 0;
		memcpy(header, "Nostr ", 6);
		if (comb_base64_encode(data, size, header + 6, hlen - 6) != 0)
			__builtin_trap();
		check_verify(header);
		free(header);
	} else {
		check_base64(data, size);
	}
	return 0;
}
