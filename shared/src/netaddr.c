/*
 * Client addresses and trusted proxies (comb/netaddr.h).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "comb/error.h"
#include "comb/netaddr.h"

/* An IPv6 address of the form ::ffff:a.b.c.d. */
static bool v4_mapped(const unsigned char *b)
{
	static const unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return !memcmp(b, prefix, sizeof(prefix));
}

int comb_netaddr_parse(const char *text, size_t len, struct comb_netaddr *out)
{
	char buf[64];

	if (len >= 2 && text[0] == '[' && text[len - 1] == ']') {
		text++;
		len -= 2;
	}
	if (len == 0 || len >= sizeof(buf))
		return COMB_EINVAL;
	memcpy(buf, text, len);
	buf[len] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, out->bytes) == 1) {
		out->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, out->bytes) != 1)
		return COMB_EINVAL;
	out->family = AF_INET6;
	if (v4_mapped(out->bytes)) {
		memmove(out->bytes, out->bytes + 12, 4);
		memset(out->bytes + 4, 0, 12);
		out->family = AF_INET;
	}
	return 0;
}

void comb_netaddr_format(const struct comb_netaddr *a, char *out, size_t outlen)
{
	if (!inet_ntop(a->family, a->bytes, out, (socklen_t)outlen) && outlen)
		out[0] = '\0';
}

/* Trims spaces and tabs around [*s, *e). */
static void trim(const char **s, const char **e)
{
	while (*s < *e && isspace((unsigned char)**s))
		(*s)++;
	while (*e > *s && isspace((unsigned char)(*e)[-1]))
		(*e)--;
}

/* Parses one range "addr" or "addr/prefix" of [s, e). */
static int parse_range(const char *s, const char *e, struct comb_netrange *r)
{
	const char *slash = memchr(s, '/', (size_t)(e - s));
	int max;

	if (comb_netaddr_parse(s, (size_t)((slash ? slash : e) - s), &r->addr))
		return COMB_EINVAL;
	max = r->addr.family == AF_INET ? 32 : 128;
	r->prefix = max;
	if (slash) {
		const char *p = slash + 1;
		int n = 0;

		if (p == e || e - p > 3)
			return COMB_EINVAL;
		for (; p < e; p++) {
			if (!isdigit((unsigned char)*p))
				return COMB_EINVAL;
			n = n * 10 + (*p - '0');
		}
		if (n > max)
			return COMB_EINVAL;
		r->prefix = n;
	}
	return 0;
}

int comb_netranges_parse(const char *list, struct comb_netranges *out,
			 char *errbuf, size_t errlen)
{
	const char *p = list ? list : "";
	size_t cap = 1;

	out->ranges = NULL;
	out->n = 0;
	for (const char *c = p; *c; c++)
		cap += *c == ',';
	out->ranges = calloc(cap, sizeof(*out->ranges));
	if (!out->ranges)
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	while (*p) {
		const char *end = strchr(p, ',');
		const char *s = p, *e = end ? end : p + strlen(p);

		trim(&s, &e);
		if (s < e && parse_range(s, e, &out->ranges[out->n])) {
			comb_netranges_free(out);
			return comb_fail(errbuf, errlen, COMB_EINVAL,
					 "not an address or CIDR range: \"%.*s\"",
					 (int)(e - s > 60 ? 60 : e - s), s);
		}
		if (s < e)
			out->n++;
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

void comb_netranges_free(struct comb_netranges *r)
{
	free(r->ranges);
	r->ranges = NULL;
	r->n = 0;
}

/* True when the first bits of a and b agree. */
static bool prefix_matches(const unsigned char *a, const unsigned char *b, int bits)
{
	int whole = bits / 8, rest = bits % 8;
	unsigned char mask;

	if (memcmp(a, b, (size_t)whole))
		return false;
	if (rest == 0)
		return true;
	mask = (unsigned char)(0xff << (8 - rest));
	return (a[whole] & mask) == (b[whole] & mask);
}

bool comb_netranges_contains(const struct comb_netranges *r,
			     const struct comb_netaddr *a)
{
	size_t i;

	for (i = 0; i < r->n; i++) {
		if (r->ranges[i].addr.family == a->family &&
		    prefix_matches(r->ranges[i].addr.bytes, a->bytes,
				   r->ranges[i].prefix))
			return true;
	}
	return false;
}

/* The last entry of [list, end) before end: its bounds, trimmed, in *s
 * and *e; returns where the list left of it ends (list when none). */
static const char *last_entry(const char *list, const char *end,
			      const char **s, const char **e)
{
	const char *comma = end;

	while (comma > list && comma[-1] != ',')
		comma--;
	*s = comma;
	*e = end;
	trim(s, e);
	return comma > list ? comma - 1 : list;
}

void comb_client_address(const struct comb_netranges *trusted,
			 const char *peer, const char *const *xff, size_t nxff,
			 char *out, size_t outlen)
{
	struct comb_netaddr a, chosen;
	size_t h;

	if (comb_netaddr_parse(peer, strlen(peer), &a)) {
		snprintf(out, outlen, "%s", peer);
		return;
	}
	chosen = a;
	/* Walks the entries right to left, headers last to first, while
	 * they are trusted proxies. */
	for (h = nxff; h-- > 0 && comb_netranges_contains(trusted, &chosen);) {
		const char *list = xff[h], *end = list + strlen(list);

		while (end > list && comb_netranges_contains(trusted, &chosen)) {
			const char *s, *e;

			end = last_entry(list, end, &s, &e);
			if (s == e)
				continue;
			if (comb_netaddr_parse(s, (size_t)(e - s), &a))
				goto done;
			chosen = a;
		}
	}
done:
	comb_netaddr_format(&chosen, out, outlen);
}
