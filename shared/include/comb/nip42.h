/*
 * NIP-42 WebSocket authentication: the client answers the relay's
 * ["AUTH",<challenge>] with a signed kind-22242 event.
 */
#ifndef COMB_NIP42_H
#define COMB_NIP42_H

#include <stddef.h>
#include <stdint.h>

#include "comb/event.h"

#define COMB_NIP42_KIND 22242
#define COMB_NIP42_MAX_SKEW 600

/*
 * Checks an AUTH event: kind 22242, valid id and signature, `challenge` tag
 * equal to challenge, `relay` tag equal to ws:// or wss:// plus host (the
 * Host header, port kept when it has one; compared case-insensitively; a
 * trailing slash or any path ignored), created_at within
 * COMB_NIP42_MAX_SKEW seconds of now. Returns 0, or COMB_EAUTH with a
 * lowercase reason in errbuf.
 */
int comb_nip42_verify(const struct comb_event *ev, const char *challenge,
		      const char *host, int64_t now, char *errbuf, size_t errlen);

#endif
