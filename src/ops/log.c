/* The process-wide structured logger: one line per event, key=value text or
 * JSON, secrets redacted, safe from any thread. */
#include "ops/log.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/rfc3339.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* The logger is process-wide by design (CONVENTIONS: the one allowed piece
 * of global mutable state besides metrics). The mutex keeps lines whole. */
static struct {
	int level;
	int format;
	FILE *out;
	long long (*now_ns)(void);
	const clk *clock;
	pthread_mutex_t mu;
} logger = { PRD_LOG_INFO, PRD_LOG_TEXT, NULL, NULL, NULL, PTHREAD_MUTEX_INITIALIZER };

static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };

void log_setup(int level, int format, FILE *out)
{
	pthread_mutex_lock(&logger.mu);
	logger.level = level < PRD_LOG_ERROR ? PRD_LOG_ERROR : level > PRD_LOG_TRACE ? PRD_LOG_TRACE : level;
	logger.format = format == PRD_LOG_JSON ? PRD_LOG_JSON : PRD_LOG_TEXT;
	logger.out = out;
	pthread_mutex_unlock(&logger.mu);
}

int log_level(void)
{
	return logger.level;
}

bool log_enabled(int level)
{
	return level <= logger.level;
}

void log_set_time_fn(long long (*now_ns)(void))
{
	logger.now_ns = now_ns;
}

void log_set_clock(const clk *c)
{
	pthread_mutex_lock(&logger.mu);
	logger.clock = c;
	pthread_mutex_unlock(&logger.mu);
}

int log_parse_format(const char *s, int *out)
{
	if(s && strcmp(s, "text") == 0)
		*out = PRD_LOG_TEXT;
	else if(s && strcmp(s, "json") == 0)
		*out = PRD_LOG_JSON;
	else
		return -2;
	return 0;
}

int log_parse_level(const char *s, int *out)
{
	int i;
	if(!s)
		return -2;
	for(i = 0; i <= PRD_LOG_TRACE; i++) {
		if(strcasecmp(s, level_names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	if(s[0] >= '0' && s[0] <= '9' && s[1] == '\0') {
		*out = s[0] - '0' > PRD_LOG_TRACE ? PRD_LOG_TRACE : s[0] - '0';
		return 0;
	}
	return -2;
}

const char *log__int(char *b, long long v)
{
	snprintf(b, 24, "%c%lld", LOG__NUM, v);
	return b;
}

/* Keys whose values must never reach a log line. Matching is by substring,
 * case-insensitive, so "bearerToken" and "client-key-data" are caught. */
static bool key_is_secret(const char *k)
{
	static const char *const secret[] = { "token", "password", "passwd", "secret",
		"authorization", "client-key", "key-data", "bearer", "cookie", "credential" };
	size_t i;
	for(i = 0; i < sizeof(secret) / sizeof(secret[0]); i++)
		if(strcasestr(k, secret[i]))
			return true;
	return false;
}

static void put_json_string(buf *b, const char *s)
{
	const unsigned char *p;
	buf_append_char(b, '"');
	for(p = (const unsigned char *)s; *p; p++) {
		switch(*p) {
		case '"': buf_append_str(b, "\\\""); break;
		case '\\': buf_append_str(b, "\\\\"); break;
		case '\n': buf_append_str(b, "\\n"); break;
		case '\r': buf_append_str(b, "\\r"); break;
		case '\t': buf_append_str(b, "\\t"); break;
		default:
			if(*p < 0x20)
				buf_printf(b, "\\u%04x", *p);
			else
				buf_append_char(b, (char)*p);
		}
	}
	buf_append_char(b, '"');
}

/* Text values are quoted when they contain spaces, quotes, '=' or control
 * characters, so every line splits unambiguously into key=value pairs. */
static void put_text_value(buf *b, const char *s)
{
	const char *p;
	bool quote = !*s;
	for(p = s; *p && !quote; p++)
		if(*p == ' ' || *p == '"' || *p == '=' || (unsigned char)*p < 0x20)
			quote = true;
	if(quote)
		put_json_string(b, s);
	else
		buf_append_str(b, s);
}

void log_kv(int level, const char *msg, ...)
{
	char ts[RFC3339_MAX];
	long long now;
	va_list ap;
	buf b;
	const char *k;
	FILE *out;

	if(!log_enabled(level))
		return;
	if(level < PRD_LOG_ERROR)
		level = PRD_LOG_ERROR;
	if(logger.clock) {
		now = clk_wall(logger.clock);
	} else if(logger.now_ns) {
		now = logger.now_ns();
	} else {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		now = (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
	}
	rfc3339_format_micro(now, ts, sizeof(ts));
	buf_init(&b);
	if(logger.format == PRD_LOG_JSON) {
		buf_printf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":", ts, level_names[level]);
		put_json_string(&b, msg);
	} else {
		buf_printf(&b, "ts=%s level=%s msg=", ts, level_names[level]);
		put_text_value(&b, msg);
	}
	va_start(ap, msg);
	while((k = va_arg(ap, const char *)) != NULL) {
		const char *v = va_arg(ap, const char *);
		if(!v)
			v = "<nil>";
		if(key_is_secret(k))
			v = "<redacted>";
		if(v[0] == LOG__NUM) {   /* from LOGI: digits and an optional '-' */
			if(logger.format == PRD_LOG_JSON) {
				buf_append_char(&b, ',');
				put_json_string(&b, k);
				buf_printf(&b, ":%s", v + 1);
			} else {
				buf_printf(&b, " %s=%s", k, v + 1);
			}
		} else if(logger.format == PRD_LOG_JSON) {
			buf_append_char(&b, ',');
			put_json_string(&b, k);
			buf_append_char(&b, ':');
			put_json_string(&b, v);
		} else {
			buf_printf(&b, " %s=", k);
			put_text_value(&b, v);
		}
	}
	va_end(ap);
	buf_append_str(&b, logger.format == PRD_LOG_JSON ? "}\n" : "\n");
	if(b.failed)
		return;
	pthread_mutex_lock(&logger.mu);
	out = logger.out ? logger.out : stderr;
	fwrite(b.data, 1, b.len, out);
	fflush(out);
	pthread_mutex_unlock(&logger.mu);
	buf_free(&b);
}
