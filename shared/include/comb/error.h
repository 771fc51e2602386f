/*
 * Error codes shared by every comb function: 0 is success, a negative
 * COMB_E* value is a failure. Detail meant for people goes into a
 * caller-provided buffer, never into the return value.
 */
#ifndef COMB_ERROR_H
#define COMB_ERROR_H

#include <stddef.h>

enum comb_error {
	COMB_OK = 0,
	COMB_EINVAL = -1,     /* malformed input from a client */
	COMB_ENOMEM = -2,     /* allocation failed */
	COMB_ETOOBIG = -3,    /* input over a size limit */
	COMB_EAUTH = -4,      /* authentication failed */
	COMB_EDENIED = -5,    /* authenticated but not allowed */
	COMB_ECONFLICT = -6,  /* lost a race or named a stale revision */
	COMB_EUNAVAIL = -7,   /* a dependency (database, Redis) is unavailable */
	COMB_ENOTFOUND = -8,  /* no such thing */
	COMB_EREPLAY = -9,    /* a single-use token was used before */
	COMB_ETIMEOUT = -10,  /* ran past its budget */
	COMB_EPLUGIN = -11,   /* a policy plugin was refused or failed */
	COMB_EIO = -12,       /* an operating-system call failed */
};

/* Returns a static lowercase description of err (never NULL). */
const char *comb_strerror(int err);

/*
 * Formats a message into errbuf (errlen bytes, always NUL-terminated when
 * errlen > 0) and returns err, so that callers can write
 * `return comb_fail(errbuf, errlen, COMB_EINVAL, "bad tag %d", i);`.
 * errbuf may be NULL.
 */
int comb_fail(char *errbuf, size_t errlen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
