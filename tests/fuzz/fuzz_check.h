/*
 * Helpers shared by the libFuzzer targets of tests/fuzz/: an invariant
 * check that names what failed before trapping (so a crash report says
 * which contract broke, not only where), the reason-buffer contract of
 * comb functions, and strict JSON parsing of the fuzz input the way the
 * relay parses request bodies. Header-only, so that each target stays one
 * self-contained executable.
 */
#ifndef COMB_FUZZ_CHECK_H
#define COMB_FUZZ_CHECK_H

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "comb/json.h"

#define FUZZ_CHECK(cond)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			__builtin_trap();                                      \
		}                                                              \
	} while (0)

/* A refusal must say why: a NUL-terminated, non-empty reason in err. */
static inline void fuzz_check_reason(const char *err, size_t len)
{
	FUZZ_CHECK(memchr(err, '\0', len) != NULL);
	FUZZ_CHECK(err[0] != '\0');
}

/* Parses data as the relay parses a body (comb_json_parse: duplicate keys
 * and invalid UTF-8 refused, NUL allowed inside strings). Returns the value
 * (caller frees with json_decref) or NULL. */
static inline json_t *fuzz_parse_json(const unsigned char *data, size_t size,
				      size_t max)
{
	char err[128];
	json_t *v;

	memset(err, 'x', sizeof(err));
	v = comb_json_parse((const char *)data, size, max, err, sizeof(err));
	if (v == NULL)
		fuzz_check_reason(err, sizeof(err));
	return v;
}

/* True when the JSON string value s holds no NUL, so that its C string is
 * all of it. */
static inline int fuzz_string_is_whole(const json_t *s)
{
	return json_is_string(s) &&
	       strlen(json_string_value(s)) == json_string_length(s);
}

#endif
