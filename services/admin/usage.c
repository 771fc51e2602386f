/*
 * comb-admin's usage lines, one per command form, and the two ways they
 * are shown: asked for (`--help`, on stdout, exit 0) and after a usage
 * error (on stderr, exit 2).
 */
#include <stdarg.h>
#include <string.h>

#include "admin.h"

struct usage_line {
	const char *topic;
	const char *text;
};

static const struct usage_line lines[] = {
	{"migrate", "migrate [--dir DIR]"},
	{"migrate", "migrate --status [--dir DIR]"},
	{"community list", "community list"},
	{"community show", "community show (--id N | --host H)"},
	{"community create", "community create --host H [--host H2 ...] --owner PUBKEY [--owner PUBKEY2 ...] [--name N]"},
	{"community add-host", "community add-host (--id N | --host H) NEW_HOST"},
	{"community remove-host", "community remove-host (--id N | --host H) HOST"},
	{"community add-admin", "community add-admin (--id N | --host H) PUBKEY"},
	{"community remove-admin", "community remove-admin (--id N | --host H) PUBKEY"},
	{"community reset-cursors", "community reset-cursors (--id N | --host H)"},
	{"key generate", "key generate"},
	{"config-table", "config-table"},
	{"version", "version"},
};

bool admin_is_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h") ||
	       !strcmp(arg, "help");
}

/* Does line's topic fall under topic ("community" covers
 * "community create")? */
static bool under(const char *line, const char *topic)
{
	size_t n = strlen(topic);

	return n == 0 || (strncmp(line, topic, n) == 0 &&
			  (line[n] == '\0' || line[n] == ' '));
}

void admin_usage(FILE *f, const char *topic)
{
	const char *lead = "usage:";
	size_t i;

	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		if (!under(lines[i].topic, topic))
			continue;
		fprintf(f, "%-6s comb-admin %s\n", lead, lines[i].text);
		lead = "";
	}
	if (!*topic)
		fprintf(f, "\nevery subcommand takes --help; the database is "
			"COMB_DATABASE_URL\n");
}

int admin_usage_error(const char *topic, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "comb-admin: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	admin_usage(stderr, topic);
	return ADMIN_USAGE;
}
