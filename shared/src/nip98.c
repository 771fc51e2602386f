/*
 * NIP-98 HTTP authorization (PROTOCOL.md section 2): turns the
 * Authorization header of a POST into a verified signer, or into one short
 * reason why it is refused. Cheap checks run before the Schnorr
 * verification so that junk costs little; single use is not checked here
 * but by the caller through comb/replay.h with the token id returned.
 */
#include "comb/nip98.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "comb/base64.h"
#include "comb/error.h"
#include "comb/event.h"
#include "comb/hex.h"

#define NIP98_SCHEME "Nostr"

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * Finds the base64 token in an Authorization header value: the scheme
 * (case-insensitive), at least one space, the token, optional trailing
 * spaces. Returns 0 with *tok and *toklen set, or COMB_EAUTH.
 */
static int split_header(const char *value, size_t len, const char **tok,
			size_t *toklen, char *errbuf, size_t errlen)
{
	size_t slen = strlen(NIP98_SCHEME), i, end;

	if (len < slen || strncasecmp(value, NIP98_SCHEME, slen) != 0 ||
	    (len > slen && !is_space(value[slen])))
		return comb_fail(errbuf, errlen, COMB_EAUTH,
				 "unsupported authorization scheme");
	i = slen;
	while (i < len && is_space(value[i]))
		i++;
	end = len;
	while (end > i && is_space(value[end - 1]))
		end--;
	if (end == i)
		return comb_fail(errbuf, errlen, COMB_EAUTH,
				 "malformed authorization");
	*tok = value + i;
	*toklen = end - i;
	return 0;
}

/* True when host is usable as the authority of a URL: non-empty, and
 * without characters that would end or split an authority. */
static bool host_is_plain(const char *host)
{
	const char *p;

	if (host == NULL || *host == '\0')
		return false;
	for (p = host; *p; p++) {
		if (*p == '/' || *p == '?' || *p == '#' || *p == '@' ||
		    is_space(*p) || (unsigned char)*p < 0x20)
			return false;
	}
	return true;
}

/* True when u is http:// or https://, then host (any case), then exactly
 * path_and_query. */
static bool url_matches(const char *u, const char *host,
			const char *path_and_query)
{
	size_t hlen;

	if (!host_is_plain(host))
		return false;
	if (strncmp(u, "https://", 8) == 0)
		u += 8;
	else if (strncmp(u, "http://", 7) == 0)
		u += 7;
	else
		return false;
	hlen = strlen(host);
	if (strncasecmp(u, host, hlen) != 0)
		return false;
	return strcmp(u + hlen, path_and_query ? path_and_query : "") == 0;
}

/* Writes the lowercase hex SHA-256 of len bytes of data into hex (65). */
static int sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	if (EVP_Digest(len ? data : "", len, md, &mdlen, EVP_sha256(), NULL) !=
		1 ||
	    mdlen != sizeof(md))
		return COMB_ENOMEM;
	comb_hex_encode(md, sizeof(md), hex);
	return 0;
}

int comb_nip98_verify(const struct comb_nip98_request *req, char pubkey[65],
		      char token_id[65], int64_t *created_at, char *errbuf,
		      size_t errlen)
{
	struct comb_event ev;
	const char *tok = NULL, *u, *method, *payload;
	unsigned char *json = NULL;
	size_t hlen, toklen = 0, jsonlen = 0;
	char body_hex[65];
	char why[128];
	int rc;

	memset(&ev, 0, sizeof(ev));
	if (req->authorization == NULL || req->authorization[0] == '\0')
		return comb_fail(errbuf, errlen, COMB_EAUTH,
				 "missing authorization");
	hlen = strnlen(req->authorization, COMB_NIP98_MAX_HEADER + 1);
	if (hlen > COMB_NIP98_MAX_HEADER)
		return comb_fail(errbuf, errlen, COMB_EAUTH,
				 "authorization too large");
	rc = split_header(req->authorization, hlen, &tok, &toklen, errbuf,
			  errlen);
	if (rc < 0)
		return rc;

	json = malloc(COMB_BASE64_DECODED_MAX(toklen) + 1);
	if (json == NULL) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH,
			       "out of memory for authorization");
		goto out;
	}
	if (comb_base64_decode(tok, toklen, json,
			       COMB_BASE64_DECODED_MAX(toklen), &jsonlen) < 0 ||
	    jsonlen == 0) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH,
			       "malformed authorization");
		goto out;
	}
	if (comb_event_parse(&ev, (const char *)json, jsonlen,
			     COMB_NIP98_MAX_HEADER, why, sizeof(why)) < 0) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH,
			       "invalid authorization event");
		goto out;
	}

	if (ev.kind != COMB_NIP98_KIND) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH, "wrong kind");
		goto out;
	}
	if (ev.created_at < req->now - COMB_NIP98_MAX_SKEW) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH,
			       "stale authorization");
		goto out;
	}
	if (ev.created_at > req->now + COMB_NIP98_MAX_SKEW) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH,
			       "authorization from the future");
		goto out;
	}

	rc = COMB_EAUTH;
	u = comb_event_single_tag(&ev, "u", errbuf, errlen);
	if (u == NULL)
		goto out;
	if (!url_matches(u, req->host, req->path_and_query)) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH, "url mismatch");
		goto out;
	}
	method = comb_event_single_tag(&ev, "method", errbuf, errlen);
	if (method == NULL)
		goto out;
	if (req->method == NULL || strcmp(method, req->method) != 0) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH, "method mismatch");
		goto out;
	}
	payload = comb_event_single_tag(&ev, "payload", errbuf, errlen);
	if (payload == NULL)
		goto out;
	if (sha256_hex(req->body, req->body_len, body_hex) < 0) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH,
			       "cannot hash request body");
		goto out;
	}
	if (strcmp(payload, body_hex) != 0) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH, "payload mismatch");
		goto out;
	}

	why[0] = '\0';
	if (comb_event_verify(&ev, why, sizeof(why)) < 0) {
		rc = comb_fail(errbuf, errlen, COMB_EAUTH, "%s",
			       why[0] ? why : "bad signature");
		goto out;
	}
	memcpy(pubkey, ev.pubkey, 65);
	memcpy(token_id, ev.id, 65);
	*created_at = ev.created_at;
	rc = 0;
out:
	comb_event_release(&ev);
	free(json);
	return rc;
}
