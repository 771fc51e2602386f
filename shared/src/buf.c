/*
 * Growable byte buffers with a hard maximum, the JSON string writer whose
 * output is byte-identical to JavaScript's JSON.stringify (the event id
 * depends on it), and PostgreSQL array literals. Every append is
 * all-or-nothing: on failure the buffer keeps exactly what it held before.
 */
#include "comb/buf.h"

#include "comb/error.h"
#include "comb/utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void comb_buf_init(struct comb_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void comb_buf_release(struct comb_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void comb_buf_reset(struct comb_buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

/* Makes room for extra more bytes plus the terminating NUL. */
static int buf_grow(struct comb_buf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (extra > b->max || b->len > b->max - extra)
		return COMB_ETOOBIG;
	if (b->len + extra == SIZE_MAX)
		return COMB_ETOOBIG; /* no room for the NUL */
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap < 64 ? 64 : b->cap;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	/* Never allocate more than the maximum allows. */
	if (b->max < SIZE_MAX && cap > b->max + 1)
		cap = b->max + 1;
	p = realloc(b->data, cap);
	if (p == NULL)
		return COMB_ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int comb_buf_append(struct comb_buf *b, const void *data, size_t len)
{
	int rc = buf_grow(b, len);

	if (rc < 0)
		return rc;
	if (len > 0)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int comb_buf_puts(struct comb_buf *b, const char *s)
{
	return comb_buf_append(b, s, strlen(s));
}

int comb_buf_putc(struct comb_buf *b, char c)
{
	return comb_buf_append(b, &c, 1);
}

int comb_buf_vprintf(struct comb_buf *b, const char *fmt, va_list ap)
{
	va_list copy;
	int n, rc;

	va_copy(copy, ap);
	n = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (n < 0)
		return COMB_EINVAL;
	rc = buf_grow(b, (size_t)n);
	if (rc < 0)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int comb_buf_printf(struct comb_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = comb_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

/*
 * JSON.stringify only needs escapes for '"', '\\' and the C0 controls; a
 * well-formed UTF-8 string has no lone surrogates, so everything else
 * (DEL, U+2028, U+2029, astral characters) is copied raw. Input that is not
 * well-formed UTF-8 has no JSON.stringify equivalent and is refused with
 * COMB_EINVAL.
 */
int comb_buf_json_string(struct comb_buf *b, const char *s, size_t len)
{
	static const char hexdig[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t start = b->len, i = 0, run, n;
	char esc[6];
	int rc;

	rc = comb_buf_putc(b, '"');
	if (rc < 0)
		return rc;
	while (i < len) {
		/* Copy the longest run needing no escape in one append. */
		run = i;
		while (run < len && p[run] >= 0x20 && p[run] != '"' &&
		       p[run] != '\\') {
			n = p[run] < 0x80 ? comb_json_plain_run(p + run, len - run)
					  : comb_utf8_sequence(p + run, len - run);
			if (n == 0) {
				rc = COMB_EINVAL;
				goto out;
			}
			run += n;
		}
		if (run > i) {
			rc = comb_buf_append(b, p + i, run - i);
			if (rc < 0)
				goto out;
			i = run;
			continue;
		}
		esc[0] = '\\';
		n = 2;
		switch (p[i]) {
		case '"':
			esc[1] = '"';
			break;
		case '\\':
			esc[1] = '\\';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		case '\b':
			esc[1] = 'b';
			break;
		case '\f':
			esc[1] = 'f';
			break;
		default:
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hexdig[p[i] >> 4];
			esc[5] = hexdig[p[i] & 0xf];
			n = 6;
			break;
		}
		rc = comb_buf_append(b, esc, n);
		if (rc < 0)
			goto out;
		i++;
	}
	rc = comb_buf_putc(b, '"');
out:
	if (rc < 0) {
		b->len = start;
		if (b->data != NULL)
			b->data[start] = '\0';
	}
	return rc;
}

int comb_buf_pg_array_item(struct comb_buf *b, const char *s)
{
	size_t start = b->len, run;
	int rc = 0;

	if (b->len > 0 && b->data[b->len - 1] != '{')
		rc = comb_buf_putc(b, ',');
	if (rc == 0 && s == NULL)
		rc = comb_buf_puts(b, "NULL");
	else if (rc == 0)
		rc = comb_buf_putc(b, '"');
	while (rc == 0 && s != NULL && *s) {
		run = strcspn(s, "\"\\");
		rc = comb_buf_append(b, s, run);
		s += run;
		if (rc == 0 && *s) {
			char esc[2] = {'\\', *s++};

			rc = comb_buf_append(b, esc, 2);
		}
	}
	if (rc == 0 && s != NULL)
		rc = comb_buf_putc(b, '"');
	if (rc < 0) {
		b->len = start;
		if (b->data != NULL)
			b->data[start] = '\0';
	}
	return rc;
}

int comb_buf_pg_array(struct comb_buf *b, const char *const *values, size_t n)
{
	size_t start = b->len, i;
	int rc = comb_buf_putc(b, '{');

	for (i = 0; i < n && rc == 0; i++)
		rc = comb_buf_pg_array_item(b, values[i]);
	rc = rc ? rc : comb_buf_putc(b, '}');
	if (rc < 0) {
		b->len = start;
		if (b->data != NULL)
			b->data[start] = '\0';
	}
	return rc;
}

char *comb_buf_detach(struct comb_buf *b, size_t *len)
{
	char *p = b->data;
	size_t n = b->len;

	if (p == NULL) {
		p = malloc(1);
		if (p == NULL)
			return NULL;
		p[0] = '\0';
		n = 0;
	}
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	if (len != NULL)
		*len = n;
	return p;
}
