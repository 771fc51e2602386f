/*
 * Leadership: one comb-capture per database publishes. Each instance keeps
 * one PostgreSQL connection; the one whose connection holds the advisory
 * lock CAPTURE_LOCK_KEY is the leader and LISTENs on that same connection,
 * so losing the connection loses the lock and the notifications together.
 * A standby asks for the lock every CAPTURE_LOCK_RETRY_MS; when the leader
 * dies, PostgreSQL ends its session, the lock is free and a standby takes
 * over with a new epoch.
 *
 * A leader pings its database every heartbeat and gives up after
 * CAPTURE_PING_TIMEOUT_MS without an answer. The server side of the
 * session is told (tcp_keepalives_*, tcp_user_timeout) to drop an
 * unreachable client only after about ten seconds, so a leader cut off
 * from its database has stopped publishing well before a standby can get
 * the lock: two leaders never publish at once.
 *
 * The ping is a horizon marker (listen.c): a NOTIFY of the marker
 * transaction's snapshot xmin, which tells capture, when it comes back,
 * that every change below that transaction id has been published. A
 * leader whose connection breaks (session terminated, database
 * restarted) keeps its epoch and its heartbeats for CAPTURE_GRACE_MS while
 * it reconnects every CAPTURE_RECONNECT_MS. If it gets the lock back in
 * time, the capture_leader row still names its epoch (no other instance
 * led meanwhile) and the catch-up from the horizon succeeds, relays see no
 * interruption: the changes made meanwhile arrive as signals with the
 * following seqs. Otherwise the epoch ends as before. A leader whose
 * database stops answering gets no grace period: its session may live on
 * at the server and keep the lock.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "comb/error.h"
#include "comb/log.h"

/* "combcapt" in ASCII: the advisory lock key of the capture leader. */
#define CAPTURE_LOCK_KEY INT64_C(0x636f6d6263617074)

static const char *const marker_sql =
	"SELECT pg_notify('comb', '" CAPTURE_HORIZON_PREFIX "' || "
	"pg_snapshot_xmin(pg_current_snapshot())::text)";

static const char *const session_sql =
	"SET application_name = 'comb-capture';"
	"SET tcp_keepalives_idle = 10;"
	"SET tcp_keepalives_interval = 2;"
	"SET tcp_keepalives_count = 3;"
	"SET tcp_user_timeout = 10000";

/* The first line of libpq's last error message (its messages span lines). */
static const char *pg_message(PGconn *conn)
{
	static char msg[256];

	snprintf(msg, sizeof(msg), "%s", conn ? PQerrorMessage(conn) : "no connection");
	msg[strcspn(msg, "\r\n")] = '\0';
	return msg[0] ? msg : "connection lost";
}

/* Server notices (such as the FATAL that precedes a terminated session)
 * go to the log instead of libpq's default, stderr. */
static void on_notice(void *arg, const char *message)
{
	char line[256];

	(void)arg;
	snprintf(line, sizeof(line), "%s", message);
	line[strcspn(line, "\r\n")] = '\0';
	comb_info("leader: database says: %s", line);
}

/* Runs sql (no result rows wanted); returns 0 or COMB_EUNAVAIL. */
static int exec_ok(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);

	PQclear(res);
	return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : COMB_EUNAVAIL;
}

/* Runs a query answering one boolean; returns 1, 0, or COMB_EUNAVAIL. */
static int query_bool(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	int rc = COMB_EUNAVAIL;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	    PQnfields(res) == 1)
		rc = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	return rc;
}

static PGconn *connect_db(const char *url)
{
	const char *keys[] = {
		"dbname", "connect_timeout", "keepalives", "keepalives_idle",
		"keepalives_interval", "keepalives_count", "tcp_user_timeout",
		NULL,
	};
	const char *values[] = {url, "5", "1", "5", "1", "3", "5000", NULL};
	PGconn *conn = PQconnectdbParams(keys, values, 1);

	if (conn)
		PQsetNoticeProcessor(conn, on_notice, NULL);
	return conn;
}

/* Ends the grace period of a lost connection: the epoch is over. */
static void end_grace(struct capture *cap, const char *why)
{
	if (!cap->reconnecting)
		return;
	comb_warn("leader: leadership lost (%s); epoch %016" PRIx64
		  " ends, standing by", why, cap->epoch);
	cap->reconnecting = false;
	cap->next_try_ms = comb_monotonic_ms() + CAPTURE_LOCK_RETRY_MS;
}

/* Closes the connection after a failure; a leader with a horizon enters
 * its grace period when grace is set. */
static void drop(struct capture *cap, const char *why, bool grace)
{
	int64_t now = comb_monotonic_ms();

	if (cap->leader && grace && cap->hz.horizon != 0) {
		comb_warn("leader: database connection lost (%s); epoch %016"
			  PRIx64 " goes on for up to %d ms while reconnecting",
			  why, cap->epoch, CAPTURE_GRACE_MS);
		cap->reconnecting = true;
		cap->grace_until_ms = now + CAPTURE_GRACE_MS;
	} else if (cap->leader) {
		comb_warn("leader: leadership lost (%s); epoch %016" PRIx64
			  " ends, standing by", why, cap->epoch);
	} else if (cap->reconnecting) {
		comb_debug("leader: reconnect failed (%s)", why);
	} else if (cap->pg) {
		comb_info("leader: standby connection dropped (%s)", why);
	}
	if (cap->pg) {
		atomic_fetch_add(&cap->stats.db_lost, 1);
		PQfinish(cap->pg);
	}
	cap->pg = NULL;
	cap->leader = false;
	cap->ping_pending = false;
	cap->standby_logged = false;
	cap->next_try_ms = now + (cap->reconnecting ? CAPTURE_RECONNECT_MS :
				  CAPTURE_LOCK_RETRY_MS);
}

/* Gives up leadership (or the standby connection) after a failure, with
 * a grace period when leading, and retries later. */
static void leader_drop(struct capture *cap, const char *why)
{
	drop(cap, why, true);
}

/* Writes the epoch this instance starts into capture_leader. */
static void record_epoch(struct capture *cap)
{
	char epoch[24];
	const char *params[1] = {epoch};
	PGresult *res;

	snprintf(epoch, sizeof(epoch), "%016" PRIx64, cap->epoch);
	res = PQexecParams(cap->pg,
			   "INSERT INTO capture_leader (epoch) VALUES ($1) "
			   "ON CONFLICT (id) DO UPDATE SET epoch = EXCLUDED.epoch, "
			   "since = now()", 1, NULL, params, NULL, NULL, 0);
	/* Not fatal: a reconnect then finds another epoch and starts anew. */
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		comb_warn("leader: cannot record epoch %s: %s", epoch,
			  pg_message(cap->pg));
	PQclear(res);
}

/* In the grace period, with the lock back: goes on with the epoch if no
 * other instance led meanwhile and the catch-up succeeds. Returns 0, or
 * COMB_EUNAVAIL with the reason in errbuf. */
static int continue_epoch(struct capture *cap, char *errbuf, size_t errlen)
{
	char epoch[24];
	PGresult *res;
	bool same;

	if (comb_monotonic_ms() >= cap->grace_until_ms)
		return comb_fail(errbuf, errlen, COMB_EUNAVAIL,
				 "the grace period passed");
	snprintf(epoch, sizeof(epoch), "%016" PRIx64, cap->epoch);
	res = PQexec(cap->pg, "SELECT epoch FROM capture_leader");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		comb_fail(errbuf, errlen, COMB_EUNAVAIL, "%s", pg_message(cap->pg));
		PQclear(res);
		return COMB_EUNAVAIL;
	}
	same = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), epoch) == 0;
	PQclear(res);
	if (!same)
		return comb_fail(errbuf, errlen, COMB_EUNAVAIL,
				 "another instance led meanwhile");
	return listen_catch_up(cap, cap->pg, errbuf, errlen);
}

/* Delivers the notifications libpq has buffered: all of them first, then
 * the WAL position read after they arrived (listen_position) stamps every
 * change among them; notifications that arrive meanwhile wait for the next
 * round, and a position of their own. */
static void drain_notifications(struct capture *cap)
{
	PGnotify **held = NULL, **grown, *n;
	size_t count = 0, cap_held = 0, i;
	uint64_t lsn = 0;
	bool changes = false;

	while (cap->pg && (n = PQnotifies(cap->pg)) != NULL) {
		if (!cap->leader || strcmp(n->relname, "comb") != 0) {
			PQfreemem(n);
			continue;
		}
		if (count == cap_held) {
			cap_held = cap_held ? 2 * cap_held : 64;
			grown = realloc(held, cap_held * sizeof(*held));
			if (!grown) {
				/* every change held so far is told at once */
				PQfreemem(n);
				comb_error("listen: out of memory; starting a new epoch");
				listen_restart(cap);
				break;
			}
			held = grown;
		}
		changes = changes || strncmp(n->extra, CAPTURE_HORIZON_PREFIX,
					     strlen(CAPTURE_HORIZON_PREFIX)) != 0;
		held[count++] = n;
	}
	if (changes)
		lsn = listen_position(cap);
	for (i = 0; i < count; i++) {
		if (cap->leader)
			listen_notification(cap, held[i]->extra, lsn);
		PQfreemem(held[i]);
	}
	free(held);
}

/* Standby: connect when needed and try the lock once. */
static void try_lead(struct capture *cap, int64_t now)
{
	int got;

	cap->next_try_ms = now + (cap->reconnecting ? CAPTURE_RECONNECT_MS :
				  CAPTURE_LOCK_RETRY_MS);
	if (!cap->pg) {
		cap->pg = connect_db(cap->cfg.database_url);
		if (PQstatus(cap->pg) != CONNECTION_OK) {
			if (!cap->standby_logged && !cap->reconnecting)
				comb_warn("leader: cannot connect to the database: %s",
					  pg_message(cap->pg));
			cap->standby_logged = true;
			PQfinish(cap->pg);
			cap->pg = NULL;
			return;
		}
		if (exec_ok(cap->pg, session_sql)) {
			leader_drop(cap, pg_message(cap->pg));
			return;
		}
		cap->standby_logged = false;
	}

	{
		char sql[96];

		snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%" PRId64 ")",
			 CAPTURE_LOCK_KEY);
		got = query_bool(cap->pg, sql);
	}
	if (got < 0) {
		leader_drop(cap, pg_message(cap->pg));
		return;
	}
	if (!got) {
		end_grace(cap, "another instance holds the capture lock");
		if (!cap->standby_logged)
			comb_info("leader: another instance holds the capture lock, standing by");
		cap->standby_logged = true;
		return;
	}

	/* The triggers must exist, or a quiet feed would hide every change. */
	got = query_bool(cap->pg,
			 "SELECT EXISTS (SELECT 1 FROM pg_trigger "
			 "WHERE tgname = 'artifact_heads_notify')");
	if (got != 1) {
		comb_error("leader: the database lacks the notify triggers "
			   "(run comb-admin migrate); not leading");
		leader_drop(cap, got < 0 ? pg_message(cap->pg) : "no triggers");
		return;
	}
	if (exec_ok(cap->pg, "LISTEN comb")) {
		leader_drop(cap, pg_message(cap->pg));
		return;
	}
	cap->leader = true;
	cap->ping_pending = false;
	cap->ping_sent_ms = now;
	/* Connected now, never while notifications wait: a slow connection
	 * must not hold up the heartbeats of a leader that publishes. */
	listen_position_connect(cap);
	if (cap->reconnecting) {
		char err[256];

		cap->reconnecting = false;
		if (continue_epoch(cap, err, sizeof(err)) == 0) {
			comb_info("leader: leadership regained (backend %d), epoch %016"
				  PRIx64 " goes on", PQbackendPID(cap->pg), cap->epoch);
			drain_notifications(cap);
			return;
		}
		comb_warn("leader: cannot go on with epoch %016" PRIx64 " (%s)",
			  cap->epoch, err);
	}
	cap->next_beat_ms = now;
	listen_restart(cap);
	record_epoch(cap);
	comb_info("leader: leadership acquired (backend %d), publishing epoch %016"
		  PRIx64 " on %s", PQbackendPID(cap->pg), cap->epoch, cap->endpoint);
	/* Notifications that arrived with the LISTEN's answer. */
	drain_notifications(cap);
}

void leader_tick(struct capture *cap, int64_t now)
{
	if (!cap->leader) {
		if (cap->reconnecting && now >= cap->grace_until_ms)
			end_grace(cap, "no reconnect within the grace period");
		if (now >= cap->next_try_ms)
			try_lead(cap, now);
		return;
	}
	listen_check_standbys(cap, now);
	if (cap->ping_pending) {
		if (now - cap->ping_sent_ms > CAPTURE_PING_TIMEOUT_MS)
			drop(cap, "the database stopped answering", false);
		return;
	}
	if (now - cap->ping_sent_ms >= cap->cfg.capture_heartbeat_ms) {
		if (!PQsendQuery(cap->pg, marker_sql)) {
			leader_drop(cap, pg_message(cap->pg));
			return;
		}
		cap->ping_pending = true;
		cap->ping_sent_ms = now;
	}
}

void leader_readable(struct capture *cap)
{
	if (!cap->pg)
		return;
	if (!PQconsumeInput(cap->pg)) {
		leader_drop(cap, pg_message(cap->pg));
		return;
	}
	while (cap->ping_pending && !PQisBusy(cap->pg)) {
		PGresult *res = PQgetResult(cap->pg);

		if (!res) {
			cap->ping_pending = false;
			break;
		}
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			PQclear(res);
			leader_drop(cap, pg_message(cap->pg));
			return;
		}
		PQclear(res);
	}
	drain_notifications(cap);
	if (cap->pg && PQstatus(cap->pg) != CONNECTION_OK)
		leader_drop(cap, pg_message(cap->pg));
}

void leader_release(struct capture *cap)
{
	if (cap->leader)
		comb_info("leader: leadership released, epoch %016" PRIx64 " ends",
			  cap->epoch);
	if (cap->pg)
		PQfinish(cap->pg);
	cap->pg = NULL;
	PQfinish(cap->pos_pg);
	cap->pos_pg = NULL;
	cap->leader = false;
	cap->reconnecting = false;
	cap->ping_pending = false;
}
