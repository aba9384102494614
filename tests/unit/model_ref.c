/*
 * model_ref.c - see model_ref.h: running the numpy references and the C
 * forward pass the model tests compare.
 */
#include "model_ref.h"

#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/err.h"
#include "test.h"

const char *ref_write_llama(const model_testgen *g, const char *name, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.gguf", test_tmpdir(), name);
  if (model_testgen_write(g, path)) {
    test_fail_at(__FILE__, __LINE__, "testgen %s: %s", name, err_detail());
    return NULL;
  }
  return path;
}

const char *ref_write_arch(const model_testgen_arch *g, const char *name, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.gguf", test_tmpdir(), name);
  if (model_testgen_arch_write(g, path)) {
    test_fail_at(__FILE__, __LINE__, "testgen %s: %s", name, err_detail());
    return NULL;
  }
  return path;
}

int ref_py_ready(const char *script) {
  if (access(script, R_OK) != 0) {
    test_fail_at(__FILE__, __LINE__, "%s not found (run the tests from the repository root)", script);
    return -1;
  }
  return system(REF_PY " -c 'import numpy' >/dev/null 2>&1") == 0 ? 1 : 0;
}

void ref_toks_str(const int32_t *t, int n, char *out, size_t cap) {
  size_t o = 0;
  out[0] = 0;
  for (int i = 0; i < n && o < cap; i++) o += (size_t)snprintf(out + o, cap - o, "%s%d", i ? "," : "", t[i]);
}

float *ref_read_floats(const char *path, size_t n) {
  float *v = malloc(n * sizeof *v);
  FILE *fp = fopen(path, "rb");
  if (!v || !fp) {
    free(v);
    if (fp) fclose(fp);
    return NULL;
  }
  size_t got = fread(v, sizeof *v, n, fp);
  int extra = fgetc(fp);
  fclose(fp);
  if (got != n || extra != EOF) {
    free(v);
    return NULL;
  }
  return v;
}

float *ref_run_floats(const char *cmd, const char *path, size_t n) {
  if (system(cmd) != 0) return NULL;
  return ref_read_floats(path, n);
}

float *ref_logits(const char *script, const char *model_path, const int32_t *toks, int n, int64_t n_vocab,
                  bool kv_f16) {
  char ts[4096], out[512], cmd[8192];
  ref_toks_str(toks, n, ts, sizeof ts);
  snprintf(out, sizeof out, "%s/ref_logits.f32", test_tmpdir());
  snprintf(cmd, sizeof cmd, REF_PY " %s logits %s %s %s%s", script, model_path, ts, out, kv_f16 ? " --kv f16" : "");
  return ref_run_floats(cmd, out, (size_t)n * (size_t)n_vocab);
}

int ref_greedy(const char *script, const char *model_path, const int32_t *toks, int n, int n_gen, bool kv_f16,
               int32_t *out) {
  char ts[4096], path[512], cmd[8192];
  ref_toks_str(toks, n, ts, sizeof ts);
  snprintf(path, sizeof path, "%s/ref_greedy.txt", test_tmpdir());
  snprintf(cmd, sizeof cmd, REF_PY " %s greedy %s %s %d %s%s", script, model_path, ts, n_gen, path,
           kv_f16 ? " --kv f16" : "");
  if (system(cmd) != 0) return -1;
  FILE *fp = fopen(path, "r");
  if (!fp) return -1;
  int k = 0;
  while (k < n_gen && fscanf(fp, "%d,", &out[k]) == 1) k++;
  fclose(fp);
  return k;
}

float *ref_c_logits(const char *path, const int32_t *toks, int n, enum model_kv_type kv, int n_threads,
                    int64_t n_batch, int64_t *n_vocab_out) {
  model *m = NULL;
  if (model_open(path, &m)) {
    test_fail_at(__FILE__, __LINE__, "model_open %s: %s", path, err_detail());
    return NULL;
  }
  model_ctx_params p = model_ctx_default_params();
  p.kv_type = kv;
  p.n_threads = n_threads;
  p.n_batch = n_batch;
  model_ctx *c = NULL;
  float *lg = NULL;
  int64_t V = model_get_hparams(m)->n_vocab;
  if (model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "model_ctx_new: %s", err_detail());
  } else {
    lg = malloc((size_t)n * (size_t)V * sizeof *lg);
    if (model_forward(c, toks, n, 0, lg, MODEL_LOGITS_ALL)) {
      test_fail_at(__FILE__, __LINE__, "model_forward: %s", err_detail());
      free(lg);
      lg = NULL;
    }
  }
  *n_vocab_out = V;
  model_ctx_free(c);
  model_free(m);
  return lg;
}

model_ctx *ref_new_ctx(model *m, int32_t n_seq, int64_t n_batch, enum model_kv_type kv) {
  model_ctx_params p = model_ctx_default_params();
  p.n_seq = n_seq;
  p.n_batch = n_batch;
  p.kv_type = kv;
  p.n_threads = 2;
  model_ctx *c = NULL;
  if (model_ctx_new(m, &p, &c)) test_fail_at(__FILE__, __LINE__, "model_ctx_new: %s", err_detail());
  return c;
}

float *ref_one_token_logits(model *m, const int32_t *toks, int n, enum model_kv_type kv) {
  model_ctx *c = ref_new_ctx(m, 1, 0, kv);
  if (!c) return NULL;
  const int64_t V = model_get_hparams(m)->n_vocab;
  float *lg = malloc((size_t)n * (size_t)V * sizeof *lg);
  for (int i = 0; i < n; i++) {
    model_batch b = {.n = 1, .tokens = toks + i};
    if (model_decode(c, &b, lg + (size_t)i * (size_t)V)) {
      test_fail_at(__FILE__, __LINE__, "model_decode: %s", err_detail());
      free(lg);
      lg = NULL;
      break;
    }
  }
  model_ctx_free(c);
  return lg;
}

void ref_check_one_token(const char *script, const char *path, const char *name, const int32_t *toks, int n,
                         double tol) {
  model *m = NULL;
  if (model_open(path, &m)) {
    test_fail_at(__FILE__, __LINE__, "model_open %s: %s", path, err_detail());
    return;
  }
  const int64_t V = model_get_hparams(m)->n_vocab;
  float *one = ref_one_token_logits(m, toks, n, MODEL_KV_F32);
  float *ref = ref_logits(script, path, toks, n, V, false);
  if (one && ref) {
    double e = ref_nmse(one, ref, (size_t)n * (size_t)V);
    printf("    %s one token at a time: nmse %.3g\n", name, e);
    if (!(e < tol)) test_fail_at(__FILE__, __LINE__, "%s one token at a time: nmse %.3g, bound %.3g", name, e, tol);
  } else {
    test_fail_at(__FILE__, __LINE__, "%s: no logits", name);
  }
  free(one);
  free(ref);
  model_free(m);
}

void ref_check_interleaved(const char *script, const char *path, const char *name, const int32_t *A, int na,
                           const int32_t *B, int nb, int64_t n_ctx) {
  model *m = NULL;
  model_ctx *c = NULL;
  model_ctx_params p = model_ctx_default_params();
  p.n_seq = 2;
  p.n_ctx = n_ctx;
  p.n_batch = 5;
  p.n_threads = 2;
  p.kv_type = MODEL_KV_F32;
  if (model_open(path, &m) || model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "%s: %s", name, err_detail());
    model_free(m);
    return;
  }
  const int64_t V = model_get_hparams(m)->n_vocab;
  const int n_all = na + nb;
  float *ra = ref_logits(script, path, A, na, V, false), *rb = ref_logits(script, path, B, nb, V, false);
  float *lg = malloc((size_t)n_all * (size_t)V * sizeof *lg);
  int32_t *toks = malloc((size_t)n_all * sizeof *toks), *seq = malloc((size_t)n_all * sizeof *seq);
  int64_t *pos = malloc((size_t)n_all * sizeof *pos);
  int n = 0;
  for (int i = 0; toks && seq && pos && i < na; i++) {
    toks[n] = A[i], seq[n] = 0, pos[n] = i, n++;
    if (i < nb) toks[n] = B[i], seq[n] = 1, pos[n] = i, n++;
  }
  model_batch b = {.n = n, .tokens = toks, .seq = seq, .pos = pos, .logits = MODEL_LOGITS_ALL};
  if (!ra || !rb || !lg || !toks || !seq || !pos || model_decode(c, &b, lg)) {
    test_fail_at(__FILE__, __LINE__, "%s: decode or reference failed: %s", name, err_detail());
  } else {
    double worst = 0;
    for (int i = 0; i < n; i++) {
      double e = ref_nmse(lg + (size_t)i * (size_t)V, (seq[i] ? rb : ra) + (size_t)pos[i] * (size_t)V, (size_t)V);
      if (e > worst) worst = e;
    }
    printf("    %s: 2 interleaved sequences vs numpy: worst row nmse %.3g\n", name, worst);
    if (!(worst < 1e-8)) test_fail_at(__FILE__, __LINE__, "%s: worst row nmse %.3g, bound 1e-8", name, worst);
  }
  free(ra);
  free(rb);
  free(lg);
  free(toks);
  free(seq);
  free(pos);
  model_ctx_free(c);
  model_free(m);
}

double ref_nmse(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? num / den : num;
}

double ref_compare(const char *script, const char *path, const int32_t *toks, int n, enum model_kv_type kv,
                   int n_threads) {
  int64_t V = 0;
  float *c = ref_c_logits(path, toks, n, kv, n_threads, 0, &V);
  if (!c) return -1;
  float *r = ref_logits(script, path, toks, n, V, kv == MODEL_KV_F16);
  if (!r) {
    free(c);
    test_fail_at(__FILE__, __LINE__, "%s failed on %s", script, path);
    return -1;
  }
  double e = ref_nmse(c, r, (size_t)n * (size_t)V);
  printf("    %s kv=%s threads=%d: nmse %.3g\n", strrchr(path, '/') + 1, kv == MODEL_KV_F16 ? "f16" : "f32",
         n_threads, e);
  free(c);
  free(r);
  return e;
}

void ref_check_greedy(const char *script, const char *path, const int32_t *prompt, int n_prompt, int n_gen,
                      bool kv_f16) {
  const char *name = strrchr(path, '/') + 1;
  int32_t want[REF_GREEDY_MAX], got[REF_GREEDY_MAX];
  if (n_gen > REF_GREEDY_MAX) return test_fail_at(__FILE__, __LINE__, "%s: %d greedy tokens asked", name, n_gen);
  EXPECT_INT_EQ(ref_greedy(script, path, prompt, n_prompt, n_gen, kv_f16, want), n_gen);
  model *m = NULL;
  model_ctx *c = NULL;
  model_ctx_params p = model_ctx_default_params();
  p.n_threads = 2;
  p.kv_type = kv_f16 ? MODEL_KV_F16 : MODEL_KV_F32;
  if (model_open(path, &m) || model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "%s: %s", name, err_detail());
    model_free(m);
    return;
  }
  const int64_t V = model_get_hparams(m)->n_vocab;
  float *lg = malloc((size_t)V * sizeof *lg);
  int rc = model_forward(c, prompt, n_prompt, 0, lg, MODEL_LOGITS_LAST);
  for (int i = 0; i < n_gen && rc == 0; i++) {
    int32_t best = 0;
    for (int32_t t = 1; t < V; t++)
      if (lg[t] > lg[best]) best = t;
    got[i] = best;
    rc = model_forward(c, &best, 1, n_prompt + i, lg, MODEL_LOGITS_LAST);
  }
  EXPECT_INT_EQ(rc, 0);
  int same = 0;
  while (rc == 0 && same < n_gen && got[same] == want[same]) same++;
  printf("    %s greedy: %d of %d tokens identical\n", name, same, n_gen);
  EXPECT_INT_EQ(same, n_gen);
  free(lg);
  model_ctx_free(c);
  model_free(m);
}

int ref_open_arch(const model_testgen_arch *g, const char *name) {
  char path[512];
  if (!ref_write_arch(g, name, path, sizeof path)) return 1;
  model *m = NULL;
  int rc = model_open(path, &m);
  model_free(m);
  return rc;
}

void ref_check_batch(const char *path, const int32_t *toks, int n, enum model_kv_type kv, const char *name) {
  int64_t V = 0;
  float *all = ref_c_logits(path, toks, n, kv, 2, 0, &V);
  float *b5 = ref_c_logits(path, toks, n, kv, 1, 5, &V);
  model *m = NULL;
  model_ctx *c = NULL;
  model_ctx_params p = model_ctx_default_params();
  p.n_threads = 2;
  p.kv_type = kv;
  float *one = malloc((size_t)(V ? V : 1) * sizeof *one);
  if (!all || !b5 || !one || model_open(path, &m) || model_ctx_new(m, &p, &c)) {
    test_fail_at(__FILE__, __LINE__, "%s: setup failed: %s", name, err_detail());
    goto out;
  }
  int same_one = 0, same_b5 = 0;
  const size_t row = (size_t)V * sizeof *one;
  for (int i = 0; i < n; i++) {
    if (model_forward(c, &toks[i], 1, i, one, MODEL_LOGITS_LAST)) {
      test_fail_at(__FILE__, __LINE__, "%s: forward: %s", name, err_detail());
      goto out;
    }
    same_one += memcmp(one, all + (size_t)i * (size_t)V, row) == 0;
    same_b5 += memcmp(b5 + (size_t)i * (size_t)V, all + (size_t)i * (size_t)V, row) == 0;
  }
  printf("    %s: rows bit-identical, batch of %d vs 1 by 1: %d/%d, vs steps of 5: %d/%d\n", name, n, same_one, n,
         same_b5, n);
  if (same_one != n || same_b5 != n)
    test_fail_at(__FILE__, __LINE__, "%s: batched and one-token logits differ", name);
out:
  free(one);
  free(all);
  free(b5);
  model_ctx_free(c);
  model_free(m);
}
