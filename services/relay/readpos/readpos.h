/*
 * Read positions: where a reader's reads must be served from, and the
 * one call every read path makes to borrow its connection (read routing
 * of comb/readroute.h, PROTOCOL-level rules in docs/operations.md, "Read
 * standbys"). A write acknowledged to a client names the WAL position
 * just after its commit; it is kept per community and author in Redis,
 * so that the author's next read, on any relay node, is served by a
 * server that has replayed it (read-your-writes). A read's other
 * positions (its cursor's, a live signal's) are the caller's to pass.
 */
#ifndef COMB_READPOS_H
#define COMB_READPOS_H

#include <stdbool.h>
#include <stddef.h>

#include "comb/readroute.h"
#include "relay.h"

/*
 * Records that the writes of authors[0..n) (hex pubkeys, borrowed) in
 * community c were committed at or below position lsn; a position already
 * kept for an author that is higher stays. Each author is recorded once,
 * in one Redis call per 14 distinct authors. A no-op when the node reads
 * from no standby. Returns 0, or COMB_EUNAVAIL when Redis could not
 * record it (the caller logs: the write stands, its author may then read
 * from a standby that has not replayed it yet).
 */
int readpos_record(struct relay *relay, const struct community *c,
		   const char *const *authors, size_t n, comb_lsn lsn);

/*
 * The position of reader's last acknowledged write in community c, into
 * *out (0 when none is kept, or the node reads from no standby). Returns
 * 0, or COMB_EUNAVAIL when Redis cannot say (the caller then reads from
 * the primary).
 */
int readpos_of(struct relay *relay, const struct community *c,
	       const char *reader, comb_lsn *out);

/*
 * Borrows a connection for a read by reader (a hex pubkey, or NULL for
 * no reader) in community c that must see position at_least (0: none):
 * the higher of at_least and the reader's last acknowledged write,
 * through comb_read_acquire; when Redis cannot tell the reader's
 * position, from the primary. Returns 0, or COMB_EUNAVAIL (answer 503).
 * Give it back with comb_read_release(relay->reads, ...).
 */
int readpos_borrow(struct relay *relay, const struct community *c,
		   const char *reader, comb_lsn at_least, int pool_wait_ms,
		   struct comb_read_lease *out);

/*
 * True when a read on lease failed on a standby for a reason the primary
 * does not share (res, may be NULL: the connection was lost; or a
 * statement cancelled by replay), so that the read is to run again on the
 * primary; *lost tells whether the connection was lost (give it back as
 * broken). False for a read on the primary, or any other failure.
 */
bool readpos_failed_over(const struct comb_read_lease *lease, const PGresult *res,
			 bool *lost);

#endif
