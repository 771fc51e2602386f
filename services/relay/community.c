/* Tenancy: the community bound to a request's Host header, and its admins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "relay.h"

int community_lookup(PGconn *db, const char *host, struct community *out)
{
	const char *params[1] = {host};
	PGresult *res;
	int rc = 0;

	res = PQexecParams(db,
			   "SELECT c.id, c.cursor_epoch FROM community_hosts h"
			   " JOIN communities c ON c.id = h.community_id WHERE h.host = $1",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = COMB_EUNAVAIL;
	else if (PQntuples(res) == 0)
		rc = COMB_ENOTFOUND;
	else {
		out->id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		snprintf(out->id_text, sizeof(out->id_text), "%lld",
			 (long long)out->id);
		out->cursor_epoch = (int)strtol(PQgetvalue(res, 0, 1), NULL, 10);
	}
	PQclear(res);
	return rc;
}

bool community_is_admin(PGconn *db, const struct community *c,
			const char *pubkey, bool *failed)
{
	const char *params[2] = {c->id_text, pubkey};
	PGresult *res;
	bool admin;

	res = PQexecParams(db,
			   "SELECT 1 FROM community_admins WHERE community_id = $1 AND pubkey = $2",
			   2, NULL, params, NULL, NULL, 0);
	*failed = PQresultStatus(res) != PGRES_TUPLES_OK;
	admin = !*failed && PQntuples(res) == 1;
	PQclear(res);
	return admin;
}
