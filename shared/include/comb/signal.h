/*
 * Change signals: what comb-capture publishes over ZeroMQ to every relay
 * node, and the text form the database triggers of migrations/0003 hand to
 * capture through NOTIFY.
 *
 * Wire form. Each ZeroMQ message has two frames: a topic (see
 * comb_signal_topic) and one msgpack map with one-letter keys:
 *
 *   "e" epoch       uint   capture instance's random epoch (never 0)
 *   "s" seq         uint   per community, 1, 2, 3... within an epoch
 *   "c" community   uint   community id (0 only on the liveness heartbeat)
 *   "t" type        uint   enum comb_signal_type (newer types may appear)
 *   "x" xid         uint   pg_current_xact_id() of the change (absent: 0)
 *   "h" channel     str    canonical channel uuid (absent: none)
 *   "d" d           str    artifact uuid (absent: none)
 *   "p" pubkey      str    member pubkey, 64 lowercase hex (absent: none)
 *   "i" id          str    event or revision id, 64 lowercase hex
 *   "k" kind        uint   event kind of an EVENT signal, 1 when an ADMIN
 *                          signal adds an admin (absent: 0)
 *   "b" payload     bin    ephemeral event JSON (absent: empty)
 *   "l" lsn         uint   a WAL position of the primary at or after the
 *                          change's commit (comb/readroute.h): a re-read
 *                          for it must be served by a server that has
 *                          replayed that far (absent: 0, unknown: only
 *                          the primary is sure to have it)
 *
 * Keys a decoder does not know are skipped, so fields can be added later;
 * a known key with a wrong type, a duplicate key or anything malformed is
 * refused. A signal whose type a consumer does not know still counts for
 * its sequence; otherwise it is ignored.
 *
 * Sequence and heartbeats. seq counts every non-heartbeat signal of a
 * community, contiguously from 1 within one epoch. Capture publishes
 *   - a liveness heartbeat (community 0, seq 0) on topic "hb" every
 *     heartbeat interval: it proves the capture leader and its database
 *     link are alive and carries nothing else;
 *   - a community heartbeat (a "mark": community c, seq = the last seq it
 *     gave c in this epoch, 0 when none) on "c:*": at the start of each
 *     epoch for every community it knows, whenever a subscriber subscribes
 *     to a topic of c, and every interval for communities that had signals
 *     in the last few intervals. A mark consumes no sequence number.
 * A consumer that subscribed to "c:" trusts community c from the first mark
 * of the current epoch; afterwards a signal whose seq is not last+1, a mark
 * whose seq is above the last seen, a new epoch or missing liveness
 * heartbeats mean changes may have been lost (resync: change feed
 * interrupted).
 */
#ifndef COMB_SIGNAL_H
#define COMB_SIGNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/buf.h"

enum comb_signal_type {
	COMB_SIGNAL_HEARTBEAT = 0, /* liveness (community 0) or a mark */
	COMB_SIGNAL_HEAD = 1,      /* artifact head changed: d in channel h */
	COMB_SIGNAL_MOVE = 2,      /* artifact d moved out of channel h */
	COMB_SIGNAL_REDACTION = 3, /* revision i of artifact d in h redacted */
	COMB_SIGNAL_MEMBER = 4,    /* membership of pubkey p in h changed */
	COMB_SIGNAL_CHANNEL = 5,   /* channel h created or its policy facts
				    * (visibility, ttl, archived, deleted)
				    * changed */
	COMB_SIGNAL_EVENT = 6,     /* stored event i of kind k in h (h empty:
				    * an event with no channel) */
	COMB_SIGNAL_EPHEMERAL = 7, /* ephemeral event (payload) in h */
	COMB_SIGNAL_ADMIN = 8,     /* pubkey p made (kind 1) or unmade (kind
				    * 0) an admin of the community */
};

/* The highest type this build knows. */
#define COMB_SIGNAL_LAST_KNOWN COMB_SIGNAL_ADMIN

/* The highest type value a decoder accepts (types above the known ones
 * are passed through for forward compatibility). */
#define COMB_SIGNAL_TYPE_LIMIT 63

/* The largest payload (ephemeral event JSON) a signal carries. */
#define COMB_SIGNAL_MAX_PAYLOAD (1024 * 1024)
/* The largest encoded signal: the payload plus every other field. */
#define COMB_SIGNAL_MAX_SIZE (COMB_SIGNAL_MAX_PAYLOAD + 1024)
/* Bytes a topic needs, with its NUL ("<int64>:<uuid>\0" at most). */
#define COMB_SIGNAL_TOPIC_MAX 64
/* The largest NOTIFY payload the triggers produce and capture accepts. */
#define COMB_SIGNAL_NOTIFY_MAX 512

struct comb_signal {
	uint64_t epoch;
	uint64_t seq;
	int64_t community;
	unsigned int type;      /* enum comb_signal_type or a newer value */
	uint64_t xid;
	uint64_t lsn;           /* WAL position at or after the commit, or 0 */
	unsigned int kind;      /* EVENT only */
	char channel[37];       /* canonical uuid or "" */
	char d[37];             /* canonical uuid or "" */
	uint8_t d_bytes[16];    /* d's bytes, set by comb_signal_decode when
				 * d is (each reader of a signal need not
				 * parse it again) */
	char pubkey[65];        /* 64 lowercase hex or "" */
	char id[65];            /* 64 lowercase hex or "" */
	const unsigned char *payload; /* borrowed; NULL when payload_len is 0 */
	size_t payload_len;
};

/* Returns a short lowercase name of type ("head", "member"...), "unknown"
 * for values this build does not know. */
const char *comb_signal_type_name(unsigned int type);

/*
 * Checks that s is well formed for its type: the fields its type needs
 * are present and valid, the others empty. Types above the known ones
 * are only checked for field syntax. Returns 0 or COMB_EINVAL with a
 * reason in errbuf.
 */
int comb_signal_check(const struct comb_signal *s, char *errbuf, size_t errlen);

/*
 * Appends the msgpack form of s to out (which must allow at least
 * COMB_SIGNAL_MAX_SIZE bytes for large payloads). Returns 0, COMB_EINVAL
 * when s fails comb_signal_check, COMB_ETOOBIG when the payload is over
 * COMB_SIGNAL_MAX_PAYLOAD or out's maximum is reached, COMB_ENOMEM.
 * On failure out may hold a partial encoding: reset it before reuse.
 */
int comb_signal_encode(const struct comb_signal *s, struct comb_buf *out,
		       char *errbuf, size_t errlen);

/*
 * Decodes one msgpack signal from exactly len bytes of data (borrowed)
 * into out. out->payload points into data, so data must outlive it.
 * Returns 0, COMB_ETOOBIG when len is over COMB_SIGNAL_MAX_SIZE, or
 * COMB_EINVAL for anything malformed, truncated, followed by trailing
 * bytes, nested deeper than a few levels, or failing comb_signal_check.
 * Never reads outside data.
 */
int comb_signal_decode(const void *data, size_t len, struct comb_signal *out,
		       char *errbuf, size_t errlen);

/*
 * Writes the topic of s into out (outlen bytes, COMB_SIGNAL_TOPIC_MAX is
 * enough) and stores its length, the terminating NUL included, in *len:
 *   "hb\0"               liveness heartbeat (community 0),
 *   "<community>:*\0"    marks and signals without a channel,
 *   "<community>:<h>\0"  signals of channel h.
 * The NUL is part of the topic so that a subscription to one channel's
 * topic never prefix-matches another's; subscribing to "<community>:"
 * (no NUL) receives every signal and mark of that community. Returns 0, or
 * COMB_EINVAL when s has a negative community or out is too small.
 */
int comb_signal_topic(const struct comb_signal *s, char *out, size_t outlen,
		      size_t *len);

/*
 * Parses the NOTIFY payload the triggers of migrations/0003 send on
 * channel "comb" into out (epoch and seq left 0): one line of
 * space-separated fields
 *     <type> <community> <channel|-> <xid> <d|-> <pubkey|-> <id|-> <kind>
 * where type is a name of comb_signal_type_name (not heartbeat or
 * ephemeral). Returns 0 or COMB_EINVAL with a reason in errbuf; text over
 * COMB_SIGNAL_NOTIFY_MAX bytes is refused.
 */
int comb_signal_parse_notify(const char *text, struct comb_signal *out,
			     char *errbuf, size_t errlen);

/* The longest Redis channel name comb_signal_ephemeral_channel writes. */
#define COMB_SIGNAL_EPHEMERAL_CHANNEL_MAX 32

/*
 * Writes into out (COMB_SIGNAL_EPHEMERAL_CHANNEL_MAX bytes) the Redis
 * channel relay nodes PUBLISH ephemeral events on and capture SUBSCRIBEs
 * to for the Redis database redis_db: "comb:ephemeral:<redis_db>". Redis
 * pub/sub ignores the selected database, so the channel names it: two
 * deployments sharing a Redis server on different databases never see
 * each other's ephemeral events.
 */
void comb_signal_ephemeral_channel(int redis_db, char *out);

/*
 * Parses a message relay nodes PUBLISH on the ephemeral channel,
 * "<community>:<channel uuid>:<event json>" (len bytes, borrowed), into an
 * ephemeral signal whose payload points at the JSON inside msg (epoch and
 * seq left 0). The JSON itself is not checked: the relay verified the
 * event. Returns 0, COMB_ETOOBIG when the JSON is over
 * COMB_SIGNAL_MAX_PAYLOAD, or COMB_EINVAL with a reason in errbuf.
 */
int comb_signal_parse_ephemeral(const void *msg, size_t len,
				struct comb_signal *out, char *errbuf,
				size_t errlen);

#endif
