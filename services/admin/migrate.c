/*
 * comb-admin migrate: applies the numbered, forward-only SQL files of the
 * migrations folder in order, each in its own transaction together with
 * its row in the comb_migrations ledger. A file whose first line is
 * NO_TRANSACTION runs outside a transaction instead (CREATE INDEX
 * CONCURRENTLY, data moved in batches that commit on their own): its
 * parts between STEP lines are sent one at a time, and its ledger row
 * only after the last; such a file must be safe to run again from its
 * start after a failure. Re-running applies nothing. A
 * ledger that disagrees with the files (a changed, renamed or unknown
 * migration) is refused before anything is applied. `--status` lists
 * what is applied and what is pending, changing nothing.
 */
#include <dirent.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "comb/buf.h"
#include "comb/hex.h"

#define MAX_MIGRATIONS 1000
#define MAX_MIGRATION_BYTES (4 * 1024 * 1024)

struct migration {
	int version;
	char name[128];
	char sha256[65];
	char *sql;
};

static int parse_file_name(const char *file, int *version, char *name,
			   size_t namelen)
{
	size_t len = strlen(file), i;

	if (len < 10 || len - 4 >= namelen || strcmp(file + len - 4, ".sql"))
		return -1;
	for (i = 0; i < 4; i++)
		if (file[i] < '0' || file[i] > '9')
			return -1;
	if (file[4] != '_')
		return -1;
	for (i = 5; i < len - 4; i++)
		if (!((file[i] >= 'a' && file[i] <= 'z') ||
		      (file[i] >= '0' && file[i] <= '9') || file[i] == '_'))
			return -1;
	*version = (file[0] - '0') * 1000 + (file[1] - '0') * 100 +
		   (file[2] - '0') * 10 + (file[3] - '0');
	memcpy(name, file, len - 4);
	name[len - 4] = '\0';
	return 0;
}

static char *read_file(const char *path)
{
	struct comb_buf b;
	char chunk[8192];
	size_t n;
	FILE *f = fopen(path, "rb");

	if (!f)
		return NULL;
	comb_buf_init(&b, MAX_MIGRATION_BYTES);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (comb_buf_append(&b, chunk, n)) {
			comb_buf_release(&b);
			fclose(f);
			return NULL;
		}
	}
	fclose(f);
	return comb_buf_detach(&b, NULL);
}

static int by_version(const void *a, const void *b)
{
	return ((const struct migration *)a)->version -
	       ((const struct migration *)b)->version;
}

/* Loads every migration file of dir, sorted; returns the count or -1. */
static int load_migrations(const char *dir, struct migration *out)
{
	DIR *d = opendir(dir);
	struct dirent *ent;
	int n = 0, i;

	if (!d) {
		fprintf(stderr, "comb-admin: cannot open migrations folder %s\n", dir);
		return -1;
	}
	while ((ent = readdir(d))) {
		struct migration *m = &out[n];
		unsigned char digest[SHA256_DIGEST_LENGTH];
		char path[4096];

		if (ent->d_name[0] == '.')
			continue;
		if (parse_file_name(ent->d_name, &m->version, m->name,
				    sizeof(m->name))) {
			fprintf(stderr, "comb-admin: %s/%s is not a migration (NNNN_name.sql)\n",
				dir, ent->d_name);
			n = -1;
			break;
		}
		if (n == MAX_MIGRATIONS) {
			fprintf(stderr, "comb-admin: too many migrations\n");
			n = -1;
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
		m->sql = read_file(path);
		if (!m->sql) {
			fprintf(stderr, "comb-admin: cannot read %s\n", path);
			n = -1;
			break;
		}
		SHA256((const unsigned char *)m->sql, strlen(m->sql), digest);
		comb_hex_encode(digest, sizeof(digest), m->sha256);
		n++;
	}
	closedir(d);
	if (n < 0)
		return -1;
	qsort(out, (size_t)n, sizeof(*out), by_version);
	for (i = 1; i < n; i++) {
		if (out[i].version == out[i - 1].version) {
			fprintf(stderr, "comb-admin: two migrations numbered %04d\n",
				out[i].version);
			return -1;
		}
	}
	return n;
}

static int exec_ok(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK ||
		 PQresultStatus(res) == PGRES_TUPLES_OK;

	if (!ok)
		fprintf(stderr, "comb-admin: %s", PQresultErrorMessage(res));
	PQclear(res);
	return ok ? 0 : -1;
}

/* Compares the ledger with the files; returns -1 when they disagree. */
static int check_ledger(PGresult *ledger, const struct migration *m, int n)
{
	int row, i;

	for (row = 0; row < PQntuples(ledger); row++) {
		int version = (int)strtol(PQgetvalue(ledger, row, 0), NULL, 10);
		const char *name = PQgetvalue(ledger, row, 1);
		const char *sha = PQgetvalue(ledger, row, 2);

		for (i = 0; i < n && m[i].version != version; i++)
			;
		if (i == n) {
			fprintf(stderr, "comb-admin: the database has migration %04d (%s), which is not among the files; refusing to continue\n",
				version, name);
			return -1;
		}
		if (strcmp(m[i].name, name) || strcmp(m[i].sha256, sha)) {
			fprintf(stderr, "comb-admin: migration %04d was applied as %s (sha256 %s) but the file is now %s (sha256 %s); migrations are forward-only: add a new one instead of editing\n",
				version, name, sha, m[i].name, m[i].sha256);
			return -1;
		}
	}
	return 0;
}

static bool in_ledger(PGresult *ledger, int version)
{
	int row;

	for (row = 0; row < PQntuples(ledger); row++)
		if ((int)strtol(PQgetvalue(ledger, row, 0), NULL, 10) == version)
			return true;
	return false;
}

/* The first line of a migration that runs outside a transaction, and the
 * line between two of its parts. */
#define NO_TRANSACTION "-- comb:no-transaction\n"
#define STEP "\n-- comb:step\n"

/* Runs the parts of a NO_TRANSACTION migration one by one, each in
 * autocommit; -1 after saying which part failed. */
static int apply_steps(PGconn *conn, const struct migration *m)
{
	char *sql = m->sql, *next;
	int step = 1;

	for (;; step++) {
		next = strstr(sql, STEP);
		if (next)
			*next = '\0';
		if (exec_ok(conn, sql)) {
			fprintf(stderr, "comb-admin: step %d of %s failed; the steps before it"
				" stay applied and the migration runs again from its start next time\n",
				step, m->name);
			return -1;
		}
		if (!next)
			return 0;
		*next = '\n';
		sql = next + strlen(STEP);
	}
}

/* Applies migration m and records it in the ledger; 0, or -1 after
 * saying what failed and what stays applied. */
static int apply(PGconn *conn, const struct migration *m)
{
	char version[16];
	const char *params[3] = {version, m->name, m->sha256};
	PGresult *res;
	bool steps;

	snprintf(version, sizeof(version), "%d", m->version);
	steps = !strncmp(m->sql, NO_TRANSACTION, strlen(NO_TRANSACTION));
	if (steps && apply_steps(conn, m))
		return -1;
	/* The ledger row in a transaction of its own after the steps, or in
	 * the migration's. */
	if (exec_ok(conn, "BEGIN") || (!steps && exec_ok(conn, m->sql)))
		goto fail;
	res = PQexecParams(conn,
			   "INSERT INTO comb_migrations (version, name, sha256) VALUES ($1, $2, $3)",
			   3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr, "comb-admin: %s", PQresultErrorMessage(res));
		PQclear(res);
		goto fail;
	}
	PQclear(res);
	if (exec_ok(conn, "COMMIT"))
		goto fail;
	printf("applied %s\n", m->name);
	return 0;
fail:
	PQclear(PQexec(conn, "ROLLBACK"));
	fprintf(stderr, steps ? "comb-admin: migration %s was not recorded; it runs again"
			" from its start next time\n"
			: "comb-admin: migration %s failed; nothing of it was applied\n",
		m->name);
	return -1;
}

/* Prints each migration file as applied (with when) or pending. */
static void print_status(PGresult *ledger, const struct migration *m, int n)
{
	int i, row, applied = 0;

	for (i = 0; i < n; i++) {
		for (row = 0; ledger && row < PQntuples(ledger); row++)
			if ((int)strtol(PQgetvalue(ledger, row, 0), NULL, 10) ==
			    m[i].version)
				break;
		if (ledger && row < PQntuples(ledger)) {
			printf("%s\tapplied\t%s\n", m[i].name,
			       PQgetvalue(ledger, row, 3));
			applied++;
		} else {
			printf("%s\tpending\n", m[i].name);
		}
	}
	printf("migrations: %d applied, %d pending\n", applied, n - applied);
}

/* The ledger's rows (version, name, sha256, applied_at), or NULL after
 * saying why. A database never migrated has an empty ledger when create
 * is set (the table is made), else *absent is set. */
static PGresult *read_ledger(PGconn *conn, bool create, bool *absent)
{
	PGresult *res;

	*absent = false;
	if (create) {
		if (exec_ok(conn, "CREATE TABLE IF NOT EXISTS comb_migrations ("
				  " version integer PRIMARY KEY, name text NOT NULL,"
				  " sha256 text NOT NULL,"
				  " applied_at timestamptz NOT NULL DEFAULT now())"))
			return NULL;
	} else {
		res = PQexec(conn, "SELECT to_regclass('comb_migrations') IS NULL");
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			fprintf(stderr, "comb-admin: %s", PQresultErrorMessage(res));
			PQclear(res);
			return NULL;
		}
		*absent = PQgetvalue(res, 0, 0)[0] == 't';
		PQclear(res);
		if (*absent)
			return NULL;
	}
	res = PQexec(conn, "SELECT version, name, sha256, applied_at"
			   " FROM comb_migrations ORDER BY version");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fprintf(stderr, "comb-admin: %s", PQresultErrorMessage(res));
		PQclear(res);
		return NULL;
	}
	return res;
}

int admin_migrate(int argc, char **argv)
{
	const char *dir = getenv("COMB_MIGRATIONS_DIR");
	struct migration *m = NULL;
	PGresult *ledger = NULL;
	PGconn *conn = NULL;
	int n = 0, i, applied = 0, rc = ADMIN_FAILED;
	bool status = false, absent;

	if (!dir || !*dir)
		dir = COMB_MIGRATIONS_DIR;
	for (i = 1; i < argc; i++) {
		if (admin_is_help(argv[i]) && argc == 2) {
			admin_usage(stdout, "migrate");
			return ADMIN_OK;
		} else if (!strcmp(argv[i], "--status")) {
			status = true;
		} else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			dir = argv[++i];
		} else {
			return admin_usage_error("migrate", "unexpected '%s'", argv[i]);
		}
	}
	m = calloc(MAX_MIGRATIONS, sizeof(*m));
	if (!m || (n = load_migrations(dir, m)) < 0)
		goto out;
	if (!(conn = admin_connect()))
		goto out;
	if (status) {
		ledger = read_ledger(conn, false, &absent);
		if (!ledger && !absent)
			goto out;
		if (ledger && check_ledger(ledger, m, n))
			goto out;
		print_status(ledger, m, n);
		rc = ADMIN_OK;
		goto out;
	}
	/* One migrator at a time, across every machine. */
	if (exec_ok(conn, "SELECT pg_advisory_lock(7447001)"))
		goto out;
	ledger = read_ledger(conn, true, &absent);
	if (!ledger || check_ledger(ledger, m, n))
		goto out;
	for (i = 0; i < n; i++) {
		if (in_ledger(ledger, m[i].version))
			continue;
		if (apply(conn, &m[i]))
			goto out;
		applied++;
	}
	printf("migrations: %d applied, %d already in place\n", applied, n - applied);
	rc = ADMIN_OK;
out:
	PQclear(ledger);
	PQfinish(conn);
	for (i = 0; m && i < n; i++)
		free(m[i].sql);
	free(m);
	return rc;
}
