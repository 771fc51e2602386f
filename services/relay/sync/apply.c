/*
 * Applying changes to open syncs, the `current` kind of subscription of
 * the hub (see sync.h and sync_int.h): what a signal means to a sync, its
 * held changes, and its turns, which re-read changed artifacts and push
 * frames.
 *
 * The feed thread only notes a change (a d, or "access") in the sync's
 * pending set and wakes it; once the sync sent its EOSE, the hub gives it
 * turns. A worker takes a batch of woken syncs and serves them with one
 * read: the current head of every changed artifact (shared by every sync
 * holding it) with its community's access epoch, in one statement, which
 * answers every sync whose epoch stands and whose client holds no
 * artifact that left its channels; the others (and all, when a signal said
 * a reader's access changed) get one READ ONLY REPEATABLE READ transaction
 * that also asks whether each sync's reader may still read each of its
 * channels and, for artifacts that left a sync, the moves with their
 * stored markers. Access is checked in the same snapshot as the data, so
 * nothing written after a reader lost a channel ever reaches that reader.
 * Then, per sync and artifact:
 *
 *   head in the synced channels and live, newer than what the client
 *     holds (or unknown to it)          -> the current revision;
 *   head there but deleted or redacted, known to the client
 *                                       -> the delete revision, or the
 *                                          redaction's marker; forgotten;
 *   head elsewhere, known to the client -> the marker of its latest move
 *                                          out of a synced channel;
 *                                          forgotten;
 *   anything else                       -> nothing.
 *
 * A sync is applied by one worker at a time, and each of its reads runs
 * where the newest state its client was shown (the snapshot's, then each
 * re-read's, by WAL position) has been replayed, so what it sends about
 * an artifact only ever moves forward, even when a signal arrives after a
 * read that already saw its change, on a standby behind that read.
 * Frames are pushed without waiting; a full outbox closes the sync
 * (`resync: slow consumer`).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/log.h"
#include "comb/policy_set.h"
#include "comb/uuid.h"
#include "relay.h"
#include "revcache/revcache.h"
#include "sync.h"
#include "sync_int.h"

/* Syncs one worker serves with one transaction. */
#define BATCH 1024
/* The slots a sync's map of held changes keeps between turns (a change
 * or two per turn is the rule; a burst's are given back). */
#define KEEP_SLOTS 16
/* The largest frame a worker builds (an event as stored, escaped). */
#define MAX_FRAME (16 * 1024 * 1024)

/* One sync of a batch and what it held. */
struct work {
	struct sync_sub *sub;
	struct ws_held_map *pending;  /* its sub's taken */
	bool access;               /* check every channel */
	const char *overflow;      /* the CLOSED reason, or NULL */
	bool skip;                 /* dead, or closed during this batch */
	bool deferred;             /* left by the quick read to the general one */
	size_t probe_first, probe_count;
};

/* One artifact to re-read, shared by every sync of the batch holding it. */
struct head_key {
	int64_t community;
	uint8_t d[16];
	int row;                   /* in the heads result, or -1 */
	int64_t seq;               /* the head's accepted_seq, when row >= 0 */
	bool want_moves;
	int move_first, move_count;
};

struct batch {
	struct relay *relay;       /* borrowed: the syncs' node */
	comb_lsn at_least;         /* the read runs where this has been replayed */
	comb_lsn read_at;          /* where the last read ran (0: it found nothing) */
	struct comb_db_pool *pool; /* the server it runs on (its statements) */
	bool quick;                /* the quick read, else the general one */
	struct work *works;
	size_t n;
	struct head_key *keys;
	size_t nkeys, capkeys;
	struct access_probe *probes;
	size_t nprobes, capprobes;
	PGresult *heads, *moves;
	PGresult *epochs;          /* of the syncs' communities (sync_epochs_stmt) */
	int64_t epoch_community, epoch;  /* epoch_of's last answer */
	bool epoch_known;
	/* The last frame built: ["EVENT",frame_sub,*frame_json] (frame_json
	 * points into heads or moves), reused for the next sync of the same
	 * subscription id. */
	struct comb_buf frame;
	const char *frame_json;
	char frame_sub[WS_SUB_ID_MAX + 1];
};

static struct relay *relay_of(const struct sync_sub *sub)
{
	return sub->head.session->relay;
}

/* ------------------------------------------------------------------ */
/* signals: what changed, held until a turn applies it */

void sync_pending_init(struct sync_sub *sub)
{
	ws_held_map_init(&sub->pending, 16, WS_SYNC_MAX_HELD, sub->head.session);
	ws_held_map_init(&sub->taken, 16, WS_SYNC_MAX_HELD, sub->head.session);
}

static struct sync_sub *sync_of(const struct hub_sub *hs)
{
	return (struct sync_sub *)ws_sub_of(hs);
}

/* Holds a change of artifact d (NULL: of the reader's access) that signal
 * s announced for sub and wakes it; the hub's lock is held. The re-read
 * runs where the signal's position has been replayed (on the primary when
 * the signal does not tell). */
static void note_change(struct sync_sub *sub, const uint8_t *d,
			const struct comb_signal *s)
{
	comb_lsn at = s->lsn ? s->lsn : COMB_READ_PRIMARY;
	int rc;

	if (sub->quiet || sub->overflow)
		return;
	if (at > sub->want_lsn)
		sub->want_lsn = at;
	if (!d)
		sub->access_check = true;
	else if ((rc = ws_held_map_put(&sub->pending, d, 0)))
		sub->overflow = rc == COMB_EDENIED ? WS_BUDGET_EXCEEDED
						   : "resync: too many held changes";
	hub_wake_locked(&sub->head.hub);
}

/*
 * The kind's signal (hub.h): head, move and redaction signals of a
 * synced channel hold the artifact (when #d allows it); member signals of
 * the reader and channel signals make it check its access, as do admin
 * signals of its reader; other types never make a frame on a sync.
 */
static void current_signal(struct hub_sub *hs, const struct comb_signal *s)
{
	struct sync_sub *sub = sync_of(hs);
	const char *reader = hs->reader;

	if (s->type == COMB_SIGNAL_ADMIN) {
		if (!strcmp(s->pubkey, reader))
			note_change(sub, NULL, s);
		return;
	}
	if (!s->channel[0])
		return;
	switch (s->type) {
	case COMB_SIGNAL_HEAD:
	case COMB_SIGNAL_MOVE:
	case COMB_SIGNAL_REDACTION:
		if (!s->d[0] ||
		    (sub->has_dfilter && !ws_held_map_get(&sub->dfilter, s->d_bytes)))
			return;
		note_change(sub, s->d_bytes, s);
		break;
	case COMB_SIGNAL_MEMBER:
		if (!strcmp(s->pubkey, reader))
			note_change(sub, NULL, s);
		break;
	case COMB_SIGNAL_CHANNEL:
		note_change(sub, NULL, s);
		break;
	default:
		break;
	}
}

const char *sync_overflowed(struct sync_sub *sub)
{
	const char *o;

	hub_lock();
	o = sub->overflow;
	hub_unlock();
	return o;
}

/* ------------------------------------------------------------------ */
/* one batch */

static int cmp_key(const void *a, const void *b)
{
	const struct head_key *x = a, *y = b;

	if (x->community != y->community)
		return x->community < y->community ? -1 : 1;
	return memcmp(x->d, y->d, 16);
}

static struct head_key *find_key(struct batch *b, int64_t community,
				 const uint8_t d[16])
{
	struct head_key probe = {.community = community};

	memcpy(probe.d, d, 16);
	return bsearch(&probe, b->keys, b->nkeys, sizeof(*b->keys), cmp_key);
}

/* Adds the artifact (community, d) to re-read; one the same as the last
 * added (many syncs holding the same change, the rule) is not repeated. */
static int add_key(struct batch *b, int64_t community, const uint8_t d[16])
{
	struct head_key *grown, *last = b->nkeys ? &b->keys[b->nkeys - 1] : NULL;
	size_t cap;

	if (last && last->community == community && !memcmp(last->d, d, 16))
		return 0;
	if (b->nkeys == b->capkeys) {
		cap = b->capkeys ? 2 * b->capkeys : 256;
		grown = realloc(b->keys, cap * sizeof(*grown));
		if (!grown)
			return COMB_ENOMEM;
		b->keys = grown;
		b->capkeys = cap;
	}
	b->keys[b->nkeys++] = (struct head_key){
		.community = community, .row = -1, .move_first = -1};
	memcpy(b->keys[b->nkeys - 1].d, d, 16);
	return 0;
}

/* Adds the probe "may w's reader read channel" (borrowed from its sync). */
static int add_probe(struct batch *b, struct work *w, const char *channel)
{
	const struct sync_sub *sub = w->sub;
	struct access_probe *grown;
	size_t cap;

	if (b->nprobes == b->capprobes) {
		cap = b->capprobes ? 2 * b->capprobes : 256;
		grown = realloc(b->probes, cap * sizeof(*grown));
		if (!grown)
			return COMB_ENOMEM;
		b->probes = grown;
		b->capprobes = cap;
	}
	b->probes[b->nprobes++] = (struct access_probe){
		.community = sub->community,
		.channel = channel,
		.reader = sub->head.hub.reader,
		.access = sub->head.hub.access,
		.named = true,  /* every channel of a sync is in #h */
	};
	return 0;
}

static void kill_all(struct batch *b, const char *reason)
{
	size_t i;

	for (i = 0; i < b->n; i++) {
		if (!b->works[i].skip) {
			ws_sub_close(&b->works[i].sub->head, reason);
			b->works[i].skip = true;
		}
	}
}

/* Skips dead syncs, closes overflowed ones, and gathers the artifacts to
 * re-read (sorted, distinct). */
static int collect(struct batch *b)
{
	const unsigned char *d;
	size_t i, k;
	int rc = 0;

	for (i = 0; i < b->n && rc == 0; i++) {
		struct work *w = &b->works[i];
		struct sync_sub *sub = w->sub;
		struct ws_held_visit v = WS_HELD_VISIT;

		pthread_mutex_lock(&sub->head.session->mu);
		w->skip = sub->head.dead;
		pthread_mutex_unlock(&sub->head.session->mu);
		if (!w->skip && w->overflow) {
			ws_sub_close(&sub->head, w->overflow);
			w->skip = true;
		}
		if (w->skip)
			continue;
		while (rc == 0 && (d = ws_held_map_next(w->pending, &v)))
			rc = add_key(b, sub->community, d);
	}
	if (rc)
		return rc;
	if (b->nkeys) {
		qsort(b->keys, b->nkeys, sizeof(*b->keys), cmp_key);
		for (i = 1, k = 1; i < b->nkeys; i++) {
			if (cmp_key(&b->keys[i], &b->keys[k - 1]))
				b->keys[k++] = b->keys[i];
		}
		b->nkeys = k;
	}
	return 0;
}

/* b's keys (all, or moves_only those wanting moves) as bigint[] and
 * uuid[] literals; index maps the query's ordinals back to keys. */
static int key_arrays(struct batch *b, bool moves_only, struct comb_buf *cids,
		      struct comb_buf *ds, size_t *index)
{
	char text[37];
	size_t i, n = 0;
	int rc = comb_buf_putc(cids, '{');

	rc = rc ? rc : comb_buf_putc(ds, '{');
	for (i = 0; i < b->nkeys && rc == 0; i++) {
		if (moves_only && !b->keys[i].want_moves)
			continue;
		comb_uuid_format(b->keys[i].d, text);
		rc = comb_buf_printf(cids, "%s%" PRId64, n ? "," : "", b->keys[i].community);
		rc = rc ? rc : comb_buf_printf(ds, "%s%s", n ? "," : "", text);
		index[n++] = i;
	}
	rc = rc ? rc : comb_buf_putc(cids, '}');
	rc = rc ? rc : comb_buf_putc(ds, '}');
	return rc;
}

static const char *head_channel(const struct batch *b, const struct head_key *k)
{
	return PQgetvalue(b->heads, k->row, 1);
}

/* True when the head of k is in sub's channels and of a wanted type. */
static bool in_scope(const struct batch *b, const struct sync_sub *sub,
		     const struct head_key *k)
{
	return k && k->row >= 0 && sync_has_channel(sub, head_channel(b, k)) &&
	       sync_has_type(sub, PQgetvalue(b->heads, k->row, 5));
}

static bool probes_readable(const struct batch *b, const struct work *w)
{
	size_t i;

	for (i = 0; i < w->probe_count; i++) {
		if (!b->probes[w->probe_first + i].readable)
			return false;
	}
	return true;
}

/* The row of the moves result holding the latest move of k out of one of
 * sub's channels, or -1. */
static int move_row(const struct batch *b, const struct sync_sub *sub,
		    const struct head_key *k)
{
	int row;

	for (row = k->move_first; k->move_first >= 0 &&
	     row < k->move_first + k->move_count; row++) {
		if (sync_has_channel(sub, PQgetvalue(b->moves, row, 1)))
			return row;
	}
	return -1;
}

/* The access epoch of community in the read's snapshot (-1: not read):
 * from the epochs' rows of the general read, or from the heads' columns 7
 * and 8 of the quick one. The last answer is kept, as a batch's syncs
 * mostly share one community. */
static int64_t epoch_of(struct batch *b, int64_t community)
{
	PGresult *r = b->epochs ? b->epochs : b->heads;
	int col = b->epochs ? 0 : 7, row;

	if (b->epoch_known && b->epoch_community == community)
		return b->epoch;
	b->epoch = -1;
	for (row = 0; r && PQnfields(r) >= col + 2 && row < PQntuples(r); row++) {
		if (strtoll(PQgetvalue(r, row, col), NULL, 10) == community) {
			b->epoch = strtoll(PQgetvalue(r, row, col + 1), NULL, 10);
			break;
		}
	}
	b->epoch_community = community;
	b->epoch_known = true;
	return b->epoch;
}

/* True when w's reader may have lost (or gained) a channel since its sync
 * last found all of them readable: a signal said its access changed, or
 * the community's access epoch moved since (migrations/0022). */
static bool access_moved(struct batch *b, const struct work *w)
{
	return w->access || epoch_of(b, w->sub->community) != w->sub->access_epoch;
}

/*
 * The probes of w: every channel of its sync when its access may have
 * moved, else none, as the epoch vouches for every channel.
 */
static int gather_probes(struct batch *b, struct work *w)
{
	struct sync_sub *sub = w->sub;
	size_t j;
	int rc = 0;

	w->probe_first = b->nprobes;
	if (access_moved(b, w)) {
		for (j = 0; j < sub->nchannels && rc == 0; j++)
			rc = add_probe(b, w, sub->channels[j]);
	}
	w->probe_count = b->nprobes - w->probe_first;
	return rc;
}

/* The key of d (held for w) when w's client knows d but its head left
 * w's channels, whose moves then say how; else NULL. */
static struct head_key *departed(struct batch *b, const struct work *w,
				 const unsigned char *d)
{
	struct head_key *k;

	if (!ws_held_map_get(&w->sub->known, d))
		return NULL;
	k = find_key(b, w->sub->community, d);
	return k && !in_scope(b, w->sub, k) ? k : NULL;
}

/* Marks the artifacts some sync knows but whose head left its channels. */
static bool mark_moves(struct batch *b)
{
	const unsigned char *d;
	struct head_key *k;
	bool any = false;
	size_t i;

	for (i = 0; i < b->n; i++) {
		struct work *w = &b->works[i];
		struct ws_held_visit v = WS_HELD_VISIT;

		if (w->skip)
			continue;
		while ((d = ws_held_map_next(w->pending, &v))) {
			if ((k = departed(b, w, d))) {
				k->want_moves = true;
				any = true;
			}
		}
	}
	return any;
}

/* The heads of the keys (their ordinal, home, accepted_seq, deleted,
 * redacted, type, and the bytes to send: the current revision, or the
 * redaction's marker). */
#define HEADS_COLUMNS \
	"SELECT q.i, h.channel_id, h.accepted_seq, h.deleted, h.redacted, h.type," \
	" CASE WHEN h.redacted THEN mk.raw ELSE e.raw END"
#define HEADS_FROM \
	" FROM unnest($1::bigint[], $2::uuid[]) WITH ORDINALITY AS q(cid, d, i)" \
	" JOIN artifact_heads h ON h.community_id = q.cid AND h.d = q.d" \
	" LEFT JOIN events e ON NOT h.redacted AND e.seq = h.accepted_seq" \
	" LEFT JOIN artifact_redactions rd ON h.redacted" \
	"  AND rd.community_id = h.community_id AND rd.revision_id = h.revision_id" \
	" LEFT JOIN events mk ON mk.seq = rd.marker_seq"

static struct comb_db_stmt heads_stmt = COMB_DB_STMT(HEADS_COLUMNS HEADS_FROM, 2);

/* The heads with, in columns 7 and 8, each one's community and its access
 * epoch, and in column 9 the WAL position of the statement's snapshot:
 * one statement, so one snapshot, for the quick read. */
static struct comb_db_stmt quick_stmt = COMB_DB_STMT(
	HEADS_COLUMNS ", q.cid, k.access_epoch, (SELECT " COMB_READ_POSITION_SQL ")"
	HEADS_FROM
	" JOIN communities k ON k.id = q.cid", 2);

static struct comb_db_stmt moves_stmt = COMB_DB_STMT(
	"SELECT q.i, m.from_channel, mk.raw"
	" FROM unnest($1::bigint[], $2::uuid[]) WITH ORDINALITY AS q(cid, d, i)"
	" JOIN events r ON r.community_id = q.cid AND r.d IS NOT NULL AND r.d = q.d"
	"  AND r.op = 'move'"
	" JOIN artifact_moves m ON m.community_id = r.community_id"
	"  AND m.revision_id = r.id"
	" JOIN events mk ON mk.community_id = m.community_id AND mk.id = m.marker_id"
	" ORDER BY q.i, r.seq DESC", 2);

/* Forgets what a read found, so that the batch can be read again. */
static void forget_reads(struct batch *b)
{
	size_t i;

	PQclear(b->heads);
	PQclear(b->moves);
	PQclear(b->epochs);
	b->heads = b->moves = b->epochs = NULL;
	b->epoch_known = false;
	b->read_at = 0;
	for (i = 0; i < b->nkeys; i++) {
		b->keys[i].row = -1;
		b->keys[i].want_moves = false;
		b->keys[i].move_first = -1;
		b->keys[i].move_count = 0;
	}
	b->nprobes = 0;
}

static const char begin_sql[] = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/* The communities of b's syncs as a bigint[] literal (one repeated
 * side by side once). */
static int communities_literal(const struct batch *b, struct comb_buf *ids)
{
	size_t i, n = 0;
	int rc = comb_buf_putc(ids, '{');

	for (i = 0; i < b->n && rc == 0; i++) {
		int64_t c = b->works[i].sub->community;

		if (!i || c != b->works[i - 1].sub->community)
			rc = comb_buf_printf(ids, "%s%" PRId64, n++ ? "," : "", c);
	}
	return rc ? rc : comb_buf_putc(ids, '}');
}

/* Statement stmt (heads_stmt, quick_stmt, or moves_stmt for the keys
 * wanting moves) for b's keys as a step of comb_db_exec_together, its
 * parameters in cids and ds; index as key_arrays. Returns 0 or
 * COMB_ENOMEM. */
static int keys_step(struct batch *b, struct comb_db_stmt *stmt, struct comb_buf *cids,
		     struct comb_buf *ds, const char *params[2], size_t *index,
		     struct comb_db_step *step)
{
	if (key_arrays(b, stmt == &moves_stmt, cids, ds, index))
		return COMB_ENOMEM;
	params[0] = cids->data;
	params[1] = ds->data;
	*step = (struct comb_db_step){.stmt = stmt, .params = params};
	return 0;
}

/* Runs stmt (quick_stmt, or moves_stmt) for b's keys on db, alone: *out
 * its result. Returns as read_heads; index as key_arrays. */
static int read_keys(struct batch *b, PGconn *db, struct comb_db_stmt *stmt,
		     size_t *index, PGresult **out, PGresult **failed, bool *budget)
{
	struct comb_buf cids, ds;
	const char *params[2];
	struct comb_db_step step;
	int rc;

	*out = NULL;
	comb_buf_init(&cids, b->nkeys * 24 + 8);
	comb_buf_init(&ds, b->nkeys * 40 + 8);
	rc = keys_step(b, stmt, &cids, &ds, params, index, &step);
	if (rc == 0 && comb_db_exec_together(b->pool, db, &step, 1, out)) {
		rc = COMB_EUNAVAIL;
		*failed = *out;
		*out = NULL;
		*budget = comb_db_is_error(*failed, "57014");
	}
	comb_buf_release(&cids);
	comb_buf_release(&ds);
	return rc;
}

/* Takes b->heads apart: each key's row, and the new revisions' bytes
 * kept for the reads that follow. */
static void take_heads(struct batch *b, const size_t *index)
{
	int row;

	for (row = 0; row < PQntuples(b->heads); row++) {
		long o = strtol(PQgetvalue(b->heads, row, 0), NULL, 10);
		int64_t seq = strtoll(PQgetvalue(b->heads, row, 2), NULL, 10);

		if (o >= 1 && (size_t)o <= b->nkeys) {
			b->keys[index[o - 1]].row = row;
			b->keys[index[o - 1]].seq = seq;
		}
		if (PQgetvalue(b->heads, row, 4)[0] != 't' &&
		    !PQgetisnull(b->heads, row, 6))
			revcache_put(b->relay->revisions, seq, PQgetvalue(b->heads, row, 6),
				     (size_t)PQgetlength(b->heads, row, 6));
	}
}

/* Takes b->moves apart: each key's rows (ordered by key). */
static void take_moves(struct batch *b, const size_t *index)
{
	int row;

	for (row = 0; row < PQntuples(b->moves); row++) {
		long o = strtol(PQgetvalue(b->moves, row, 0), NULL, 10);
		struct head_key *k;

		if (o < 1 || (size_t)o > b->nkeys)
			continue;
		k = &b->keys[index[o - 1]];
		if (k->move_first < 0)
			k->move_first = row;
		k->move_count++;
	}
}

/*
 * The first round trip of the general read: BEGIN, the epochs and the
 * heads. Returns 0, or COMB_EUNAVAIL (*failed the failed result, which
 * the caller clears, and *budget whether it ran past the statement
 * budget) or COMB_ENOMEM; index as key_arrays.
 */
static int read_heads(struct batch *b, PGconn *db, size_t *index,
		      PGresult **failed, bool *budget)
{
	struct comb_buf ids, cids, ds;
	const char *params[2], *communities;
	struct comb_db_step steps[3] = {
		{.sql = begin_sql},
		{.stmt = &sync_epochs_stmt, .params = &communities},
	};
	PGresult *results[3] = {NULL, NULL, NULL};
	size_t nsteps = 2, i;
	int rc, heads_at = -1;

	comb_buf_init(&ids, b->n * 24 + 8);
	comb_buf_init(&cids, b->nkeys * 24 + 8);
	comb_buf_init(&ds, b->nkeys * 40 + 8);
	rc = communities_literal(b, &ids) ? COMB_ENOMEM : 0;
	communities = ids.data;
	if (rc == 0 && b->nkeys) {
		rc = keys_step(b, &heads_stmt, &cids, &ds, params, index, &steps[nsteps]);
		heads_at = (int)nsteps++;
	}
	if (rc == 0 && comb_db_exec_together(b->pool, db, steps, nsteps, results))
		rc = COMB_EUNAVAIL;
	for (i = 0; i < nsteps && rc; i++) {
		if (PQresultStatus(results[i]) == PGRES_FATAL_ERROR) {
			*failed = results[i];
			*budget = comb_db_is_error(*failed, "57014");
			results[i] = NULL;
			break;
		}
	}
	if (rc == 0) {
		b->epochs = results[1];
		results[1] = NULL;
		b->read_at = sync_epochs_position(b->epochs);
		if (heads_at >= 0) {
			b->heads = results[heads_at];
			results[heads_at] = NULL;
			take_heads(b, index);
		}
	}
	for (i = 0; i < nsteps; i++)
		PQclear(results[i]);
	comb_buf_release(&ids);
	comb_buf_release(&cids);
	comb_buf_release(&ds);
	return rc;
}

/*
 * The quick read, one statement: the heads with their communities' access
 * epochs, which answer every sync whose access epoch stands and whose
 * client holds no artifact that left its channels (needs_general).
 * Returns as read_heads.
 */
static int read_quick(struct batch *b, PGconn *db, size_t *index,
		      PGresult **failed, bool *budget)
{
	int rc = read_keys(b, db, &quick_stmt, index, &b->heads, failed, budget);

	if (rc == 0) {
		take_heads(b, index);
		if (PQntuples(b->heads) > 0)
			comb_lsn_parse(PQgetvalue(b->heads, 0, 9), &b->read_at);
	}
	return rc;
}

/*
 * The general read: the epochs and the heads, then the moves of artifacts
 * some sync knows that left its channels, then every channel of each sync
 * whose access may have moved, in one snapshot. A sync that finds all its
 * channels readable keeps the snapshot's epoch. Returns as read_heads.
 */
static int read_general(struct batch *b, PGconn *db, size_t *index,
			PGresult **failed, bool *budget)
{
	size_t i;
	int rc = read_heads(b, db, index, failed, budget);

	if (rc == 0 && mark_moves(b)) {
		rc = read_keys(b, db, &moves_stmt, index, &b->moves, failed, budget);
		if (rc == 0)
			take_moves(b, index);
	}
	for (i = 0; i < b->n && rc == 0; i++) {
		if (!b->works[i].skip)
			rc = gather_probes(b, &b->works[i]);
	}
	if (rc == 0)
		rc = access_probe_all(b->pool, db, b->probes, b->nprobes, "COMMIT", budget);
	for (i = 0; i < b->n && rc == 0; i++) {
		struct work *w = &b->works[i];

		if (!w->skip && access_moved(b, w) && probes_readable(b, w))
			w->sub->access_epoch = epoch_of(b, w->sub->community);
	}
	return rc;
}

/*
 * Reads the batch on a server that has replayed position at (one of the
 * node's standbys or the primary, comb/readroute.h): the quick read when
 * b->quick, else the general one. Returns 0, or a negative COMB_E* with
 * the CLOSED message in why; sets *again when the read failed on a
 * standby for a reason the primary may not share.
 */
static int read_at(struct batch *b, comb_lsn at, bool *again, char *why, size_t whylen)
{
	struct comb_read_lease lease;
	size_t *index;
	PGresult *failed = NULL;
	bool budget = false;
	int rc;

	*again = false;
	index = calloc(b->nkeys ? b->nkeys : 1, sizeof(*index));
	if (!index) {
		snprintf(why, whylen, "error: out of memory");
		return COMB_ENOMEM;
	}
	if (comb_read_acquire(b->relay->reads, at, 2000, &lease)) {
		free(index);
		snprintf(why, whylen, "error: database unavailable");
		return COMB_EUNAVAIL;
	}
	b->pool = lease.pool;
	rc = b->quick ? read_quick(b, lease.conn, index, &failed, &budget)
		      : read_general(b, lease.conn, index, &failed, &budget);
	*again = rc == COMB_EUNAVAIL && lease.server >= 0;
	if (rc && !*again) {
		if (failed && !budget)
			comb_warn("sync re-read failed: %s", PQresultErrorMessage(failed));
		snprintf(why, whylen, "%s", budget ? "error: query budget exceeded" :
			 rc == COMB_ENOMEM ? "error: out of memory" :
			 "error: database unavailable");
	}
	PQclear(failed);
	comb_read_release(b->relay->reads, &lease, rc && comb_db_conn_lost(lease.conn));
	free(index);
	return rc;
}

/*
 * Reads the batch where every change it applies has been replayed
 * (b->at_least); a read a standby failed for a reason of its own (replay
 * cancelled it, its connection broke) runs again on the primary.
 */
static int read_db(struct batch *b, char *why, size_t whylen)
{
	bool again = false;
	int rc = read_at(b, b->at_least, &again, why, whylen);

	if (!again)
		return rc;
	forget_reads(b);
	return read_at(b, COMB_READ_PRIMARY, &again, why, whylen);
}

/* Pushes one event frame for w without waiting. Returns 0, or non-zero
 * when the sync is closed (or was closed just now). */
static int push(struct batch *b, struct work *w, const char *json, size_t len)
{
	struct sync_sub *sub = w->sub;
	struct ws_session *s = sub->head.session;
	int rc;

	if (b->frame_json != json || strcmp(b->frame_sub, sub->head.id)) {
		comb_buf_reset(&b->frame);
		b->frame_json = NULL;
		if (ws_format_event(&b->frame, sub->head.id, json, len)) {
			ws_sub_close(&sub->head, "error: out of memory");
			return COMB_ENOMEM;
		}
		b->frame_json = json;
		snprintf(b->frame_sub, sizeof(b->frame_sub), "%s", sub->head.id);
	}
	pthread_mutex_lock(&s->mu);
	if (sub->head.dead) {
		rc = COMB_EIO;
	} else {
		rc = ws_outbox_push(s->outbox, WS_OP_TEXT, b->frame.data, b->frame.len, 0);
		if (rc == COMB_ETOOBIG || rc == COMB_ENOMEM)
			ws_sub_close_locked(&sub->head, "resync: slow consumer");
		else if (rc)
			sub->head.dead = true;  /* the connection is closing */
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* The marker of the latest move of k out of one of sub's channels. */
static const char *move_marker(const struct batch *b, const struct sync_sub *sub,
			       const struct head_key *k, size_t *len)
{
	int row = move_row(b, sub, k);

	if (row < 0)
		return NULL;
	*len = (size_t)PQgetlength(b->moves, row, 2);
	return PQgetvalue(b->moves, row, 2);
}

/* Applies one changed artifact d to w's sync. Returns 0, or non-zero
 * when the sync was closed. */
static int apply_one(struct batch *b, struct work *w, const uint8_t d[16])
{
	struct sync_sub *sub = w->sub;
	struct head_key *k = find_key(b, sub->community, d);
	int64_t *known = ws_held_map_get(&sub->known, d);
	const char *json = NULL;
	size_t len = 0;
	bool live;
	int rc;

	if (in_scope(b, sub, k)) {
		live = PQgetvalue(b->heads, k->row, 3)[0] != 't' &&
		       PQgetvalue(b->heads, k->row, 4)[0] != 't';
		if (PQgetisnull(b->heads, k->row, 6))
			return 0;  /* not served anywhere */
		json = PQgetvalue(b->heads, k->row, 6);
		len = (size_t)PQgetlength(b->heads, k->row, 6);
		if (live) {
			if (known && *known >= k->seq)
				return 0;
			if (!known && sub->known.count >= sub->known.max) {
				/* A fresh open would be refused now. */
				ws_sub_close(&sub->head, "resync: sync set too large");
				return COMB_ETOOBIG;
			}
			rc = push(b, w, json, len);
			if (rc)
				return rc;
			rc = ws_held_map_put(&sub->known, d, k->seq);
			if (rc) {
				ws_sub_close(&sub->head, rc == COMB_EDENIED ? WS_BUDGET_EXCEEDED
									     : "error: out of memory");
				return COMB_ENOMEM;
			}
			return 0;
		}
		if (!known)
			return 0;  /* gone before the client saw it */
		/* the delete revision, or the redaction's marker */
		rc = push(b, w, json, len);
		if (rc == 0)
			ws_held_map_del(&sub->known, d);
		return rc;
	}
	if (!known)
		return 0;
	json = k ? move_marker(b, sub, k, &len) : NULL;
	if (!json) {
		/* It left, and no stored move says how: say so. */
		ws_sub_close(&sub->head, "resync: artifact left the sync");
		return COMB_ENOTFOUND;
	}
	rc = push(b, w, json, len);
	if (rc == 0)
		ws_held_map_del(&sub->known, d);
	return rc;
}

/* True when the quick read cannot answer for w: its reader's access may
 * have moved, or an artifact its client holds left its channels (the
 * general read finds how). */
static bool needs_general(struct batch *b, const struct work *w)
{
	struct ws_held_visit v = WS_HELD_VISIT;
	const unsigned char *d;

	if (access_moved(b, w))
		return true;
	while ((d = ws_held_map_next(w->pending, &v)))
		if (departed(b, w, d))
			return true;
	return false;
}

/* Applies w's held changes from the read, which its client is shown from
 * now on: no later read of the sync runs below it. */
static void apply_work(struct batch *b, struct work *w)
{
	struct ws_held_visit v = WS_HELD_VISIT;
	const unsigned char *d;

	if (b->read_at > w->sub->seen_lsn)
		w->sub->seen_lsn = b->read_at;
	if (!probes_readable(b, w)) {
		ws_sub_close(&w->sub->head, "resync: access changed");
		w->skip = true;
		return;
	}
	while ((d = ws_held_map_next(w->pending, &v))) {
		if (apply_one(b, w, d)) {
			w->skip = true;
			return;
		}
	}
}

/* Applies every open work of the batch from the read. After the quick
 * read, a work it cannot answer (needs_general) gets nothing and is
 * marked deferred. Returns how many were. */
static size_t apply_all(struct batch *b)
{
	size_t i, deferred = 0;

	for (i = 0; i < b->n; i++) {
		struct work *w = &b->works[i];

		w->deferred = !w->skip && b->quick && needs_general(b, w);
		if (w->deferred)
			deferred++;
		else if (!w->skip)
			apply_work(b, w);
	}
	return deferred;
}

/* Moves the deferred works to the front of the batch, by swaps: every
 * work stays in it, for the run's end (current_run). */
static void deferred_first(struct batch *b)
{
	struct work t;
	size_t i, k = 0;

	for (i = 0; i < b->n; i++) {
		if (b->works[i].deferred) {
			t = b->works[k];
			b->works[k++] = b->works[i];
			b->works[i] = t;
		}
	}
}

/*
 * Serves a batch: the quick read unless a signal said some reader's
 * access changed, applied to every sync it answers; then the general read
 * for the syncs it could not answer (or for all), in a snapshot of its
 * own. Each sync's frames of a turn come from one snapshot.
 */
static void run_batch(struct batch *b)
{
	char why[96];
	size_t i, n = b->n, deferred;

	b->nkeys = 0;
	b->nprobes = 0;
	b->heads = b->moves = b->epochs = NULL;
	b->epoch_known = false;
	if (collect(b)) {
		kill_all(b, "error: out of memory");
		return;
	}
	for (i = 0; i < b->n && b->works[i].skip; i++)
		;
	if (i == b->n)
		return;
	b->quick = true;
	for (i = 0; i < b->n; i++)
		b->quick = b->quick && (b->works[i].skip || !b->works[i].access);
	if (read_db(b, why, sizeof(why))) {
		kill_all(b, why);
		deferred = 0;
	} else {
		deferred = apply_all(b);
	}
	if (deferred) {
		deferred_first(b);
		b->n = deferred;
		b->quick = false;
		forget_reads(b);
		if (read_db(b, why, sizeof(why)))
			kill_all(b, why);
		else
			apply_all(b);
		b->n = n;
	}
	forget_reads(b);
	b->frame_json = NULL;
}

/* The kind's take (hub.h): what was held goes to the turn; the turn's
 * map, emptied by the last run, holds what comes next. */
static void current_take(struct hub_sub *hs)
{
	struct sync_sub *sub = sync_of(hs);
	struct ws_held_map emptied = sub->taken;

	sub->taken = sub->pending;
	sub->pending = emptied;
	sub->taken_access = sub->access_check;
	sub->taken_overflow = sub->overflow;
	sub->taken_lsn = sub->want_lsn;
	sub->access_check = false;
	sub->want_lsn = 0;
	sub->closed = false;
}

/* The kind's run (hub.h): one batch, one transaction, for n syncs. */
static void current_run(void *scratch, struct hub_sub **subs, size_t n)
{
	struct batch *b = scratch;
	size_t i;

	if (!b) {
		/* this worker could not make its batch when it started */
		for (i = 0; i < n; i++) {
			struct sync_sub *sub = sync_of(subs[i]);

			ws_sub_close(&sub->head, "error: out of memory");
			sub->closed = true;
			ws_held_map_clear(&sub->taken, KEEP_SLOTS);
		}
		return;
	}
	b->relay = relay_of(sync_of(subs[0]));
	b->at_least = 0;
	for (b->n = 0; b->n < n; b->n++) {
		struct sync_sub *sub = sync_of(subs[b->n]);

		if (sub->taken_lsn > b->at_least)
			b->at_least = sub->taken_lsn;
		if (sub->seen_lsn > b->at_least)
			b->at_least = sub->seen_lsn;
		b->works[b->n] = (struct work){
			.sub = sub, .pending = &sub->taken,
			.access = sub->taken_access, .overflow = sub->taken_overflow,
		};
	}
	run_batch(b);
	for (i = 0; i < n; i++) {
		b->works[i].sub->closed = b->works[i].skip;
		ws_held_map_clear(b->works[i].pending, KEEP_SLOTS);
	}
	if (b->frame.cap > 4 * 65536)
		comb_buf_release(&b->frame);
}

/* The kind's next (hub.h): a closed sync notes nothing more; another
 * runs again when a signal wakes it. */
static double current_next(struct hub_sub *hs, double now)
{
	struct sync_sub *sub = sync_of(hs);

	(void)now;
	if (!sub->closed)
		return 0;
	sub->quiet = true;
	return -1;
}

static void *batch_new(void)
{
	struct batch *b = calloc(1, sizeof(*b));

	if (b && !(b->works = calloc(BATCH, sizeof(*b->works)))) {
		free(b);
		b = NULL;
	}
	if (!b) {
		comb_error("sync worker: out of memory");
		return NULL;
	}
	comb_buf_init(&b->frame, MAX_FRAME);
	return b;
}

static void batch_free(void *scratch)
{
	struct batch *b = scratch;

	if (!b)
		return;
	comb_buf_release(&b->frame);
	free(b->works);
	free(b->keys);
	free(b->probes);
	free(b);
}

const struct hub_kind sync_current_kind = {
	.signal = current_signal,
	.interrupt = ws_sub_interrupt,
	.most = BATCH,
	.take = current_take,
	.run = current_run,
	.next = current_next,
	.worker_new = batch_new,
	.worker_free = batch_free,
};
