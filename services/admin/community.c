/*
 * comb-admin community: create a community bound to one or more hosts with
 * its admins, list and show communities, and bump a community's cursor
 * epoch so that every incremental-read cursor issued for it answers
 * incremental_reset. The edits of a community's hosts and admins are
 * community_edit.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "comb/hex.h"

#define MAX_HOSTS 32
#define MAX_OWNERS 32

/* Says whether argv[1] asks for topic's help (printed then). */
static bool help(int argc, char **argv, const char *topic)
{
	if (argc == 2 && admin_is_help(argv[1])) {
		admin_usage(stdout, topic);
		return true;
	}
	return false;
}

/* Runs sql and clears its result; returns 0 or -1 (printed). */
static int exec_ok(PGconn *conn, const char *sql, int nparams,
		   const char *const *params)
{
	PGresult *res = admin_exec(conn, sql, nparams, params);

	PQclear(res);
	return res ? 0 : -1;
}

static int create(int argc, char **argv)
{
	static char hosts[MAX_HOSTS][ADMIN_HOST_MAX + 1];
	const char *owners[MAX_OWNERS];
	const char *name = NULL, *topic = "community create";
	int nhosts = 0, nowners = 0, i, rc = ADMIN_FAILED;
	PGresult *res;
	PGconn *conn;
	char id[32];

	if (help(argc, argv, topic))
		return ADMIN_OK;
	for (i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			return admin_usage_error(topic, "%s needs a value", argv[i]);
		if (!strcmp(argv[i], "--host")) {
			if (nhosts == MAX_HOSTS)
				return admin_usage_error(topic, "at most %d hosts",
							 MAX_HOSTS);
			if (admin_normalize_host(argv[++i], hosts[nhosts],
						 sizeof(hosts[0])))
				return admin_usage_error(topic, "bad host '%s'",
							 argv[i]);
			nhosts++;
		} else if (!strcmp(argv[i], "--owner")) {
			if (nowners == MAX_OWNERS)
				return admin_usage_error(topic, "at most %d owners",
							 MAX_OWNERS);
			if (strlen(argv[++i]) != 64 || !comb_hex_is_lower(argv[i], 64))
				return admin_usage_error(topic, "--owner takes a public key in 64 lowercase hex");
			owners[nowners++] = argv[i];
		} else if (!strcmp(argv[i], "--name")) {
			name = argv[++i];
		} else {
			return admin_usage_error(topic, "unknown option '%s'", argv[i]);
		}
	}
	if (nhosts == 0 || nowners == 0)
		return admin_usage_error(topic, "at least one --host and one --owner are required");
	if (!name)
		name = hosts[0];
	if (!(conn = admin_connect()))
		return ADMIN_FAILED;
	if (exec_ok(conn, "BEGIN", 0, NULL))
		goto out;
	res = admin_exec(conn, "INSERT INTO communities (name) VALUES ($1) RETURNING id",
			 1, (const char *const[]){name});
	if (!res)
		goto rollback;
	snprintf(id, sizeof(id), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	for (i = 0; i < nhosts; i++) {
		res = admin_exec(conn, "INSERT INTO community_hosts (host, community_id)"
				 " VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING host",
				 2, (const char *const[]){hosts[i], id});
		if (!res)
			goto rollback;
		if (PQntuples(res) == 0) {
			fprintf(stderr, "comb-admin: host %s is already bound to a community; nothing was changed\n",
				hosts[i]);
			PQclear(res);
			goto rollback;
		}
		PQclear(res);
	}
	for (i = 0; i < nowners; i++)
		if (exec_ok(conn, "INSERT INTO community_admins (community_id, pubkey)"
			    " VALUES ($1, $2) ON CONFLICT DO NOTHING",
			    2, (const char *const[]){id, owners[i]}))
			goto rollback;
	if (exec_ok(conn, "COMMIT", 0, NULL))
		goto out;
	printf("%s\n", id);
	rc = ADMIN_OK;
	goto out;
rollback:
	PQclear(PQexec(conn, "ROLLBACK"));
out:
	PQfinish(conn);
	return rc;
}

static int list(int argc, char **argv)
{
	PGresult *res;
	PGconn *conn;
	int i;

	if (help(argc, argv, "community list"))
		return ADMIN_OK;
	if (argc != 1)
		return admin_usage_error("community list", "list takes no arguments");
	if (!(conn = admin_connect()))
		return ADMIN_FAILED;
	res = admin_exec(conn,
			 "SELECT c.id, c.name, coalesce(string_agg(h.host, ','"
			 " ORDER BY h.host), '-') FROM communities c"
			 " LEFT JOIN community_hosts h ON h.community_id = c.id"
			 " GROUP BY c.id ORDER BY c.id", 0, NULL);
	for (i = 0; res && i < PQntuples(res); i++)
		printf("%s\t%s\t%s\n", PQgetvalue(res, i, 0),
		       PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
	PQclear(res);
	PQfinish(conn);
	return res ? ADMIN_OK : ADMIN_FAILED;
}

/* Prints "label: value" for every row of a one-column query on id. */
static int print_rows(PGconn *conn, const char *label, const char *sql,
		      const char *id)
{
	PGresult *res = admin_exec(conn, sql, 1, &id);
	int i;

	for (i = 0; res && i < PQntuples(res); i++)
		printf("%s: %s\n", label, PQgetvalue(res, i, 0));
	PQclear(res);
	return res ? 0 : -1;
}

/* Reads the one --id or --host argument of topic's command. Returns
 * ADMIN_OK or ADMIN_USAGE (printed). */
static int one_target(int argc, char **argv, const char *topic,
		      struct admin_target *t)
{
	int i = 1, rc;

	memset(t, 0, sizeof(*t));
	if (argc != 3)
		return admin_usage_error(topic, "give the community: --id N or --host H");
	rc = admin_target_arg(t, argc, argv, &i, topic);
	if (rc == 0)
		return admin_usage_error(topic, "unknown option '%s'", argv[1]);
	return rc == 1 ? ADMIN_OK : rc;
}

/*
 * The start of a command on one community: help, its --id or --host,
 * the connection and the community's id. Returns ADMIN_OK with *conn
 * open (the caller closes it), -1 after printing help, or an exit status.
 */
static int open_target(int argc, char **argv, const char *topic,
		       PGconn **conn, char *id, size_t idlen)
{
	struct admin_target t;
	int rc;

	*conn = NULL;
	if (help(argc, argv, topic))
		return -1;
	if ((rc = one_target(argc, argv, topic, &t)))
		return rc;
	if (!(*conn = admin_connect()))
		return ADMIN_FAILED;
	rc = admin_target_resolve(*conn, &t, false, id, idlen);
	if (rc) {
		PQfinish(*conn);
		*conn = NULL;
	}
	return rc;
}

static int show(int argc, char **argv)
{
	PGresult *res = NULL;
	PGconn *conn;
	char id[32];
	int rc;

	rc = open_target(argc, argv, "community show", &conn, id, sizeof(id));
	if (rc)
		return rc < 0 ? ADMIN_OK : rc;
	rc = ADMIN_FAILED;
	res = admin_exec(conn, "SELECT id, name, cursor_epoch, created_at"
			 " FROM communities WHERE id = $1", 1,
			 (const char *const[]){id});
	if (!res || PQntuples(res) != 1)
		goto out;
	printf("id: %s\nname: %s\ncursor epoch: %s\ncreated: %s\n",
	       PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
	       PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3));
	if (print_rows(conn, "host", "SELECT host FROM community_hosts"
		       " WHERE community_id = $1 ORDER BY host", id) ||
	    print_rows(conn, "admin", "SELECT pubkey FROM community_admins"
		       " WHERE community_id = $1 ORDER BY pubkey", id))
		goto out;
	rc = ADMIN_OK;
out:
	PQclear(res);
	PQfinish(conn);
	return rc;
}

static int reset_cursors(int argc, char **argv)
{
	PGresult *res;
	PGconn *conn;
	char id[32];
	int rc;

	rc = open_target(argc, argv, "community reset-cursors", &conn, id,
			 sizeof(id));
	if (rc)
		return rc < 0 ? ADMIN_OK : rc;
	res = admin_exec(conn, "UPDATE communities SET cursor_epoch = cursor_epoch + 1"
			 " WHERE id = $1 RETURNING cursor_epoch", 1,
			 (const char *const[]){id});
	rc = res && PQntuples(res) == 1 ? ADMIN_OK : ADMIN_FAILED;
	if (rc == ADMIN_OK)
		printf("cursor epoch is now %s\n", PQgetvalue(res, 0, 0));
	PQclear(res);
	PQfinish(conn);
	return rc;
}

int admin_community(int argc, char **argv)
{
	const char *sub = argc >= 2 ? argv[1] : NULL;

	if (!sub)
		return admin_usage_error("community", "a community subcommand is required");
	if (admin_is_help(sub)) {
		admin_usage(stdout, "community");
		return ADMIN_OK;
	}
	if (!strcmp(sub, "create"))
		return create(argc - 1, argv + 1);
	if (!strcmp(sub, "list"))
		return list(argc - 1, argv + 1);
	if (!strcmp(sub, "show"))
		return show(argc - 1, argv + 1);
	if (!strcmp(sub, "reset-cursors"))
		return reset_cursors(argc - 1, argv + 1);
	if (!strcmp(sub, "add-host") || !strcmp(sub, "remove-host") ||
	    !strcmp(sub, "add-admin") || !strcmp(sub, "remove-admin"))
		return admin_community_edit(argc - 1, argv + 1);
	return admin_usage_error("community", "unknown community subcommand '%s'",
				 sub);
}
