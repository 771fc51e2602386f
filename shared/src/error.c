/*
 * Error codes: the static description of each COMB_E* value and the helper
 * that formats a human-readable reason into a caller-provided buffer while
 * returning the code, so failures read as one statement.
 */
#include "comb/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *comb_strerror(int err)
{
	switch (err) {
	case COMB_OK:
		return "success";
	case COMB_EINVAL:
		return "invalid input";
	case COMB_ENOMEM:
		return "out of memory";
	case COMB_ETOOBIG:
		return "input too large";
	case COMB_EAUTH:
		return "authentication failed";
	case COMB_EDENIED:
		return "permission denied";
	case COMB_ECONFLICT:
		return "conflict";
	case COMB_EUNAVAIL:
		return "service unavailable";
	case COMB_ENOTFOUND:
		return "not found";
	case COMB_EREPLAY:
		return "token already used";
	case COMB_ETIMEOUT:
		return "timed out";
	case COMB_EPLUGIN:
		return "policy plugin failed";
	case COMB_EIO:
		return "i/o error";
	default:
		return "unknown error";
	}
}

int comb_fail(char *errbuf, size_t errlen, int err, const char *fmt, ...)
{
	va_list ap;

	if (errbuf == NULL || errlen == 0)
		return err;
	errbuf[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(errbuf, errlen, fmt, ap);
	va_end(ap);
	return err;
}
