/*
 * Strict JSON input: jansson with duplicate keys rejected, invalid UTF-8
 * rejected (always, by jansson), NUL allowed inside strings (callers decide
 * where NUL is acceptable), and a size limit checked before parsing.
 */
#ifndef COMB_JSON_H
#define COMB_JSON_H

#include <jansson.h>
#include <stddef.h>

/* Deepest nesting of arrays and objects accepted. */
#define COMB_JSON_MAX_DEPTH 32

/*
 * Parses len bytes of buf as one JSON value. Returns the new value (caller
 * frees with json_decref), or NULL with a reason in errbuf when the input is
 * longer than max, is not valid JSON, nests deeper than
 * COMB_JSON_MAX_DEPTH, holds a duplicate object key or invalid UTF-8.
 */
json_t *comb_json_parse(const char *buf, size_t len, size_t max, char *errbuf,
			size_t errlen);

/* Returns the string value of key in obj, or NULL when absent or not a
 * string. Borrowed from obj. */
const char *comb_json_get_string(const json_t *obj, const char *key);

#endif
