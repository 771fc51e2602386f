/*
 * comb-slow-resolve: a test library, loaded into a relay with LD_PRELOAD,
 * that makes one host name resolve slowly, as the name of a capture
 * container that died can (tests/e2e/feed_endpoints.test.mjs).
 *
 * Every getaddrinfo of the host SLOW_RESOLVE_HOST waits
 * SLOW_RESOLVE_MS milliseconds, appends one line to the file
 * SLOW_RESOLVE_LOG (when set), so that a test can see the slow lookups
 * happened, and fails with EAI_AGAIN. Every other lookup goes to the next
 * getaddrinfo (the C library's) unchanged.
 */
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*getaddrinfo_fn)(const char *, const char *,
			      const struct addrinfo *, struct addrinfo **);

/* Waits ms milliseconds, whatever signals interrupt the wait. */
static void wait_ms(long ms)
{
	struct timespec left = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&left, &left) != 0)
		;
}

/* Appends one line to SLOW_RESOLVE_LOG, when it is set. */
static void note_lookup(const char *node)
{
	const char *path = getenv("SLOW_RESOLVE_LOG");
	FILE *f = path ? fopen(path, "a") : NULL;

	if (!f)
		return;
	fprintf(f, "slow lookup of %s\n", node);
	fclose(f);
}

int getaddrinfo(const char *node, const char *service,
		const struct addrinfo *hints, struct addrinfo **res)
{
	const char *slow = getenv("SLOW_RESOLVE_HOST");
	const char *ms = getenv("SLOW_RESOLVE_MS");
	getaddrinfo_fn next;

	if (node && slow && strcmp(node, slow) == 0) {
		wait_ms(ms ? atol(ms) : 1000);
		note_lookup(node);
		return EAI_AGAIN;
	}
	next = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
	if (!next)
		return EAI_SYSTEM;
	return next(node, service, hints, res);
}
