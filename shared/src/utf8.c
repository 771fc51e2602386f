/* UTF-8 well-formedness and the plain runs of JSON strings (utf8.h). */
#include "comb/utf8.h"

#include <stdint.h>
#include <string.h>

size_t comb_utf8_sequence(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return avail >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (avail < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if (c == 0xe0 && s[1] < 0xa0)
			return 0; /* overlong */
		if (c == 0xed && s[1] >= 0xa0)
			return 0; /* UTF-16 surrogate */
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (avail < 4 || (s[1] & 0xc0) != 0x80 ||
		    (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
			return 0;
		if (c == 0xf0 && s[1] < 0x90)
			return 0; /* overlong */
		if (c == 0xf4 && s[1] >= 0x90)
			return 0; /* above U+10FFFF */
		return 4;
	}
	return 0;
}

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Nonzero when a byte of w is zero (each byte's high bit flags it, the
 * lowest flagged byte exactly). */
static uint64_t zero_byte(uint64_t w)
{
	return (w - ONES) & ~w & HIGHS;
}

/* Nonzero when a byte of w is below n (n <= 0x80). */
static uint64_t byte_below(uint64_t w, unsigned char n)
{
	return (w - ONES * n) & ~w & HIGHS;
}

static int plain(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

size_t comb_json_plain_run(const unsigned char *s, size_t len)
{
	size_t i = 0;
	uint64_t w;

	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		if ((w & HIGHS) || byte_below(w, 0x20) ||
		    zero_byte(w ^ (ONES * '"')) || zero_byte(w ^ (ONES * '\\')))
			break;
	}
	while (i < len && plain(s[i]))
		i++;
	return i;
}
