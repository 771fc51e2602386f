/*
 * comb-admin community add-host|remove-host|add-admin|remove-admin: change
 * the hosts a community answers on and its admins after creation. Each
 * change runs in one transaction holding the community's row, so a
 * community always keeps at least one host and one admin. Relays look the
 * host and the admins up on every request, so a change applies to the
 * next request (open WebSockets keep the community they were opened on).
 */
#include <string.h>

#include "admin.h"
#include "comb/hex.h"

enum edit { ADD_HOST, REMOVE_HOST, ADD_ADMIN, REMOVE_ADMIN };

struct edit_sql {
	const char *name;
	const char *count;  /* how many the community has now */
	const char *change; /* $1 community id, $2 value; returns a row when done */
};

static const struct edit_sql edits[] = {
	[ADD_HOST] = {"add-host", NULL,
		      "INSERT INTO community_hosts (host, community_id) VALUES ($2, $1)"
		      " ON CONFLICT DO NOTHING RETURNING host"},
	[REMOVE_HOST] = {"remove-host",
			 "SELECT count(*) FROM community_hosts WHERE community_id = $1",
			 "DELETE FROM community_hosts WHERE community_id = $1"
			 " AND host = $2 RETURNING host"},
	[ADD_ADMIN] = {"add-admin", NULL,
		       "INSERT INTO community_admins (community_id, pubkey)"
		       " VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING pubkey"},
	[REMOVE_ADMIN] = {"remove-admin",
			  "SELECT count(*) FROM community_admins WHERE community_id = $1",
			  "DELETE FROM community_admins WHERE community_id = $1"
			  " AND pubkey = $2 RETURNING pubkey"},
};

/* Why a change did nothing, for the operator. */
static void explain(PGconn *conn, enum edit e, const char *id,
		    const char *value)
{
	PGresult *res;

	switch (e) {
	case ADD_HOST:
		res = admin_exec(conn, "SELECT community_id FROM community_hosts"
				 " WHERE host = $1", 1, &value);
		if (res && PQntuples(res) == 1)
			fprintf(stderr, "comb-admin: host %s is already bound to community %s\n",
				value, PQgetvalue(res, 0, 0));
		PQclear(res);
		return;
	case REMOVE_HOST:
		fprintf(stderr, "comb-admin: community %s is not bound to %s\n",
			id, value);
		return;
	case ADD_ADMIN:
		fprintf(stderr, "comb-admin: %s is already an admin of community %s\n",
			value, id);
		return;
	case REMOVE_ADMIN:
		fprintf(stderr, "comb-admin: %s is not an admin of community %s\n",
			value, id);
		return;
	}
}

/* Runs edit e of value on the community t names, in one transaction. */
static int apply(enum edit e, const struct admin_target *t, const char *value)
{
	const struct edit_sql *q = &edits[e];
	PGresult *res = NULL;
	int rc = ADMIN_FAILED;
	PGconn *conn;
	char id[32];

	if (!(conn = admin_connect()))
		return ADMIN_FAILED;
	res = admin_exec(conn, "BEGIN", 0, NULL);
	if (!res)
		goto out;
	PQclear(res);
	res = NULL;
	if (admin_target_resolve(conn, t, true, id, sizeof(id)))
		goto out;
	res = admin_exec(conn, q->change, 2, (const char *const[]){id, value});
	if (!res)
		goto out;
	if (PQntuples(res) != 1) {
		explain(conn, e, id, value);
		goto out;
	}
	PQclear(res);
	res = NULL;
	if (q->count) {
		res = admin_exec(conn, q->count, 1, (const char *const[]){id});
		if (!res)
			goto out;
		if (strcmp(PQgetvalue(res, 0, 0), "0") == 0) {
			fprintf(stderr, "comb-admin: community %s keeps at least one %s; add another first\n",
				id, e == REMOVE_HOST ? "host" : "admin");
			goto out;
		}
		PQclear(res);
	}
	res = admin_exec(conn, "COMMIT", 0, NULL);
	if (!res)
		goto out;
	printf("community %s: %s %s\n", id, q->name, value);
	rc = ADMIN_OK;
out:
	PQclear(res);
	if (rc && PQtransactionStatus(conn) != PQTRANS_IDLE)
		PQclear(PQexec(conn, "ROLLBACK"));
	PQfinish(conn);
	return rc;
}

int admin_community_edit(int argc, char **argv)
{
	char topic[64], host[ADMIN_HOST_MAX + 1];
	struct admin_target t;
	const char *value = NULL;
	enum edit e;
	int i, rc;

	for (e = ADD_HOST; e < REMOVE_ADMIN && strcmp(argv[0], edits[e].name); e++)
		;
	snprintf(topic, sizeof(topic), "community %s", edits[e].name);
	if (argc == 2 && admin_is_help(argv[1])) {
		admin_usage(stdout, topic);
		return ADMIN_OK;
	}
	memset(&t, 0, sizeof(t));
	for (i = 1; i < argc; i++) {
		rc = admin_target_arg(&t, argc, argv, &i, topic);
		if (rc == 1)
			continue;
		if (rc)
			return rc;
		if (argv[i][0] == '-' || value)
			return admin_usage_error(topic, "unexpected '%s'", argv[i]);
		value = argv[i];
	}
	if (!t.id && !t.host[0])
		return admin_usage_error(topic, "give the community: --id N or --host H");
	if (!value)
		return admin_usage_error(topic, "give the %s to %s",
					 e <= REMOVE_HOST ? "host" : "public key",
					 e == ADD_HOST || e == ADD_ADMIN ? "add" : "remove");
	if (e <= REMOVE_HOST) {
		if (admin_normalize_host(value, host, sizeof(host)))
			return admin_usage_error(topic, "bad host '%s'", value);
		value = host;
	} else if (strlen(value) != 64 || !comb_hex_is_lower(value, 64)) {
		return admin_usage_error(topic, "a public key is 64 lowercase hex");
	}
	return apply(e, &t, value);
}
