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
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "capture.h"
#include "comb/error.h"
#include "comb/log.h"

/* "combcapt" in ASCII: the advisory lock key of the capture leader. */
#define CAPTURE_LOCK_KEY INT64_C(0x636f6d6263617074)

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

void leader_drop(struct capture *cap, const char *why)
{
	if (cap->leader)
		comb_warn("leader: leadership lost (%s); epoch %016" PRIx64
			  " ends, standing by", why, cap->epoch);
	else if (cap->pg)
		comb_info("leader: standby connection dropped (%s)", why);
	if (cap->pg)
		PQfinish(cap->pg);
	cap->pg = NULL;
	cap->leader = false;
	cap->ping_pending = false;
	cap->standby_logged = false;
	cap->next_try_ms = capture_now_ms() + CAPTURE_LOCK_RETRY_MS;
}

/* Delivers the notifications libpq has buffered. */
static void drain_notifications(struct capture *cap)
{
	PGnotify *n;

	while (cap->pg && (n = PQnotifies(cap->pg)) != NULL) {
		if (cap->leader && strcmp(n->relname, "comb") == 0)
			listen_notification(cap, n->extra);
		PQfreemem(n);
	}
}

/* Standby: connect when needed and try the lock once. */
static void try_lead(struct capture *cap, int64_t now)
{
	int got;

	cap->next_try_ms = now + CAPTURE_LOCK_RETRY_MS;
	if (!cap->pg) {
		cap->pg = connect_db(cap->cfg.database_url);
		if (PQstatus(cap->pg) != CONNECTION_OK) {
			if (!cap->standby_logged)
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
	cap->next_beat_ms = now;
	publish_new_epoch(cap);
	comb_info("leader: leadership acquired (backend %d), publishing epoch %016"
		  PRIx64 " on %s", PQbackendPID(cap->pg), cap->epoch, cap->endpoint);
	/* Notifications that arrived with the LISTEN's answer. */
	drain_notifications(cap);
}

void leader_tick(struct capture *cap, int64_t now)
{
	if (!cap->leader) {
		if (now >= cap->next_try_ms)
			try_lead(cap, now);
		return;
	}
	if (cap->ping_pending) {
		if (now - cap->ping_sent_ms > CAPTURE_PING_TIMEOUT_MS)
			leader_drop(cap, "the database stopped answering");
		return;
	}
	if (now - cap->ping_sent_ms >= cap->cfg.capture_heartbeat_ms) {
		if (!PQsendQuery(cap->pg, "SELECT 1")) {
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
	cap->leader = false;
	cap->ping_pending = false;
}
