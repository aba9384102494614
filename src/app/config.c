/*
 * config.c - the option table and its parser.
 *
 * Each option is one row: flag name, environment variable, kind, default,
 * help, and the offset of its field in struct config. Parsing, defaults,
 * validation and `parley help` all walk the same table, so an option is
 * added in exactly one place.
 */
#include "app/config.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "engine/manager.h"

enum opt_kind {
  OPT_KIND_STR,   /* char * */
  OPT_KIND_INT,   /* int64_t within [min, max] */
  OPT_KIND_SIZE,  /* int64_t bytes; accepts K, M, G suffixes (powers of 1024) */
  OPT_KIND_BOOL,  /* bool; a bare flag means true; env 1/0/true/false/yes/no */
  OPT_KIND_DURATION, /* int64_t milliseconds: "5m", "30s", "1h30m", a number
                        of seconds; any negative = -1 (forever) */
  OPT_KIND_BUDGET,   /* int64_t bytes: a size ("8G"), a percentage of
                        physical RAM ("75%"), or none/off/unlimited = -1 */
  OPT_KIND_KV_TYPE,  /* int: enum model_kv_type from f16 / q8_0 / f32 */
};

struct opt {
  const char *flag;
  const char *env;
  enum opt_kind kind;
  const char *def;   /* default as text; NULL = computed (see apply_computed) */
  int64_t min, max;  /* INT and SIZE bounds */
  size_t offset;
  const char *help;
};

#define OFF(f) offsetof(config, f)
static const struct opt OPTS[] = {
  {"host", "PARLEY_HOST", OPT_KIND_STR, "127.0.0.1", 0, 0, OFF(host), "address to listen on"},
  {"port", "PARLEY_PORT", OPT_KIND_INT, "8080", 0, 65535, OFF(port), "TCP port (0 picks a free one)"},
  {"tls-cert", "PARLEY_TLS_CERT", OPT_KIND_STR, "", 0, 0, OFF(tls_cert),
   "PEM certificate (chain) file: serve HTTPS and WSS (with --tls-key)"},
  {"tls-key", "PARLEY_TLS_KEY", OPT_KIND_STR, "", 0, 0, OFF(tls_key), "PEM private key file for --tls-cert"},
  {"tls-port", "PARLEY_TLS_PORT", OPT_KIND_INT, "0", -1, 65535, OFF(tls_port),
   "0: the main port serves TLS only; N: plain on the main port and TLS on N (-1 picks a free one)"},
  {"api-key", "PARLEY_API_KEY", OPT_KIND_STR, "", 0, 0, OFF(api_keys_raw),
   "accepted API key(s), comma-separated; none = open"},
  {"no-auth", "PARLEY_NO_AUTH", OPT_KIND_BOOL, "false", 0, 0, OFF(no_auth),
   "allow listening beyond loopback without a key"},
  {"host-check", "PARLEY_HOST_CHECK", OPT_KIND_BOOL, "true", 0, 0, OFF(host_check),
   "on a loopback listener, refuse (403) requests whose Host header is not local (DNS-rebinding guard); "
   "false behind a proxy that forwards a public Host"},
  {"allowed-origins", "PARLEY_ALLOWED_ORIGINS", OPT_KIND_STR, "", 0, 0, OFF(allowed_origins),
   "without an API key, web origins allowed besides local ones (localhost, 127.0.0.1, [::1], app://, file://, "
   "tauri://, vscode-webview://), comma-separated; a '*' in an entry matches anything, '*' alone allows every origin"},
  {"admin", "PARLEY_ADMIN", OPT_KIND_BOOL, "false", 0, 0, OFF(admin),
   "serve the /admin/* diagnostic routes without an API key (with a key they are always served)"},
  {"data-dir", "PARLEY_DATA_DIR", OPT_KIND_STR, NULL, 0, 0, OFF(data_dir),
   "data directory (default $XDG_DATA_HOME/parley or ~/.local/share/parley)"},
  {"models-dir", "PARLEY_MODELS_DIR", OPT_KIND_STR, NULL, 0, 0, OFF(models_dir),
   "directory of GGUF models (default <data-dir>/models)"},
  {"log-level", "PARLEY_LOG_LEVEL", OPT_KIND_STR, "info", 0, 0, OFF(log_level), "debug, info, warn, error or off"},
  {"access-log", "PARLEY_ACCESS_LOG", OPT_KIND_BOOL, "true", 0, 0, OFF(access_log), "log one line per request"},
  {"http-threads", "PARLEY_HTTP_THREADS", OPT_KIND_INT, "0", 0, 256, OFF(http_threads),
   "HTTP connection threads (0 = automatic)"},
  {"speech-workers", "PARLEY_SPEECH_WORKERS", OPT_KIND_INT, "4", 1, 64, OFF(speech_workers),
   "worker processes per speech pool (synthesis, recognition, decoding of client audio)"},
  {"stt-model", "PARLEY_STT_MODEL", OPT_KIND_STR, "", 0, 0, OFF(stt_model),
   "a whisper.cpp model file (ggml-base.en.bin, ...) for speech to text; without it the first ggml-*.bin in the "
   "models directory, else pocketsphinx"},
  {"stt-beam-size", "PARLEY_STT_BEAM_SIZE", OPT_KIND_INT, "0", 0, 8, OFF(stt_beam_size),
   "Whisper: beam search of this many hypotheses at temperature 0 (Whisper's option: 5); 0 or 1 = greedy"},
  {"speech-timeout", "PARLEY_SPEECH_TIMEOUT", OPT_KIND_INT, "60", 1, 86400, OFF(speech_timeout_s),
   "seconds one speech worker call may take (plus 2 s per second of audio) before the worker is killed"},
  {"max-body", "PARLEY_MAX_BODY", OPT_KIND_SIZE, "32M", 1024, INT64_C(1) << 40, OFF(max_body),
   "largest JSON request body"},
  {"max-upload", "PARLEY_MAX_UPLOAD", OPT_KIND_SIZE, "512M", 1024, INT64_C(1) << 44, OFF(max_upload),
   "largest multipart or binary upload"},
  {"sse-keepalive", "PARLEY_SSE_KEEPALIVE", OPT_KIND_INT, "15", 1, 3600, OFF(sse_keepalive_s),
   "seconds between keep-alive comments on an idle event stream"},
  {"conn-timeout", "PARLEY_CONN_TIMEOUT", OPT_KIND_INT, "60", 1, 86400, OFF(conn_timeout_s),
   "seconds an idle connection is kept open"},
  {"ws-max-message", "PARLEY_WS_MAX_MESSAGE", OPT_KIND_SIZE, "16M", 1024, INT64_C(1) << 32, OFF(ws_max_message),
   "largest WebSocket message"},
  {"model", "PARLEY_MODEL", OPT_KIND_STR, NULL, 0, 0, OFF(models),
   "model file(s) to serve: [NAME=]PATH, comma-separated"},
  {"alias", "PARLEY_ALIAS", OPT_KIND_STR, NULL, 0, 0, OFF(aliases),
   "model alias(es): ALIAS=MODEL, comma-separated"},
  {"default-model", "PARLEY_DEFAULT_MODEL", OPT_KIND_STR, NULL, 0, 0, OFF(default_model),
   "model used when a request names none"},
  {"parallel", "PARLEY_PARALLEL", OPT_KIND_INT, "4", 1, 256, OFF(parallel),
   "requests one loaded model runs at once (engine slots)"},
  {"queue-max", "PARLEY_QUEUE_MAX", OPT_KIND_INT, "64", 1, 65536, OFF(queue_max),
   "requests that may wait for a loaded model's slots; more get the dialect's overloaded error"},
  {"rs-checkpoints", "PARLEY_RS_CHECKPOINTS", OPT_KIND_INT, "8", 0, 64, OFF(rs_checkpoints),
   "recurrent-state checkpoints per slot of a hybrid model (LFM2), so a re-sent chat history resumes from the "
   "longest one (0 = none)"},
  {"ctx-size", "PARLEY_CTX_SIZE", OPT_KIND_INT, "0", 0, INT64_C(1) << 24, OFF(ctx_size),
   "context positions per slot (0 = the model's trained context)"},
  {"keep-alive", "PARLEY_KEEP_ALIVE", OPT_KIND_DURATION, "5m", 0, 0, OFF(keep_alive_ms),
   "how long an idle model stays loaded (5m, 30s, 1h; -1 = forever, 0 = unload at once)"},
  {"memory-budget", "PARLEY_MEMORY_BUDGET", OPT_KIND_BUDGET, "75%", 0, 0, OFF(memory_budget),
   "memory the loaded models may take: bytes (8G), a percentage of RAM, or none"},
  {"cache-type", "PARLEY_CACHE_TYPE", OPT_KIND_KV_TYPE, "f16", 0, 0, OFF(cache_type),
   "KV cache type: f16, q8_0 (about half the memory, slightly less exact) or f32"},
  {"fetch-hosts", "PARLEY_FETCH_HOSTS", OPT_KIND_STR, "", 0, 0, OFF(fetch_hosts),
   "hosts a Deepgram {\"url\"} body or callback may reach, comma-separated (* = any); none by default"},
};
#undef OFF

static int parse_size(const char *s, int64_t *out) {
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v < 0) return ERR_INVALID;
  int64_t mul = 1;
  if (*end) {
    switch (*end) {
      case 'k': case 'K': mul = 1024; break;
      case 'm': case 'M': mul = 1024 * 1024; break;
      case 'g': case 'G': mul = INT64_C(1024) * 1024 * 1024; break;
      case 't': case 'T': mul = INT64_C(1024) * 1024 * 1024 * 1024; break;
      default: return ERR_INVALID;
    }
    end++;
    if (*end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return ERR_INVALID;
  }
  if (v > INT64_MAX / mul) return ERR_INVALID;
  *out = v * mul;
  return 0;
}

/* A memory budget: a size, "N%" of physical RAM (1..100), or no limit. */
static int parse_budget(const char *s, const char *source, int64_t *out) {
  if (strcasecmp(s, "none") == 0 || strcasecmp(s, "off") == 0 || strcasecmp(s, "unlimited") == 0) {
    *out = -1;
    return 0;
  }
  size_t n = strlen(s);
  if (n > 1 && s[n - 1] == '%') {
    char *end = NULL;
    errno = 0;
    double pct = strtod(s, &end);
    if (errno || end != s + n - 1 || !(pct > 0 && pct <= 100))
      return err_set(ERR_INVALID, "%s: invalid percentage '%s' (expected more than 0%% and at most 100%%)", source, s);
    uint64_t phys = manager_physical_memory();
    if (!phys)
      return err_set(ERR_INVALID, "%s: cannot read the physical memory size to resolve '%s'; give bytes (8G)",
                     source, s);
    double v = (double)phys * pct / 100.0;
    *out = v >= 1 ? (int64_t)v : 1;
    return 0;
  }
  int64_t v = 0;
  if (parse_size(s, &v) || v < 1)
    return err_set(ERR_INVALID,
                   "%s: invalid memory budget '%s' (expected bytes with an optional K/M/G/T suffix, a percentage "
                   "of RAM like 75%%, or none)",
                   source, s);
  *out = v;
  return 0;
}

static int parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < ARRAY_LEN(yes); i++) {
    if (strcasecmp(s, yes[i]) == 0) { *out = true; return 0; }
    if (strcasecmp(s, no[i]) == 0) { *out = false; return 0; }
  }
  return ERR_INVALID;
}

/* Sets one option from text; `source` ("--port" or "PARLEY_PORT") names it
 * in the error. */
static int opt_set(config *cfg, const struct opt *o, const char *val, const char *source) {
  char *field = (char *)cfg + o->offset;
  switch (o->kind) {
    case OPT_KIND_STR: {
      char **p = (char **)(void *)field;
      char *copy = strdup(val);
      if (!copy) return ERR_NOMEM;
      free(*p);
      *p = copy;
      return 0;
    }
    case OPT_KIND_INT: {
      errno = 0;
      char *end = NULL;
      long long v = strtoll(val, &end, 10);
      if (errno || end == val || *end || v < o->min || v > o->max)
        return err_set(ERR_INVALID, "%s: invalid value '%s' (expected an integer from %lld to %lld)", source, val,
                       (long long)o->min, (long long)o->max);
      *(int64_t *)(void *)field = v;
      return 0;
    }
    case OPT_KIND_SIZE: {
      int64_t v = 0;
      if (parse_size(val, &v) || v < o->min || v > o->max)
        return err_set(ERR_INVALID, "%s: invalid size '%s' (expected bytes with an optional K/M/G suffix, %lld to %lld)",
                       source, val, (long long)o->min, (long long)o->max);
      *(int64_t *)(void *)field = v;
      return 0;
    }
    case OPT_KIND_BOOL: {
      bool b = false;
      if (parse_bool(val, &b))
        return err_set(ERR_INVALID, "%s: invalid value '%s' (expected true or false)", source, val);
      *(bool *)(void *)field = b;
      return 0;
    }
    case OPT_KIND_DURATION: {
      int64_t ms = 0;
      if (manager_parse_keep_alive(val, &ms)) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", err_detail());
        return err_set(ERR_INVALID, "%s: %s", source, detail);
      }
      *(int64_t *)(void *)field = ms;
      return 0;
    }
    case OPT_KIND_BUDGET:
      return parse_budget(val, source, (int64_t *)(void *)field);
    case OPT_KIND_KV_TYPE: {
      enum model_kv_type t;
      if (model_kv_type_parse(val, &t))
        return err_set(ERR_INVALID, "%s: invalid value '%s' (expected f16, q8_0 or f32)", source, val);
      *(int *)(void *)field = (int)t;
      return 0;
    }
  }
  return ERR_INTERNAL;
}

static const struct opt *opt_find(const char *name, size_t len) {
  for (size_t i = 0; i < ARRAY_LEN(OPTS); i++)
    if (strlen(OPTS[i].flag) == len && strncmp(OPTS[i].flag, name, len) == 0) return &OPTS[i];
  return NULL;
}

static char *default_data_dir(void) {
  const char *xdg = getenv("XDG_DATA_HOME");
  const char *home = getenv("HOME");
  char path[PATH_MAX];
  if (xdg && *xdg) snprintf(path, sizeof path, "%s/parley", xdg);
  else if (home && *home) snprintf(path, sizeof path, "%s/.local/share/parley", home);
  else snprintf(path, sizeof path, "./parley-data");
  return strdup(path);
}

/* Splits api_keys_raw on commas into api_keys (pointers into one copy). */
static int split_keys(config *cfg) {
  cfg->n_api_keys = 0;
  for (char *key = strtok(cfg->api_keys_raw, ","); key; key = strtok(NULL, ",")) {
    while (*key == ' ') key++;
    size_t n = strlen(key);
    while (n && key[n - 1] == ' ') key[--n] = '\0';
    if (!n) continue;
    if (cfg->n_api_keys == CONFIG_MAX_KEYS)
      return err_set(ERR_INVALID, "api-key: more than %d keys", CONFIG_MAX_KEYS);
    cfg->api_keys[cfg->n_api_keys++] = key;
  }
  return 0;
}

int config_load(config *cfg, int argc, char **argv) {
  memset(cfg, 0, sizeof *cfg);
  int rc;
  for (size_t i = 0; i < ARRAY_LEN(OPTS); i++)
    if (OPTS[i].def && (rc = opt_set(cfg, &OPTS[i], OPTS[i].def, OPTS[i].flag))) return rc;
  for (size_t i = 0; i < ARRAY_LEN(OPTS); i++) {
    const char *v = getenv(OPTS[i].env);
    if (v && *v && (rc = opt_set(cfg, &OPTS[i], v, OPTS[i].env))) return rc;
  }
  for (int a = 0; a < argc; a++) {
    const char *arg = argv[a];
    if (strncmp(arg, "--", 2) != 0)
      return err_set(ERR_INVALID, "unexpected argument '%s' (options start with --)", arg);
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
    const struct opt *o = opt_find(name, nlen);
    if (!o) return err_set(ERR_INVALID, "unknown option '--%.*s' (see parley help)", (int)nlen, name);
    char source[64];
    snprintf(source, sizeof source, "--%s", o->flag);
    const char *val;
    if (eq) val = eq + 1;
    else if (o->kind == OPT_KIND_BOOL) val = "true";
    else if (a + 1 < argc) val = argv[++a];
    else return err_set(ERR_INVALID, "%s: missing value", source);
    if ((rc = opt_set(cfg, o, val, source))) return rc;
  }
  if (!cfg->data_dir && !(cfg->data_dir = default_data_dir())) return ERR_NOMEM;
  if (!cfg->models_dir) {
    size_t n = strlen(cfg->data_dir) + 8;
    if (!(cfg->models_dir = malloc(n))) return ERR_NOMEM;
    snprintf(cfg->models_dir, n, "%s/models", cfg->data_dir);
  }
  enum log_level lvl;
  if (log_level_parse(cfg->log_level, &lvl))
    return err_set(ERR_INVALID, "log-level: invalid value '%s' (expected debug, info, warn, error or off)",
                   cfg->log_level);
  if (!cfg->host[0]) return err_set(ERR_INVALID, "host: empty address");
  return split_keys(cfg);
}

void config_free(config *cfg) {
  for (size_t i = 0; i < ARRAY_LEN(OPTS); i++)
    if (OPTS[i].kind == OPT_KIND_STR) {
      char **p = (char **)(void *)((char *)cfg + OPTS[i].offset);
      free(*p);
      *p = NULL;
    }
  cfg->n_api_keys = 0;
}

void config_print_help(FILE *out) {
  fprintf(out, "options (flag, environment variable, default):\n");
  for (size_t i = 0; i < ARRAY_LEN(OPTS); i++) {
    const struct opt *o = &OPTS[i];
    char flag[64];
    snprintf(flag, sizeof flag, "--%s%s", o->flag, o->kind == OPT_KIND_BOOL ? "" : " VALUE");
    fprintf(out, "  %-26s %-24s %s", flag, o->env, o->help);
    if (o->def && *o->def) fprintf(out, " [%s]", o->def);
    fputc('\n', out);
  }
}

bool config_host_is_loopback(const char *host) {
  return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 || strcmp(host, "[::1]") == 0 ||
         strcasecmp(host, "localhost") == 0;
}
