/* Channel and artifact identifiers: canonical lowercase hyphenated UUIDs. */
#ifndef COMB_UUID_H
#define COMB_UUID_H

#include <stdbool.h>

#define COMB_UUID_LEN 36

/* True when s is a canonical lowercase hyphenated UUID other than the nil
 * UUID (8-4-4-4-12 hex digits, no braces, no uppercase). */
bool comb_uuid_is_canonical(const char *s);

#endif
