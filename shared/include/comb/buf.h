/*
 * A growable byte buffer with a hard maximum (like curl's dynbuf): every
 * append fails with COMB_ETOOBIG instead of growing past max. The content is
 * always NUL-terminated so it can be used as a C string.
 */
#ifndef COMB_BUF_H
#define COMB_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct comb_buf {
	char *data;   /* owned; NULL until the first append */
	size_t len;   /* bytes used, excluding the terminating NUL */
	size_t cap;   /* bytes allocated */
	size_t max;   /* the largest len allowed */
};

/* Prepares an empty buffer that may hold up to max bytes. */
void comb_buf_init(struct comb_buf *b, size_t max);

/* Frees the content and leaves an empty buffer with the same max. */
void comb_buf_release(struct comb_buf *b);

/* Empties the buffer, keeping its allocation. */
void comb_buf_reset(struct comb_buf *b);

int comb_buf_append(struct comb_buf *b, const void *data, size_t len);
int comb_buf_puts(struct comb_buf *b, const char *s);
int comb_buf_putc(struct comb_buf *b, char c);
int comb_buf_printf(struct comb_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int comb_buf_vprintf(struct comb_buf *b, const char *fmt, va_list ap);

/* Appends s (len bytes, may contain NUL) as a JSON string literal with the
 * quotes, escaped exactly as JavaScript's JSON.stringify does. Returns
 * COMB_EINVAL, appending nothing, when s is not well-formed UTF-8. */
int comb_buf_json_string(struct comb_buf *b, const char *s, size_t len);

/* Appends s as the next element of a PostgreSQL array literal that b holds
 * from its opening '{' on: a comma unless b ends with '{', then s in
 * double quotes with its quotes and backslashes escaped, or the unquoted
 * NULL when s is NULL. The caller closes the literal with '}'. All or
 * nothing, like every append. */
int comb_buf_pg_array_item(struct comb_buf *b, const char *s);

/* Appends the n strings of values as a whole PostgreSQL array literal
 * ("{...}", each element as comb_buf_pg_array_item writes it). All or
 * nothing. */
int comb_buf_pg_array(struct comb_buf *b, const char *const *values, size_t n);

/* Hands the content to the caller (caller frees) and empties the buffer.
 * Returns an empty allocated string when nothing was appended, NULL only
 * when out of memory. */
char *comb_buf_detach(struct comb_buf *b, size_t *len);

#endif
