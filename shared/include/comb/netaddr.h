/*
 * Client addresses (PROTOCOL.md section 10): IPv4 and IPv6 addresses,
 * the operator's list of trusted proxies (COMB_TRUSTED_PROXIES: addresses
 * and CIDR ranges), and the client address of a request: the TCP peer,
 * or, only when the peer is a trusted proxy, the last entry of
 * X-Forwarded-For that is not itself a trusted proxy.
 */
#ifndef COMB_NETADDR_H
#define COMB_NETADDR_H

#include <stdbool.h>
#include <stddef.h>

/* Enough for any address comb_netaddr_format writes, NUL included. */
#define COMB_NETADDR_TEXT 46

/* An address; an IPv4-mapped IPv6 address is held as the IPv4 one. */
struct comb_netaddr {
	int family;               /* AF_INET or AF_INET6 */
	unsigned char bytes[16];  /* 4 or 16 of them, network order */
};

/* A list of address ranges. */
struct comb_netranges {
	struct comb_netrange {
		struct comb_netaddr addr;
		int prefix;       /* leading bits that must match */
	} *ranges;
	size_t n;
};

/* Parses len bytes of text (an address, optionally in brackets, without
 * a port) into out. Returns 0, or COMB_EINVAL. */
int comb_netaddr_parse(const char *text, size_t len, struct comb_netaddr *out);

/* Writes a's canonical text (inet_ntop) into out (COMB_NETADDR_TEXT). */
void comb_netaddr_format(const struct comb_netaddr *a, char *out, size_t outlen);

/*
 * Parses a comma-separated list of addresses and CIDR ranges
 * ("10.0.0.0/8, ::1, 192.168.1.7") into out (release it with
 * comb_netranges_free); an empty list is valid. Returns 0, or COMB_EINVAL
 * or COMB_ENOMEM with errbuf set.
 */
int comb_netranges_parse(const char *list, struct comb_netranges *out,
			 char *errbuf, size_t errlen);

void comb_netranges_free(struct comb_netranges *r);

/* True when a lies in one of r's ranges. */
bool comb_netranges_contains(const struct comb_netranges *r,
			     const struct comb_netaddr *a);

/*
 * The client address of a request whose TCP peer is peer (text) and whose
 * X-Forwarded-For headers are the nxff strings xff (in the order they came,
 * read as one comma-separated list), with trusted the operator's proxies:
 * the peer when it is not trusted or there is no forwarded entry; else the
 * rightmost entry that is not trusted (all trusted: the leftmost one). An
 * entry that is not an address stops the walk: the entry right of it (or
 * the peer) is the client address, since nothing left of it can be
 * believed. Writes the canonical text into out (COMB_NETADDR_TEXT bytes);
 * a peer that is not an address is copied as it is.
 */
void comb_client_address(const struct comb_netranges *trusted,
			 const char *peer, const char *const *xff, size_t nxff,
			 char *out, size_t outlen);

#endif
