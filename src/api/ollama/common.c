/*
 * common.c - what the Ollama handlers share: JSON answers with Ollama's
 * content type, errors, timestamps, the model-name grammar, and the request
 * fields every generation endpoint takes (options, format, think,
 * keep_alive, stream), plus model details and capabilities for /api/tags,
 * /api/ps and /api/show.
 *
 * Option defaults are Ollama's (temperature 0.8, top_k 40, top_p 0.9,
 * repeat_last_n 64, seed -1 = random, num_predict -1 = unlimited); keys
 * parley does not use (num_ctx, num_gpu, mirostat, ...) are type-checked and
 * ignored, unknown keys ignored, as Ollama does.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/util.h"
#include "gguf/gguf.h"

void ollama_json(http_req *req, int status, const json_t *v) {
  char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (!s) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  http_respond(req, status, "application/json; charset=utf-8", s, strlen(s));
  free(s);
}

int ollama_answer(http_req *req, int rc) {
  ollama_err(req, rc == ERR_NOMEM ? 500 : 400, rc, "%s", err_detail());
  return rc;
}

void ollama_err(http_req *req, int status, int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  api_error(req, status, code, msg, NULL);
}

int64_t ollama_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void ollama_time(int64_t wall_ns, char *out, size_t cap) {
  time_t s = (time_t)(wall_ns / 1000000000LL);
  long ns = (long)(wall_ns % 1000000000LL);
  struct tm tm;
  gmtime_r(&s, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, cap, "%s.%09ldZ", base, ns);
}

/* One part of a name: first byte alphanumeric or '_', then alnum, '_', '-',
 * '.', plus ':' in a host and '@' (parley's "@source" suffix). */
static bool part_ok(const char *p, size_t n, bool host) {
  if (!n || n > 350) return false;
  if (!isalnum((unsigned char)p[0]) && p[0] != '_') return false;
  for (size_t i = 1; i < n; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (isalnum(ch) || ch == '_' || ch == '-' || ch == '.' || ch == '@' || (host && ch == ':')) continue;
    return false;
  }
  return true;
}

bool ollama_name_valid(const char *name) {
  if (!name || !*name) return false;
  const char *parts[3];
  size_t lens[3], n = 0;
  const char *p = name;
  for (;;) {
    const char *slash = strchr(p, '/');
    if (n == 3) return false;
    parts[n] = p;
    lens[n] = slash ? (size_t)(slash - p) : strlen(p);
    n++;
    if (!slash) break;
    p = slash + 1;
  }
  for (size_t i = 0; i + 1 < n; i++)
    if (!part_ok(parts[i], lens[i], i == 0 && n == 3)) return false;
  /* the model part may carry ":tag" */
  const char *last = parts[n - 1];
  size_t ll = lens[n - 1];
  const char *colon = memchr(last, ':', ll);
  if (!colon) return part_ok(last, ll, false);
  size_t ml = (size_t)(colon - last);
  return part_ok(last, ml, false) && part_ok(colon + 1, ll - ml - 1, false);
}

/* ---- options ------------------------------------------------------------- */

void ollama_params_init(gen_params *g) {
  gen_params_init(g);
  g->er.sample.temperature = 0.8f;
  g->er.sample.top_k = 40;
  g->er.sample.top_p = 0.9f;
  g->er.sample.repeat_penalty = 1.0f;
  g->er.sample.penalty_last_n = 64;
  uint64_t seed = 0;
  rand_bytes(&seed, sizeof seed);
  g->er.sample.seed = seed;
  g->er.max_tokens = 0;
}

enum opt_type { OPT_INT, OPT_FLOAT, OPT_BOOL, OPT_STRING, OPT_ARRAY };

/* Each known option's type and, where a value outside it means nothing
 * (a context of -1 tokens), its range: lo < hi bounds the number. */
static const struct {
  const char *key;
  enum opt_type type;
  double lo, hi;
} OPTIONS[] = {
    {"num_ctx", OPT_INT, 1, 1e9},  {"num_batch", OPT_INT, 1, 1e9}, {"num_gpu", OPT_INT, 0, 0},
    {"main_gpu", OPT_INT, 0, 0},         {"use_mmap", OPT_BOOL, 0, 0},        {"num_thread", OPT_INT, 0, 1e6},
    {"draft_num_predict", OPT_INT, 0, 0}, {"num_keep", OPT_INT, 0, 0},        {"seed", OPT_INT, 0, 0},
    {"num_predict", OPT_INT, -2, 1e12}, {"top_k", OPT_INT, 0, 0},       {"top_p", OPT_FLOAT, 0, 0},
    {"min_p", OPT_FLOAT, 0, 0},          {"typical_p", OPT_FLOAT, 0, 0},      {"repeat_last_n", OPT_INT, 0, 0},
    {"temperature", OPT_FLOAT, 0, 0},    {"repeat_penalty", OPT_FLOAT, 0, 0}, {"presence_penalty", OPT_FLOAT, 0, 0},
    {"frequency_penalty", OPT_FLOAT, 0, 0}, {"stop", OPT_ARRAY, 0, 0},        {"numa", OPT_BOOL, 0, 0},
    {"low_vram", OPT_BOOL, 0, 0},        {"f16_kv", OPT_BOOL, 0, 0},          {"logits_all", OPT_BOOL, 0, 0},
    {"vocab_only", OPT_BOOL, 0, 0},      {"use_mlock", OPT_BOOL, 0, 0},       {"embedding_only", OPT_BOOL, 0, 0},
    {"tfs_z", OPT_FLOAT, 0, 0},          {"mirostat", OPT_INT, 0, 0},         {"mirostat_tau", OPT_FLOAT, 0, 0},
    {"mirostat_eta", OPT_FLOAT, 0, 0},   {"penalize_newline", OPT_BOOL, 0, 0},
};

static const char *type_word(enum opt_type t) {
  switch (t) {
    case OPT_INT: return "integer";
    case OPT_FLOAT: return "float32";
    case OPT_BOOL: return "boolean";
    case OPT_STRING: return "string";
    default: return "array";
  }
}

int ollama_options(const json_t *options, gen_params *g) {
  if (!options || json_is_null(options)) return 0;
  if (!json_is_object(options)) {
    return err_set(ERR_TYPE, "options: expected object, got %s", api_json_type_name(options));
  }
  for (size_t i = 0; i < ARRAY_LEN(OPTIONS); i++) {
    const json_t *v = json_object_get(options, OPTIONS[i].key);
    if (!v || json_is_null(v)) continue;
    enum opt_type t = OPTIONS[i].type;
    bool ok = t == OPT_INT || t == OPT_FLOAT ? json_is_number(v)
              : t == OPT_BOOL                ? json_is_boolean(v)
              : t == OPT_STRING              ? json_is_string(v)
                                             : json_is_array(v) || json_is_string(v);
    if (!ok) {
      return err_set(ERR_TYPE, "option \"%s\" must be of type %s", OPTIONS[i].key, type_word(t));
    }
    double d = json_number_value(v);
    if (OPTIONS[i].lo < OPTIONS[i].hi && json_is_number(v) && !(d >= OPTIONS[i].lo && d <= OPTIONS[i].hi)) {
      return err_set(ERR_RANGE, "option \"%s\": %g is out of range (expected %g to %g)", OPTIONS[i].key, d,
                 OPTIONS[i].lo, OPTIONS[i].hi);
    }
  }
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)options, key, v) {
    if (json_is_null(v)) continue;
    double d = json_number_value(v);
    sample_params *s = &g->er.sample;
    if (strcmp(key, "temperature") == 0) s->temperature = (float)d;
    else if (strcmp(key, "top_k") == 0) s->top_k = d < 0 ? 0 : (int32_t)d;
    else if (strcmp(key, "top_p") == 0) s->top_p = d <= 0 ? 1e-6f : d > 1 ? 1.0f : (float)d;
    else if (strcmp(key, "min_p") == 0) s->min_p = (float)d;
    else if (strcmp(key, "repeat_penalty") == 0) s->repeat_penalty = (float)d;
    else if (strcmp(key, "presence_penalty") == 0) s->presence_penalty = (float)d;
    else if (strcmp(key, "frequency_penalty") == 0) s->frequency_penalty = (float)d;
    else if (strcmp(key, "repeat_last_n") == 0) s->penalty_last_n = d < 0 ? 64 : (int32_t)d;
    else if (strcmp(key, "seed") == 0) {
      if (d >= 0) s->seed = (uint64_t)(int64_t)d;
    } else if (strcmp(key, "num_predict") == 0) g->er.max_tokens = d > 0 ? (int64_t)d : 0;
    else if (strcmp(key, "stop") == 0) {
      /* replaces earlier stops (a Modelfile's), as Ollama's merge does */
      for (size_t k = 0; k < g->n_stop; k++) free(g->stop[k]);
      g->n_stop = 0;
      g->er.n_stop = 0;
      size_t n = json_is_string(v) ? 1 : json_array_size(v);
      for (size_t k = 0; k < n; k++) {
        const json_t *sv = json_is_string(v) ? v : json_array_get(v, k);
        if (!json_is_string(sv)) {
          return err_set(ERR_TYPE, "option \"stop\" must be of type array of strings (options.stop[%zu] is %s)",
                     k, api_json_type_name(sv));
        }
        if (gen_params_add_stop(g, json_string_value(sv), json_string_length(sv))) {
          return err_set(ERR_NOMEM, "out of memory");
        }
      }
    }
  }
  return 0;
}

int ollama_format(const json_t *format, gen_params *g) {
  if (!format || json_is_null(format)) return 0;
  if (json_is_string(format)) {
    const char *s = json_string_value(format);
    if (!*s) return 0;
    if (strcmp(s, "json") == 0) {
      gen_params_set_format(g, GEN_FORMAT_JSON, NULL, "format");
      return 0;
    }
  } else if (json_is_object(format)) {
    gen_params_set_format(g, GEN_FORMAT_SCHEMA, format, "format");
    return 0;
  }
  char *text = json_dumps(format, JSON_COMPACT | JSON_ENCODE_ANY);
  int rc = err_set(ERR_INVALID, "invalid format: %.200s; expected \"json\" or a valid JSON Schema object",
                   text ? text : "?");
  free(text);
  return rc;
}

int ollama_think(const json_t *think, int *out, enum gen_effort *effort) {
  *out = -1;
  *effort = GEN_EFFORT_DEFAULT;
  if (!think || json_is_null(think)) return 0;
  if (json_is_boolean(think)) {
    *out = json_is_true(think) ? 1 : 0;
    return 0;
  }
  const char *s = json_string_value(think);
  if (s && (!strcmp(s, "high") || !strcmp(s, "medium") || !strcmp(s, "low") || !strcmp(s, "max"))) {
    *out = 1;
    *effort = gen_effort_of(s);
    return 0;
  }
  char *text = json_dumps(think, JSON_COMPACT | JSON_ENCODE_ANY);
  int rc = err_set(ERR_INVALID, "invalid think value: %.100s (must be \"high\", \"medium\", \"low\", \"max\", true, or false)",
                   text ? text : "?");
  free(text);
  return rc;
}

int ollama_keep_alive(const json_t *v, bool *set, int64_t *ms) {
  *set = false;
  *ms = 0;
  if (!v || json_is_null(v)) return 0;
  if (json_is_number(v)) {
    double d = json_number_value(v);
    *ms = d < 0 ? -1 : (int64_t)(d * 1000.0);
    *set = true;
    return 0;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (manager_parse_keep_alive(s, ms)) { /* seconds, or a Go duration */
      return err_set(ERR_INVALID, "keep_alive: time: invalid duration \"%.64s\"", s);
    }
    *set = true;
    return 0;
  }
  return err_set(ERR_TYPE, "Unsupported type: '%s'", json_is_boolean(v) ? "bool" : api_json_type_name(v));
}

int ollama_stream(const json_t *body, bool *stream) {
  const json_t *v = json_object_get(body, "stream");
  *stream = true;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_boolean(v)) {
    return err_set(ERR_TYPE, "stream: expected boolean, got %s", api_json_type_name(v));
  }
  *stream = json_is_true(v);
  return 0;
}

bool ollama_base64_valid(const char *s, size_t len) {
  if (len % 4) return false;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (isalnum(ch) || ch == '+' || ch == '/') continue;
    if (ch == '=' && i >= len - 2 && (i == len - 1 || s[len - 1] == '=')) continue;
    return false;
  }
  return true;
}

/* ---- models -------------------------------------------------------------- */

json_t *ollama_capabilities(uint32_t caps, bool executable) {
  json_t *a = json_array();
  if (!a) return NULL;
  if ((caps & FAMILY_CAP_CHAT) && executable) json_array_append_new(a, json_string("completion"));
  /* every chat model takes tools: a template that does not show them gets
   * the generic tool prompt (api/gen.c), so none answers "does not support
   * tools" */
  if (caps & (FAMILY_CAP_CHAT | FAMILY_CAP_TOOLS)) json_array_append_new(a, json_string("tools"));
  if (caps & FAMILY_CAP_INSERT) json_array_append_new(a, json_string("insert"));
  if (caps & FAMILY_CAP_VISION) json_array_append_new(a, json_string("vision"));
  if (caps & FAMILY_CAP_EMBED) json_array_append_new(a, json_string("embedding"));
  if (caps & FAMILY_CAP_REASONING) json_array_append_new(a, json_string("thinking"));
  if (caps & FAMILY_CAP_AUDIO_IN) json_array_append_new(a, json_string("audio"));
  return a;
}

void ollama_digest_hex(const registry_entry *e, char out[65]) {
  if (strncmp(e->digest, "sha256:", 7) == 0 && strlen(e->digest) == 71) {
    memcpy(out, e->digest + 7, 64);
    out[64] = '\0';
    return;
  }
  /* no content hash known: a stable 64-hex stand-in derived from the
   * registry's own digest (path, size, mtime) */
  ollama_sha256 s;
  ollama_sha256_init(&s);
  ollama_sha256_update(&s, e->digest, strlen(e->digest));
  ollama_sha256_update(&s, e->name, strlen(e->name));
  ollama_sha256_hex(&s, out);
}

/* Parameter count and embedding length from the GGUF header, cached by
 * digest (opening a header costs a few milliseconds). */
static void gguf_numbers(ollama_ctx *c, const registry_entry *e, uint64_t *params, uint64_t *embd) {
  *params = *embd = 0;
  pthread_mutex_lock(&c->info_lock);
  const json_t *hit = json_object_get(c->info_cache, e->digest);
  if (hit) {
    *params = (uint64_t)json_integer_value(json_object_get(hit, "params"));
    *embd = (uint64_t)json_integer_value(json_object_get(hit, "embd"));
  }
  pthread_mutex_unlock(&c->info_lock);
  if (hit || !e->path) return;
  gguf_file *f = NULL;
  if (gguf_open(e->path, &f) == 0) {
    uint64_t pc = 0;
    if (gguf_get_u64(f, "general.parameter_count", &pc) || !pc)
      for (size_t i = 0; i < gguf_n_tensors(f); i++) pc += gguf_tensor_at(f, i)->n_elements;
    *params = pc;
    char key[128];
    snprintf(key, sizeof key, "%s.embedding_length", e->arch);
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    if (!gguf_get_u32(f, key, &u32)) *embd = u32;
    else if (!gguf_get_u64(f, key, &u64)) *embd = u64;
    gguf_close(f);
  }
  pthread_mutex_lock(&c->info_lock);
  json_object_set_new(c->info_cache, e->digest,
                      json_pack("{s:I, s:I}", "params", (json_int_t)*params, "embd", (json_int_t)*embd));
  pthread_mutex_unlock(&c->info_lock);
}

/* "3.2B", "137M", "22.6K" as Ollama's format.HumanNumber writes them. */
static void human_params(uint64_t n, char *out, size_t cap) {
  if (n >= 1000000000ull) snprintf(out, cap, "%.1fB", (double)n / 1e9);
  else if (n >= 1000000ull) snprintf(out, cap, "%.0fM", (double)n / 1e6);
  else if (n >= 1000ull) snprintf(out, cap, "%.1fK", (double)n / 1e3);
  else snprintf(out, cap, "%llu", (unsigned long long)n);
}

json_t *ollama_details(ollama_ctx *c, const registry_entry *e) {
  uint64_t params = 0, embd = 0;
  gguf_numbers(c, e, &params, &embd);
  char ps[32];
  human_params(params, ps, sizeof ps);
  const char *family = e->arch[0] ? e->arch : family_name(e->family);
  json_t *d = json_pack("{s:s, s:s, s:s, s:[s], s:s, s:s}", "parent_model", "", "format", "gguf", "family", family,
                        "families", family, "parameter_size", ps, "quantization_level",
                        e->quant[0] ? e->quant : "unknown");
  /* the detected family joins the architecture in families when it says
   * more ("llama" + "voxtral-realtime"), as Ollama lists a model's families */
  if (d && e->family != FAMILY_UNKNOWN && strcmp(family_name(e->family), family) != 0)
    json_array_append_new(json_object_get(d, "families"), json_string(family_name(e->family)));
  if (d && e->context_length) json_object_set_new(d, "context_length", json_integer((json_int_t)e->context_length));
  /* a mixture of experts: what one token reads beside the total
   * (parameter_size), in the same style */
  if (d && e->n_params_active && e->n_params_active < e->n_params) {
    char as[32];
    human_params(e->n_params_active, as, sizeof as);
    json_object_set_new(d, "active_parameter_size", json_string(as));
  }
  if (d && embd) json_object_set_new(d, "embedding_length", json_integer((json_int_t)embd));
  return d;
}

/* ---- overlay lookups ------------------------------------------------------- */

json_t *ollama_overlay_get(ollama_ctx *c, const char *name) {
  if (!name || !*name) return NULL;
  json_t *found = NULL;
  pthread_mutex_lock(&c->lock);
  size_t i;
  json_t *m;
  json_array_foreach(json_object_get(c->overlay, "models"), i, m) {
    const char *n = json_string_value(json_object_get(m, "name"));
    if (!n) continue;
    size_t nl = strlen(name);
    bool eq = strcasecmp(n, name) == 0 ||
              (!strchr(name, ':') && strncasecmp(n, name, nl) == 0 && strcmp(n + nl, ":latest") == 0);
    if (eq) {
      found = json_deep_copy(m);
      break;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return found;
}

const char *ollama_resolve(ollama_ctx *c, const char *name, char *out, size_t cap) {
  json_t *m = ollama_overlay_get(c, name);
  const char *n = m ? json_string_value(json_object_get(m, "name")) : NULL;
  snprintf(out, cap, "%s", n ? n : name ? name : "");
  json_decref(m);
  return out;
}

json_t *ollama_body(http_req *req) {
  size_t len = 0;
  const char *b = http_req_body(req, &len);
  bool blank = true;
  for (size_t i = 0; b && i < len && blank; i++) blank = isspace((unsigned char)b[i]);
  if (!b || blank) {
    api_error(req, 400, ERR_INVALID, "missing request body", NULL);
    return NULL;
  }
  /* Go decodes a JSON null into an empty request: the handler then names
   * the missing field ("model is required") */
  while (len && isspace((unsigned char)*b)) b++, len--;
  while (len && isspace((unsigned char)b[len - 1])) len--;
  if (len == 4 && memcmp(b, "null", 4) == 0) return json_object();
  return api_parse_body(req);
}

void ollama_full_name(const char *name, char *out, size_t cap) {
  int slashes = 0;
  for (const char *p = name; *p; p++) slashes += *p == '/';
  const char *last = strrchr(name, '/');
  bool tag = strchr(last ? last : name, ':') != NULL;
  snprintf(out, cap, "%s%s%s", slashes == 0 ? "registry.ollama.ai/library/" : slashes == 1 ? "registry.ollama.ai/" : "",
           name, tag ? "" : ":latest");
}
