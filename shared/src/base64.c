/*
 * Standard padded base64, used to carry NIP-98 tokens in the Authorization
 * header. The decoder accepts only the canonical encoding (see base64.h):
 * anything lenient here would give one token several spellings.
 */
#include "comb/base64.h"

#include <stdint.h>

#include "comb/error.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Returns the 6-bit value of c, or -1 when c is not in the alphabet. */
static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int comb_base64_encode(const void *in, size_t len, char *out, size_t outlen)
{
	const unsigned char *p = in;
	size_t i, o = 0;

	if (len > (SIZE_MAX - 1) / 4 * 3 - 2 ||
	    outlen < COMB_BASE64_ENCODED_LEN(len) + 1)
		return COMB_ETOOBIG;
	for (i = 0; i + 3 <= len; i += 3) {
		uint32_t v =
		    (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[o++] = b64_alphabet[(v >> 18) & 63];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = b64_alphabet[(v >> 6) & 63];
		out[o++] = b64_alphabet[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;

		out[o++] = b64_alphabet[(v >> 18) & 63];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

		out[o++] = b64_alphabet[(v >> 18) & 63];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = b64_alphabet[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
	return 0;
}

int comb_base64_decode(const char *in, size_t inlen, unsigned char *out,
		       size_t outmax, size_t *outlen)
{
	size_t pad = 0, n, i, o = 0;

	*outlen = 0;
	if (inlen % 4 != 0)
		return COMB_EINVAL;
	if (inlen == 0)
		return 0;
	if (in[inlen - 1] == '=')
		pad = in[inlen - 2] == '=' ? 2 : 1;
	n = inlen / 4 * 3 - pad;
	if (n > outmax)
		return COMB_ETOOBIG;

	for (i = 0; i < inlen; i += 4) {
		int last = i + 4 == inlen;
		int v0 = b64_value((unsigned char)in[i]);
		int v1 = b64_value((unsigned char)in[i + 1]);
		int v2 = b64_value((unsigned char)in[i + 2]);
		int v3 = b64_value((unsigned char)in[i + 3]);

		if (v0 < 0 || v1 < 0)
			return COMB_EINVAL;
		if (last && pad == 2) {
			if (in[i + 2] != '=' || in[i + 3] != '=' ||
			    (v1 & 0x0f) != 0)
				return COMB_EINVAL;
			out[o++] = (unsigned char)(v0 << 2 | v1 >> 4);
			break;
		}
		if (v2 < 0)
			return COMB_EINVAL;
		if (last && pad == 1) {
			if (in[i + 3] != '=' || (v2 & 0x03) != 0)
				return COMB_EINVAL;
			out[o++] = (unsigned char)(v0 << 2 | v1 >> 4);
			out[o++] = (unsigned char)((v1 & 0x0f) << 4 | v2 >> 2);
			break;
		}
		if (v3 < 0)
			return COMB_EINVAL;
		out[o++] = (unsigned char)(v0 << 2 | v1 >> 4);
		out[o++] = (unsigned char)((v1 & 0x0f) << 4 | v2 >> 2);
		out[o++] = (unsigned char)((v2 & 0x03) << 6 | v3);
	}
	*outlen = o;
	return 0;
}
