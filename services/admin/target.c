/*
 * The community a comb-admin command acts on, named on its command line
 * (--id N or --host H), for community.c and community_edit.c (admin.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"

int admin_target_arg(struct admin_target *t, int argc, char **argv, int *i,
		     const char *topic)
{
	const char *opt = argv[*i];

	if (strcmp(opt, "--id") && strcmp(opt, "--host"))
		return 0;
	if (t->id || t->host[0])
		return admin_usage_error(topic, "give one of --id and --host");
	if (*i + 1 >= argc)
		return admin_usage_error(topic, "%s needs a value", opt);
	(*i)++;
	if (!strcmp(opt, "--id")) {
		char *end;
		long long v;

		errno = 0;
		v = strtoll(argv[*i], &end, 10);
		if (errno || *end || end == argv[*i] || v <= 0)
			return admin_usage_error(topic, "bad community id '%s'",
						 argv[*i]);
		t->id = argv[*i];
	} else if (admin_normalize_host(argv[*i], t->host, sizeof(t->host))) {
		return admin_usage_error(topic, "bad host '%s'", argv[*i]);
	}
	return 1;
}

int admin_target_resolve(PGconn *conn, const struct admin_target *t,
			 bool lock, char *id, size_t idlen)
{
	const char *param = t->id ? t->id : t->host;
	PGresult *res;
	int rc = ADMIN_FAILED;

	res = admin_exec(conn, t->id ?
			 (lock ? "SELECT id FROM communities WHERE id = $1::bigint FOR UPDATE" :
				 "SELECT id FROM communities WHERE id = $1::bigint") :
			 (lock ? "SELECT c.id FROM communities c JOIN community_hosts h"
				 " ON h.community_id = c.id WHERE h.host = $1 FOR UPDATE OF c" :
				 "SELECT community_id FROM community_hosts WHERE host = $1"),
			 1, &param);
	if (!res)
		return ADMIN_FAILED;
	if (PQntuples(res) != 1) {
		if (t->id)
			fprintf(stderr, "comb-admin: no community has id %s\n", t->id);
		else
			fprintf(stderr, "comb-admin: no community is bound to %s\n",
				t->host);
		goto out;
	}
	snprintf(id, idlen, "%s", PQgetvalue(res, 0, 0));
	rc = ADMIN_OK;
out:
	PQclear(res);
	return rc;
}
