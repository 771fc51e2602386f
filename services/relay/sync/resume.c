/*
 * Resumable sync (PROTOCOL.md section 7.1, docs/protocol.md "Resumable
 * sync"): a REQ whose only filter is {"artifact":"changes"} with
 * optionally #h, #type and an incremental cursor. Every frame it sends is
 * an incremental read (read/, the code of POST /query) from the
 * connection's cursor, so its cursors are the HTTP ones and exactness is
 * theirs: nothing reaches the client that the next read from the same
 * cursor would not also return, nothing is skipped, and a frame's cursor
 * covers exactly what was sent up to it.
 *
 * Order of an open: the sub enters the registry, so that from then on
 * every signal of its scope marks it; the community's feed must be
 * trusted; the database's next transaction id is noted (every change
 * committed before the registration lies below it); the catch-up is read
 * page by page, each page one snapshot, and sent as CHANGES frames until
 * `more` is false; if the feed stayed trusted, EOSE. Then its turns on the
 * hub's workers (the `changes` kind of subscription, hub/) read again from
 * the cursor whenever a signal of the scope arrived, and
 * keep reading (backing off) until the horizon passed the newest signalled
 * transaction and the noted one: a long writing transaction holds the
 * horizon, never causes a miss. Subs waiting to be read with the same
 * cursor (which binds the reader and the scope) are read together: one
 * read answers all of them, as it would answer each, so a change seen by
 * many readers of one scope costs one read, not one per reader. A quiet
 * sub is read every COMB_SYNC_QUIET_MS (30 s) and sent an empty CHANGES
 * when its cursor moved. A full outbox postpones a frame (the cursor stays where it was)
 * and closes the sub with `resync: slow consumer` only when it stays full.
 *
 * Locks: the hub's lock (registry, scheduling, what signals note) may be
 * taken before a session's mu, never after it. Database reads and frames
 * are done holding neither, except the push of a frame, under the
 * session's mu so that nothing follows a CLOSED.
 */
#include "sync.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/cursor.h"
#include "comb/error.h"
#include "comb/log.h"
#include "feed/feed.h"
#include "metrics/metrics.h"
#include "read/read.h"
#include "sync_int.h"

/* Items per CHANGES frame: the catch-up's, as many as one HTTP read may
 * ask for (each page runs the change query again, so fewer pages cost
 * less; pushed waiting for the client), and the live ones (pushed
 * without waiting into an outbox of 1 MiB). */
#define CATCHUP_PAGE 1000
#define LIVE_PAGE 50
/* Backoff of a read again while the horizon is below a signalled change. */
#define RETRY_FIRST_MS 5
#define RETRY_MAX_MS 1000
/* Postponed frames in a row (full outbox) before the sub is closed. */
#define SLOW_LIMIT 50
/* The largest answer of one read. */
#define MAX_ANSWER (64u << 20)
/* Subs with one cursor read together at most. */
#define GROUP_MAX 1024

struct resume_sub {
	struct ws_sub head;          /* first */
	json_t *filter;                 /* owned: the incremental filter */
	char (*channels)[37];           /* owned, sorted; none: no #h */
	size_t nchannels;

	/* the opener, then the worker running it */
	char cursor[COMB_CURSOR_MAX_TEXT];  /* read up to here; "" first */
	char sent[COMB_CURSOR_MAX_TEXT];    /* the cursor of the last frame */
	double sent_ms;                 /* when a frame last went out */
	int slow;                       /* frames postponed in a row */

	/* guarded by the hub's lock */
	uint64_t want_xid;              /* read until the horizon passed it */
	comb_lsn want_lsn;              /* the signals' WAL position: live reads
					 * run where it has been replayed */
	double retry_at;                /* 0: none */
	double quiet_at;
	int retry_ms;

	/* the worker running it: this turn's read, taken from the above */
	uint64_t read_xid;              /* read until the horizon passed it */
	comb_lsn read_lsn;              /* read where this has been replayed */
	bool read_quiet;                /* an empty frame is due if the cursor moved */
	bool reading;                   /* still following the group's pages */
	bool caught_up;                 /* the horizon passed read_xid */
	bool postponed;                 /* a frame waits for the client to read */
};

/* What every resumable sync shares: its node and the cursors' key. */
static struct {
	struct relay *relay;
	unsigned char cursor_key[32];
} changes;

/*
 * Catch-up frames' buffers kept for the next catch-up: a client that
 * reconnects catches up on a new connection, served by a thread of its
 * own, and a buffer of megabytes faulted in afresh each time costs more
 * than the read on some machines (docs/benchmarks-history.md). At most
 * SPARE_FRAMES of at most SPARE_FRAME_BYTES each are kept.
 */
#define SPARE_FRAMES 2
#define SPARE_FRAME_BYTES (16u << 20)

static struct {
	pthread_mutex_t mu;
	struct comb_buf bufs[SPARE_FRAMES];
	int n;
} spare = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* An empty frame buffer of at most MAX_ANSWER + 256 bytes, kept from an
 * earlier catch-up when there is one. */
static void spare_take(struct comb_buf *b)
{
	pthread_mutex_lock(&spare.mu);
	if (spare.n > 0)
		*b = spare.bufs[--spare.n];
	else
		comb_buf_init(b, MAX_ANSWER + 256);
	pthread_mutex_unlock(&spare.mu);
}

/* Makes b (empty) allocate at most max bytes (its content, at most max -
 * 1, and the NUL), dropping an allocation larger than that. */
static void answer_bound(struct comb_buf *b, size_t max)
{
	size_t most = max > 0 ? max - 1 : 0;

	if (most > MAX_ANSWER + 256)
		most = MAX_ANSWER + 256;
	if (b->cap > most + 1) {
		comb_buf_release(b);
		comb_buf_init(b, most);
	}
	b->max = most;
}

/* Keeps b's allocation for a later catch-up if there is room, else frees
 * it; b is left empty either way. */
static void spare_give(struct comb_buf *b)
{
	pthread_mutex_lock(&spare.mu);
	if (b->data && b->cap <= SPARE_FRAME_BYTES && spare.n < SPARE_FRAMES) {
		comb_buf_reset(b);
		spare.bufs[spare.n++] = *b;
		comb_buf_init(b, b->max);
	}
	pthread_mutex_unlock(&spare.mu);
	comb_buf_release(b);
}

/* True when channel is in sub's scope: one of its #h, or any without. */
static bool in_scope(const struct resume_sub *sub, const char *channel)
{
	return sub->nchannels == 0 ||
	       bsearch(channel, sub->channels, sub->nchannels,
		       sizeof(*sub->channels), sync_cmp_channel) != NULL;
}

static struct resume_sub *resume_of(const struct hub_sub *hs)
{
	return (struct resume_sub *)ws_sub_of(hs);
}

/* ------------------------------------------------------------------ */
/* signals */

/* True when signal s may change what sub's reader gets. */
static bool concerns(const struct resume_sub *sub, const struct comb_signal *s)
{
	switch (s->type) {
	case COMB_SIGNAL_HEAD:
	case COMB_SIGNAL_MOVE:
	case COMB_SIGNAL_REDACTION:
	case COMB_SIGNAL_CHANNEL:
		return s->channel[0] && in_scope(sub, s->channel);
	case COMB_SIGNAL_MEMBER:
		return s->channel[0] && in_scope(sub, s->channel) &&
		       !strcmp(s->pubkey, sub->head.hub.reader);
	case COMB_SIGNAL_ADMIN:
		return !strcmp(s->pubkey, sub->head.hub.reader);
	default:
		return false;  /* chat, moderation, ephemeral: never a change */
	}
}

/* The kind's signal (hub.h): a read when the signal concerns sub's
 * reader and scope, until the horizon passed it and where it has been
 * replayed. */
static void changes_signal(struct hub_sub *hs, const struct comb_signal *s)
{
	struct resume_sub *sub = resume_of(hs);

	if (!concerns(sub, s))
		return;
	if (s->xid > sub->want_xid)
		sub->want_xid = s->xid;
	if (s->lsn > sub->want_lsn)
		sub->want_lsn = s->lsn;
	hub_wake_locked(hs);
}

/* ------------------------------------------------------------------ */
/* one read */

/* What one read answered. */
struct page {
	struct comb_buf answer;         /* the incremental answer object,
					 * after what the reader put first */
	char cursor[COMB_CURSOR_MAX_TEXT];
	bool more;
	size_t items;
	uint64_t after_xid;             /* the cursor's position */
};

/* The CLOSED reason for an incremental read's error. */
static int page_error_reason(const struct incremental_page *page, char *why,
			     size_t whylen)
{
	if (!strcmp(page->code, "incremental_bad_request"))
		return comb_fail(why, whylen, COMB_EINVAL, "invalid: %s", page->message);
	if (page->code[0])
		return comb_fail(why, whylen, COMB_EINVAL, "%s: %s", page->code, page->message);
	return comb_fail(why, whylen, COMB_EUNAVAIL, "%s", page->message);
}

/*
 * Reads one page from sub's cursor (limit items), a catch-up or a live
 * read as kind says, where position at_least (0: none) has been replayed,
 * and writes its answer object after what pg->answer
 * holds. Returns 0, COMB_ETOOBIG when the answer would pass pg->answer's
 * maximum (fewer items may fit), or another negative COMB_E*, with the
 * CLOSED reason in why.
 */
static int read_page(struct resume_sub *sub, int limit, enum incremental_kind kind,
		     comb_lsn at_least, struct page *pg, char *why, size_t whylen)
{
	struct ws_session *s = sub->head.session;
	struct incremental_ask ask = {
		.relay = s->relay, .community = &s->community, .pubkey = s->pubkey,
		.filter = sub->filter, .kind = kind, .at_least = at_least,
	};
	struct incremental_page page = {0};
	struct comb_cursor decoded;
	int rc;

	if (json_object_set_new(sub->filter, "limit", json_integer(limit)) ||
	    (sub->cursor[0] &&
	     json_object_set_new(sub->filter, "cursor", json_string(sub->cursor))))
		return comb_fail(why, whylen, COMB_ENOMEM, "error: out of memory");
	incremental_read_page(&ask, &page);
	if (page.status != 200)
		rc = page_error_reason(&page, why, whylen);
	else if (comb_cursor_decode(page.cursor, changes.cursor_key, &decoded))
		rc = comb_fail(why, whylen, COMB_EINVAL, "error: bad incremental answer");
	else
		rc = incremental_page_write(s->relay, &page, &pg->answer, 0, NULL, NULL,
					    why, whylen);
	if (rc == COMB_ETOOBIG)
		rc = comb_fail(why, whylen, COMB_ETOOBIG, "%s", WS_BUDGET_EXCEEDED);
	if (rc == 0) {
		memcpy(pg->cursor, page.cursor, sizeof(pg->cursor));
		pg->more = page.more;
		pg->items = (size_t)page.nitems;
		pg->after_xid = decoded.phase == COMB_CURSOR_CHANGES ? decoded.after.xid : 0;
	}
	incremental_page_release(&page);
	return rc;
}

/* Empties out and writes the start of a CHANGES frame for sub_id into
 * it: what comes before the answer. */
static int changes_frame_start(struct comb_buf *out, const char *sub_id)
{
	int rc;

	comb_buf_reset(out);
	rc = comb_buf_puts(out, "[\"CHANGES\",");
	rc = rc ? rc : comb_buf_json_string(out, sub_id, strlen(sub_id));
	return rc ? rc : comb_buf_putc(out, ',');
}

/* ["CHANGES",<sub>,<answer>] into out. */
static int format_changes(struct comb_buf *out, const char *sub_id,
			  const struct page *pg)
{
	int rc = changes_frame_start(out, sub_id);

	rc = rc ? rc : comb_buf_append(out, pg->answer.data, pg->answer.len);
	return rc ? rc : comb_buf_putc(out, ']');
}

/* ------------------------------------------------------------------ */
/* live reads (the workers) */

/* The CHANGES frame of one page, built once per subscription id: the
 * subs of a group that share an id get the same bytes. */
struct page_frame {
	struct comb_buf buf;
	bool built;                     /* buf holds the frame for sub */
	char sub[WS_SUB_ID_MAX + 1];
};

/* Pushes pg to sub's client, if it has items (or, when quiet, a newer
 * cursor), and moves sub's cursor on; sub stops reading when it was
 * closed or the frame was postponed (its cursor then stays). */
static void deliver(struct resume_sub *sub, const struct page *pg,
		    struct page_frame *frame)
{
	struct ws_session *s = sub->head.session;
	const char *id = sub->head.id;
	int rc;

	if (pg->items > 0 || (sub->read_quiet && strcmp(pg->cursor, sub->sent))) {
		if (!frame->built || strcmp(frame->sub, id)) {
			frame->built = false;
			if (format_changes(&frame->buf, id, pg)) {
				ws_sub_close(&sub->head, "error: out of memory");
				sub->reading = false;
				return;
			}
			frame->built = true;
			snprintf(frame->sub, sizeof(frame->sub), "%s", id);
		}
		pthread_mutex_lock(&s->mu);
		rc = sub->head.dead ? COMB_EIO :
			ws_outbox_push(s->outbox, WS_OP_TEXT, frame->buf.data,
				       frame->buf.len, 0);
		if ((rc == COMB_ETOOBIG || rc == COMB_ENOMEM) && ++sub->slow > SLOW_LIMIT)
			ws_sub_close_locked(&sub->head, "resync: slow consumer");
		else if (rc == COMB_EIO)
			sub->head.dead = true;  /* the connection is closing */
		pthread_mutex_unlock(&s->mu);
		if (rc) {
			/* the cursor stays: the same read is done again */
			sub->postponed = rc == COMB_ETOOBIG || rc == COMB_ENOMEM;
			sub->reading = false;
			return;
		}
		sub->slow = 0;
		sub->sent_ms = hub_now_ms();
		memcpy(sub->sent, pg->cursor, sizeof(sub->sent));
	}
	memcpy(sub->cursor, pg->cursor, sizeof(sub->cursor));
	if (!pg->more) {
		sub->caught_up = pg->after_xid > sub->read_xid;
		sub->reading = false;
	}
}

/*
 * The kind's run (hub.h): reads the n subs of group, which share one
 * cursor, from that cursor until `more` is false: each page once, sent to
 * every sub still reading (see deliver). Sets each one's caught_up and
 * postponed.
 */
static void changes_run(void *scratch, struct hub_sub **group, size_t n)
{
	struct page_frame frame = {0};
	char why[300];
	size_t i, reading = n;
	int limit = LIVE_PAGE;
	comb_lsn at_least = 0;  /* every member's signals are there */

	(void)scratch;
	comb_buf_init(&frame.buf, MAX_ANSWER + 256);
	for (i = 0; i < n; i++) {
		struct resume_sub *sub = resume_of(group[i]);

		if (sub->read_lsn > at_least)
			at_least = sub->read_lsn;
		pthread_mutex_lock(&sub->head.session->mu);
		sub->reading = !sub->head.dead;
		pthread_mutex_unlock(&sub->head.session->mu);
	}
	while (reading > 0) {
		struct resume_sub *reader = NULL;
		struct page pg = {0};
		int rc;

		/* any sub still reading asks: they all hold the same cursor */
		for (i = 0; i < n && !reader; i++)
			if (resume_of(group[i])->reading)
				reader = resume_of(group[i]);
		if (!reader)
			break;
		/* a page no larger than one connection's subscriptions may
		 * hold: the frame is queued to each of them */
		comb_buf_init(&pg.answer, reader->head.session->held_limit);
		rc = read_page(reader, limit, INCREMENTAL_LIVE, at_least, &pg, why, sizeof(why));
		if (rc == COMB_ETOOBIG && limit > 1) {
			limit /= 2;  /* the same page again, in fewer items */
			comb_buf_release(&pg.answer);
			continue;
		}
		metrics_add(rc == 0 && pg.items > 0 ? METRIC_RESUMABLE_READS
						    : METRIC_RESUMABLE_READS_EMPTY, 1);
		frame.built = false;  /* a new page */
		reading = 0;
		for (i = 0; i < n; i++) {
			struct resume_sub *sub = resume_of(group[i]);

			if (!sub->reading)
				continue;
			if (rc) {
				ws_sub_close(&sub->head, why);
				sub->reading = false;
				continue;
			}
			deliver(sub, &pg, &frame);
			reading += sub->reading;
		}
		comb_buf_release(&pg.answer);
	}
	comb_buf_release(&frame.buf);
}

/* The kind's together (hub.h): sub holds the cursor of first, so that
 * one read serves both. */
static bool same_cursor(const struct hub_sub *hs, const struct hub_sub *first_hs)
{
	const struct resume_sub *sub = resume_of(hs), *first = resume_of(first_hs);

	return first->cursor[0] && hs->community == first_hs->community &&
	       !strcmp(sub->cursor, first->cursor);
}

/* The kind's take (hub.h): this turn reads until the horizon passed what
 * was signalled, where it has been replayed. */
static void changes_take(struct hub_sub *hs)
{
	struct resume_sub *sub = resume_of(hs);

	sub->retry_at = 0;
	sub->read_xid = sub->want_xid;
	sub->read_lsn = sub->want_lsn;
	sub->read_quiet = sub->quiet_at <= hub_now_ms();
	sub->caught_up = sub->postponed = false;
}

/* The kind's next (hub.h): a closed sub never runs again; one not caught
 * up reads again after a backoff (longer when its frame waits for the
 * client); every sub reads again when it has been quiet for
 * COMB_SYNC_QUIET_MS. */
static double changes_next(struct hub_sub *hs, double now)
{
	struct resume_sub *sub = resume_of(hs);
	bool dead;

	pthread_mutex_lock(&sub->head.session->mu);
	dead = sub->head.dead;
	pthread_mutex_unlock(&sub->head.session->mu);
	if (dead)
		return -1;
	if (sub->read_quiet)
		sub->sent_ms = now;  /* the next quiet read is a full interval away */
	sub->quiet_at = sub->sent_ms + changes.relay->cfg.sync_quiet_ms;
	if (sub->caught_up) {
		sub->retry_ms = RETRY_FIRST_MS;
		return sub->quiet_at;
	}
	sub->retry_at = now + (sub->postponed ? 20 * RETRY_FIRST_MS : sub->retry_ms);
	if (!sub->postponed && sub->retry_ms < RETRY_MAX_MS)
		sub->retry_ms *= 2;
	return sub->retry_at < sub->quiet_at ? sub->retry_at : sub->quiet_at;
}

const struct hub_kind sync_changes_kind = {
	.signal = changes_signal,
	.interrupt = ws_sub_interrupt,
	.together = same_cursor,
	.most = GROUP_MAX,
	.take = changes_take,
	.run = changes_run,
	.next = changes_next,
};

/* ------------------------------------------------------------------ */
/* lifecycle */

static void sub_free(struct resume_sub *sub)
{
	metrics_add(METRIC_RESUMABLE_SYNCS, -1);
	json_decref(sub->filter);
	free(sub->channels);
	free(sub);
}

static void sub_release(struct ws_session *s, struct ws_sub *base)
{
	struct resume_sub *sub = (struct resume_sub *)base;

	(void)s;
	hub_sub_remove(&sub->head.hub);
	sub_free(sub);
}

static struct resume_sub *sub_new(struct ws_session *s, const char *id,
				  const json_t *filter, char *why, size_t whylen)
{
	struct inc_request in;
	struct resume_sub *sub;
	const char *cursor;
	char err[200];
	size_t i;

	/* Only these keys: anything else could let an artifact leave the scope
	 * unseen, or is not part of a resumable sync. */
	static const char *const keys[] = {"artifact", "#h", "#type", "cursor", NULL};

	if (sync_check_keys(filter, keys, "a resumable sync", "#h, #type and cursor",
			    why, whylen))
		return NULL;
	sub = calloc(1, sizeof(*sub));
	if (!sub || !(sub->filter = json_deep_copy(filter)) ||
	    json_object_set_new(sub->filter, "artifact", json_string("incremental"))) {
		snprintf(why, whylen, "error: out of memory");
		goto fail;
	}
	json_object_del(sub->filter, "cursor");
	switch (inc_request_parse(sub->filter, &in, err, sizeof(err))) {
	case INC_OK:
		break;
	case INC_BAD_CURSOR:
		snprintf(why, whylen, "incremental_bad_cursor: %s", err);
		goto fail;
	default:
		snprintf(why, whylen, "invalid: %s", err);
		goto fail;
	}
	cursor = json_string_value(json_object_get(filter, "cursor"));
	if (json_object_get(filter, "cursor") &&
	    (!cursor || strlen(cursor) >= sizeof(sub->cursor) || !cursor[0])) {
		snprintf(why, whylen, "incremental_bad_cursor: the cursor is not one this relay issued");
		goto fail;
	}
	if (cursor)
		snprintf(sub->cursor, sizeof(sub->cursor), "%s", cursor);
	if (in.has_channels) {
		sub->channels = calloc(in.nchannels ? in.nchannels : 1, sizeof(*sub->channels));
		if (!sub->channels) {
			snprintf(why, whylen, "error: out of memory");
			goto fail;
		}
		for (i = 0; i < in.nchannels; i++)
			snprintf(sub->channels[i], sizeof(sub->channels[i]), "%s", in.channels[i]);
		sub->nchannels = in.nchannels;
		qsort(sub->channels, sub->nchannels, sizeof(*sub->channels), sync_cmp_channel);
	}
	ws_sub_init(&sub->head, s, id, &sync_changes_kind,
		    (const char (*)[37])sub->channels, sub->nchannels, sub_release);
	sub->retry_ms = RETRY_FIRST_MS;
	metrics_add(METRIC_RESUMABLE_SYNCS, 1);
	return sub;
fail:
	if (sub) {
		json_decref(sub->filter);
		free(sub);
	}
	return NULL;
}

/* The database's next transaction id: every transaction that committed
 * before now lies below it. Returns 0 or COMB_EUNAVAIL. */
static int next_xid(PGconn *db, uint64_t *out)
{
	PGresult *res = PQexec(db, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text");
	int rc = COMB_EUNAVAIL;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		*out = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
		rc = 0;
	}
	PQclear(res);
	return rc;
}

/*
 * The catch-up: pages from sub's cursor until `more` is false, each sent
 * as a CHANGES frame (waiting for the client, no database connection held
 * meanwhile). Returns 0, COMB_EIO when the connection is closing, or
 * another negative COMB_E* with the CLOSED reason in why.
 */
static int catch_up(struct resume_sub *sub, char *why, size_t whylen)
{
	struct ws_session *s = sub->head.session;
	struct page pg = {0};  /* answer: each page's frame, read in place */
	uint64_t noted = 0;
	bool first = true, more = true;
	int rc = 0, limit = CATCHUP_PAGE;
	size_t held = 0;
	PGconn *db;

	spare_take(&pg.answer);
	while (more && rc == 0) {
		/* a page is as large as the connection's budget has room for */
		answer_bound(&pg.answer, ws_session_room(s));
		if (first) {
			db = comb_db_acquire(s->relay->db, 2000);
			rc = db ? next_xid(db, &noted) : COMB_EUNAVAIL;
			if (db)
				comb_db_release(s->relay->db, db, rc && comb_db_conn_lost(db));
			if (rc) {
				rc = comb_fail(why, whylen, COMB_EUNAVAIL, "error: database unavailable");
				break;
			}
			first = false;
		}
		if (changes_frame_start(&pg.answer, sub->head.id)) {
			rc = comb_fail(why, whylen, COMB_ENOMEM, "error: out of memory");
			break;
		}
		/* the answer is read into the frame after its start */
		rc = read_page(sub, limit, INCREMENTAL_CATCHUP, 0, &pg, why, whylen);
		if (rc == COMB_ETOOBIG && limit > 1) {
			limit /= 2;  /* the same page again, in fewer items */
			rc = 0;
			continue;
		}
		if (rc == 0 && comb_buf_putc(&pg.answer, ']'))
			rc = comb_fail(why, whylen, COMB_ENOMEM, "error: out of memory");
		if (rc == 0 && !ws_session_hold(s, pg.answer.cap))
			rc = comb_fail(why, whylen, COMB_ETOOBIG, "%s", WS_BUDGET_EXCEEDED);
		else if (rc == 0)
			held = pg.answer.cap;
		if (rc == 0) {
			/* written by this thread as the client reads, not
			 * copied for the writer thread */
			rc = ws_outbox_push(s->outbox, WS_OP_TEXT, pg.answer.data,
					    pg.answer.len, WS_PUSH_WAIT | WS_PUSH_STREAM);
			if (rc)
				rc = COMB_EIO;
		}
		ws_session_unhold(s, held);
		held = 0;
		if (rc == 0) {
			memcpy(sub->cursor, pg.cursor, sizeof(sub->cursor));
			memcpy(sub->sent, pg.cursor, sizeof(sub->sent));
			more = pg.more;
		}
	}
	spare_give(&pg.answer);
	if (rc == 0) {
		/* every change committed before the registration lies below
		 * noted; the live reads go on until the horizon passed it */
		hub_lock();
		if (noted > 0 && noted - 1 > sub->want_xid)
			sub->want_xid = noted - 1;
		hub_unlock();
		sub->sent_ms = hub_now_ms();
	}
	return rc;
}

/* After the catch-up: EOSE when it is still exact, else CLOSED; then its
 * turns take over, the first at once: it sends what was signalled during
 * the catch-up and learns whether the horizon passed the registration. */
static void finish(struct resume_sub *sub, uint64_t generation)
{
	if (!ws_sub_open_end(&sub->head, generation))
		return;
	hub_lock();
	sub->quiet_at = sub->sent_ms + changes.relay->cfg.sync_quiet_ms;
	hub_unlock();
	hub_sub_start(&sub->head.hub, true);
}

void ws_resume_open(struct ws_session *s, const char *sub_id,
		    const json_t *filter)
{
	struct resume_sub *sub;
	uint64_t generation;
	char why[300];
	int rc;

	if (!s->relay->cfg.incremental_enabled) {
		ws_send_closed(s, sub_id, "error: incremental_unavailable", WS_PUSH_WAIT);
		return;
	}
	if (!hub_running()) {
		ws_send_closed(s, sub_id, "error: sync unavailable", WS_PUSH_WAIT);
		return;
	}
	sub = sub_new(s, sub_id, filter, why, sizeof(why));
	if (!sub) {
		ws_send_closed(s, sub_id, why, WS_PUSH_WAIT);
		return;
	}
	if (!ws_sub_open_begin(&sub->head, &generation))
		return;
	rc = catch_up(sub, why, sizeof(why));
	if (rc == COMB_EIO) {
		ws_session_drop_sub(s, &sub->head);  /* the connection is closing */
		return;
	}
	if (rc) {
		ws_sub_refuse(&sub->head, why);
		return;
	}
	finish(sub, generation);
}

int ws_sync_start(struct relay *relay, char *errbuf, size_t errlen)
{
	changes.relay = relay;
	if (comb_cursor_key(relay->secret_key, changes.cursor_key))
		return comb_fail(errbuf, errlen, COMB_EIO, "cannot derive the cursor key");
	return 0;
}

void ws_sync_stop(void)
{
	memset(changes.cursor_key, 0, sizeof(changes.cursor_key));
	pthread_mutex_lock(&spare.mu);
	while (spare.n > 0)
		comb_buf_release(&spare.bufs[--spare.n]);
	pthread_mutex_unlock(&spare.mu);
}
