/*
 * Access decisions: facts about a channel and an actor are loaded from the
 * database, and the policy plugins decide over them. For reads over many
 * channels the plugins' answers are compiled into read keys so that
 * PostgreSQL filters before LIMIT (docs/plugins.md).
 */
#ifndef COMB_ACCESS_H
#define COMB_ACCESS_H

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "comb/policy.h"
#include "relay.h"

/* Large enough for every read key as a PostgreSQL array literal. */
#define ACCESS_KEYS_LITERAL 1200
/* Large enough for every action key as a PostgreSQL array literal. */
#define ACCESS_ACTION_KEYS_LITERAL 2048
/* Added to a channel's read key in an action key (see below). */
#define ACCESS_KEY_ADMIN (1 << 8)
#define ACCESS_KEY_CREATOR (1 << 9)

struct actor {
	char pubkey[65];
	bool community_admin;
};

/*
 * How access_load_channel locks the channel row. Membership and policy
 * changes take it FOR UPDATE; writes that add artifacts to a channel or take
 * them out take it FOR SHARE, before their first write, so that between such
 * transactions xid order is commit order (migrations/0004_incremental.sql).
 */
enum access_lock {
	ACCESS_LOCK_NONE = 0,
	ACCESS_LOCK_UPDATE = 1,
	ACCESS_LOCK_SHARE = 2,
};

/* One channel as the policy sees it, for one actor. */
struct channel_row {
	bool exists;
	char id[37];
	struct comb_policy_channel facts;  /* role is the actor's */
	int ttl;                           /* seconds; 0 when none */
	int owners;                        /* active owners */
};

/* Fills actor for pubkey in community c, asking db (borrowed from pool).
 * Returns 0 or COMB_EUNAVAIL. */
int access_load_actor(struct comb_db_pool *pool, PGconn *db,
		      const struct community *c, const char *pubkey,
		      struct actor *out);

/*
 * Loads channel channel_id of community c and the actor's active role in
 * it; out->exists is false when there is no such channel. named says
 * whether the request names the channel in #h. lock says how the channel
 * row is locked (enum access_lock). Returns 0 or COMB_EUNAVAIL.
 */
int access_load_channel(PGconn *db, const struct community *c,
			const char *channel_id, const struct actor *actor,
			bool named, enum access_lock lock,
			struct channel_row *out);

/* Who writes where, for access_load_writes; everything borrowed. */
struct access_write {
	const struct community *community;
	const char *pubkey;
	const char *channel_id;  /* canonical uuid */
};

/*
 * Loads the facts of n writes in one statement on db (a connection of
 * pool, which prepares it once): for each writes[i], the
 * actor as access_load_actor and the channel named in the request as
 * access_load_channel with ACCESS_LOCK_SHARE would (actors[i] and
 * channels[i]; owners is left 0). Every channel row is locked
 * FOR SHARE in the order of (community, id), so that two such loads never
 * wait on each other in a cycle. Returns 0 or COMB_EUNAVAIL (COMB_ENOMEM
 * when the arrays cannot be built).
 */
int access_load_writes(struct comb_db_pool *pool, PGconn *db,
		       const struct access_write *writes, size_t n,
		       struct actor *actors, struct channel_row *channels);

/* Asks the policy plugins whether actor may do action on channel (NULL for
 * channel creation). A channel that does not exist is never allowed. */
bool access_allows(const struct relay *relay, const struct actor *actor,
		   enum comb_action action, const struct channel_row *channel,
		   const struct comb_policy_request *extra);

/*
 * Writes as a PostgreSQL int[] literal ("{130,...}") every action key for
 * which the policy plugins let pubkey do action on a channel its request
 * names. An action key is the channel's read key (comb_policy_read_key of
 * its facts, with the actor's role and named set) plus ACCESS_KEY_ADMIN
 * when the actor is a community admin and, for COMB_ACT_DELETE_ARTIFACT
 * only, ACCESS_KEY_CREATOR when the actor created the artifact. Both
 * states of each flag are asked, so that the database, which learns them
 * only inside the write's transaction, can decide with the plugins'
 * answers (SQL comb_write_key() computes a channel's key).
 */
void access_action_keys_literal(const struct relay *relay, const char *pubkey,
				enum comb_action action,
				char out[ACCESS_ACTION_KEYS_LITERAL]);

/* Writes actor's read keys as a PostgreSQL int[] literal ("{0,1,...}"). */
void access_read_keys_literal(const struct relay *relay,
			      const struct actor *actor,
			      char out[ACCESS_KEYS_LITERAL]);

/*
 * The SQL condition "channel c is readable": needs `c` (channels) joined
 * with `m` (the reader's active membership, LEFT JOIN), $named (uuid[] of
 * channels named in #h) and $keys (int[] read keys) at the given parameter
 * numbers. Writes it into out.
 */
void access_readable_sql(char *out, size_t outlen, int named_param,
			 int keys_param);

/* The LEFT JOIN of the reader's membership onto channels `c`, with the
 * reader's pubkey as parameter reader_param. */
void access_member_join_sql(char *out, size_t outlen, int reader_param);

/* Bytes of a read-key bitmap: bit k set when read key k is readable. */
#define ACCESS_KEY_BYTES (COMB_POLICY_READ_KEYS / 8)

/*
 * What one reader of an open WebSocket may read, as it stands now: the
 * read keys the policy plugins give it as a plain member and as a
 * community admin, and which of the two applies. The keys are fixed once
 * the reader is known; `admin` changes when the operator adds or removes
 * the reader as a community admin (hub/ flips it on the capture signal,
 * before any later event is delivered, and loads it again whenever a
 * subscription opens), and `generation` counts the flips so that a load
 * from the database racing with one can tell it lost.
 */
struct reader_access {
	int64_t community_id;
	char pubkey[65];
	uint8_t member_keys[ACCESS_KEY_BYTES];
	uint8_t admin_keys[ACCESS_KEY_BYTES];
	atomic_bool admin;
	atomic_uint generation;
};

/* Fills ra's community, pubkey and both key sets from the policy plugins
 * (no database; admin false, generation 0). */
void reader_access_init(struct reader_access *ra, const struct relay *relay,
			int64_t community_id, const char *pubkey);

/* True when read key `key` is readable by ra now. Any thread. */
bool reader_access_readable(const struct reader_access *ra, int key);

/* Writes ra's read keys as they stand now as a PostgreSQL int[] literal. */
void reader_access_literal(const struct reader_access *ra,
			   char out[ACCESS_KEYS_LITERAL]);

/* One question "may this reader read this channel now?". */
struct access_probe {
	int64_t community;
	const char *channel;            /* borrowed canonical uuid */
	const char *reader;             /* borrowed pubkey hex */
	const struct reader_access *access; /* borrowed */
	bool named;                     /* the reader's request names the
					 * channel in #h */
	bool readable;                  /* the answer */
};

/*
 * Answers n probes with one query on db, borrowed from dbs (inside the
 * caller's transaction when it has one), as the policy would for each
 * reader's request; probes of the same community, channel and reader
 * share one row of it (a channel that does not exist is readable by
 * nobody). then, SQL without parameters (such as COMMIT) or NULL, runs
 * right after the query in the same round trip. Returns 0, or
 * COMB_EUNAVAIL (the query or then failed; *budget tells whether the
 * query ran past the statement budget) or COMB_ENOMEM.
 */
int access_probe_all(struct comb_db_pool *dbs, PGconn *db,
		     struct access_probe *probes, size_t n, const char *then,
		     bool *budget);

#endif
