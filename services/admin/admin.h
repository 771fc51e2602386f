/*
 * comb-admin's internals, shared by its files. Layers, calls going down
 * only: main.c dispatches to the subcommands (migrate.c, community.c,
 * community_edit.c, key.c), which use the helpers of connect.c (the
 * database), target.c (the community a command names) and usage.c (help
 * and usage errors).
 *
 * Exit statuses: 0 success, 1 a failure (the database refused or is
 * unreachable, a file is missing), 2 a usage error (unknown subcommand,
 * missing or malformed argument). `--help` after any subcommand prints
 * its usage on stdout and exits 0.
 */
#ifndef COMB_ADMIN_H
#define COMB_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

/* Exit statuses. */
#define ADMIN_OK 0
#define ADMIN_FAILED 1
#define ADMIN_USAGE 2

/* The longest host name (DNS). */
#define ADMIN_HOST_MAX 253

/* usage.c */

/* True when arg asks for help: --help, -h or help. */
bool admin_is_help(const char *arg);
/* Prints the usage lines of topic (a subcommand such as "community" or
 * "community create"; "" for every line) to f. */
void admin_usage(FILE *f, const char *topic);
/* Says what is wrong (printf format) and the usage of topic on stderr;
 * returns ADMIN_USAGE. */
int admin_usage_error(const char *topic, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* connect.c */

/* Opens a connection from COMB_DATABASE_URL, or prints why not and
 * returns NULL. The caller closes it with PQfinish. */
PGconn *admin_connect(void);
/* Runs sql with text params. Returns the result (the caller clears it)
 * when it succeeded, else NULL after printing the server's message. */
PGresult *admin_exec(PGconn *conn, const char *sql, int nparams,
		     const char *const *params);
/* Lowercases host into out (outlen bytes); returns 0, or -1 when it is
 * not a host name (letters, digits, dots and dashes, at most
 * ADMIN_HOST_MAX). */
int admin_normalize_host(const char *in, char *out, size_t outlen);

/* Subcommands: argv[0] is the subcommand's name; each returns the exit
 * status. */
int admin_migrate(int argc, char **argv);
int admin_community(int argc, char **argv);
int admin_key(int argc, char **argv);

/* community_edit.c: add-host, remove-host, add-admin, remove-admin
 * (argv[0] names which). */
int admin_community_edit(int argc, char **argv);

/* target.c: the community named on the command line. */
struct admin_target {
	const char *id;   /* --id N, or NULL */
	char host[ADMIN_HOST_MAX + 1]; /* --host H, or "" */
};

/*
 * Reads --id N or --host H (exactly one) from argv[*i], moving *i past
 * it. Returns 1 when argv[*i] was one of them, 0 when it was something
 * else, or ADMIN_USAGE (after printing why for topic) when the value is
 * missing or malformed.
 */
int admin_target_arg(struct admin_target *t, int argc, char **argv, int *i,
		     const char *topic);
/*
 * Finds the community t names, writing its id as text to id. With lock
 * set (in a transaction) the community's row is locked until it ends.
 * Returns ADMIN_OK, or ADMIN_FAILED after saying why.
 */
int admin_target_resolve(PGconn *conn, const struct admin_target *t,
			 bool lock, char *id, size_t idlen);

#endif
