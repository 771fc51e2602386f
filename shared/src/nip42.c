/*
 * NIP-42 WebSocket authentication (PROTOCOL.md sections 7 and 10): checks
 * the kind-22242 event a client sends in answer to ["AUTH",<challenge>].
 * The `relay` tag must name this relay as the client reached it, that is
 * the Host header of the upgrade request; its path is ignored because
 * clients disagree on whether to write one.
 */
#include "comb/nip42.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "comb/error.h"

/* True when relay is ws:// or wss://, then host (any case), then nothing
 * or a path, query or fragment. */
static bool relay_matches(const char *relay, const char *host)
{
	size_t alen;

	if (host == NULL || *host == '\0')
		return false;
	if (strncasecmp(relay, "wss://", 6) == 0)
		relay += 6;
	else if (strncasecmp(relay, "ws://", 5) == 0)
		relay += 5;
	else
		return false;
	alen = strcspn(relay, "/?#");
	return alen == strlen(host) && strncasecmp(relay, host, alen) == 0;
}

int comb_nip42_verify(const struct comb_event *ev, const char *challenge,
		      const char *host, int64_t now, char *errbuf,
		      size_t errlen)
{
	const char *c, *relay;
	char why[128];

	if (ev->kind != COMB_NIP42_KIND)
		return comb_fail(errbuf, errlen, COMB_EAUTH, "wrong kind");
	if (ev->created_at < now - COMB_NIP42_MAX_SKEW)
		return comb_fail(errbuf, errlen, COMB_EAUTH,
				 "stale authentication");
	if (ev->created_at > now + COMB_NIP42_MAX_SKEW)
		return comb_fail(errbuf, errlen, COMB_EAUTH,
				 "authentication from the future");
	c = comb_event_single_tag(ev, "challenge", errbuf, errlen);
	if (c == NULL)
		return COMB_EAUTH;
	if (challenge == NULL || *challenge == '\0' ||
	    strcmp(c, challenge) != 0)
		return comb_fail(errbuf, errlen, COMB_EAUTH,
				 "challenge mismatch");
	relay = comb_event_single_tag(ev, "relay", errbuf, errlen);
	if (relay == NULL)
		return COMB_EAUTH;
	if (!relay_matches(relay, host))
		return comb_fail(errbuf, errlen, COMB_EAUTH, "relay mismatch");
	why[0] = '\0';
	if (comb_event_verify(ev, why, sizeof(why)) < 0)
		return comb_fail(errbuf, errlen, COMB_EAUTH, "%s",
				 why[0] ? why : "bad signature");
	return 0;
}
