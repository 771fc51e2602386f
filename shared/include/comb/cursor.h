/*
 * Incremental-read cursors: an opaque token authenticated with a key
 * derived (HKDF-SHA256) from the relay secret key, so every relay node
 * sharing that key accepts every other node's cursors. A cursor binds the
 * community, the reader and scope (as a hash), the database identity and
 * the community's cursor epoch, and holds only transaction positions: no
 * event or revision ids. It also names the WAL position its last read's
 * snapshot had seen, so that a read continuing it is served only by a
 * server that has replayed that far (comb/readroute.h).
 */
#ifndef COMB_CURSOR_H
#define COMB_CURSOR_H

#include <stddef.h>
#include <stdint.h>

#define COMB_CURSOR_MAX_TEXT 256
#define COMB_CURSOR_SCOPE_LEN 16

enum comb_cursor_phase {
	COMB_CURSOR_INITIAL = 0,  /* first read: every current artifact, by d */
	COMB_CURSOR_CHANGES = 1,  /* later reads: changes in position order */
};

/* A position in the change order: (xid, source, key), compared in that
 * order; key is an artifact or channel uuid, or "" before every key. */
struct comb_position {
	uint64_t xid;
	uint8_t source;
	char key[37];
};

struct comb_cursor {
	int64_t community;
	int32_t epoch;
	uint64_t system_id;                      /* pg_control_system() */
	unsigned char scope[COMB_CURSOR_SCOPE_LEN];
	uint8_t phase;                           /* enum comb_cursor_phase */
	uint64_t horizon;   /* INITIAL: the first page's horizon */
	struct comb_position after; /* continue strictly after this */
	uint64_t lsn;       /* WAL position seen (comb_lsn); 0 in cursors
			     * issued before positions were kept */
};

/* Derives the cursor key from the relay secret key. */
int comb_cursor_key(const unsigned char secret32[32], unsigned char key32[32]);

/*
 * Computes the scope hash of a reader and its sorted, deduplicated #h and
 * #type sets (arrays of NUL-terminated strings; the caller sorts them).
 */
void comb_cursor_scope(const char *reader, const char *const *channels,
		       size_t nchannels, const char *const *types,
		       size_t ntypes, unsigned char out[COMB_CURSOR_SCOPE_LEN]);

/* Writes the token for c into out (COMB_CURSOR_MAX_TEXT bytes). */
int comb_cursor_encode(const struct comb_cursor *c,
		       const unsigned char key32[32], char *out, size_t outlen);

/*
 * Decodes and authenticates text. Returns 0, or COMB_EINVAL when it is
 * empty, undecodable or forged. Binding checks (community, scope, epoch,
 * database) are the caller's, on the decoded fields.
 */
int comb_cursor_decode(const char *text, const unsigned char key32[32],
		       struct comb_cursor *out);

#endif
