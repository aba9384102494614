/*
 * embed.c - POST /api/embed (batch, L2-normalised, `truncate`,
 * `dimensions`) and the legacy POST /api/embeddings (one `prompt`, one
 * `embedding`), on the manager's pooled embeddings: all inputs of a request
 * go to the model's embedding batcher at once (manager_model_embed_many).
 *
 * Ollama's rules (../shared/specs/ollama.md 2.8, 2.9): an empty input
 * loads the model and answers no vectors; a non-string input is `invalid
 * input type`; an input longer than the context is cut to fit unless
 * truncate is false (then 400); `dimensions` keeps the first d components
 * and renormalises; an unknown model is 404 `model "x" not found, try
 * pulling it first`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/util.h"

/* Tokenizes one text into *ids, cut to the context when truncate (else
 * 400). Answers the error itself. */
static int embed_tokens(http_req *req, manager_model *mm, const char *text, size_t len, bool truncate, tok_ids *ids) {
  int rc = tok_encode(mm->t, text, len, TOK_ENCODE_ADD_SPECIAL, ids);
  if (rc) {
    ollama_err(req, 400, rc, "%s", err_detail());
    return rc;
  }
  int64_t n_ctx = model_get_hparams(mm->m)->n_ctx_train;
  if (n_ctx > 0 && (int64_t)ids->n > n_ctx) {
    if (!truncate) {
      ollama_err(req, 400, ERR_CONTEXT, "the input length exceeds the context length");
      return ERR_CONTEXT;
    }
    /* keep the end marker (SEP/EOS) the vocabulary appended */
    int32_t last = ids->ids[ids->n - 1];
    ids->n = (size_t)n_ctx;
    if (tok_add_eos(mm->t) || tok_model_kind(mm->t) == TOK_MODEL_WPM) ids->ids[ids->n - 1] = last;
  }
  if (!ids->n) {
    ollama_err(req, 400, ERR_INVALID, "the input has no tokens");
    return ERR_INVALID;
  }
  return 0;
}

/* Embeds n texts' tokens into vec[n][n_embd] (unit length) in the model's
 * batched passes. Answers the error itself. */
static int embed_many(http_req *req, manager_model *mm, const tok_ids *ids, size_t n, float *vec) {
  const int32_t **toks = malloc((n ? n : 1) * sizeof *toks);
  int64_t *lens = malloc((n ? n : 1) * sizeof *lens);
  int rc = 0;
  if (!toks || !lens) {
    ollama_err(req, 500, ERR_NOMEM, "out of memory");
    rc = ERR_NOMEM;
  } else {
    for (size_t i = 0; i < n; i++) {
      toks[i] = ids[i].ids;
      lens[i] = (int64_t)ids[i].n;
    }
    if ((rc = manager_model_embed_many(mm, n, toks, lens, vec, NULL))) ollama_err(req, 0, rc, "%s", err_detail());
  }
  free(toks);
  free(lens);
  return rc;
}

static bool finite_all(const float *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(v[i])) return false;
  return true;
}

void ollama_embed(http_req *req, void *ctx) {
  ollama_ctx *oc = ctx;
  uint64_t t0 = time_mono_ns();
  json_t *body = ollama_body(req);
  if (!body) return;
  manager_model *mm = NULL;
  float *vec = NULL;
  tok_ids *ids = NULL;
  json_t *embs = NULL;
  const char *mname = NULL;
  bool truncate = true, ka_set = false;
  int64_t ka_ms = 0;
  int rc = api_json_str(body, "", "model", false, &mname);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  if (!mname || !*mname) {
    ollama_err(req, 400, ERR_INVALID, "model is required");
    goto done;
  }
  if (!ollama_name_valid(mname)) {
    ollama_err(req, 400, ERR_INVALID, "invalid model name");
    goto done;
  }
  const json_t *input = json_object_get(body, "input");
  size_t n_in = 0;
  if (json_is_string(input)) n_in = json_string_length(input) ? 1 : 0;
  else if (json_is_array(input)) {
    n_in = json_array_size(input);
    for (size_t i = 0; i < n_in; i++)
      if (!json_is_string(json_array_get(input, i))) {
        ollama_err(req, 400, ERR_TYPE, "invalid input type");
        goto done;
      }
  } else if (input && !json_is_null(input)) {
    ollama_err(req, 400, ERR_TYPE, "invalid input type");
    goto done;
  }
  rc = api_json_bool(body, "", "truncate", false, &truncate);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "truncate");
    goto done;
  }
  if (rc == ERR_NOT_FOUND) truncate = true;
  long long dims = 0;
  rc = api_json_int(body, "", "dimensions", false, &dims);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "dimensions");
    goto done;
  }
  if (dims < 0) {
    ollama_err(req, 400, ERR_RANGE, "dimensions must be a positive number, got %lld", dims);
    goto done;
  }
  gen_params scratch;
  ollama_params_init(&scratch);
  rc = ollama_options(json_object_get(body, "options"), &scratch);
  gen_params_free(&scratch);
  if (rc || (rc = ollama_keep_alive(json_object_get(body, "keep_alive"), &ka_set, &ka_ms))) {
    ollama_answer(req, rc);
    goto done;
  }
  uint64_t tl = time_mono_ns();
  if ((rc = ollama_model_get(oc, mname, ka_set, ka_ms, &mm))) {
    if (rc == ERR_NOT_FOUND) ollama_err(req, 404, rc, "model \"%s\" not found, try pulling it first", mname);
    else ollama_error_manager(req, rc, mname);
    goto done;
  }
  uint64_t load_ns = time_mono_ns() - tl;
  if (!manager_model_can_embed(mm)) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support embeddings", mname);
    goto done;
  }
  int64_t n_embd = model_get_hparams(mm->m)->n_embd;
  if (dims > n_embd) {
    ollama_err(req, 400, ERR_RANGE, "dimensions %lld is larger than the model's embedding length %lld", dims,
               (long long)n_embd);
    goto done;
  }
  if (!dims) dims = n_embd;
  vec = malloc((n_in ? n_in : 1) * (size_t)n_embd * sizeof *vec);
  ids = calloc(n_in ? n_in : 1, sizeof *ids);
  embs = json_array();
  if (!vec || !ids || !embs) {
    ollama_err(req, 500, ERR_NOMEM, "out of memory");
    goto done;
  }
  int64_t n_tokens = 0;
  for (size_t i = 0; i < n_in; i++) {
    const json_t *s = json_is_string(input) ? input : json_array_get(input, i);
    if (embed_tokens(req, mm, json_string_value(s), json_string_length(s), truncate, &ids[i])) goto done;
  }
  if (n_in && embed_many(req, mm, ids, n_in, vec)) goto done;
  for (size_t i = 0; i < n_in; i++) {
    const float *v = vec + i * (size_t)n_embd;
    if (!finite_all(v, n_embd)) {
      ollama_err(req, 500, ERR_INTERNAL, "the embedding of input %zu holds NaN or Inf", i);
      goto done;
    }
    n_tokens += (int64_t)ids[i].n;
    double ss = 0;
    for (long long k = 0; k < dims; k++) ss += (double)v[k] * v[k];
    double inv = ss > 0 ? 1.0 / sqrt(ss) : 0.0;
    json_t *e = json_array();
    for (long long k = 0; e && k < dims; k++) json_array_append_new(e, json_real((double)v[k] * inv));
    if (!e || json_array_append_new(embs, e)) {
      ollama_err(req, 500, ERR_NOMEM, "out of memory");
      goto done;
    }
  }
  json_t *resp = json_pack("{s:s, s:O}", "model", mname, "embeddings", embs);
  if (resp && n_in) {
    int64_t total = (int64_t)(time_mono_ns() - t0);
    json_object_set_new(resp, "total_duration", json_integer(total > 0 ? total : 1));
    json_object_set_new(resp, "load_duration", json_integer(load_ns > 0 ? (json_int_t)load_ns : 1));
    json_object_set_new(resp, "prompt_eval_count", json_integer(n_tokens));
  }
  if (resp) ollama_json(req, 200, resp);
  else ollama_err(req, 500, ERR_NOMEM, "out of memory");
  json_decref(resp);
done:
  manager_release(mm);
  for (size_t i = 0; ids && i < n_in; i++) tok_ids_free(&ids[i]);
  free(ids);
  free(vec);
  json_decref(embs);
  json_decref(body);
}

void ollama_embeddings(http_req *req, void *ctx) {
  ollama_ctx *oc = ctx;
  json_t *body = ollama_body(req);
  if (!body) return;
  manager_model *mm = NULL;
  float *vec = NULL;
  const char *mname = NULL, *prompt = "";
  bool ka_set = false;
  int64_t ka_ms = 0;
  int rc = api_json_str(body, "", "model", false, &mname);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  if (!mname || !*mname) {
    ollama_err(req, 400, ERR_INVALID, "model is required");
    goto done;
  }
  if (!ollama_name_valid(mname)) {
    ollama_err(req, 400, ERR_INVALID, "invalid model name");
    goto done;
  }
  rc = api_json_str(body, "", "prompt", false, &prompt);
  if (rc == ERR_NOT_FOUND) prompt = "";
  else if (rc) {
    api_error_last(req, rc, "prompt");
    goto done;
  }
  if ((rc = ollama_keep_alive(json_object_get(body, "keep_alive"), &ka_set, &ka_ms))) {
    ollama_answer(req, rc);
    goto done;
  }
  if ((rc = ollama_model_get(oc, mname, ka_set, ka_ms, &mm))) {
    if (rc == ERR_NOT_FOUND) ollama_err(req, 404, rc, "model \"%s\" not found, try pulling it first", mname);
    else ollama_error_manager(req, rc, mname);
    goto done;
  }
  if (!manager_model_can_embed(mm)) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support embeddings", mname);
    goto done;
  }
  int64_t n_embd = model_get_hparams(mm->m)->n_embd;
  json_t *e = json_array();
  if (*prompt) {
    tok_ids ids = TOK_IDS_INIT;
    if (!(vec = malloc((size_t)n_embd * sizeof *vec))) {
      json_decref(e);
      ollama_err(req, 500, ERR_NOMEM, "out of memory");
      goto done;
    }
    if (embed_tokens(req, mm, prompt, strlen(prompt), true, &ids) || embed_many(req, mm, &ids, 1, vec)) {
      tok_ids_free(&ids);
      json_decref(e);
      goto done;
    }
    tok_ids_free(&ids);
    for (int64_t k = 0; e && k < n_embd; k++) json_array_append_new(e, json_real(vec[k]));
  }
  json_t *resp = e ? json_pack("{s:o}", "embedding", e) : NULL;
  if (resp) ollama_json(req, 200, resp);
  else ollama_err(req, 500, ERR_NOMEM, "out of memory");
  json_decref(resp);
done:
  manager_release(mm);
  free(vec);
  json_decref(body);
}
