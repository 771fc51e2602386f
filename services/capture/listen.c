/*
 * From notification to signal: each payload the triggers of
 * migrations/0003_notify.sql send on "comb" becomes one signal published
 * on its channel's topic. PostgreSQL delivers them after commit in commit
 * order, and this loop numbers them in that order.
 *
 * It also keeps the horizon that lets a leader catch up after losing its
 * database connection. Once per heartbeat the leader commits a marker,
 * "horizon <xmin>", where xmin is pg_snapshot_xmin() of the marker's own
 * snapshot: every transaction below xmin ended before that snapshot, so
 * queued its notifications before the marker was queued, and PostgreSQL
 * delivers the queue in order. When the marker arrives, every change with
 * a smaller transaction id has been published. After a reconnect,
 * listen_catch_up publishes every change stamped at or after the horizon
 * (skipping the transactions already published from notifications) and
 * notes its snapshot, so that the notifications of transactions the
 * catch-up already covered are not published twice.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "comb/error.h"
#include "comb/log.h"
#include "comb/readroute.h"

/*
 * Every change relays hear about, in the notify payload format of
 * migrations/0003_notify.sql, stamped at or after $1, in transaction
 * order. The tables with a (community_id, stamp) index are read community
 * by community so that the index serves; members and redactions have none
 * and are scanned.
 */
static const char *const catch_up_sql =
	"SELECT x::text, p FROM ("
	" SELECT h.changed_xid AS x, 1 AS src, concat_ws(' ', 'head',"
	"  h.community_id::text, h.channel_id::text, h.changed_xid::text,"
	"  h.d::text, '-', h.revision_id, '0') AS p"
	" FROM communities k JOIN artifact_heads h ON h.community_id = k.id"
	"  AND h.changed_xid >= $1::xid8"
	" UNION ALL"
	" SELECT m.moved_xid, 2, concat_ws(' ', 'move', m.community_id::text,"
	"  m.from_channel::text, m.moved_xid::text, m.d::text, '-',"
	"  m.revision_id, '0')"
	" FROM communities k JOIN artifact_moves m ON m.community_id = k.id"
	"  AND m.moved_xid >= $1::xid8"
	" UNION ALL"
	" SELECT r.redacted_xid, 3, concat_ws(' ', 'redaction',"
	"  r.community_id::text, r.channel_id::text, r.redacted_xid::text,"
	"  r.d::text, '-', r.revision_id, '0')"
	" FROM artifact_redactions r WHERE r.redacted_xid >= $1::xid8"
	" UNION ALL"
	" SELECT b.changed_xid, 4, concat_ws(' ', 'member', b.community_id::text,"
	"  b.channel_id::text, b.changed_xid::text, '-', b.pubkey, '-', '0')"
	" FROM members b WHERE b.changed_xid >= $1::xid8"
	" UNION ALL"
	" SELECT c.signal_xid, 5, concat_ws(' ', 'channel', c.community_id::text,"
	"  c.id::text, c.signal_xid::text, '-', '-', '-', '0')"
	" FROM communities k JOIN channels c ON c.community_id = k.id"
	"  AND c.signal_xid >= $1::xid8"
	" UNION ALL"
	" SELECT e.xid, 6, concat_ws(' ', 'event', e.community_id::text,"
	"  coalesce(e.channel_id::text, '-'), e.xid::text, '-', e.pubkey, e.id,"
	"  e.kind::text)"
	" FROM communities k JOIN events e ON e.community_id = k.id"
	"  AND e.xid >= $1::xid8 AND e.kind NOT IN (45010, 45011)"
	" UNION ALL"
	" SELECT a.xid, 7, concat_ws(' ', 'admin', a.community_id::text, '-',"
	"  a.xid::text, '-', a.pubkey, '-', CASE WHEN a.admin THEN '1' ELSE '0' END)"
	" FROM community_admin_log a WHERE a.xid >= $1::xid8"
	") c ORDER BY c.x, c.src";

static bool seen_has(const struct capture_horizon *hz, uint64_t xid)
{
	size_t i;

	for (i = 0; i < hz->nseen; i++)
		if (hz->seen[i] == xid)
			return true;
	return false;
}

/* Remembers that xid (at or above the horizon) was published. */
static void seen_add(struct capture_horizon *hz, uint64_t xid)
{
	if (hz->horizon == 0 || xid < hz->horizon || seen_has(hz, xid))
		return;
	if (hz->nseen >= CAPTURE_SEEN_MAX) {
		if (!hz->seen_full_warned)
			comb_warn("listen: more than %d transactions above the "
				  "horizon %" PRIu64 "; a catch-up may repeat "
				  "signals", CAPTURE_SEEN_MAX, hz->horizon);
		hz->seen_full_warned = true;
		return;
	}
	hz->seen[hz->nseen++] = xid;
}

static void snap_clear(struct capture_horizon *hz)
{
	free(hz->snap_xip);
	hz->snap_xip = NULL;
	hz->snap_nxip = 0;
	hz->snap_active = false;
}

/* Moves the horizon up to h, forgetting what it no longer needs. A
 * marker's horizon (marker set) also ends the catch-up snapshot once every
 * transaction it could have seen is below it. */
static void advance(struct capture_horizon *hz, uint64_t h, bool marker)
{
	size_t i, n = 0;

	if (marker && hz->snap_active && h >= hz->snap_xmax)
		snap_clear(hz);
	if (h <= hz->horizon)
		return;
	hz->horizon = h;
	for (i = 0; i < hz->nseen; i++)
		if (hz->seen[i] >= h)
			hz->seen[n++] = hz->seen[i];
	hz->nseen = n;
	hz->seen_full_warned = false;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Did the catch-up snapshot see transaction xid (committed before it)? */
static bool snap_saw(const struct capture_horizon *hz, uint64_t xid)
{
	if (!hz->snap_active || xid >= hz->snap_xmax)
		return false;
	if (xid < hz->snap_xmin)
		return true;
	return !bsearch(&xid, hz->snap_xip, hz->snap_nxip, sizeof(xid), cmp_u64);
}

/* Reads an unsigned decimal at *p, moving *p past it. */
static int read_u64(const char **p, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (**p < '0' || **p > '9')
		return COMB_EINVAL;
	v = strtoull(*p, &end, 10);
	*p = end;
	*out = v;
	return 0;
}

/* Parses pg_snapshot text "xmin:xmax:xip,xip,..." into hz's snapshot. */
static int snap_parse(struct capture_horizon *hz, const char *text)
{
	const char *p = text;
	uint64_t xmin, xmax, *xip = NULL;
	size_t n = 0, cap = 0;

	if (read_u64(&p, &xmin) || *p++ != ':' || read_u64(&p, &xmax) ||
	    *p++ != ':')
		return COMB_EINVAL;
	while (*p) {
		uint64_t x;

		if (n == cap) {
			uint64_t *grown;

			if (cap >= CAPTURE_SNAPSHOT_MAX_XIP)
				goto bad;
			cap = cap ? 2 * cap : 64;
			grown = realloc(xip, cap * sizeof(*xip));
			if (!grown)
				goto bad;
			xip = grown;
		}
		if (read_u64(&p, &x))
			goto bad;
		xip[n++] = x;
		if (*p == ',')
			p++;
		else if (*p)
			goto bad;
	}
	if (n > 1)
		qsort(xip, n, sizeof(*xip), cmp_u64);
	snap_clear(hz);
	hz->snap_active = true;
	hz->snap_xmin = xmin;
	hz->snap_xmax = xmax;
	hz->snap_xip = xip;
	hz->snap_nxip = n;
	return 0;
bad:
	free(xip);
	return COMB_EINVAL;
}

static void horizon_marker(struct capture *cap, const char *payload)
{
	const char *p = payload + strlen(CAPTURE_HORIZON_PREFIX);
	uint64_t h;

	if (read_u64(&p, &h) || *p) {
		atomic_fetch_add(&cap->stats.rejected, 1);
		comb_warn("listen: unusable horizon marker '%.100s'", payload);
		return;
	}
	advance(&cap->hz, h, true);
}

void listen_position_connect(struct capture *cap)
{
	const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
	const char *values[] = {cap->cfg.database_url, "5", "comb-capture-position", NULL};

	cap->positions_wanted = true;
	cap->standbys_checked_ms = 0;
	if (cap->pos_pg)
		return;
	cap->pos_pg = PQconnectdbParams(keys, values, 1);
	if (PQstatus(cap->pos_pg) != CONNECTION_OK) {
		comb_warn("listen: cannot read WAL positions (signals carry none until the next leadership): %s",
			  PQerrorMessage(cap->pos_pg));
		PQfinish(cap->pos_pg);
		cap->pos_pg = NULL;
	}
}

/* Gives up cap's position connection after a failed statement res. */
static void position_failed(struct capture *cap, PGresult *res)
{
	comb_warn("listen: cannot read the WAL position (signals carry none until the next leadership): %s",
		  PQresultErrorMessage(res)[0] ? PQresultErrorMessage(res) :
		  PQerrorMessage(cap->pos_pg));
	PQfinish(cap->pos_pg);
	cap->pos_pg = NULL;
}

void listen_check_standbys(struct capture *cap, int64_t now)
{
	PGresult *res;
	bool streaming;

	if (!cap->pos_pg || (cap->standbys_checked_ms &&
			     now - cap->standbys_checked_ms < CAPTURE_STANDBY_CHECK_MS))
		return;
	cap->standbys_checked_ms = now;
	res = PQexec(cap->pos_pg, "SELECT EXISTS (SELECT FROM pg_stat_replication)");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		position_failed(cap, res);
		PQclear(res);
		return;
	}
	streaming = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	if (streaming != cap->positions_wanted)
		comb_info(streaming ? "listen: a standby streams from the primary: signals carry WAL positions"
			  : "listen: no standby streams from the primary: signals carry no WAL position"
			    " (relays re-read live changes on the primary)");
	cap->positions_wanted = streaming;
}

uint64_t listen_position(struct capture *cap)
{
	PGresult *res;
	comb_lsn lsn = 0;

	if (!cap->pos_pg || !cap->positions_wanted)
		return 0;
	res = PQexec(cap->pos_pg, "SELECT pg_current_wal_insert_lsn()::text");
	if (PQresultStatus(res) != PGRES_TUPLES_OK ||
	    comb_lsn_parse(PQgetvalue(res, 0, 0), &lsn)) {
		position_failed(cap, res);
		lsn = 0;
	}
	PQclear(res);
	return lsn;
}

void listen_notification(struct capture *cap, const char *payload, uint64_t lsn)
{
	struct comb_signal s;
	char err[128];

	if (strncmp(payload, CAPTURE_HORIZON_PREFIX,
		    strlen(CAPTURE_HORIZON_PREFIX)) == 0) {
		horizon_marker(cap, payload);
		return;
	}
	atomic_fetch_add(&cap->stats.notifications, 1);
	if (comb_signal_parse_notify(payload, &s, err, sizeof(err))) {
		/*
		 * A change was made that cannot be told to relays: say so by
		 * ending the epoch, so that every sync starts again.
		 */
		atomic_fetch_add(&cap->stats.rejected, 1);
		comb_error("listen: unusable notification '%.200s': %s; "
			   "starting a new epoch", payload, err);
		listen_restart(cap);
		return;
	}
	if (snap_saw(&cap->hz, s.xid)) {
		comb_debug("listen: %s of xid %" PRIu64 " already caught up",
			   comb_signal_type_name(s.type), s.xid);
		return;
	}
	comb_debug("listen: %s community %" PRId64 " channel %s xid %" PRIu64,
		   comb_signal_type_name(s.type), s.community,
		   s.channel[0] ? s.channel : "-", s.xid);
	s.lsn = lsn;
	publish_signal(cap, &s);
	seen_add(&cap->hz, s.xid);
}

/* Runs sql on conn; returns the result when its status is want, else NULL
 * with the reason in errbuf. */
static PGresult *run(PGconn *conn, const char *sql, int nparams,
		     const char *const *params, ExecStatusType want,
		     char *errbuf, size_t errlen)
{
	PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL,
				     NULL, 0);

	if (PQresultStatus(res) == want)
		return res;
	comb_fail(errbuf, errlen, COMB_EUNAVAIL, "%.200s",
		  PQresultErrorMessage(res)[0] ? PQresultErrorMessage(res) :
		  PQerrorMessage(conn));
	errbuf[strcspn(errbuf, "\r\n")] = '\0';
	PQclear(res);
	return NULL;
}

int listen_catch_up(struct capture *cap, PGconn *conn, char *errbuf,
		    size_t errlen)
{
	struct capture_horizon *hz = &cap->hz;
	struct comb_signal *sigs = NULL;
	PGresult *snap = NULL, *rows = NULL, *res;
	char horizon[24];
	const char *params[1] = {horizon};
	uint64_t snap_xmin;
	comb_lsn lsn;
	int rc = COMB_EUNAVAIL, i, n, kept = 0;

	if (hz->horizon == 0)
		return comb_fail(errbuf, errlen, COMB_EUNAVAIL, "no horizon yet");
	snprintf(horizon, sizeof(horizon), "%" PRIu64, hz->horizon);
	res = run(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0,
		  NULL, PGRES_COMMAND_OK, errbuf, errlen);
	if (!res)
		goto out;
	PQclear(res);
	/* the position after the snapshot: every commit it sees is below */
	snap = run(conn, "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text",
		   0, NULL, PGRES_TUPLES_OK, errbuf, errlen);
	if (!snap)
		goto out;
	rows = run(conn, catch_up_sql, 1, params, PGRES_TUPLES_OK, errbuf,
		   errlen);
	if (!rows)
		goto out;
	res = run(conn, "COMMIT", 0, NULL, PGRES_COMMAND_OK, errbuf, errlen);
	if (!res)
		goto out;
	PQclear(res);

	n = PQntuples(rows);
	sigs = calloc(n > 0 ? (size_t)n : 1, sizeof(*sigs));
	if (!sigs) {
		comb_fail(errbuf, errlen, COMB_EUNAVAIL, "out of memory");
		goto out;
	}
	/* Parse everything first: publish all or nothing. */
	for (i = 0; i < n; i++) {
		const char *p = PQgetvalue(rows, i, 1);
		char err[128];

		if (comb_signal_parse_notify(p, &sigs[kept], err, sizeof(err))) {
			comb_fail(errbuf, errlen, COMB_EUNAVAIL,
				  "unusable catch-up row '%.200s': %s", p, err);
			goto out;
		}
		if (!seen_has(hz, sigs[kept].xid))
			kept++;
	}
	if (PQntuples(snap) != 1 || snap_parse(hz, PQgetvalue(snap, 0, 0))) {
		comb_fail(errbuf, errlen, COMB_EUNAVAIL, "unusable snapshot");
		goto out;
	}
	snap_xmin = hz->snap_xmin;
	comb_lsn_parse(PQgetvalue(snap, 0, 1), &lsn);
	for (i = 0; i < kept; i++) {
		sigs[i].lsn = lsn;
		comb_debug("listen: catch-up %s community %" PRId64 " xid %" PRIu64,
			   comb_signal_type_name(sigs[i].type), sigs[i].community,
			   sigs[i].xid);
		publish_signal(cap, &sigs[i]);
		seen_add(hz, sigs[i].xid);
	}
	atomic_fetch_add(&cap->stats.caught_up, (uint64_t)kept);
	comb_info("listen: caught up from horizon %s: %d signals (%d already "
		  "published)", horizon, kept, n - kept);
	/* Every transaction below the snapshot's xmin is published now. */
	advance(hz, snap_xmin, false);
	rc = 0;
out:
	if (rc && PQtransactionStatus(conn) != PQTRANS_IDLE)
		PQclear(PQexec(conn, "ROLLBACK"));
	free(sigs);
	PQclear(rows);
	PQclear(snap);
	return rc;
}

void listen_restart(struct capture *cap)
{
	cap->hz.horizon = 0;
	cap->hz.nseen = 0;
	cap->hz.seen_full_warned = false;
	snap_clear(&cap->hz);
	publish_new_epoch(cap);
}

void listen_release(struct capture *cap)
{
	snap_clear(&cap->hz);
}
