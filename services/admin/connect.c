/*
 * comb-admin's database helpers: one connection from COMB_DATABASE_URL,
 * statements whose failures are printed for the operator, and the host
 * names communities are bound to.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"

PGconn *admin_connect(void)
{
	const char *url = getenv("COMB_DATABASE_URL");
	PGconn *conn;

	if (!url || !*url) {
		fprintf(stderr, "comb-admin: COMB_DATABASE_URL is not set\n");
		return NULL;
	}
	conn = PQconnectdb(url);
	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "comb-admin: cannot connect: %s",
			PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	PQclear(PQexec(conn, "SET client_min_messages = warning"));
	return conn;
}

PGresult *admin_exec(PGconn *conn, const char *sql, int nparams,
		     const char *const *params)
{
	PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL,
				     NULL, 0);
	ExecStatusType st = PQresultStatus(res);

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return res;
	fprintf(stderr, "comb-admin: %s", PQresultErrorMessage(res));
	PQclear(res);
	return NULL;
}

int admin_normalize_host(const char *in, char *out, size_t outlen)
{
	size_t i, len = strlen(in);

	if (len == 0 || len > ADMIN_HOST_MAX || len >= outlen)
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
