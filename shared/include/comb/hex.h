/* Lowercase hexadecimal encoding and strict decoding. */
#ifndef COMB_HEX_H
#define COMB_HEX_H

#include <stdbool.h>
#include <stddef.h>

/* Writes 2*len lowercase hex digits and a NUL into out (2*len+1 bytes). */
void comb_hex_encode(const unsigned char *in, size_t len, char *out);

/* Decodes exactly 2*outlen lowercase hex digits from in (NUL-terminated);
 * returns COMB_EINVAL on any other length or on an uppercase or non-hex
 * character. */
int comb_hex_decode(const char *in, unsigned char *out, size_t outlen);

/* True when s is exactly len lowercase hex digits. */
bool comb_hex_is_lower(const char *s, size_t len);

#endif
