/*
 * Standard base64 (RFC 4648 section 4, alphabet A-Z a-z 0-9 + /) with
 * padding. Decoding is strict: no whitespace, no missing or extra padding,
 * no bits set after the last encoded byte, and a hard output limit, so that
 * every byte string has exactly one accepted encoding.
 */
#ifndef COMB_BASE64_H
#define COMB_BASE64_H

#include <stddef.h>

/* Characters (without the NUL) in the padded encoding of len bytes. */
#define COMB_BASE64_ENCODED_LEN(len) ((((len) + 2) / 3) * 4)

/* Largest number of bytes that inlen characters of base64 can decode to. */
#define COMB_BASE64_DECODED_MAX(inlen) (((inlen) / 4) * 3)

/*
 * Writes the padded base64 encoding of len bytes of in, and a NUL, into out
 * (outlen bytes, so at least COMB_BASE64_ENCODED_LEN(len) + 1). Returns 0,
 * or COMB_ETOOBIG when out is too small (out is then left untouched).
 */
int comb_base64_encode(const void *in, size_t len, char *out, size_t outlen);

/*
 * Decodes inlen characters of in into out (at most outmax bytes) and stores
 * the decoded length in *outlen. inlen must be a multiple of 4 and every
 * character part of the alphabet, with one or two '=' only at the very end
 * and unused trailing bits zero. Returns 0, COMB_EINVAL for anything else,
 * or COMB_ETOOBIG when the result would be longer than outmax. Zero
 * characters decode to zero bytes.
 */
int comb_base64_decode(const char *in, size_t inlen, unsigned char *out,
		       size_t outmax, size_t *outlen);

#endif
