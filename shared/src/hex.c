/*
 * Lowercase hexadecimal: encoding, and decoding that accepts only the
 * canonical lowercase form so that one value has exactly one spelling
 * (ids, keys and signatures are compared as strings elsewhere).
 */
#include "comb/hex.h"

#include "comb/error.h"

#include <string.h>

static const char hex_digits[] = "0123456789abcdef";

/* Returns the value of a lowercase hex digit, or -1. */
static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

void comb_hex_encode(const unsigned char *in, size_t len, char *out)
{
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = hex_digits[in[i] >> 4];
		out[2 * i + 1] = hex_digits[in[i] & 0xf];
	}
	out[2 * len] = '\0';
}

/* s must be NUL-terminated or have at least len + 1 readable bytes. */
bool comb_hex_is_lower(const char *s, size_t len)
{
	size_t i;

	if (s == NULL)
		return false;
	for (i = 0; i < len; i++) {
		if (hex_value(s[i]) < 0)
			return false; /* also stops at an early NUL */
	}
	return s[len] == '\0';
}

int comb_hex_decode(const char *in, unsigned char *out, size_t outlen)
{
	size_t i;

	if (outlen > (((size_t)-1) - 1) / 2 ||
	    !comb_hex_is_lower(in, 2 * outlen))
		return COMB_EINVAL;
	for (i = 0; i < outlen; i++)
		out[i] = (unsigned char)(hex_value(in[2 * i]) << 4 |
					 hex_value(in[2 * i + 1]));
	return 0;
}
