/* Channel and artifact identifiers: canonical lowercase hyphenated UUIDs. */
#ifndef COMB_UUID_H
#define COMB_UUID_H

#include <stdbool.h>
#include <stdint.h>

#define COMB_UUID_LEN 36

/* True when s is a canonical lowercase hyphenated UUID other than the nil
 * UUID (8-4-4-4-12 hex digits, no braces, no uppercase). */
bool comb_uuid_is_canonical(const char *s);

/* Parses a canonical UUID (comb_uuid_is_canonical) into its 16 bytes.
 * Returns 0 or COMB_EINVAL. */
int comb_uuid_parse(const char *text, uint8_t out[16]);

/* Writes the canonical text of the 16 bytes d and a NUL into out. */
void comb_uuid_format(const uint8_t d[16], char out[COMB_UUID_LEN + 1]);

#endif
