/*
 * comb-admin community: create a community bound to one or more hosts with
 * its admins, and bump a community's cursor epoch so that every
 * incremental-read cursor issued for it answers incremental_reset.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "comb/hex.h"

#define MAX_HOSTS 32
#define MAX_OWNERS 32
#define MAX_HOST_LEN 253

static int normalize_host(const char *in, char *out, size_t outlen)
{
	size_t i, len = strlen(in);

	if (len == 0 || len > MAX_HOST_LEN || len >= outlen)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (!isalnum(c) && c != '.' && c != '-')
			return -1;
		out[i] = (char)tolower(c);
	}
	out[len] = '\0';
	return 0;
}

static int run(PGconn *conn, const char *sql, int nparams,
	       const char *const *params, PGresult **out)
{
	PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL,
				     NULL, 0);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		if (code && !strcmp(code, "23505"))
			fprintf(stderr, "comb-admin: a host is already bound to a community; nothing was changed\n");
		else
			fprintf(stderr, "comb-admin: %s", PQresultErrorMessage(res));
		PQclear(res);
		return -1;
	}
	if (out)
		*out = res;
	else
		PQclear(res);
	return 0;
}

static int create(int argc, char **argv)
{
	static char hosts[MAX_HOSTS][MAX_HOST_LEN + 1];
	const char *owners[MAX_OWNERS];
	const char *name = NULL;
	int nhosts = 0, nowners = 0, i, rc = 1;
	PGresult *res = NULL;
	PGconn *conn = NULL;
	char id[32];

	for (i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			goto usage;
		if (!strcmp(argv[i], "--host")) {
			if (nhosts == MAX_HOSTS ||
			    normalize_host(argv[++i], hosts[nhosts], sizeof(hosts[0]))) {
				fprintf(stderr, "comb-admin: bad host '%s'\n", argv[i]);
				return 1;
			}
			nhosts++;
		} else if (!strcmp(argv[i], "--owner")) {
			if (nowners == MAX_OWNERS || !comb_hex_is_lower(argv[++i], 64) ||
			    strlen(argv[i]) != 64) {
				fprintf(stderr, "comb-admin: --owner takes a public key in 64 lowercase hex\n");
				return 1;
			}
			owners[nowners++] = argv[i];
		} else if (!strcmp(argv[i], "--name")) {
			name = argv[++i];
		} else {
			goto usage;
		}
	}
	if (nhosts == 0 || nowners == 0)
		goto usage;
	if (!name)
		name = hosts[0];
	if (!(conn = admin_connect()))
		return 1;
	if (run(conn, "BEGIN", 0, NULL, NULL))
		goto out;
	if (run(conn, "INSERT INTO communities (name) VALUES ($1) RETURNING id",
		1, (const char *const[]){name}, &res))
		goto rollback;
	snprintf(id, sizeof(id), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	for (i = 0; i < nhosts; i++)
		if (run(conn, "INSERT INTO community_hosts (host, community_id) VALUES ($1, $2)",
			2, (const char *const[]){hosts[i], id}, NULL))
			goto rollback;
	for (i = 0; i < nowners; i++)
		if (run(conn, "INSERT INTO community_admins (community_id, pubkey) VALUES ($1, $2) ON CONFLICT DO NOTHING",
			2, (const char *const[]){id, owners[i]}, NULL))
			goto rollback;
	if (run(conn, "COMMIT", 0, NULL, NULL))
		goto out;
	printf("%s\n", id);
	rc = 0;
	goto out;
rollback:
	PQclear(PQexec(conn, "ROLLBACK"));
out:
	PQfinish(conn);
	return rc;
usage:
	fprintf(stderr, "usage: comb-admin community create --host H [--host H2 ...] --owner PUBKEY [--name N]\n");
	return 2;
}

static int reset_cursors(int argc, char **argv)
{
	char host[MAX_HOST_LEN + 1];
	PGresult *res = NULL;
	PGconn *conn;
	int rc = 1;

	if (argc != 3 || strcmp(argv[1], "--host")) {
		fprintf(stderr, "usage: comb-admin community reset-cursors --host H\n");
		return 2;
	}
	if (normalize_host(argv[2], host, sizeof(host))) {
		fprintf(stderr, "comb-admin: bad host '%s'\n", argv[2]);
		return 1;
	}
	if (!(conn = admin_connect()))
		return 1;
	if (run(conn,
		"UPDATE communities SET cursor_epoch = cursor_epoch + 1"
		" WHERE id = (SELECT community_id FROM community_hosts WHERE host = $1)"
		" RETURNING cursor_epoch",
		1, (const char *const[]){host}, &res))
		goto out;
	if (PQntuples(res) != 1) {
		fprintf(stderr, "comb-admin: no community is bound to %s\n", host);
		goto out;
	}
	printf("cursor epoch is now %s\n", PQgetvalue(res, 0, 0));
	rc = 0;
out:
	PQclear(res);
	PQfinish(conn);
	return rc;
}

int admin_community(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "create"))
		return create(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "reset-cursors"))
		return reset_cursors(argc - 1, argv + 1);
	fprintf(stderr, "usage: comb-admin community create|reset-cursors ...\n");
	return 2;
}
