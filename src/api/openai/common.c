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
#include "api/request.h"
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

/* A number field within [lo, hi]; absent leaves *out. */
static int num_field(gen_request *r, const json_t *body, const char *key, double lo, double hi, float *out) {
  double v;
  int rc = api_json_num(body, "", key, false, &v);
  if (rc == ERR_NOT_FOUND) return 0;
  if (rc) return gen_request_fail(r, rc, key, "%s", err_detail());
  if (!(v >= lo && v <= hi))
    return gen_request_fail(r, ERR_RANGE, key, "%s: %g is out of range (expected %g to %g)", key, v, lo, hi);
  *out = (float)v;
  return 0;
}

static int int_field(gen_request *r, const json_t *body, const char *key, long long lo, long long hi, long long *out,
                     bool *present) {
  long long v;
  int rc = api_json_int(body, "", key, false, &v);
  if (present) *present = false;
  if (rc == ERR_NOT_FOUND) return 0;
  if (rc) return gen_request_fail(r, rc, key, "%s", err_detail());
  if (v < lo || v > hi)
    return gen_request_fail(r, ERR_RANGE, key, "%s: %lld is out of range (expected %lld to %lld)", key, v, lo, hi);
  *out = v;
  if (present) *present = true;
  return 0;
}

static int bool_field(gen_request *r, const json_t *obj, const char *path, const char *key, const char *param,
                      bool *out) {
  int rc = api_json_bool(obj, path, key, false, out);
  if (rc && rc != ERR_NOT_FOUND) return gen_request_fail(r, rc, param, "%s", err_detail());
  return 0;
}

static int parse_stop(const json_t *body, gen_request *r) {
  const json_t *st = json_object_get(body, "stop");
  if (!st || json_is_null(st)) return 0;
  if (!json_is_string(st) && !json_is_array(st))
    return gen_request_fail(r, ERR_TYPE, "stop", "stop: expected string or array of strings, got %s",
                            api_json_type_name(st));
  size_t n = json_is_string(st) ? 1 : json_array_size(st);
  if (n > 4) return gen_request_fail(r, ERR_RANGE, "stop", "stop: at most 4 stop sequences, got %zu", n);
  for (size_t i = 0; i < n; i++) {
    const json_t *s = json_is_string(st) ? st : json_array_get(st, i);
    char path[32];
    snprintf(path, sizeof path, json_is_string(st) ? "stop" : "stop[%zu]", i);
    if (!json_is_string(s))
      return gen_request_fail(r, ERR_TYPE, path, "%s: expected string, got %s", path, api_json_type_name(s));
    if (gen_params_add_stop(&r->p, json_string_value(s), json_string_length(s)))
      return gen_request_fail(r, ERR_NOMEM, NULL, "out of memory");
  }
  return 0;
}

/* response_format: {"type":"text"} | {"type":"json_object"} |
 * {"type":"json_schema","json_schema":{"name","schema","strict"}}. The
 * schema is enforced by the grammar sampler whether or not strict is set
 * (a local model needs the constraint to follow it at all). */
static int parse_response_format(const json_t *body, gen_request *r) {
  const json_t *rf = json_object_get(body, "response_format");
  if (!rf || json_is_null(rf)) return 0;
  const char *type = json_string_value(json_object_get(rf, "type"));
  if (!json_is_object(rf) || !type)
    return gen_request_fail(r, ERR_INVALID, json_is_object(rf) ? "response_format.type" : "response_format",
                            "response_format: expected {\"type\": \"text\" | \"json_object\" | \"json_schema\"}");
  if (strcmp(type, "text") == 0) return 0;
  if (strcmp(type, "json_object") == 0) {
    gen_params_set_format(&r->p, GEN_FORMAT_JSON, NULL, "response_format");
    return 0;
  }
  if (strcmp(type, "json_schema") != 0)
    return gen_request_fail(r, ERR_INVALID, "response_format.type",
                            "response_format.type: '%.64s' is not one of text, json_object, json_schema", type);
  const json_t *js = json_object_get(rf, "json_schema");
  if (!json_is_object(js))
    return gen_request_fail(r, ERR_INVALID, "response_format.json_schema",
                            "response_format.json_schema: required object is missing");
  if (!json_is_string(json_object_get(js, "name")))
    return gen_request_fail(r, ERR_INVALID, "response_format.json_schema.name",
                            "response_format.json_schema.name: required string is missing");
  const json_t *schema = json_object_get(js, "schema");
  if (schema && !json_is_object(schema))
    return gen_request_fail(r, ERR_TYPE, "response_format.json_schema.schema",
                            "response_format.json_schema.schema: expected object, got %s", api_json_type_name(schema));
  if (schema) gen_params_set_format(&r->p, GEN_FORMAT_SCHEMA, schema, "response_format.json_schema.schema");
  else gen_params_set_format(&r->p, GEN_FORMAT_JSON, NULL, "response_format");
  return 0;
}

int openai_sampling_parse(const json_t *body, bool chat, gen_request *r) {
  int rc;
  float temp = 1.0f, top_p = 1.0f, pp = 0.0f, fp = 0.0f;
  if ((rc = num_field(r, body, "temperature", 0, 2, &temp))) return rc;
  if ((rc = num_field(r, body, "top_p", 0, 1, &top_p))) return rc;
  if ((rc = num_field(r, body, "presence_penalty", -2, 2, &pp))) return rc;
  if ((rc = num_field(r, body, "frequency_penalty", -2, 2, &fp))) return rc;
  engine_request *er = &r->p.er;
  er->sample.temperature = temp;
  er->sample.top_p = top_p > 0 ? top_p : 1e-6f;
  er->sample.presence_penalty = pp;
  er->sample.frequency_penalty = fp;
  if (pp != 0 || fp != 0) er->sample.penalty_last_n = 64;
  long long seed = 0;
  bool has_seed = false;
  if ((rc = int_field(r, body, "seed", INT64_MIN, INT64_MAX, &seed, &has_seed))) return rc;
  if (!has_seed) rand_bytes(&seed, sizeof seed);
  er->sample.seed = (uint64_t)seed;

  long long max_tokens = 0;
  bool has_max = false;
  if (chat && (rc = int_field(r, body, "max_completion_tokens", 1, INT32_MAX, &max_tokens, &has_max))) return rc;
  if (!has_max && (rc = int_field(r, body, "max_tokens", 1, INT32_MAX, &max_tokens, &has_max))) return rc;
  if (!chat && !has_max) max_tokens = 16; /* the legacy endpoint's documented default */
  er->max_tokens = max_tokens;

  /* the upper bound is the engine's slots: gen_request_bind */
  long long n = 1;
  if ((rc = int_field(r, body, "n", 1, INT32_MAX, &n, NULL))) return rc;
  er->n = (int32_t)n;

  if ((rc = parse_stop(body, r))) return rc;
  const json_t *lb = json_object_get(body, "logit_bias");
  if (lb && !json_is_null(lb) && !json_is_object(lb))
    return gen_request_fail(r, ERR_TYPE, "logit_bias", "logit_bias: expected object, got %s", api_json_type_name(lb));
  r->logit_bias = json_is_object(lb) ? lb : NULL; /* token ids: gen_request_bind */

  if ((rc = bool_field(r, body, "", "stream", "stream", &r->stream))) return rc;
  const json_t *so = json_object_get(body, "stream_options");
  if (so && !json_is_null(so)) {
    if (!json_is_object(so))
      return gen_request_fail(r, ERR_TYPE, "stream_options", "stream_options: expected object, got %s",
                              api_json_type_name(so));
    if ((rc = bool_field(r, so, "stream_options", "include_usage", "stream_options.include_usage",
                         &r->include_usage)))
      return rc;
  }

  if (chat) {
    if ((rc = parse_response_format(body, r))) return rc;
    if ((rc = bool_field(r, body, "", "logprobs", "logprobs", &r->logprobs))) return rc;
    long long top = 0;
    bool has_top = false;
    if ((rc = int_field(r, body, "top_logprobs", 0, SAMPLE_MAX_LOGPROBS, &top, &has_top))) return rc;
    if (has_top && !r->logprobs)
      return gen_request_fail(r, ERR_INVALID, "top_logprobs", "top_logprobs: requires logprobs to be true");
    r->top_logprobs = (int32_t)top;
  } else {
    long long lp = 0;
    bool has_lp = false;
    if ((rc = int_field(r, body, "logprobs", 0, 5, &lp, &has_lp))) return rc;
    r->logprobs = has_lp;
    r->top_logprobs = (int32_t)lp;
  }
  er->logprobs = r->logprobs;
  er->sample.n_logprobs = r->top_logprobs;
  return 0;
}

int openai_gen_parse(http_req *req, const json_t *body, bool chat, const manager_model *mm, openai_gen *g) {
  memset(g, 0, sizeof *g);
  gen_request r;
  gen_request_init(&r);
  int rc = openai_sampling_parse(body, chat, &r);
  if (!rc) rc = gen_request_bind(&r, mm);
  if (rc) {
    gen_front_parse_error(NULL, req, &r, rc);
    gen_request_free(&r);
    gen_params_init(&g->p);
    return rc;
  }
  g->p = r.p; /* moved */
  memset(&r.p, 0, sizeof r.p);
  g->stream = r.stream;
  g->include_usage = r.include_usage;
  g->logprobs = r.logprobs;
  g->top_logprobs = r.top_logprobs;
  gen_request_free(&r);
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
