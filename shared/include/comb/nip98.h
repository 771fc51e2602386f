/*
 * NIP-98 HTTP authorization: every POST carries
 * `Authorization: Nostr <base64 of a signed kind-27235 event>`.
 * This file checks the token against the request; single use is enforced
 * separately through the shared replay store (comb/replay.h).
 */
#ifndef COMB_NIP98_H
#define COMB_NIP98_H

#include <stddef.h>
#include <stdint.h>

#define COMB_NIP98_KIND 27235
#define COMB_NIP98_MAX_SKEW 60        /* seconds either side of now */
/* How far a relay node's clock may trail the replay store's: a token is
 * remembered until created_at + COMB_NIP98_MAX_SKEW + this margin, past
 * the last moment a node that slow could still accept it. */
#define COMB_NIP98_CLOCK_MARGIN 300
#define COMB_NIP98_MAX_HEADER 16384   /* bytes of the Authorization header */

struct comb_nip98_request {
	const char *authorization;  /* the header value, or NULL when absent */
	const char *method;         /* "POST" */
	const char *host;           /* the Host header as sent */
	const char *path_and_query; /* "/events" or "/query?x=1" */
	const void *body;
	size_t body_len;
	int64_t now;                /* the relay's clock, unix seconds */
};

/*
 * Checks every rule of PROTOCOL.md section 2 except single use: header
 * present and well-formed, base64 decodes to a valid signed event of kind
 * 27235, created_at within COMB_NIP98_MAX_SKEW of now, `u` equal to
 * http(s)://<host><path_and_query> (host case-insensitive), `method` equal,
 * `payload` equal to the lowercase hex SHA-256 of the body.
 * On success writes the signer into pubkey, the token's event id into
 * token_id and its created_at into *created_at, and returns 0. Otherwise
 * returns COMB_EAUTH with a lowercase reason (no prefix) in errbuf.
 */
int comb_nip98_verify(const struct comb_nip98_request *req, char pubkey[65],
		      char token_id[65], int64_t *created_at, char *errbuf,
		      size_t errlen);

#endif
