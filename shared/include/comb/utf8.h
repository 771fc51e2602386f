/* UTF-8 well-formedness and the plain runs of JSON strings. */
#ifndef COMB_UTF8_H
#define COMB_UTF8_H

#include <stddef.h>

/*
 * Returns the length of the well-formed UTF-8 sequence starting at s (at
 * most avail >= 1 bytes), or 0 when it is malformed: truncated, overlong, a
 * surrogate, above U+10FFFF or a stray continuation byte.
 */
size_t comb_utf8_sequence(const unsigned char *s, size_t avail);

/*
 * Returns how many of the len bytes at s, from the start, are printable
 * ASCII that a JSON string holds as they are: 0x20 to 0x7f except '"' and
 * '\\'. Reads eight bytes at a time, for the long texts of event contents.
 */
size_t comb_json_plain_run(const unsigned char *s, size_t len);

#endif
