/*
 * comb-admin: the operator's command line. Subcommands: migrate,
 * community create, community reset-cursors, key generate, config-table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "comb/config.h"
#include "comb/log.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: comb-admin migrate [--dir DIR]\n"
		"       comb-admin community create --host H [--host H2 ...] --owner PUBKEY [--name N]\n"
		"       comb-admin community reset-cursors --host H\n"
		"       comb-admin key generate\n"
		"       comb-admin config-table\n");
}

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

int main(int argc, char **argv)
{
	comb_log_init("comb-admin", COMB_LOG_INFO);
	if (argc < 2) {
		usage();
		return 2;
	}
	if (!strcmp(argv[1], "migrate"))
		return admin_migrate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "community"))
		return admin_community(argc - 1, argv + 1);
	if (!strcmp(argv[1], "key"))
		return admin_key(argc - 1, argv + 1);
	if (!strcmp(argv[1], "config-table")) {
		comb_config_print_markdown();
		return 0;
	}
	usage();
	return 2;
}
