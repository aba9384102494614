/*
 * log.h - leveled logging to stderr, one line per call, safe from any thread.
 *
 * Lines look like `2026-12-02T15:40:01.123Z INFO  http: message`. Never log a
 * secret: callers pass API keys through nothing here.
 */
#ifndef PARLEY_BASE_LOG_H
#define PARLEY_BASE_LOG_H

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR, LOG_LEVEL_OFF };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Parses "debug|info|warn|error|off"; returns 0 or ERR_INVALID. */
int log_level_parse(const char *s, enum log_level *out);
void log_write(enum log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LOG_DEBUG(mod, ...) log_write(LOG_LEVEL_DEBUG, mod, __VA_ARGS__)
#define LOG_INFO(mod, ...) log_write(LOG_LEVEL_INFO, mod, __VA_ARGS__)
#define LOG_WARN(mod, ...) log_write(LOG_LEVEL_WARN, mod, __VA_ARGS__)
#define LOG_ERROR(mod, ...) log_write(LOG_LEVEL_ERROR, mod, __VA_ARGS__)

#endif
