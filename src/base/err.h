/*
 * err.h - the project's one table of error codes.
 *
 * Every function that can fail returns an int: 0 on success or a negative
 * code from the table below. The code says what kind of failure it was; the
 * detail (which key, which field, which line) is a thread-local message set
 * with err_set() at the place that found the problem and read back with
 * err_detail() by whoever reports it. Adapters in api/ map a code to a
 * dialect's status and error type (api/errors.c); nothing below api/ knows
 * about HTTP statuses.
 */
#ifndef PARLEY_BASE_ERR_H
#define PARLEY_BASE_ERR_H

#include <stddef.h>

/* X(name, value, short message) */
#define ERR_TABLE(X)                                                         \
  X(ERR_OK, 0, "ok")                                                         \
  X(ERR_NOMEM, -1, "out of memory")                                          \
  X(ERR_IO, -2, "input/output error")                                        \
  X(ERR_INVALID, -3, "invalid argument")                                     \
  X(ERR_PARSE, -4, "malformed input")                                        \
  X(ERR_TOO_LARGE, -5, "too large")                                          \
  X(ERR_NOT_FOUND, -6, "not found")                                          \
  X(ERR_EXISTS, -7, "already exists")                                        \
  X(ERR_UNSUPPORTED, -8, "not supported")                                    \
  X(ERR_AUTH, -9, "authentication failed")                                   \
  X(ERR_FORBIDDEN, -10, "forbidden")                                         \
  X(ERR_OVERLOADED, -11, "overloaded")                                       \
  X(ERR_TIMEOUT, -12, "timed out")                                           \
  X(ERR_CANCELLED, -13, "cancelled")                                         \
  X(ERR_CONFLICT, -14, "conflict")                                           \
  X(ERR_METHOD, -15, "method not allowed")                                   \
  X(ERR_INTERNAL, -16, "internal error")                                     \
  X(ERR_CORRUPT, -17, "corrupt data")                                        \
  X(ERR_RANGE, -18, "value out of range")                                    \
  X(ERR_TYPE, -19, "wrong type")                                             \
  X(ERR_CONTEXT, -20, "context length exceeded")                             \
  X(ERR_UNAVAILABLE, -21, "temporarily unavailable")                        \
  X(ERR_WORKER, -22, "a worker process died")

enum err_code {
#define ERR_ENUM(name, value, msg) name = value,
  ERR_TABLE(ERR_ENUM)
#undef ERR_ENUM
  ERR_MIN_ = -23
};

/* Name of a code ("ERR_PARSE"); "ERR_UNKNOWN" for a value not in the table. */
const char *err_name(int code);
/* Short English message of a code ("malformed input"). */
const char *err_message(int code);

/* Records a detail message for the calling thread and returns code, so that
 * a failing function can write `return err_set(ERR_PARSE, "key %s: ...", k);` */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's last detail message, or the code's short message when
 * none was set since err_clear(). Valid until the next err_set on the thread. */
const char *err_detail(void);
/* Code of the last err_set on this thread (0 after err_clear). */
int err_last(void);
void err_clear(void);

#endif
