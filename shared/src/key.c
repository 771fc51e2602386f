/*
 * BIP-340 Schnorr keys and signatures for events, on libsecp256k1. One
 * context serves the whole process: it is created once (pthread_once),
 * randomized from getrandom() against side channels, and afterwards only
 * read, which libsecp256k1 allows from any number of threads. Secret key
 * material is wiped from the stack after use.
 */
#include "comb/event.h"

#include "comb/error.h"
#include "comb/random.h"
#include "comb/hex.h"

#include <errno.h>
#include <pthread.h>
#include <secp256k1.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>
#include <string.h>

static pthread_once_t secp_once = PTHREAD_ONCE_INIT;
static secp256k1_context *secp_ctx;

static void secp_init(void)
{
	unsigned char seed[32];

	secp_ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
	if (secp_ctx == NULL)
		return;
	/* Randomization only hardens signing; without entropy the context
	 * stays correct, so a failure here is not fatal. */
	if (comb_random_bytes(seed, sizeof(seed)) == 0 &&
	    !secp256k1_context_randomize(secp_ctx, seed)) {
		secp256k1_context_destroy(secp_ctx);
		secp_ctx = NULL;
	}
	explicit_bzero(seed, sizeof(seed));
}

/* Returns the shared context, or NULL when it could not be created. */
static const secp256k1_context *secp(void)
{
	pthread_once(&secp_once, secp_init);
	return secp_ctx;
}

/* Creates the keypair of seckey32 and writes its x-only public key in hex.
 * The caller wipes kp. */
static int keypair_of(const secp256k1_context *ctx,
		      const unsigned char seckey32[32], secp256k1_keypair *kp,
		      char pubkey_hex[65])
{
	secp256k1_xonly_pubkey xpk;
	unsigned char pk[32];

	if (!secp256k1_keypair_create(ctx, kp, seckey32) ||
	    !secp256k1_keypair_xonly_pub(ctx, &xpk, NULL, kp) ||
	    !secp256k1_xonly_pubkey_serialize(ctx, pk, &xpk))
		return COMB_EINVAL;
	comb_hex_encode(pk, sizeof(pk), pubkey_hex);
	return 0;
}

int comb_key_public(const unsigned char seckey32[32], char pubkey_hex[65])
{
	const secp256k1_context *ctx = secp();
	secp256k1_keypair kp;
	int rc;

	if (ctx == NULL)
		return COMB_ENOMEM;
	rc = keypair_of(ctx, seckey32, &kp, pubkey_hex);
	explicit_bzero(&kp, sizeof(kp));
	return rc;
}

int comb_key_generate(unsigned char seckey32[32])
{
	const secp256k1_context *ctx = secp();
	int tries, rc;

	if (ctx == NULL)
		return COMB_ENOMEM;
	/* A random 32-byte string is a valid key except with probability
	 * about 2^-128; a few tries only guard against a broken source. */
	for (tries = 0; tries < 8; tries++) {
		rc = comb_random_bytes(seckey32, 32);
		if (rc < 0)
			return rc;
		if (secp256k1_ec_seckey_verify(ctx, seckey32))
			return 0;
	}
	explicit_bzero(seckey32, 32);
	return COMB_EIO;
}

/*
 * The public key this thread parsed last: one connection's events mostly
 * share an author, and parsing a key (a square root) costs about a tenth
 * of a verification. The parsed form may be copied (secp256k1.h).
 */
static __thread struct {
	unsigned char pk[32];
	secp256k1_xonly_pubkey xpk;
	bool valid;
} last_key;

/* Parses the x-only public key pk into *xpk, reusing this thread's last
 * parse of the same bytes. Returns libsecp256k1's answer (1: valid). */
static int parse_pubkey(const secp256k1_context *ctx, secp256k1_xonly_pubkey *xpk,
			const unsigned char pk[32])
{
	if (last_key.valid && memcmp(last_key.pk, pk, sizeof(last_key.pk)) == 0) {
		*xpk = last_key.xpk;
		return 1;
	}
	if (!secp256k1_xonly_pubkey_parse(ctx, xpk, pk))
		return 0;
	memcpy(last_key.pk, pk, sizeof(last_key.pk));
	last_key.xpk = *xpk;
	last_key.valid = true;
	return 1;
}

int comb_event_verify(const struct comb_event *ev, char *errbuf, size_t errlen)
{
	const secp256k1_context *ctx = secp();
	secp256k1_xonly_pubkey xpk;
	unsigned char id[32], pk[32], sig[64];
	char idhex[65];
	int rc;

	if (ctx == NULL)
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	rc = comb_event_compute_id(ev, id);
	if (rc == COMB_ENOMEM)
		return comb_fail(errbuf, errlen, rc, "out of memory");
	if (rc < 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL, "bad event id");
	comb_hex_encode(id, sizeof(id), idhex);
	if (memcmp(idhex, ev->id, sizeof(idhex)) != 0)
		return comb_fail(errbuf, errlen, COMB_EINVAL, "bad event id");
	if (comb_hex_decode(ev->pubkey, pk, sizeof(pk)) < 0 ||
	    comb_hex_decode(ev->sig, sig, sizeof(sig)) < 0 ||
	    !parse_pubkey(ctx, &xpk, pk) ||
	    !secp256k1_schnorrsig_verify(ctx, sig, id, sizeof(id), &xpk))
		return comb_fail(errbuf, errlen, COMB_EINVAL, "bad signature");
	return 0;
}

int comb_event_sign(struct comb_event *ev, const unsigned char seckey32[32])
{
	const secp256k1_context *ctx = secp();
	secp256k1_keypair kp;
	unsigned char id[32], aux[32], sig[64];
	int rc;

	if (ctx == NULL)
		return COMB_ENOMEM;
	rc = keypair_of(ctx, seckey32, &kp, ev->pubkey);
	if (rc < 0)
		goto out;
	rc = comb_event_compute_id(ev, id);
	if (rc < 0)
		goto out;
	rc = comb_random_bytes(aux, sizeof(aux));
	if (rc < 0)
		goto out;
	if (!secp256k1_schnorrsig_sign32(ctx, sig, id, &kp, aux)) {
		rc = COMB_EINVAL;
		goto out;
	}
	comb_hex_encode(id, sizeof(id), ev->id);
	comb_hex_encode(sig, sizeof(sig), ev->sig);
out:
	explicit_bzero(&kp, sizeof(kp));
	explicit_bzero(aux, sizeof(aux));
	return rc;
}
