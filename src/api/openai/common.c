/*
 * common.c - what the OpenAI chat and legacy-completion handlers share:
 * parsing and range-checking the sampling fields (errors name the JSON
 * path), ids, finish reasons, logprob entries, prompt tokenization and SSE
 * writes. Ranges follow the OpenAI reference: temperature 0..2, top_p 0..1,
 * penalties -2..2, logit_bias values -100..100, at most 4 stop strings,
 * top_logprobs 0..20, n 1..--parallel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/openai.h"
#include "base/err.h"
#include "base/util.h"

void openai_error_model_not_found(http_req *req, const char *message) {
  if (api_dialect_of(req) != API_DIALECT_OPENAI) {
    api_error(req, 404, ERR_NOT_FOUND, message, "model");
    return;
  }
  json_t *body = json_pack("{s:{s:s, s:s, s:s, s:s}}", "error", "message", message, "type", "invalid_request_error",
                           "param", "model", "code", "model_not_found");
  if (!body) {
    api_error(req, 404, ERR_NOT_FOUND, message, "model");
    return;
  }
  http_resp_header(req, "x-should-retry", "false");
  api_respond_json(req, 404, body);
  json_decref(body);
}

void openai_error_manager(http_req *req, int rc) {
  if (rc == ERR_NOT_FOUND) openai_error_model_not_found(req, err_detail());
  else if (rc == ERR_UNSUPPORTED || rc == ERR_INVALID) api_error(req, 400, rc, err_detail(), "model");
  else api_error_last(req, rc, NULL);
}

void openai_make_id(char *out, size_t cap, const char *prefix) {
  if (id_make(out, cap, prefix, 12)) snprintf(out, cap, "%s%016llx", prefix, (unsigned long long)time_mono_ns());
}

const char *openai_finish_reason(enum engine_finish f) {
  return f == ENGINE_FINISH_LENGTH ? "length" : "stop";
}

/* 400 naming the field; returns the code. */
static int bad(http_req *req, int code, const char *param) {
  api_error(req, 400, code, err_detail(), param);
  return code;
}

/* A number field within [lo, hi]; absent leaves *out. */
static int num_field(http_req *req, const json_t *body, const char *key, double lo, double hi, float *out) {
  double v;
  int rc = api_json_num(body, "", key, false, &v);
  if (rc == ERR_NOT_FOUND) return 0;
  if (rc) return bad(req, rc, key);
  if (!(v >= lo && v <= hi)) {
    err_set(ERR_RANGE, "%s: %g is out of range (expected %g to %g)", key, v, lo, hi);
    return bad(req, ERR_RANGE, key);
  }
  *out = (float)v;
  return 0;
}

static int int_field(http_req *req, const json_t *body, const char *key, long long lo, long long hi, long long *out,
                     bool *present) {
  long long v;
  int rc = api_json_int(body, "", key, false, &v);
  if (present) *present = false;
  if (rc == ERR_NOT_FOUND) return 0;
  if (rc) return bad(req, rc, key);
  if (v < lo || v > hi) {
    err_set(ERR_RANGE, "%s: %lld is out of range (expected %lld to %lld)", key, v, lo, hi);
    return bad(req, ERR_RANGE, key);
  }
  *out = v;
  if (present) *present = true;
  return 0;
}

static int parse_stop(http_req *req, const json_t *body, openai_gen *g) {
  const json_t *st = json_object_get(body, "stop");
  if (!st || json_is_null(st)) return 0;
  size_t n = json_is_string(st) ? 1 : json_is_array(st) ? json_array_size(st) : 0;
  if (!json_is_string(st) && !json_is_array(st)) {
    err_set(ERR_TYPE, "stop: expected string or array of strings, got %s", api_json_type_name(st));
    return bad(req, ERR_TYPE, "stop");
  }
  if (n > 4) {
    err_set(ERR_RANGE, "stop: at most 4 stop sequences, got %zu", n);
    return bad(req, ERR_RANGE, "stop");
  }
  for (size_t i = 0; i < n; i++) {
    const json_t *s = json_is_string(st) ? st : json_array_get(st, i);
    char path[32];
    snprintf(path, sizeof path, json_is_string(st) ? "stop" : "stop[%zu]", i);
    if (!json_is_string(s)) {
      err_set(ERR_TYPE, "%s: expected string, got %s", path, api_json_type_name(s));
      return bad(req, ERR_TYPE, path);
    }
    if (gen_params_add_stop(&g->p, json_string_value(s), json_string_length(s))) return bad(req, ERR_NOMEM, NULL);
  }
  return 0;
}

static int parse_bias(http_req *req, const json_t *body, const manager_model *mm, openai_gen *g) {
  const json_t *lb = json_object_get(body, "logit_bias");
  if (!lb || json_is_null(lb)) return 0;
  if (!json_is_object(lb)) {
    err_set(ERR_TYPE, "logit_bias: expected object, got %s", api_json_type_name(lb));
    return bad(req, ERR_TYPE, "logit_bias");
  }
  size_t n = json_object_size(lb);
  if (!n) return 0;
  const char *key;
  const json_t *v;
  int32_t n_vocab = tok_n_vocab(mm->t);
  json_object_foreach((json_t *)lb, key, v) {
    char path[96];
    snprintf(path, sizeof path, "logit_bias.%.64s", key);
    char *end = NULL;
    long id = strtol(key, &end, 10);
    if (!*key || *end || id < 0 || id >= n_vocab) {
      err_set(ERR_RANGE, "%s: '%.64s' is not a token id of this model (0 to %d)", path, key, n_vocab - 1);
      return bad(req, ERR_RANGE, path);
    }
    if (!json_is_number(v)) {
      err_set(ERR_TYPE, "%s: expected number, got %s", path, api_json_type_name(v));
      return bad(req, ERR_TYPE, path);
    }
    double b = json_number_value(v);
    if (!(b >= -100 && b <= 100)) {
      err_set(ERR_RANGE, "%s: %g is out of range (expected -100 to 100)", path, b);
      return bad(req, ERR_RANGE, path);
    }
    if (gen_params_add_bias(&g->p, n, (int32_t)id, b <= -100 ? -INFINITY : (float)b)) return bad(req, ERR_NOMEM, NULL);
  }
  return 0;
}

/* response_format: {"type":"text"} | {"type":"json_object"} |
 * {"type":"json_schema","json_schema":{"name","schema","strict"}}. The
 * schema is enforced by the grammar sampler whether or not strict is set
 * (a local model needs the constraint to follow it at all). */
static int parse_response_format(http_req *req, const json_t *body, openai_gen *g) {
  const json_t *rf = json_object_get(body, "response_format");
  if (!rf || json_is_null(rf)) return 0;
  const char *type = json_string_value(json_object_get(rf, "type"));
  if (!json_is_object(rf) || !type) {
    err_set(ERR_INVALID, "response_format: expected {\"type\": \"text\" | \"json_object\" | \"json_schema\"}");
    return bad(req, ERR_INVALID, json_is_object(rf) ? "response_format.type" : "response_format");
  }
  if (strcmp(type, "text") == 0) return 0;
  if (strcmp(type, "json_object") == 0) {
    gen_params_set_format(&g->p, GEN_FORMAT_JSON, NULL, "response_format");
    return 0;
  }
  if (strcmp(type, "json_schema") != 0) {
    err_set(ERR_INVALID, "response_format.type: '%.64s' is not one of text, json_object, json_schema", type);
    return bad(req, ERR_INVALID, "response_format.type");
  }
  const json_t *js = json_object_get(rf, "json_schema");
  if (!json_is_object(js)) {
    err_set(ERR_INVALID, "response_format.json_schema: required object is missing");
    return bad(req, ERR_INVALID, "response_format.json_schema");
  }
  if (!json_is_string(json_object_get(js, "name"))) {
    err_set(ERR_INVALID, "response_format.json_schema.name: required string is missing");
    return bad(req, ERR_INVALID, "response_format.json_schema.name");
  }
  const json_t *schema = json_object_get(js, "schema");
  if (schema && !json_is_object(schema)) {
    err_set(ERR_TYPE, "response_format.json_schema.schema: expected object, got %s", api_json_type_name(schema));
    return bad(req, ERR_TYPE, "response_format.json_schema.schema");
  }
  if (schema) gen_params_set_format(&g->p, GEN_FORMAT_SCHEMA, schema, "response_format.json_schema.schema");
  else gen_params_set_format(&g->p, GEN_FORMAT_JSON, NULL, "response_format");
  return 0;
}

int openai_gen_parse(http_req *req, const json_t *body, bool chat, const manager_model *mm, openai_gen *g) {
  memset(g, 0, sizeof *g);
  gen_params_init(&g->p);
  int rc;
  float temp = 1.0f, top_p = 1.0f, pp = 0.0f, fp = 0.0f;
  if ((rc = num_field(req, body, "temperature", 0, 2, &temp))) return rc;
  if ((rc = num_field(req, body, "top_p", 0, 1, &top_p))) return rc;
  if ((rc = num_field(req, body, "presence_penalty", -2, 2, &pp))) return rc;
  if ((rc = num_field(req, body, "frequency_penalty", -2, 2, &fp))) return rc;
  g->p.er.sample.temperature = temp;
  g->p.er.sample.top_p = top_p > 0 ? top_p : 1e-6f;
  g->p.er.sample.presence_penalty = pp;
  g->p.er.sample.frequency_penalty = fp;
  if (pp != 0 || fp != 0) g->p.er.sample.penalty_last_n = 64;
  long long seed = 0;
  bool has_seed = false;
  if ((rc = int_field(req, body, "seed", INT64_MIN, INT64_MAX, &seed, &has_seed))) return rc;
  if (!has_seed) rand_bytes(&seed, sizeof seed);
  g->p.er.sample.seed = (uint64_t)seed;

  long long max_tokens = 0;
  bool has_max = false;
  if (chat && (rc = int_field(req, body, "max_completion_tokens", 1, INT32_MAX, &max_tokens, &has_max))) return rc;
  if (!has_max && (rc = int_field(req, body, "max_tokens", 1, INT32_MAX, &max_tokens, &has_max))) return rc;
  if (!chat && !has_max) max_tokens = 16; /* the legacy endpoint's documented default */
  g->p.er.max_tokens = max_tokens;

  long long n = 1;
  int32_t n_slots = mm->eng ? engine_n_slots(mm->eng) : 1;
  if ((rc = int_field(req, body, "n", 1, n_slots, &n, NULL))) return rc;
  g->p.er.n = (int32_t)n;

  if ((rc = parse_stop(req, body, g))) return rc;
  if ((rc = parse_bias(req, body, mm, g))) return rc;

  rc = api_json_bool(body, "", "stream", false, &g->stream);
  if (rc && rc != ERR_NOT_FOUND) return bad(req, rc, "stream");
  const json_t *so = json_object_get(body, "stream_options");
  if (so && !json_is_null(so)) {
    if (!json_is_object(so)) {
      err_set(ERR_TYPE, "stream_options: expected object, got %s", api_json_type_name(so));
      return bad(req, ERR_TYPE, "stream_options");
    }
    rc = api_json_bool(so, "stream_options", "include_usage", false, &g->include_usage);
    if (rc && rc != ERR_NOT_FOUND) return bad(req, rc, "stream_options.include_usage");
  }

  if (chat && (rc = parse_response_format(req, body, g))) return rc;
  if (chat) {
    rc = api_json_bool(body, "", "logprobs", false, &g->logprobs);
    if (rc && rc != ERR_NOT_FOUND) return bad(req, rc, "logprobs");
    long long top = 0;
    bool has_top = false;
    if ((rc = int_field(req, body, "top_logprobs", 0, SAMPLE_MAX_LOGPROBS, &top, &has_top))) return rc;
    if (has_top && !g->logprobs) {
      err_set(ERR_INVALID, "top_logprobs: requires logprobs to be true");
      return bad(req, ERR_INVALID, "top_logprobs");
    }
    g->top_logprobs = (int32_t)top;
  } else {
    long long lp = 0;
    bool has_lp = false;
    if ((rc = int_field(req, body, "logprobs", 0, 5, &lp, &has_lp))) return rc;
    g->logprobs = has_lp;
    g->top_logprobs = (int32_t)lp;
  }
  g->p.er.logprobs = g->logprobs;
  g->p.er.sample.n_logprobs = g->top_logprobs;
  return 0;
}

void openai_gen_free(openai_gen *g) {
  gen_params_free(&g->p);
  memset(g, 0, sizeof *g);
}

json_t *openai_logprob_entry(const tok *t, const sample_result *r, int32_t n_top) {
  buf piece = BUF_INIT;
  json_t *e = NULL, *top = json_array();
  if (!top) return NULL;
  for (int32_t k = -1; k < n_top && k < r->n_top; k++) {
    int32_t id = k < 0 ? r->token : r->top[k].token;
    float lp = k < 0 ? r->logprob : r->top[k].logprob;
    buf_reset(&piece);
    tok_decode_piece(t, id, 0, &piece);
    json_t *bytes = json_array();
    for (size_t i = 0; bytes && i < piece.len; i++) json_array_append_new(bytes, json_integer((unsigned char)piece.data[i]));
    json_t *item = json_pack("{s:s%, s:f, s:o}", "token", piece.len ? piece.data : "", piece.len,
                             "logprob", isfinite(lp) ? (double)lp : -9999.0, "bytes", bytes ? bytes : json_null());
    if (k < 0) e = item;
    else if (item) json_array_append_new(top, item);
  }
  buf_free(&piece);
  if (!e) {
    json_decref(top);
    return NULL;
  }
  json_object_set_new(e, "top_logprobs", top);
  return e;
}

int openai_sse_json(http_stream *s, const json_t *v) {
  char *text = json_dumps(v, JSON_COMPACT);
  if (!text) return ERR_NOMEM;
  int rc = http_stream_sse(s, NULL, text, strlen(text));
  free(text);
  return rc;
}
