/* The subcommands of comb-admin; each returns the process exit status. */
#ifndef COMB_ADMIN_H
#define COMB_ADMIN_H

#include <libpq-fe.h>

/* Opens a connection from COMB_DATABASE_URL, or prints why not. */
PGconn *admin_connect(void);

int admin_migrate(int argc, char **argv);
int admin_community(int argc, char **argv);
int admin_key(int argc, char **argv);

#endif
