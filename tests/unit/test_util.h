/*
 * Small helpers shared by the unit tests: an assertion for byte strings
 * that prints both sides (escaped) when they differ, and a loader for the
 * JSON files under tests/. Header-only so each test stays one file.
 */
#ifndef COMB_TEST_UTIL_H
#define COMB_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

/* Prints len bytes of s with non-printable bytes as \xNN. */
static inline void test_print_escaped(const char *label, const void *s,
				      size_t len)
{
	const unsigned char *p = s;
	size_t i;

	fprintf(stderr, "  %s (%zu bytes): \"", label, len);
	for (i = 0; i < len; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			fputc(p[i], stderr);
		else
			fprintf(stderr, "\\x%02x", p[i]);
	}
	fprintf(stderr, "\"\n");
}

/* Fails the test, printing both byte strings, unless they are equal. */
#define assert_bytes_equal(a, alen, b, blen)                                   \
	do {                                                                   \
		const void *a_ = (a), *b_ = (b);                               \
		size_t alen_ = (alen), blen_ = (blen);                         \
		if (alen_ != blen_ || (alen_ > 0 && memcmp(a_, b_, alen_))) {  \
			fprintf(stderr, "%s:%d: bytes differ\n", __FILE__,     \
				__LINE__);                                     \
			test_print_escaped(#a, a_, alen_);                     \
			test_print_escaped(#b, b_, blen_);                     \
			fail();                                                \
		}                                                              \
	} while (0)

/* Loads a JSON file relative to tests/ (duplicates refused, NUL allowed);
 * fails the test when it cannot. Caller frees with json_decref. */
static inline json_t *test_load_json(const char *relpath)
{
	char path[4096];
	json_error_t err;
	json_t *v;

	snprintf(path, sizeof(path), "%s/%s", COMB_TEST_DIR, relpath);
	v = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
	if (v == NULL) {
		fprintf(stderr, "cannot load %s: %s (line %d)\n", path,
			err.text, err.line);
		fail();
	}
	return v;
}

#endif
