/*
 * Logging: one line per message on stderr, prefixed with a UTC timestamp,
 * the level and the program name. Thread-safe. Messages are lowercase with
 * no trailing period, subject first.
 */
#ifndef COMB_LOG_H
#define COMB_LOG_H

enum comb_log_level {
	COMB_LOG_DEBUG = 0,
	COMB_LOG_INFO = 1,
	COMB_LOG_WARN = 2,
	COMB_LOG_ERROR = 3,
};

/* Sets the program name shown in each line (borrowed; must outlive logging)
 * and the lowest level written. */
void comb_log_init(const char *program, enum comb_log_level min_level);

/* Parses "debug", "info", "warn" or "error"; returns COMB_EINVAL otherwise. */
int comb_log_level_parse(const char *name, enum comb_log_level *out);

void comb_log(enum comb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define comb_debug(...) comb_log(COMB_LOG_DEBUG, __VA_ARGS__)
#define comb_info(...) comb_log(COMB_LOG_INFO, __VA_ARGS__)
#define comb_warn(...) comb_log(COMB_LOG_WARN, __VA_ARGS__)
#define comb_error(...) comb_log(COMB_LOG_ERROR, __VA_ARGS__)

/* Reports a programmer error (never bad input) and aborts. */
#define COMB_BUG(...) comb__bug(__FILE__, __LINE__, __VA_ARGS__)
void comb__bug(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

#endif
