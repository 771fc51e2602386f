/*
 * comb-admin: the operator's command line. Subcommands: migrate,
 * community, key, config-table and version (usage.c lists their forms).
 */
#include <string.h>

#include "admin.h"
#include "comb/config.h"
#include "comb/log.h"

/* A subcommand without arguments of its own (version, config-table). */
static int plain(int argc, char **argv, void (*print)(void))
{
	if (argc == 2 && admin_is_help(argv[1])) {
		admin_usage(stdout, argv[0]);
		return ADMIN_OK;
	}
	if (argc != 1)
		return admin_usage_error(argv[0], "%s takes no arguments",
					 argv[0]);
	print();
	return ADMIN_OK;
}

static void print_version(void)
{
	printf("comb-admin %s\n", COMB_VERSION);
}

int main(int argc, char **argv)
{
	comb_log_init("comb-admin", COMB_LOG_INFO);
	if (argc < 2)
		return admin_usage_error("", "a subcommand is required");
	if (admin_is_help(argv[1])) {
		admin_usage(stdout, "");
		return ADMIN_OK;
	}
	if (!strcmp(argv[1], "migrate"))
		return admin_migrate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "community"))
		return admin_community(argc - 1, argv + 1);
	if (!strcmp(argv[1], "key"))
		return admin_key(argc - 1, argv + 1);
	if (!strcmp(argv[1], "config-table"))
		return plain(argc - 1, argv + 1, comb_config_print_markdown);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version"))
		return plain(argc - 1, argv + 1, print_version);
	return admin_usage_error("", "unknown subcommand '%s'", argv[1]);
}
