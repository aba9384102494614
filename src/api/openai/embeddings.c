/*
 * embeddings.c - POST /v1/embeddings for models whose architecture embeds
 * (bert, qwen2/qwen3 embedders: model_embed). input is a string or an array
 * of strings; each is tokenized (with the vocabulary's special tokens,
 * CLS/SEP for WordPiece) and embedded to a unit vector. dimensions keeps the
 * first k components and renormalises them (Matryoshka-style truncation).
 * encoding_format "base64" (what the SDKs ask by default) is the vector's
 * little-endian float32 bytes in base64; "float" a JSON array.
 */
#include <math.h>
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

void openai_embeddings(http_req *req, void *ctx) {
  openai_ctx *oc = ctx;
  json_t *body = api_parse_body(req);
  if (!body) return;
  float *vec = NULL;
  json_t *data = NULL;
  tok_ids ids = TOK_IDS_INIT;
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
  size_t n_in = json_is_string(input) ? 1 : json_is_array(input) ? json_array_size(input) : 0;
  if (!n_in) {
    api_error(req, 400, ERR_INVALID, "input: expected a non-empty string or array of strings", "input");
    goto done;
  }
  for (size_t i = 0; json_is_array(input) && i < n_in; i++)
    if (!json_is_string(json_array_get(input, i)) || !json_string_length(json_array_get(input, i))) {
      char path[32], msg[96];
      snprintf(path, sizeof path, "input[%zu]", i);
      snprintf(msg, sizeof msg, "%s: expected a non-empty string (token arrays are not supported)", path);
      api_error(req, 400, ERR_INVALID, msg, path);
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
  vec = malloc((size_t)n_embd * sizeof *vec);
  data = json_array();
  if (!vec || !data) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    goto done;
  }
  int64_t n_tokens = 0;
  for (size_t i = 0; i < n_in; i++) {
    const json_t *s = json_is_string(input) ? input : json_array_get(input, i);
    ids.n = 0;
    if ((rc = tok_encode(mm->t, json_string_value(s), json_string_length(s), TOK_ENCODE_ADD_SPECIAL, &ids)) ||
        (rc = manager_model_embed(mm, ids.ids, (int64_t)ids.n, vec))) {
      char path[32];
      snprintf(path, sizeof path, json_is_string(input) ? "input" : "input[%zu]", i);
      api_error(req, 0, rc, err_detail(), path);
      goto done;
    }
    n_tokens += (int64_t)ids.n;
    if (dims < n_embd) { /* truncate and renormalise */
      double ss = 0;
      for (long long k = 0; k < dims; k++) ss += (double)vec[k] * vec[k];
      float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
      for (long long k = 0; k < dims; k++) vec[k] *= inv;
    }
    json_t *emb;
    if (b64) emb = base64_floats(vec, (size_t)dims);
    else {
      emb = json_array();
      for (long long k = 0; emb && k < dims; k++) json_array_append_new(emb, json_real(vec[k]));
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
  tok_ids_free(&ids);
  json_decref(data);
  free(vec);
  json_decref(body);
}
