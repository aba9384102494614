/*
 * config.h - parley's configuration: one table of options, each a flag and
 * an environment variable, which also produces `parley help`.
 *
 * Precedence: built-in default < environment variable < command-line flag.
 * A bad value gives one line naming the option and the value, and the CLI
 * exits with status 2.
 */
#ifndef PARLEY_APP_CONFIG_H
#define PARLEY_APP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_MAX_KEYS 32

typedef struct config {
  char *host;              /* listen address */
  int64_t port;            /* listen port, 0..65535 */
  char *api_keys_raw;      /* comma-separated keys as given */
  char *api_keys[CONFIG_MAX_KEYS];
  size_t n_api_keys;
  bool no_auth;            /* allow a non-loopback listener without a key */
  bool host_check;         /* loopback listener: 403 for a non-local Host */
  char *allowed_origins;   /* extra web origins allowed without a key, comma-separated */
  bool admin;              /* serve the /admin diagnostic routes without a key */
  char *data_dir;          /* database, blobs, spool, downloaded models */
  char *models_dir;        /* GGUF files served; default <data_dir>/models */
  char *log_level;         /* debug|info|warn|error|off */
  bool access_log;         /* one line per request */
  int64_t http_threads;    /* connection pool size; 0 = automatic */
  int64_t speech_workers;  /* worker processes per speech pool */
  int64_t speech_timeout_s; /* base time limit of one speech worker call */
  int64_t stt_beam_size;   /* --stt-beam-size: Whisper beam search at temperature 0; 0/1 = greedy */
  char *stt_model;         /* --stt-model: a Whisper file; "" = discover in models_dir */
  int64_t max_body;        /* bytes, JSON request bodies */
  int64_t max_upload;      /* bytes, multipart and binary uploads */
  int64_t sse_keepalive_s; /* idle seconds between SSE keep-alive comments */
  int64_t conn_timeout_s;  /* idle connection timeout, seconds */
  int64_t ws_max_message;  /* bytes, largest WebSocket message */
  char *models;            /* --model: [NAME=]PATH, comma-separated */
  char *aliases;           /* --alias: ALIAS=MODEL, comma-separated */
  char *default_model;     /* model used when a request names none */
  int64_t parallel;        /* engine slots per loaded model */
  int64_t queue_max;       /* requests waiting per loaded model */
  int64_t rs_checkpoints;  /* recurrent-state checkpoints per slot (0 = none) */
  int64_t ctx_size;        /* positions per slot; 0 = the trained context */
  int64_t keep_alive_ms;   /* idle time before a model unloads; -1 = never,
                              0 = as soon as idle */
  int64_t memory_budget;   /* bytes the loaded models may take (a
                              percentage is resolved against physical RAM);
                              -1 = no limit */
  char *tls_cert;          /* PEM certificate file, "" = no TLS */
  char *tls_key;           /* PEM key file */
  int64_t tls_port;        /* 0 = TLS on the main port; > 0 (or -1: free) a second TLS port */
  int cache_type;          /* enum model_kv_type of the engines' KV caches */
  char *fetch_hosts;       /* hosts Deepgram url/callback may reach, comma-separated; "" = none */
} config;

/* Fills cfg with defaults, then applies the environment (getenv), then argv
 * (flags only, after the subcommand). On a bad value returns ERR_INVALID with
 * err_detail() naming the option. Unknown flags are errors too. */
int config_load(config *cfg, int argc, char **argv);
void config_free(config *cfg);
/* Prints every option: flag, environment variable, default, help. */
void config_print_help(FILE *out);
/* True when host is a loopback address (127.0.0.0/8, ::1, localhost). */
bool config_host_is_loopback(const char *host);

#endif
