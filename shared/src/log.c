/*
 * Logging to stderr: each message becomes one line
 * `2026-11-30T01:02:03.456Z comb-relay info: message` (UTC, milliseconds),
 * written whole under a mutex so that lines from different threads never
 * interleave. Control characters in a message (which may quote client input) are replaced so
 * that one message always stays one line.
 */
#include "comb/log.h"

#include "comb/error.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The longest line written; longer messages are cut. */
#define LOG_LINE_MAX 4096

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *log_program = "comb";
static atomic_int log_min_level = COMB_LOG_INFO;

static const char *const level_names[] = {
    [COMB_LOG_DEBUG] = "debug",
    [COMB_LOG_INFO] = "info",
    [COMB_LOG_WARN] = "warn",
    [COMB_LOG_ERROR] = "error",
};

void comb_log_init(const char *program, enum comb_log_level min_level)
{
	pthread_mutex_lock(&log_lock);
	log_program = program != NULL ? program : "comb";
	pthread_mutex_unlock(&log_lock);
	atomic_store(&log_min_level, (int)min_level);
}

int comb_log_level_parse(const char *name, enum comb_log_level *out)
{
	size_t i;

	if (name == NULL)
		return COMB_EINVAL;
	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum comb_log_level)i;
			return 0;
		}
	}
	return COMB_EINVAL;
}

/* Formats and writes one line; the caller has already filtered the level. */
static void log_write(enum comb_log_level level, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	char stamp[40];
	struct timespec now = {0};
	struct tm tm;
	size_t head, len, i, sec;
	int n;

	clock_gettime(CLOCK_REALTIME, &now);
	if (gmtime_r(&now.tv_sec, &tm) == NULL ||
	    (sec = strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm)) == 0)
		sec = (size_t)snprintf(stamp, sizeof(stamp), "1970-01-01T00:00:00");
	snprintf(stamp + sec, sizeof(stamp) - sec, ".%03ldZ",
		 now.tv_nsec / 1000000L);

	pthread_mutex_lock(&log_lock);
	n = snprintf(line, sizeof(line), "%s %s %s: ", stamp, log_program,
		     level_names[level]);
	if (n < 0)
		head = 0;
	else if ((size_t)n >= sizeof(line))
		head = sizeof(line) - 1;
	else
		head = (size_t)n;
	line[head] = '\0';
	n = vsnprintf(line + head, sizeof(line) - head, fmt, ap);
	if (n < 0)
		line[head] = '\0';
	len = strlen(line);
	for (i = head; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if (c < 0x20 || c == 0x7f)
			line[i] = '?';
	}
	if (len >= sizeof(line) - 1)
		len = sizeof(line) - 2;
	line[len] = '\n';
	fwrite(line, 1, len + 1, stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}

void comb_log(enum comb_log_level level, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	if ((int)level < atomic_load(&log_min_level) || (int)level < 0 ||
	    level > COMB_LOG_ERROR) {
		errno = saved;
		return;
	}
	va_start(ap, fmt);
	log_write(level, fmt, ap);
	va_end(ap);
	errno = saved;
}

void comb__bug(const char *file, int line, const char *fmt, ...)
{
	char msg[LOG_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
		msg[0] = '\0';
	va_end(ap);
	comb_log(COMB_LOG_ERROR, "bug at %s:%d: %s", file, line, msg);
	abort();
}
