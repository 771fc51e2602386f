/*
 * Canonical UUID checks for channel and artifact identifiers: exactly the
 * lowercase hyphenated 8-4-4-4-12 form, so that a UUID has one spelling and
 * can be compared as a string. The nil UUID is refused.
 */
#include "comb/uuid.h"

#include <stddef.h>
#include <string.h>

#include "comb/error.h"
#include "comb/hex.h"

/* Where each of the five groups of hex digits starts, and its bytes. */
static const struct {
	size_t at, bytes;
} groups[] = {{0, 4}, {9, 2}, {14, 2}, {19, 2}, {24, 6}};

bool comb_uuid_is_canonical(const char *s)
{
	bool nonzero = false;
	size_t i;

	if (s == NULL)
		return false;
	for (i = 0; i < COMB_UUID_LEN; i++) {
		char c = s[i];

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				return false;
			continue;
		}
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false; /* also stops at an early NUL */
		if (c != '0')
			nonzero = true;
	}
	return s[COMB_UUID_LEN] == '\0' && nonzero;
}

int comb_uuid_parse(const char *text, uint8_t out[16])
{
	char group[13];
	size_t i, k = 0;

	if (!comb_uuid_is_canonical(text))
		return COMB_EINVAL;
	for (i = 0; i < 5; i++) {
		memcpy(group, text + groups[i].at, 2 * groups[i].bytes);
		group[2 * groups[i].bytes] = '\0';
		if (comb_hex_decode(group, out + k, groups[i].bytes))
			return COMB_EINVAL;
		k += groups[i].bytes;
	}
	return 0;
}

void comb_uuid_format(const uint8_t d[16], char out[COMB_UUID_LEN + 1])
{
	size_t i, k = 0;

	for (i = 0; i < 5; i++) {
		if (i)
			out[groups[i].at - 1] = '-';
		comb_hex_encode(d + k, groups[i].bytes, out + groups[i].at);
		k += groups[i].bytes;
	}
}
