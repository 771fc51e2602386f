/*
 * Cursor tokens: a fixed little-endian layout, an HMAC-SHA256 tag
 * (truncated to 16 bytes) over it, and base64 around both.
 */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <string.h>

#include "comb/base64.h"
#include "comb/cursor.h"
#include "comb/error.h"
#include "comb/log.h"

/* Version 1 had no WAL position; its cursors are still accepted (as
 * position 0) so that readers keep theirs across an upgrade. */
#define CURSOR_VERSION_1 1
#define CURSOR_VERSION 2
#define TAG_LEN 16
/* version, community, epoch, system id, scope, phase, horizon,
 * after.xid, after.source, after.key (36), then, from version 2, lsn */
#define BODY_LEN_1 (1 + 8 + 4 + 8 + COMB_CURSOR_SCOPE_LEN + 1 + 8 + 8 + 1 + 36)
#define BODY_LEN (BODY_LEN_1 + 8)

static void put64(unsigned char **p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		*(*p)++ = (unsigned char)(v >> (8 * i));
}

static void put32(unsigned char **p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		*(*p)++ = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char **p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v |= (uint64_t)*(*p)++ << (8 * i);
	return v;
}

int comb_cursor_key(const unsigned char secret32[32], unsigned char key32[32])
{
	static const unsigned char info[] = "comb incremental cursor v1";
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	size_t len = 32;
	int ok;

	ok = ctx && EVP_PKEY_derive_init(ctx) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_key(ctx, secret32, 32) > 0 &&
	     EVP_PKEY_CTX_add1_hkdf_info(ctx, info, sizeof(info) - 1) > 0 &&
	     EVP_PKEY_derive(ctx, key32, &len) > 0;
	EVP_PKEY_CTX_free(ctx);
	return ok ? 0 : COMB_ENOMEM;
}

void comb_cursor_scope(const char *reader, const char *const *channels,
		       size_t nchannels, const char *const *types,
		       size_t ntypes, unsigned char out[COMB_CURSOR_SCOPE_LEN])
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t i;

	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		COMB_BUG("sha256 unavailable");
	EVP_DigestUpdate(md, reader, strlen(reader) + 1);
	EVP_DigestUpdate(md, "h", 2);
	for (i = 0; i < nchannels; i++)
		EVP_DigestUpdate(md, channels[i], strlen(channels[i]) + 1);
	EVP_DigestUpdate(md, "type", 5);
	for (i = 0; i < ntypes; i++)
		EVP_DigestUpdate(md, types[i], strlen(types[i]) + 1);
	EVP_DigestFinal_ex(md, digest, NULL);
	EVP_MD_CTX_free(md);
	memcpy(out, digest, COMB_CURSOR_SCOPE_LEN);
}

static void tag(const unsigned char *body, size_t len,
		const unsigned char key32[32], unsigned char out[TAG_LEN])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;

	HMAC(EVP_sha256(), key32, 32, body, len, mac, &maclen);
	memcpy(out, mac, TAG_LEN);
}

int comb_cursor_encode(const struct comb_cursor *c,
		       const unsigned char key32[32], char *out, size_t outlen)
{
	unsigned char raw[BODY_LEN + TAG_LEN], *p = raw;
	size_t keylen = strlen(c->after.key);

	if (keylen > 36)
		return COMB_EINVAL;
	*p++ = CURSOR_VERSION;
	put64(&p, (uint64_t)c->community);
	put32(&p, (uint32_t)c->epoch);
	put64(&p, c->system_id);
	memcpy(p, c->scope, COMB_CURSOR_SCOPE_LEN);
	p += COMB_CURSOR_SCOPE_LEN;
	*p++ = c->phase;
	put64(&p, c->horizon);
	put64(&p, c->after.xid);
	*p++ = c->after.source;
	memset(p, 0, 36);
	memcpy(p, c->after.key, keylen);
	p += 36;
	put64(&p, c->lsn);
	tag(raw, BODY_LEN, key32, p);
	return comb_base64_encode(raw, sizeof(raw), out, outlen);
}

int comb_cursor_decode(const char *text, const unsigned char key32[32],
		       struct comb_cursor *out)
{
	unsigned char raw[BODY_LEN + TAG_LEN + 3], expect[TAG_LEN];
	const unsigned char *p = raw;
	size_t len = 0, body;

	memset(out, 0, sizeof(*out));
	if (!text || !*text || strlen(text) > COMB_CURSOR_MAX_TEXT ||
	    comb_base64_decode(text, strlen(text), raw, sizeof(raw), &len) ||
	    (len != BODY_LEN + TAG_LEN && len != BODY_LEN_1 + TAG_LEN))
		return COMB_EINVAL;
	body = len - TAG_LEN;
	tag(raw, body, key32, expect);
	if (CRYPTO_memcmp(expect, raw + body, TAG_LEN) ||
	    raw[0] != (body == BODY_LEN ? CURSOR_VERSION : CURSOR_VERSION_1))
		return COMB_EINVAL;
	p++;
	out->community = (int64_t)get64(&p);
	out->epoch = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
			       (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
	p += 4;
	out->system_id = get64(&p);
	memcpy(out->scope, p, COMB_CURSOR_SCOPE_LEN);
	p += COMB_CURSOR_SCOPE_LEN;
	out->phase = *p++;
	out->horizon = get64(&p);
	out->after.xid = get64(&p);
	out->after.source = *p++;
	memcpy(out->after.key, p, 36);
	out->after.key[36] = '\0';
	p += 36;
	if (body == BODY_LEN)
		out->lsn = get64(&p);
	if (out->phase > COMB_CURSOR_CHANGES)
		return COMB_EINVAL;
	return 0;
}
