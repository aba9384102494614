/*
 * embeddings.c - POST /v1/embeddings for models whose architecture embeds
 * (bert, qwen2/qwen3 embedders: model_embed). input is a string, an array
 * of strings, an array of token ids or an array of token-id arrays; a text
 * is tokenized (with the vocabulary's special tokens, CLS/SEP for
 * WordPiece), token ids are used as given (so a text's own ids embed to the
 * same vector), and each input is embedded to a unit vector. An input
 * longer than the model's context is a 400 naming input[i] with both
 * numbers; every input is checked before the first is embedded.
 *
 * Batching: all inputs go to the model's embedding batcher at once
 * (manager_model_embed_many, engine/embedq.c), which runs them, together
 * with other requests' inputs, in batched forward passes and takes inputs
 * round-robin across requests, so a request with a long input array does
 * not hold the model until it is done. dimensions keeps the
 * first k components and renormalises them (Matryoshka-style truncation).
 * encoding_format "base64" (what the SDKs ask by default) is the vector's
 * little-endian float32 bytes in base64; "float" a JSON array.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/openai.h"
#include "base/err.h"
#include "base/util.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *base64_floats(const float *v, size_t n) {
  size_t nb = n * 4, out_len = (nb + 2) / 3 * 4;
  unsigned char *bytes = malloc(nb ? nb : 1);
  char *out = malloc(out_len + 1);
  if (!bytes || !out) {
    free(bytes);
    free(out);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], 4);
    bytes[4 * i] = (unsigned char)u;
    bytes[4 * i + 1] = (unsigned char)(u >> 8);
    bytes[4 * i + 2] = (unsigned char)(u >> 16);
    bytes[4 * i + 3] = (unsigned char)(u >> 24);
  }
  size_t o = 0;
  for (size_t i = 0; i < nb; i += 3) {
    uint32_t w = (uint32_t)bytes[i] << 16;
    if (i + 1 < nb) w |= (uint32_t)bytes[i + 1] << 8;
    if (i + 2 < nb) w |= bytes[i + 2];
    out[o++] = B64[(w >> 18) & 63];
    out[o++] = B64[(w >> 12) & 63];
    out[o++] = i + 1 < nb ? B64[(w >> 6) & 63] : '=';
    out[o++] = i + 2 < nb ? B64[w & 63] : '=';
  }
  out[o] = '\0';
  json_t *s = json_string(out);
  free(bytes);
  free(out);
  return s;
}

/* The inputs: forms "s" | ["s", ...] | [id, ...] | [[id, ...], ...]. On
 * error answers 400 naming input / input[i] / input[i][j]. */
static int read_inputs(http_req *req, const json_t *input, const manager_model *mm, tok_ids **out, size_t *n_out) {
  char path[48], msg[256];
  bool one = json_is_string(input) || (json_is_array(input) && json_is_integer(json_array_get(input, 0)));
  size_t n = one ? 1 : json_is_array(input) ? json_array_size(input) : 0;
  if (!n) {
    api_error(req, 400, json_is_array(input) ? ERR_INVALID : ERR_TYPE,
              "input: expected a non-empty string, array of strings, array of token ids or array of token-id arrays",
              "input");
    return ERR_INVALID;
  }
  if (n > 2048) {
    snprintf(msg, sizeof msg, "input: %zu inputs given, at most 2048 per request", n);
    api_error(req, 400, ERR_RANGE, msg, "input");
    return ERR_RANGE;
  }
  tok_ids *v = calloc(n, sizeof *v);
  if (!v) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return ERR_NOMEM;
  }
  *out = v;
  *n_out = n;
  bool strings = json_is_string(input) || json_is_string(json_array_get(input, 0));
  int32_t n_vocab = tok_n_vocab(mm->t);
  int64_t limit = model_get_hparams(mm->m)->n_ctx_train;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = one ? input : json_array_get(input, i);
    if (one) snprintf(path, sizeof path, "input");
    else snprintf(path, sizeof path, "input[%zu]", i);
    if (strings ? !json_is_string(e) || !json_string_length(e) : !json_is_array(e) || !json_array_size(e)) {
      snprintf(msg, sizeof msg, "%s: expected %s like the first input", path,
               strings ? "a non-empty string" : "a non-empty array of token ids");
      api_error(req, 400, ERR_INVALID, msg, path);
      return ERR_INVALID;
    }
    int rc = 0;
    if (strings) {
      rc = tok_encode(mm->t, json_string_value(e), json_string_length(e), TOK_ENCODE_ADD_SPECIAL, &v[i]);
      if (rc) {
        api_error(req, 0, rc, err_detail(), path);
        return rc;
      }
    } else {
      size_t k;
      const json_t *id;
      json_array_foreach(e, k, id) {
        char ipath[80];
        snprintf(ipath, sizeof ipath, "%s[%zu]", path, k);
        json_int_t x = json_is_integer(id) ? json_integer_value(id) : -1;
        if (!json_is_integer(id) || x < 0 || x >= n_vocab) {
          if (json_is_integer(id))
            snprintf(msg, sizeof msg, "%s: token id %lld is outside the vocabulary (0 to %d)", ipath, (long long)x,
                     n_vocab - 1);
          else snprintf(msg, sizeof msg, "%s: expected a token id (integer), got %s", ipath, api_json_type_name(id));
          api_error(req, 400, json_is_integer(id) ? ERR_RANGE : ERR_TYPE, msg, ipath);
          return ERR_INVALID;
        }
        if (tok_ids_push(&v[i], (int32_t)x)) {
          api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
          return ERR_NOMEM;
        }
      }
    }
    if ((int64_t)v[i].n > limit) {
      snprintf(msg, sizeof msg, "%s: %zu tokens, but the model's context holds %lld", path, v[i].n, (long long)limit);
      api_error(req, 400, ERR_CONTEXT, msg, path);
      return ERR_CONTEXT;
    }
  }
  return 0;
}

void openai_embeddings(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  if (openai_check_fields(req, body, OPENAI_SHAPE_EMBEDDING)) {
    json_decref(body);
    return;
  }
  float *vec = NULL;
  const int32_t **toks = NULL;
  int64_t *lens = NULL;
  json_t *data = NULL;
  tok_ids *ins = NULL;
  size_t n_in = 0;
  manager_model *mm = NULL;
  const char *model_name = NULL, *fmt = "float";
  int rc = api_json_str(body, "", "model", false, &model_name);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  rc = api_json_str(body, "", "encoding_format", false, &fmt);
  if (rc == ERR_NOT_FOUND) fmt = "float";
  else if (rc) {
    api_error_last(req, rc, "encoding_format");
    goto done;
  }
  bool b64 = strcmp(fmt, "base64") == 0;
  if (!b64 && strcmp(fmt, "float") != 0) {
    api_error(req, 400, ERR_INVALID, "encoding_format: expected 'float' or 'base64'", "encoding_format");
    goto done;
  }
  const json_t *input = json_object_get(body, "input");
  if (!input || json_is_null(input)) {
    api_error(req, 400, ERR_INVALID, "input: required field is missing", "input");
    goto done;
  }
  if ((rc = manager_get(oc->mgr, model_name, &mm))) {
    openai_error_manager(req, rc);
    goto done;
  }
  if (!manager_model_can_embed(mm)) {
    char msg[256];
    snprintf(msg, sizeof msg, "model '%s' does not produce embeddings", mm->name);
    api_error(req, 400, ERR_UNSUPPORTED, msg, "model");
    goto done;
  }
  int64_t n_embd = model_get_hparams(mm->m)->n_embd;
  long long dims = n_embd;
  rc = api_json_int(body, "", "dimensions", false, &dims);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "dimensions");
    goto done;
  }
  if (dims < 1 || dims > n_embd) {
    char msg[128];
    snprintf(msg, sizeof msg, "dimensions: %lld is out of range (1 to %lld)", dims, (long long)n_embd);
    api_error(req, 400, ERR_RANGE, msg, "dimensions");
    goto done;
  }
  if (read_inputs(req, input, mm, &ins, &n_in)) goto done;
  vec = malloc(n_in * (size_t)n_embd * sizeof *vec);
  toks = malloc(n_in * sizeof *toks);
  lens = malloc(n_in * sizeof *lens);
  data = json_array();
  if (!vec || !toks || !lens || !data) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    goto done;
  }
  for (size_t i = 0; i < n_in; i++) {
    toks[i] = ins[i].ids;
    lens[i] = (int64_t)ins[i].n;
  }
  size_t bad = 0;
  if ((rc = manager_model_embed_many(mm, n_in, toks, lens, vec, &bad))) {
    char path[32];
    snprintf(path, sizeof path, json_is_array(input) && !json_is_integer(json_array_get(input, 0)) ? "input[%zu]" : "input", bad);
    api_error(req, 0, rc, err_detail(), rc == ERR_OVERLOADED ? NULL : path);
    goto done;
  }
  int64_t n_tokens = 0;
  for (size_t i = 0; i < n_in; i++) {
    float *v = vec + i * (size_t)n_embd;
    n_tokens += (int64_t)ins[i].n;
    if (dims < n_embd) { /* truncate and renormalise */
      double ss = 0;
      for (long long k = 0; k < dims; k++) ss += (double)v[k] * v[k];
      float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
      for (long long k = 0; k < dims; k++) v[k] *= inv;
    }
    json_t *emb;
    if (b64) emb = base64_floats(v, (size_t)dims);
    else {
      emb = json_array();
      for (long long k = 0; emb && k < dims; k++) json_array_append_new(emb, json_real(v[k]));
    }
    json_t *item = emb ? json_pack("{s:s, s:I, s:o}", "object", "embedding", "index", (json_int_t)i, "embedding", emb)
                       : NULL;
    if (!item || json_array_append_new(data, item)) {
      api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
      goto done;
    }
  }
  json_t *resp = json_pack("{s:s, s:O, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model",
                           model_name ? model_name : mm->name, "usage", "prompt_tokens", (json_int_t)n_tokens,
                           "total_tokens", (json_int_t)n_tokens);
  if (resp) api_respond_json(req, 200, resp);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(resp);
done:
  manager_release(mm);
  for (size_t i = 0; ins && i < n_in; i++) tok_ids_free(&ins[i]);
  free(ins);
  json_decref(data);
  free(vec);
  free(toks);
  free(lens);
  json_decref(body);
}
