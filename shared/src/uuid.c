/*
 * Canonical UUID checks for channel and artifact identifiers: exactly the
 * lowercase hyphenated 8-4-4-4-12 form, so that a UUID has one spelling and
 * can be compared as a string. The nil UUID is refused.
 */
#include "comb/uuid.h"

#include <stddef.h>

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
