/* Structured logging: one line per event, key=value text or JSON.
 *
 * Values whose key names a secret (token, password, secret, authorization,
 * client-key, key-data, bearer, cookie) are always written as "<redacted>".
 * The logger is one of the two allowed pieces of global state; it is safe to
 * call from any thread (a line is written with one locked fwrite). */
#ifndef PRD_OPS_LOG_H
#define PRD_OPS_LOG_H

#include <stdbool.h>
#include <stdio.h>

enum prd_log_level {
	PRD_LOG_ERROR = 0,
	PRD_LOG_WARN = 1,
	PRD_LOG_INFO = 2,
	PRD_LOG_DEBUG = 3,
	PRD_LOG_TRACE = 4
};

enum prd_log_format {
	PRD_LOG_TEXT = 0,
	PRD_LOG_JSON = 1
};

/* Configure level, format and destination (NULL = stderr). */
void log_setup(int level, int format, FILE *out);
int log_level(void);
bool log_enabled(int level);
/* Parse "text"/"json" and "error|warn|info|debug|trace" or a number 0-4. */
int log_parse_format(const char *s, int *out);
int log_parse_level(const char *s, int *out);
/* Use a fixed timestamp source for tests (NULL restores the real clock). */
void log_set_time_fn(long long (*now_ns)(void));
/* Stamp lines with this clock's wall time (`provreqd simulate` passes its
 * simulated clock); NULL restores the real clock. Borrowed: clear it with
 * log_set_clock(NULL) before the clock goes away. Takes precedence over
 * log_set_time_fn. */
struct clk;
void log_set_clock(const struct clk *c);

/* Log `msg` with key/value string pairs, terminated by NULL. A NULL value
 * prints as "<nil>". Values made with LOGI() are JSON numbers in JSON
 * lines; every other value is a JSON string. */
void log_kv(int level, const char *msg, ...);

/* Format integers for a key/value list without a named buffer. The text
 * carries a leading LOG__NUM byte so log_kv writes it as a JSON number
 * (and drops the byte in text lines); pass it only to log_* calls. */
#define LOG__NUM '\x1f'
const char *log__int(char *buf, long long v);
#define LOGI(v) log__int((char[24]){0}, (long long)(v))

#define log_error(...) log_kv(PRD_LOG_ERROR, __VA_ARGS__, (const char *)NULL)
#define log_warn(...) log_kv(PRD_LOG_WARN, __VA_ARGS__, (const char *)NULL)
#define log_info(...) log_kv(PRD_LOG_INFO, __VA_ARGS__, (const char *)NULL)
#define log_debug(...) log_kv(PRD_LOG_DEBUG, __VA_ARGS__, (const char *)NULL)
#define log_trace(...) log_kv(PRD_LOG_TRACE, __VA_ARGS__, (const char *)NULL)

#endif
