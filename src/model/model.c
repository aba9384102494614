/*
 * model.c - the architecture-independent half of the model runtime: the
 * architecture table, opening a model (metadata, hyper-parameters, tensor
 * binding with shape checks), contexts (KV cache, compute buffers, thread
 * pool); the attention every decoder shares is in attn.c.
 *
 * Start reading at model_load() and model_decode() (model_forward() is its
 * one-sequence form); an architecture file (llama.c) provides
 * load/ctx_init/forward through model_arch_ops.
 *
 * Invariants:
 *   - weights are copied out of the mapping once, at load, into memory the
 *     model owns (m->owned): matrices whose type has a repacked layout on
 *     this CPU into that layout (bind_pack), other matrices as they are
 *     (bind_copy; huge pages from 2 MiB on), 1-D vectors (norms, biases)
 *     into small f32 buffers. Only tensors bound MODEL_BIND_ROWS
 *     (an untied token_embd: one row read per token; a tied one is the
 *     output matrix too and is copied) and files read into memory
 *     rather than mapped stay where gguf put them. The mapping's pages of
 *     every copied tensor are released (MADV_DONTNEED), so they are not
 *     resident twice; see docs/runtime.md, "Memory".
 *   - every buffer a context computes with is allocated in model_ctx_new();
 *     a forward pass allocates nothing (the kernels' pool keeps its own
 *     scratch);
 *   - c->n_past[s] <= c->n_ctx for every sequence s, and cache positions
 *     >= n_past[s] hold stale (finite) values or zeros;
 *   - a failed model_decode leaves n_past[s] at the batch's first position
 *     of s, so nothing half-written is ever visible.
 */
#include "model/model_int.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "kernels/attn.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"

static int own(model *m, void *p);
static int bind_v(model *m, model_tensor *t, int64_t n_cols, int64_t n_rows, int flags, const char *fmt,
                  va_list ap);
static void copied(model *m, const void *p, size_t n);

/* ---- architecture table ---------------------------------------------------
 * one row per architecture (files llama.c, qwen.c, bert.c, gemma.c,
 * llamalike.c). */
static const model_arch_ops *const arch_table[MODEL_ARCH_COUNT] = {
    [MODEL_ARCH_LLAMA] = &model_arch_llama,
    [MODEL_ARCH_QWEN2] = &model_arch_qwen2,
    [MODEL_ARCH_QWEN3] = &model_arch_qwen3,
    [MODEL_ARCH_BERT] = &model_arch_bert,
    [MODEL_ARCH_GEMMA2] = &model_arch_gemma2,
    [MODEL_ARCH_GEMMA3] = &model_arch_gemma3,
    [MODEL_ARCH_PHI3] = &model_arch_phi3,
    [MODEL_ARCH_GRANITE] = &model_arch_granite,
    [MODEL_ARCH_SMOLLM3] = &model_arch_smollm3,
    [MODEL_ARCH_QWEN3MOE] = &model_arch_qwen3moe,
    [MODEL_ARCH_LLAMA_MOE] = &model_arch_llama_moe,
    [MODEL_ARCH_LFM2] = &model_arch_lfm2,
    [MODEL_ARCH_OLMO2] = &model_arch_olmo2,
    [MODEL_ARCH_GLM4] = &model_arch_glm4,
    [MODEL_ARCH_MISTRAL3] = &model_arch_mistral3,
    [MODEL_ARCH_NOMIC_BERT] = &model_arch_nomic_bert,
    [MODEL_ARCH_GPT_OSS] = &model_arch_gpt_oss,
    [MODEL_ARCH_QWEN2MOE] = &model_arch_qwen2moe,
    [MODEL_ARCH_OLMOE] = &model_arch_olmoe,
    [MODEL_ARCH_GRANITEMOE] = &model_arch_granitemoe,
    [MODEL_ARCH_GEMMA_EMBEDDING] = &model_arch_gemma_embedding,
    [MODEL_ARCH_EXAONE4] = &model_arch_exaone4,
    [MODEL_ARCH_QWEN35] = &model_arch_qwen35,
    [MODEL_ARCH_QWEN35MOE] = &model_arch_qwen35moe,
    [MODEL_ARCH_QWEN3NEXT] = &model_arch_qwen3next,
    [MODEL_ARCH_MAMBA2] = &model_arch_mamba2,
    [MODEL_ARCH_GRANITEHYBRID] = &model_arch_granitehybrid,
    [MODEL_ARCH_NEMOTRON_H] = &model_arch_nemotron_h,
    [MODEL_ARCH_GEMMA4] = &model_arch_gemma4,
};

bool model_is_encoder(const model *m) { return m->ops->encoder; }

const char *model_arch_name(enum model_arch a) {
  return (unsigned)a < MODEL_ARCH_COUNT ? arch_table[a]->name : "unknown";
}

bool model_arch_runs(const char *name) {
  for (int a = 0; name && a < MODEL_ARCH_COUNT; a++)
    if (strcmp(arch_table[a]->name, name) == 0) return true;
  return false;
}

/* ---- open / free ---------------------------------------------------------- */

static void release_copied(model *m);

int model_open(const char *path, model **out) {
  *out = NULL;
  gguf_file *f = NULL;
  int rc = gguf_open(path, &f);
  if (rc) return rc;
  return model_load(f, out);
}

int model_load(gguf_file *f, model **out) {
  *out = NULL;
  model *m = calloc(1, sizeof *m);
  if (!m) {
    gguf_close(f);
    return err_set(ERR_NOMEM, "model: out of memory");
  }
  m->f = f;
  const char *arch = NULL;
  int rc = gguf_get_str(f, "general.architecture", &arch);
  if (rc) {
    if (rc == ERR_NOT_FOUND) err_set(rc, "key 'general.architecture' is missing: not a model file");
    model_free(m);
    return rc;
  }
  /* the row of that name; of two (dense and MoE), the one matching
   * whether ARCH.expert_count > 0 */
  char key[160];
  snprintf(key, sizeof key, "%s.expert_count", arch);
  int64_t n_expert = 0;
  const bool experts = gguf_get_i64(f, key, &n_expert) == 0 && n_expert > 0;
  m->arch = MODEL_ARCH_COUNT;
  for (int a = 0; a < MODEL_ARCH_COUNT; a++)
    if (strcmp(arch_table[a]->name, arch) == 0 &&
        (m->arch == MODEL_ARCH_COUNT || arch_table[a]->moe == experts))
      m->arch = (enum model_arch)a;
  if (m->arch == MODEL_ARCH_COUNT) {
    rc = err_set(ERR_UNSUPPORTED, "architecture '%s' (general.architecture) is not supported", arch);
    model_free(m);
    return rc;
  }
  m->ops = arch_table[m->arch];
  rc = m->ops->load(m);
  if (rc) {
    model_free(m);
    return rc;
  }
  if (!m->layer_kv) m->hp.n_layer_kv = m->hp.n_layer; /* no recurrent layers: every layer attends */
  release_copied(m);
  *out = m;
  return 0;
}

void model_free(model *m) {
  if (!m) return;
  if (m->ops && m->ops->unload) m->ops->unload(m);
  for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
  free(m->owned);
  free(m->copied);
  gguf_close(m->f);
  free(m);
}

enum model_arch model_arch_of(const model *m) { return m->arch; }
bool model_is_recurrent(const model *m) { return m->hp.n_layer_rs > 0; }

int model_set_recurrent(model *m, const bool *recurrent, int64_t rs_floats) {
  return model_set_layer_kinds(m, recurrent, NULL, rs_floats);
}

int model_set_layer_kinds(model *m, const bool *recurrent, const bool *stateless, int64_t rs_floats) {
  model_hparams *hp = &m->hp;
  if (rs_floats <= 0 || rs_floats > ((int64_t)1 << 32))
    return err_set(ERR_RANGE, "%s: recurrent state of %lld values per layer", m->ops->name, (long long)rs_floats);
  int32_t *map = malloc(2 * (size_t)hp->n_layer * sizeof *map);
  if (!map || own(m, map)) {
    free(map);
    return err_set(ERR_NOMEM, "%s: out of memory", m->ops->name);
  }
  m->layer_kv = map;
  m->layer_rs = map + hp->n_layer;
  hp->n_layer_kv = hp->n_layer_rs = 0;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    m->layer_kv[l] = recurrent[l] || (stateless && stateless[l]) ? -1 : (int32_t)hp->n_layer_kv++;
    m->layer_rs[l] = recurrent[l] ? (int32_t)hp->n_layer_rs++ : -1;
  }
  hp->rs_floats = rs_floats;
  return 0;
}
const model_hparams *model_get_hparams(const model *m) { return &m->hp; }
const gguf_file *model_gguf(const model *m) { return m->f; }
uint64_t model_weight_bytes(const model *m) { return m->weight_bytes; }

/* ---- hyper-parameters ----------------------------------------------------- */

static const char *arch_key(const model *m, const char *suffix, char *out, size_t cap) {
  snprintf(out, cap, "%s.%s", m->ops->name, suffix);
  return out;
}

int model_key_i64(model *m, const char *suffix, const int64_t *def, int64_t lo, int64_t hi, int64_t *out) {
  char key[160];
  arch_key(m, suffix, key, sizeof key);
  int64_t v = 0;
  int rc = gguf_get_i64(m->f, key, &v);
  if (rc == ERR_NOT_FOUND && def) {
    *out = *def;
    return 0;
  }
  if (rc == ERR_NOT_FOUND) return err_set(rc, "key '%s' is missing", key);
  if (rc) return rc;
  if (v < lo || v > hi)
    return err_set(ERR_RANGE, "key '%s' is %lld, expected %lld..%lld", key, (long long)v, (long long)lo,
                   (long long)hi);
  *out = v;
  return 0;
}

int model_key_f32(model *m, const char *suffix, const float *def, float *out) {
  char key[160];
  arch_key(m, suffix, key, sizeof key);
  float v = 0;
  int rc = gguf_get_f32(m->f, key, &v);
  if (rc == ERR_NOT_FOUND && def) {
    *out = *def;
    return 0;
  }
  if (rc == ERR_NOT_FOUND) return err_set(rc, "key '%s' is missing", key);
  if (rc) return rc;
  if (!isfinite(v)) return err_set(ERR_RANGE, "key '%s' is not a finite number", key);
  *out = v;
  return 0;
}

/* ARCH.SUFFIX as a float in lo .. hi (def when absent), or an error
 * naming the key and the range. */
static int rope_key(model *m, const char *suffix, float def, float lo, float hi, float *out) {
  int rc = model_key_f32(m, suffix, &def, out);
  if (rc) return rc;
  if (*out < lo || *out > hi)
    return err_set(ERR_RANGE, "key '%s.%s' is %g, expected %g .. %g", m->ops->name, suffix, *out, lo, hi);
  return 0;
}

/* YaRN's get_mscale: the magnitude a factor s brings at strength k. */
static float yarn_mscale(float s, float k) { return s <= 1.0f ? 1.0f : 0.1f * k * logf(s) + 1.0f; }

/* RoPE scaling as llama.cpp reads it (llama-model.cpp's common keys,
 * llama-context.cpp's YaRN magnitude): ARCH.rope.scaling.type "none",
 * "linear" (positions divided by rope.scaling.factor, or the older
 * rope.scale_linear) or "yarn" (the same factor, mixed per pair with the
 * unscaled angles: ops_rope_yarn over rope.scaling.original_context_length,
 * default the trained context, yarn_beta_fast 32, yarn_beta_slow 1,
 * yarn_ext_factor 1). The magnitude: rope.scaling.attn_factor (default 1,
 * every type), times 1 + 0.1 ln(factor) for YaRN with a factor > 1 (or
 * yarn_attn_factor when yarn_ext_factor is 0). LongRoPE (phi3) is
 * llamalike.c's: its factors are tensors, chosen per context; its
 * attn_factor is this one. */
static int load_rope_scaling(model *m, ops_rope *r) {
  const model_hparams *hp = &m->hp;
  char key[160];
  const char *stype = "linear";
  int rc = gguf_get_str(m->f, arch_key(m, "rope.scaling.type", key, sizeof key), &stype);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  const bool yarn = strcmp(stype, "yarn") == 0;
  if (strcmp(stype, "none") != 0 && strcmp(stype, "linear") != 0 && !yarn)
    return err_set(ERR_UNSUPPORTED, "key '%s' is '%s': only 'none', 'linear' and 'yarn' RoPE scaling are supported",
                   key, stype);
  float factor = 0.0f;
  r->freq_scale = 1.0f;
  if (strcmp(stype, "none") != 0) {
    if ((rc = rope_key(m, "rope.scaling.factor", 0.0f, 0.0f, 1e6f, &factor))) return rc;
    if (factor == 0.0f && (rc = rope_key(m, "rope.scale_linear", 0.0f, 0.0f, 1e6f, &factor))) return rc;
    if (factor > 0.0f) r->freq_scale = 1.0f / factor;
  }
  if ((rc = rope_key(m, "rope.scaling.attn_factor", 1.0f, 1e-6f, 16.0f, &r->attn_factor))) return rc;
  if (!yarn) return 0;
  int64_t n_orig = 0;
  float fast = 0.0f, slow = 0.0f, ext = 0.0f, yattn = 0.0f;
  if ((rc = model_key_i64(m, "rope.scaling.original_context_length", &hp->n_ctx_train, 1, hp->n_ctx_train,
                          &n_orig)) ||
      (rc = rope_key(m, "rope.scaling.yarn_beta_fast", 32.0f, 1e-3f, 1e6f, &fast)) ||
      (rc = rope_key(m, "rope.scaling.yarn_beta_slow", 1.0f, 1e-3f, fast, &slow)) ||
      (rc = rope_key(m, "rope.scaling.yarn_ext_factor", 1.0f, 0.0f, 1.0f, &ext)) ||
      (rc = rope_key(m, "rope.scaling.yarn_attn_factor", 1.0f, 1e-6f, 16.0f, &yattn)))
    return rc;
  ops_rope_yarn(r, n_orig, fast, slow, ext);
  if (ext == 0.0f) r->attn_factor *= yattn;
  else r->attn_factor *= yarn_mscale(factor, 1.0f);
  return 0;
}

/* ARCH.attention.head_count_kv: one number, or (hybrid files, LFM2) one
 * per layer, where 0 marks a recurrent layer (model_layer_kv_heads) and
 * the attention layers must agree. */
static int load_head_count_kv(model *m) {
  model_hparams *hp = &m->hp;
  char key[160];
  arch_key(m, "attention.head_count_kv", key, sizeof key);
  const gguf_value *v = gguf_find(m->f, key);
  if (!v || v->type != GGUF_TYPE_ARRAY)
    return model_key_i64(m, "attention.head_count_kv", &hp->n_head, 1, hp->n_head, &hp->n_head_kv);
  if (v->v.arr.n != (uint64_t)hp->n_layer || v->v.arr.elem_type == GGUF_TYPE_STRING ||
      v->v.arr.elem_type == GGUF_TYPE_ARRAY)
    return err_set(ERR_RANGE, "key '%s' is an array of %llu, expected %lld integers (one per layer)", key,
                   (unsigned long long)v->v.arr.n, (long long)hp->n_layer);
  hp->n_head_kv = 0;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    int64_t h = gguf_arr_i64(v, (uint64_t)l);
    if (h < 0 || h > hp->n_head)
      return err_set(ERR_RANGE, "key '%s': layer %lld has %lld kv heads, expected 0..%lld", key, (long long)l,
                     (long long)h, (long long)hp->n_head);
    if (h == 0 && !m->ops->hybrid)
      return err_set(ERR_UNSUPPORTED, "key '%s': layer %lld has no attention, which architecture '%s' cannot run",
                     key, (long long)l, m->ops->name);
    if (h && hp->n_head_kv && h != hp->n_head_kv)
      return err_set(ERR_UNSUPPORTED, "key '%s': layers with %lld and %lld kv heads (one count is supported)", key,
                     (long long)hp->n_head_kv, (long long)h);
    if (h) hp->n_head_kv = h;
  }
  if (hp->n_head_kv == 0) hp->n_head_kv = hp->n_head; /* no attention layer: only sizes the (empty) cache */
  return 0;
}

/* ARCH.feed_forward_length: one width, or for a hybrid row one per layer
 * (0: a layer without a feed-forward; nemotron_h), hp.n_ff then the
 * largest (model_layer_ff reads each). */
static int load_ff(model *m, int64_t big) {
  model_hparams *hp = &m->hp;
  char key[160];
  arch_key(m, "feed_forward_length", key, sizeof key);
  const gguf_value *v = gguf_find(m->f, key);
  if (!v || v->type != GGUF_TYPE_ARRAY || !m->ops->hybrid)
    return model_key_i64(m, "feed_forward_length", NULL, 1, big, &hp->n_ff);
  if (v->v.arr.n != (uint64_t)hp->n_layer || v->v.arr.elem_type == GGUF_TYPE_STRING ||
      v->v.arr.elem_type == GGUF_TYPE_ARRAY)
    return err_set(ERR_RANGE, "key '%s' is an array of %llu, expected %lld integers (one per layer)", key,
                   (unsigned long long)v->v.arr.n, (long long)hp->n_layer);
  hp->n_ff = 0;
  for (int64_t l = 0; l < hp->n_layer; l++) {
    int64_t f = gguf_arr_i64(v, (uint64_t)l);
    if (f < 0 || f > big)
      return err_set(ERR_RANGE, "key '%s': layer %lld has width %lld, expected 0..%lld", key, (long long)l,
                     (long long)f, (long long)big);
    if (f > hp->n_ff) hp->n_ff = f;
  }
  return 0;
}

int64_t model_layer_ff(model *m, int64_t l) {
  char key[160];
  arch_key(m, "feed_forward_length", key, sizeof key);
  const gguf_value *v = gguf_find(m->f, key);
  return v && v->type == GGUF_TYPE_ARRAY ? gguf_arr_i64(v, (uint64_t)l) : m->hp.n_ff;
}

int64_t model_layer_kv_heads(model *m, int64_t l) {
  char key[160];
  arch_key(m, "attention.head_count_kv", key, sizeof key);
  const gguf_value *v = gguf_find(m->f, key);
  return v && v->type == GGUF_TYPE_ARRAY ? gguf_arr_i64(v, (uint64_t)l) : m->hp.n_head_kv;
}

int model_bind_f32(model *m, const float **out, int64_t n_cols, int64_t n_rows, const char *fmt, ...) {
  *out = NULL;
  model_tensor t;
  va_list ap;
  va_start(ap, fmt);
  int rc = bind_v(m, &t, n_cols, n_rows, MODEL_BIND_ROWS, fmt, ap);
  va_end(ap);
  if (rc) return rc;
  float *v = malloc((size_t)(n_cols * n_rows) * sizeof *v);
  if (!v || own(m, v)) {
    free(v);
    return err_set(ERR_NOMEM, "tensor '%s': out of memory", t.name);
  }
  for (int64_t r = 0; r < n_rows; r++)
    if ((rc = model_tensor_row_f32(&t, r, v + r * n_cols))) return rc;
  copied(m, t.data, (size_t)n_rows * t.row_bytes);
  *out = v;
  return 0;
}

int model_rope_yarn_log_mul(model *m, float unit) {
  ops_rope *r = &m->hp.rope;
  float mul = 0.0f, attn = 1.0f;
  int rc = rope_key(m, "rope.scaling.yarn_log_multiplier", 0.0f, 0.0f, 1e3f, &mul);
  if (rc || mul == 0.0f || r->ext_factor == 0.0f) return rc;
  if ((rc = rope_key(m, "rope.scaling.attn_factor", 1.0f, 1e-6f, 16.0f, &attn))) return rc;
  const float factor = 1.0f / r->freq_scale;
  r->attn_factor = attn * yarn_mscale(factor, 1.0f) / yarn_mscale(factor, mul * unit);
  return 0;
}

int model_load_common_hparams(model *m, enum ops_rope_style style) {
  model_hparams *hp = &m->hp;
  const int64_t big = (int64_t)1 << 24; /* no real dimension comes near */
  int rc;
  if ((rc = model_key_i64(m, "context_length", NULL, 1, (int64_t)1 << 31, &hp->n_ctx_train))) return rc;
  if ((rc = model_key_i64(m, "embedding_length", NULL, 1, big, &hp->n_embd))) return rc;
  if ((rc = model_key_i64(m, "block_count", NULL, 1, 4096, &hp->n_layer))) return rc;
  if ((rc = load_ff(m, big))) return rc;
  if ((rc = model_key_i64(m, "attention.head_count", NULL, 1, 4096, &hp->n_head))) return rc;
  if ((rc = load_head_count_kv(m))) return rc;
  if (hp->n_head % hp->n_head_kv)
    return err_set(ERR_RANGE, "%s.attention.head_count %lld is not a multiple of head_count_kv %lld",
                   m->ops->name, (long long)hp->n_head, (long long)hp->n_head_kv);
  int64_t def_hd = hp->n_embd / hp->n_head;
  char key[160];
  if (!gguf_find(m->f, arch_key(m, "attention.key_length", key, sizeof key)) && hp->n_embd % hp->n_head)
    return err_set(ERR_RANGE, "%s.embedding_length %lld is not a multiple of attention.head_count %lld",
                   m->ops->name, (long long)hp->n_embd, (long long)hp->n_head);
  if ((rc = model_key_i64(m, "attention.key_length", &def_hd, 1, 65536, &hp->head_dim))) return rc;
  int64_t vlen = 0;
  if ((rc = model_key_i64(m, "attention.value_length", &hp->head_dim, 1, 65536, &vlen))) return rc;
  if (vlen != hp->head_dim)
    return err_set(ERR_UNSUPPORTED, "%s.attention.value_length %lld differs from key_length %lld",
                   m->ops->name, (long long)vlen, (long long)hp->head_dim);
  /* Some MoE files use a dense architecture's name with expert tensors;
   * the MoE rows read the key themselves (moe.c). */
  int64_t n_expert = 0, zero = 0;
  if (!m->ops->moe && (rc = model_key_i64(m, "expert_count", &zero, 0, 1 << 20, &n_expert))) return rc;
  if (n_expert > 0)
    return err_set(ERR_UNSUPPORTED, "%s.expert_count is %lld: mixture-of-experts models are not supported yet",
                   m->ops->name, (long long)n_expert);

  float eps_def = 1e-5f;
  if (gguf_find(m->f, arch_key(m, "attention.layer_norm_rms_epsilon", key, sizeof key)))
    rc = model_key_f32(m, "attention.layer_norm_rms_epsilon", NULL, &hp->norm_eps);
  else
    rc = model_key_f32(m, "attention.layer_norm_epsilon", &eps_def, &hp->norm_eps);
  if (rc) return rc;
  if (!(hp->norm_eps >= 0.0f)) return err_set(ERR_RANGE, "%s: norm epsilon %g is negative", m->ops->name, hp->norm_eps);

  ops_rope *r = &hp->rope;
  r->style = style;
  int64_t n_rot = 0;
  if ((rc = model_key_i64(m, "rope.dimension_count", &hp->head_dim, 2, hp->head_dim, &n_rot))) return rc;
  if (n_rot % 2) return err_set(ERR_RANGE, "key '%s.rope.dimension_count' is %lld, expected an even number",
                                m->ops->name, (long long)n_rot);
  r->n_rot = (int32_t)n_rot;
  float base_def = 10000.0f;
  if ((rc = model_key_f32(m, "rope.freq_base", &base_def, &r->freq_base))) return rc;
  if (!(r->freq_base > 1.0f))
    return err_set(ERR_RANGE, "key '%s.rope.freq_base' is %g, expected > 1", m->ops->name, r->freq_base);

  if ((rc = load_rope_scaling(m, r))) return rc;
  /* Llama 3.x: per-pair frequency divisors computed by the converter. */
  if ((rc = model_bind_vector(m, &r->freq_factors, n_rot / 2, MODEL_BIND_OPTIONAL, "rope_freqs.weight"))) return rc;
  return 0;
}

/* ARCH.attention.sliding_window_pattern into *out (model_hparams.
 * swa_pattern; def when absent). The converter writes it either as the
 * period P (an integer) or, from a Hugging Face layer_types list, as one
 * bool per layer (true = sliding: exaone4 and the newer families). An
 * array becomes the smallest P whose "P - 1 sliding, then one global"
 * repetition gives the same layers (0 when every layer slides); an
 * array no period describes is refused, naming the first layer it breaks
 * on for the nearest period. */
static int swa_pattern_key(model *m, int32_t def, int32_t *out) {
  char key[160];
  arch_key(m, "attention.sliding_window_pattern", key, sizeof key);
  const gguf_value *v = gguf_find(m->f, key);
  if (!v || v->type != GGUF_TYPE_ARRAY) {
    int64_t pat = def;
    int rc = model_key_i64(m, "attention.sliding_window_pattern", &pat, 1, 4096, &pat);
    *out = (int32_t)pat;
    return rc;
  }
  const int64_t n = m->hp.n_layer;
  const enum gguf_type et = v->v.arr.elem_type;
  if (et != GGUF_TYPE_BOOL && gguf_type_size(et) == 0)
    return err_set(ERR_TYPE, "key '%s' is an array of %s, expected bools (one per layer) or an integer", key,
                   gguf_type_name(et));
  if (v->v.arr.n != (uint64_t)n)
    return err_set(ERR_RANGE, "key '%s' has %llu entries, expected one per layer (%lld)", key,
                   (unsigned long long)v->v.arr.n, (long long)n);
  bool all = true;
  for (int64_t l = 0; l < n; l++) all = all && gguf_arr_u64(v, (uint64_t)l) != 0;
  if (all) {
    *out = 0;
    return 0;
  }
  int64_t best_bad = -1, best_p = 0;
  for (int64_t p = 1; p <= n; p++) {
    int64_t l = 0;
    while (l < n && (gguf_arr_u64(v, (uint64_t)l) != 0) == (l % p < p - 1)) l++;
    if (l == n) {
      *out = (int32_t)p;
      return 0;
    }
    if (l > best_bad) {
      best_bad = l;
      best_p = p;
    }
  }
  return err_set(ERR_UNSUPPORTED,
                 "key '%s' is a per-layer list that no repeating pattern of sliding layers then one global "
                 "layer describes (layer %lld breaks the nearest, period %lld)",
                 key, (long long)best_bad, (long long)best_p);
}

int model_load_swa_hparams(model *m, int32_t pattern, const int64_t *def_window, float def_base_swa) {
  model_hparams *hp = &m->hp;
  int rc;
  /* a window larger than the trained context would never slide: such a
   * file is mislabelled, so it is refused rather than run as global */
  if ((rc = model_key_i64(m, "attention.sliding_window", def_window, 1, hp->n_ctx_train, &hp->n_swa))) return rc;
  if ((rc = swa_pattern_key(m, pattern, &hp->swa_pattern))) return rc;
  /* the sliding layers' RoPE: the same rotation with their own base and
   * no scaling (def_base_swa 0: the global layers' base and scaling) */
  hp->rope_swa = hp->rope;
  if (def_base_swa > 0.0f) {
    hp->rope_swa.freq_base = def_base_swa;
    hp->rope_swa.freq_scale = 1.0f;
    hp->rope_swa.freq_factors = NULL;
    hp->rope_swa.ext_factor = 0.0f;
    /* llama.cpp gives every layer the same magnitude; unscaled, YaRN's
     * part of it cancels and rope.scaling.attn_factor is what remains */
    if ((rc = rope_key(m, "rope.scaling.attn_factor", 1.0f, 1e-6f, 16.0f, &hp->rope_swa.attn_factor))) return rc;
  }
  float base = hp->rope_swa.freq_base;
  if ((rc = model_key_f32(m, "rope.freq_base_swa", &base, &hp->rope_swa.freq_base))) return rc;
  if (!(hp->rope_swa.freq_base > 1.0f))
    return err_set(ERR_RANGE, "key '%s.rope.freq_base_swa' is %g, expected > 1", m->ops->name,
                   hp->rope_swa.freq_base);
  return 0;
}

int model_load_softcap(model *m, const char *suffix, const float *def, bool zero_ok, float *out) {
  int rc = model_key_f32(m, suffix, def, out);
  if (rc) return rc;
  if (*out < 0.0f || (*out == 0.0f && !zero_ok) || *out > 1e6f)
    return err_set(ERR_RANGE, "key '%s.%s' is %g, expected a soft cap in %s..1e6", m->ops->name, suffix, *out,
                   zero_ok ? "0 (none)" : "(0");
  return 0;
}

/* ---- tensor binding ------------------------------------------------------- */

static int own(model *m, void *p) {
  if (m->n_owned == m->cap_owned) {
    size_t cap = m->cap_owned ? m->cap_owned * 2 : 16;
    void **o = realloc(m->owned, cap * sizeof *o);
    if (!o) return ERR_NOMEM;
    m->owned = o;
    m->cap_owned = cap;
  }
  m->owned[m->n_owned++] = p;
  return 0;
}

static void fmt_dims(const gguf_tensor *t, char *out, size_t cap) {
  size_t o = 0;
  o += (size_t)snprintf(out + o, cap - o, "[");
  for (uint32_t i = 0; i < t->n_dims && o < cap; i++)
    o += (size_t)snprintf(out + o, cap - o, "%s%llu", i ? ", " : "", (unsigned long long)t->dims[i]);
  if (o < cap) snprintf(out + o, cap - o, "]");
}

void model_release_pages(const void *src, size_t bytes) {
  long pg = sysconf(_SC_PAGESIZE);
  if (pg <= 0) return;
  uintptr_t a = (uintptr_t)src, e = a + (uintptr_t)bytes;
  a = (a + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
  e &= ~((uintptr_t)pg - 1);
  if (e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED);
}

/* model_release_pages as a kern_pack_ex callback (ctx unused). */
static void release_pages(const void *src, size_t bytes, void *ctx) {
  (void)ctx;
  model_release_pages(src, bytes);
}

/* Remembers that the model holds its own copy of src..src + bytes of the
 * mapping, and releases those pages now. Out of memory for the list only
 * costs the second release (release_copied), so it is not an error. */
static void copied(model *m, const void *src, size_t bytes) {
  if (!gguf_is_mapped(m->f)) return;
  release_pages(src, bytes, NULL);
  if (m->n_copied == m->cap_copied) {
    size_t cap = m->cap_copied ? m->cap_copied * 2 : 64;
    struct model_span *c = realloc(m->copied, cap * sizeof *c);
    if (!c) return;
    m->copied = c;
    m->cap_copied = cap;
  }
  m->copied[m->n_copied++] = (struct model_span){src, bytes};
}

/* Releases every copied range once more, after the whole load. Needed
 * because a page fault maps more than the page it hits: fault-around maps
 * up to 64 KiB of neighbours, and on file systems with large folios (ext4
 * since Linux 6.16) a fault maps the whole folio, up to 2 MiB. Copying a
 * norm vector (8 KiB) right after the previous layer's ffn_down was
 * repacked and released brought back up to 2 MiB of ffn_down's pages; a
 * forward pass reading norms from the mapping did the same on every call
 * (Q8_0 TinyLlama: 82 MiB of the file resident for 66 MiB of token_embd,
 * on top of the repacked copy). */
static void release_copied(model *m) {
  for (size_t i = 0; i < m->n_copied; i++) release_pages(m->copied[i].p, m->copied[i].n, NULL);
}

#define COPY_SLICE ((size_t)1 << 20) /* bytes copied between releases */

/* A matrix without a repacked layout (F16, BF16, F32, the K-quants...),
 * from a mapping: copied (kern_weights_alloc: huge pages from 2 MiB on),
 * releasing the mapping's pages slice by slice, as bind_pack does.
 * Why copy at all: generation streams every weight once per token; in the
 * mapping that is 4 KiB pages (only part of a file is ever mapped with
 * 2 MiB entries, depending on the page cache's folios), a TLB miss and a
 * hardware-prefetch restart every 4 KiB. Why copy the small ones too: a
 * matrix read from the mapping faults in its whole folio (up to 2 MiB),
 * with the pages of its copied neighbours (Q4_K_M TinyLlama: attn_k and
 * attn_v, 0.3-0.4 MiB, kept 31 MiB of attn_q and attn_output resident
 * twice). Same resident size, one memcpy of the file at load; the page
 * cache keeps the file (reclaimable). */
static int bind_copy(model *m, model_tensor *t, uint64_t n_bytes) {
  if (!gguf_is_mapped(m->f) || n_bytes == 0 || n_bytes > SIZE_MAX) return 0;
  uint8_t *dst = kern_weights_alloc((size_t)n_bytes);
  if (!dst || own(m, dst)) {
    free(dst);
    return err_set(ERR_NOMEM, "tensor '%s': out of memory for %llu bytes", t->name, (unsigned long long)n_bytes);
  }
  const uint8_t *src = t->data;
  for (size_t o = 0; o < (size_t)n_bytes; o += COPY_SLICE) {
    size_t n = (size_t)n_bytes - o < COPY_SLICE ? (size_t)n_bytes - o : COPY_SLICE;
    memcpy(dst + o, src + o, n);
    release_pages(src + o, n, NULL);
  }
  copied(m, src, (size_t)n_bytes);
  t->data = dst;
  return 0;
}

/* Repacks a bound matrix when its type has a faster layout on this CPU (see
 * model_bind_matrix), releasing the mapping's pages of the original slice
 * by slice as they are copied (so a big tensor is never resident twice),
 * then once more over the whole range for the pages straddling slices. */
static int bind_pack(model *m, model_tensor *t, uint64_t n_bytes) {
  kern_packed *p = NULL;
  bool mapped = gguf_is_mapped(m->f);
  int rc = kern_pack_ex((int)t->type, t->data, t->n_rows, t->n_cols, mapped ? release_pages : NULL, NULL, &p);
  if (rc) {
    char why[256];
    snprintf(why, sizeof why, "%s", err_detail());
    return err_set(rc, "tensor '%s': cannot repack: %s", t->name, why);
  }
  if (!p) return bind_copy(m, t, n_bytes);
  if (own(m, p)) { /* kern_packed_free is free() */
    kern_packed_free(p);
    return err_set(ERR_NOMEM, "tensor '%s': out of memory", t->name);
  }
  t->packed = p;
  copied(m, t->data, (size_t)n_bytes);
  return 0;
}

static int bind_v(model *m, model_tensor *t, int64_t n_cols, int64_t n_rows, int flags, const char *fmt,
                  va_list ap) {
  char name[128];
  vsnprintf(name, sizeof name, fmt, ap);
  memset(t, 0, sizeof *t);
  const gguf_tensor *g = gguf_find_tensor(m->f, name);
  if (!g) {
    if (flags & MODEL_BIND_OPTIONAL) return 0;
    return err_set(ERR_NOT_FOUND, "tensor '%s' is missing", name);
  }
  int want_dims = n_rows ? 2 : 1;
  bool ok = g->dims[0] == (uint64_t)n_cols && g->dims[1] == (uint64_t)(n_rows ? n_rows : 1) && g->dims[2] == 1 &&
            g->dims[3] == 1;
  if (!ok) {
    char have[96];
    fmt_dims(g, have, sizeof have);
    if (want_dims == 2)
      return err_set(ERR_RANGE, "tensor '%s' has shape %s, expected [%lld, %lld]", name, have, (long long)n_cols,
                     (long long)n_rows);
    return err_set(ERR_RANGE, "tensor '%s' has shape %s, expected [%lld]", name, have, (long long)n_cols);
  }
  const struct tensor_type_traits *tt = tensor_type_get(g->type);
  if (!tt || !tt->supported)
    return err_set(ERR_UNSUPPORTED, "tensor '%s' has type %s, which has no kernel", name, tensor_type_name(g->type));
  size_t rb = 0;
  int rc = tensor_type_row_bytes(g->type, n_cols, &rb);
  if (rc) return err_set(rc, "tensor '%s': rows of %lld elements do not fit type %s", name, (long long)n_cols,
                         tensor_type_name(g->type));
  t->name = g->name;
  t->type = g->type;
  t->n_cols = n_cols;
  t->n_rows = n_rows ? n_rows : 1;
  t->data = g->data;
  t->row_bytes = rb;
  m->weight_bytes += g->n_bytes;
  if (n_rows && !(flags & MODEL_BIND_ROWS)) return bind_pack(m, t, g->n_bytes);
  return 0;
}

int model_bind_matrix(model *m, model_tensor *t, int64_t n_cols, int64_t n_rows, int flags, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = bind_v(m, t, n_cols, n_rows, flags, fmt, ap);
  va_end(ap);
  return rc;
}

int model_bind_matrix_parts(model *m, model_tensor *parts, int n_parts, const int64_t *part_rows, int64_t n_cols,
                            int flags, const char *fmt, ...) {
  int64_t total = 0;
  for (int i = 0; i < n_parts; i++) total += part_rows[i];
  model_tensor whole;
  va_list ap;
  va_start(ap, fmt);
  /* checked and counted as one tensor, never packed whole */
  int rc = bind_v(m, &whole, n_cols, total, (flags & MODEL_BIND_OPTIONAL) | MODEL_BIND_ROWS, fmt, ap);
  va_end(ap);
  for (int i = 0; i < n_parts; i++) memset(&parts[i], 0, sizeof parts[i]);
  if (rc || !whole.data) return rc;
  int64_t row0 = 0;
  for (int i = 0; i < n_parts; i++) {
    model_tensor *t = &parts[i];
    *t = whole;
    t->n_rows = part_rows[i];
    t->data = (const uint8_t *)whole.data + (size_t)row0 * whole.row_bytes;
    row0 += part_rows[i];
    if ((rc = bind_pack(m, t, (uint64_t)t->n_rows * whole.row_bytes))) return rc;
  }
  return 0;
}

/* n_rows (0: a 1-D tensor) vectors of n elements as one f32 copy. */
static int bind_vec(model *m, const float **out, int64_t n, int64_t n_rows, int flags, const char *fmt, va_list ap) {
  *out = NULL;
  model_tensor t;
  int rc = bind_v(m, &t, n, n_rows, flags | MODEL_BIND_ROWS, fmt, ap);
  if (rc || !t.data) return rc;
  /* Copied even when F32: read from the mapping on every forward pass, an
   * 8 KiB norm kept its whole folio (up to 2 MiB) of the file resident,
   * next to the repacked copy of the matrices around it. */
  const size_t rows = (size_t)(n_rows ? n_rows : 1);
  float *v = malloc(rows * (size_t)n * sizeof *v);
  if (!v || own(m, v)) {
    free(v);
    return err_set(ERR_NOMEM, "tensor '%s': out of memory", t.name);
  }
  for (size_t r = 0; r < rows; r++) {
    const uint8_t *src = (const uint8_t *)t.data + r * t.row_bytes;
    if (t.type == TENSOR_TYPE_F32)
      memcpy(v + r * (size_t)n, src, (size_t)n * sizeof *v);
    else if ((rc = ref_dequantize_row(t.type, src, v + r * (size_t)n, n)))
      return err_set(rc, "tensor '%s': cannot dequantize type %s", t.name, tensor_type_name(t.type));
  }
  copied(m, t.data, rows * t.row_bytes);
  *out = v;
  return 0;
}

int model_bind_vector(model *m, const float **out, int64_t n, int flags, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = bind_vec(m, out, n, 0, flags, fmt, ap);
  va_end(ap);
  return rc;
}

int model_bind_vectors(model *m, const float **out, int64_t n, int64_t n_rows, int flags, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = bind_vec(m, out, n, n_rows, flags, fmt, ap);
  va_end(ap);
  return rc;
}

/* ---- matrix products ------------------------------------------------------ */

int model_matmul(model_ctx *c, const model_tensor *t, const float *x, int64_t n, float *y) {
  if (c->prof) model_prof_product_begin(c, 1, &t);
  int rc = t->packed ? kern_matmul_packed(c->tp, t->packed, x, n, y)
                     : kern_matmul(c->tp, (int)t->type, t->data, t->n_rows, t->n_cols, x, n, y);
  if (c->prof) model_prof_product_end(c);
  if (rc) {
    char why[256];
    snprintf(why, sizeof why, "%s", err_detail());
    return err_set(rc, "tensor '%s': %s", t->name, why);
  }
  return 0;
}

int model_matmul_multi(model_ctx *c, int n_parts, const model_tensor *const *ts, float *const *ys, const float *x,
                       int64_t n) {
  kern_mm_part parts[KERN_MULTI_MAX];
  if (n_parts < 1 || n_parts > KERN_MULTI_MAX) return err_set(ERR_INTERNAL, "model: %d fused products", n_parts);
  for (int i = 0; i < n_parts; i++) {
    if (ts[i]->n_cols != ts[0]->n_cols)
      return err_set(ERR_INTERNAL, "tensors '%s' and '%s': %lld and %lld columns in one fused product", ts[0]->name,
                     ts[i]->name, (long long)ts[0]->n_cols, (long long)ts[i]->n_cols);
    parts[i] = (kern_mm_part){.packed = ts[i]->packed, .type = (int)ts[i]->type, .W = ts[i]->data,
                              .n_rows = ts[i]->n_rows, .y = ys[i]};
  }
  if (c->prof) model_prof_product_begin(c, n_parts, ts);
  int rc = kern_matmul_multi(c->tp, parts, n_parts, ts[0]->n_cols, x, n);
  if (c->prof) model_prof_product_end(c);
  if (rc) {
    char why[256], names[256];
    snprintf(why, sizeof why, "%s", err_detail());
    size_t o = 0;
    names[0] = 0;
    for (int i = 0; i < n_parts && o < sizeof names; i++)
      o += (size_t)snprintf(names + o, sizeof names - o, "%s'%s'", i ? ", " : "", ts[i]->name);
    return err_set(rc, "tensors %s: %s", names, why);
  }
  return 0;
}

int model_tensor_row_f32(const model_tensor *t, int64_t r, float *out) {
  int rc = t->packed ? kern_packed_row_f32(t->packed, r, out)
                     : ref_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)r * t->row_bytes, out, t->n_cols);
  if (rc) {
    char why[256];
    snprintf(why, sizeof why, "%s", err_detail());
    return err_set(rc, "tensor '%s': cannot read row %lld as f32: %s", t->name, (long long)r, why);
  }
  return 0;
}

/* ---- contexts ------------------------------------------------------------- */


model_ctx_params model_ctx_default_params(void) {
  model_ctx_params p;
  memset(&p, 0, sizeof p);
  return p;
}

static const char *const kv_type_names[MODEL_KV_TYPE_COUNT] = {
    [MODEL_KV_F16] = "f16", [MODEL_KV_F32] = "f32", [MODEL_KV_Q8_0] = "q8_0"};

const char *model_kv_type_name(enum model_kv_type t) {
  return (unsigned)t < MODEL_KV_TYPE_COUNT ? kv_type_names[t] : "unknown";
}

int model_kv_type_parse(const char *s, enum model_kv_type *out) {
  for (int t = 0; s && t < MODEL_KV_TYPE_COUNT; t++)
    if (strcasecmp(s, kv_type_names[t]) == 0) {
      *out = (enum model_kv_type)t;
      return 0;
    }
  return err_set(ERR_INVALID, "KV cache type '%s' is not one of f16, q8_0, f32", s ? s : "(null)");
}

enum model_kv_type model_kv_type_for(int64_t head_dim, enum model_kv_type t) {
  return t == MODEL_KV_Q8_0 && head_dim % QK8_0 != 0 ? MODEL_KV_F16 : t;
}

size_t model_kv_row_bytes(int64_t head_dim, enum model_kv_type t) {
  switch (model_kv_type_for(head_dim, t)) {
    case MODEL_KV_F32: return (size_t)head_dim * 4;
    case MODEL_KV_Q8_0: return (size_t)head_dim / QK8_0 * sizeof(block_q8_0);
    default: return (size_t)head_dim * 2;
  }
}

int model_ctx_new(model *m, const model_ctx_params *p, model_ctx **out) {
  *out = NULL;
  model_ctx_params d = model_ctx_default_params();
  if (!p) p = &d;
  const model_hparams *hp = &m->hp;
  if (p->n_ctx < 0 || p->n_batch < 0 || p->n_threads < 0 || p->n_seq < 0)
    return err_set(ERR_RANGE, "model context: negative n_ctx, n_batch, n_seq or n_threads");
  if (p->n_seq > 65536) return err_set(ERR_RANGE, "model context: %d sequences, at most 65536", p->n_seq);
  if ((unsigned)p->kv_type >= MODEL_KV_TYPE_COUNT)
    return err_set(ERR_RANGE, "model context: unknown KV cache type %d", (int)p->kv_type);
  model_ctx *c = calloc(1, sizeof *c);
  if (!c) return err_set(ERR_NOMEM, "model context: out of memory");
  c->m = m;
  c->n_ctx = p->n_ctx == 0 || p->n_ctx > hp->n_ctx_train ? hp->n_ctx_train : p->n_ctx;
  c->n_seq = p->n_seq ? p->n_seq : 1;
  c->n_batch = p->n_batch ? p->n_batch : 512;
  if (c->n_batch > c->n_ctx * c->n_seq) c->n_batch = c->n_ctx * c->n_seq;
  c->kv_type = model_kv_type_for(hp->head_dim, p->kv_type);
  if (c->kv_type != p->kv_type)
    LOG_WARN("model", "KV cache: q8_0 needs a head size that is a multiple of %d, this model's is %lld: using f16",
             QK8_0, (long long)hp->head_dim);
  c->kv_elem = c->kv_type == MODEL_KV_F16 ? 2 : c->kv_type == MODEL_KV_F32 ? 4 : 0;
  c->kv_row = model_kv_row_bytes(hp->head_dim, c->kv_type);
  int rc = 0;
  if (p->tp) {
    c->tp = p->tp;
  } else {
    rc = tpool_new(p->n_threads ? p->n_threads : 1, &c->tp);
    if (rc) goto fail;
    c->own_tp = true;
  }
  c->n_threads = tpool_n_threads(c->tp);

  size_t per_layer = 0, kv_total = 0;
  /* positions rounded up to whole attention tiles (the v layout); an
   * encoder keeps no cache (its rows are the row's own buffers) */
  c->n_ctx_pad = (c->n_ctx + ATT_TILE_POS - 1) / ATT_TILE_POS * ATT_TILE_POS;
  if (!size_mul(m->ops->encoder ? 0 : (size_t)hp->n_head_kv * c->kv_row, (size_t)c->n_ctx_pad, &per_layer) ||
      !size_mul(per_layer, 2 * (size_t)hp->n_layer_kv, &kv_total) ||
      !size_mul(kv_total, (size_t)c->n_seq, &kv_total)) {
    rc = err_set(ERR_TOO_LARGE, "model context: KV cache for %d x %lld positions overflows", c->n_seq,
                 (long long)c->n_ctx);
    goto fail;
  }
  c->kv_layer_bytes = per_layer;
  /* zeroed: attention multiplies not-yet-written positions of a tile by 0,
   * which must not meet a NaN */
  c->kv = calloc(1, kv_total ? kv_total : 1);
  const size_t rs_bytes = (size_t)model_rs_seq_bytes(hp) * (size_t)c->n_seq;
  if (rs_bytes && !(c->rs = calloc(1, rs_bytes))) {
    rc = err_set(ERR_NOMEM, "model context: cannot allocate %zu bytes of recurrent state for %d sequences", rs_bytes,
                 c->n_seq);
    goto fail;
  }
  size_t nb = (size_t)c->n_batch, ns = (size_t)c->n_seq;
  c->rope_cs = malloc(nb * (size_t)hp->rope.n_rot * sizeof(float));
  c->att_scratch_floats = model_att_scratch_floats(hp);
  /* 64-byte aligned, each thread's part too (a multiple of 16 floats): the
   * attention kernel's aligned vector loads */
  c->att_scratch = aligned_alloc(64, (size_t)c->n_threads * c->att_scratch_floats * sizeof(float));
  c->n_past = calloc(ns, sizeof *c->n_past);
  c->seq_next = malloc(ns * sizeof *c->seq_next);
  c->seq_last = malloc(ns * sizeof *c->seq_last);
  c->step_seq = malloc(nb * sizeof *c->step_seq);
  c->step_pos = malloc(nb * sizeof *c->step_pos);
  c->step_out = malloc(nb * sizeof *c->step_out);
  c->runs = malloc(nb * sizeof *c->runs);
  if (!c->kv || !c->rope_cs || !c->att_scratch || !c->n_past || !c->seq_next || !c->seq_last || !c->step_seq ||
      !c->step_pos || !c->step_out || !c->runs) {
    rc = err_set(ERR_NOMEM, "model context: cannot allocate a KV cache of %zu bytes for %d x %lld positions", kv_total,
                 c->n_seq, (long long)c->n_ctx);
    goto fail;
  }
  c->buf_bytes = nb * (size_t)hp->rope.n_rot * sizeof(float) +
                 (size_t)c->n_threads * c->att_scratch_floats * sizeof(float) +
                 nb * (sizeof(int32_t) + 2 * sizeof(int64_t) + sizeof(model_att_run));
  if ((rc = m->ops->ctx_init(c))) goto fail;
  *out = c;
  return 0;
fail:
  model_ctx_free(c);
  return rc;
}

void model_ctx_free(model_ctx *c) {
  if (!c) return;
  if (c->arch_data && c->m->ops->ctx_free) c->m->ops->ctx_free(c);
  if (c->own_tp) tpool_free(c->tp);
  free(c->kv);
  free(c->rs);
  free(c->rope_cs);
  free(c->att_scratch);
  free(c->n_past);
  free(c->seq_next);
  free(c->seq_last);
  free(c->step_seq);
  free(c->step_pos);
  free(c->step_out);
  free(c->runs);
  free(c);
}

int64_t model_ctx_n_ctx(const model_ctx *c) { return c->n_ctx; }
enum model_kv_type model_ctx_kv_type(const model_ctx *c) { return c->kv_type; }
int32_t model_ctx_n_seq(const model_ctx *c) { return c->n_seq; }
int64_t model_ctx_seq_n_past(const model_ctx *c, int32_t seq) {
  return seq >= 0 && seq < c->n_seq ? c->n_past[seq] : 0;
}
int64_t model_ctx_n_past(const model_ctx *c) { return c->n_past[0]; }
size_t model_ctx_kv_bytes(const model_ctx *c) {
  return c->kv_layer_bytes * 2 * (size_t)c->m->hp.n_layer_kv * (size_t)c->n_seq;
}
size_t model_ctx_rs_bytes(const model_ctx *c) { return c->rs ? (size_t)model_rs_seq_bytes(&c->m->hp) * (size_t)c->n_seq : 0; }
size_t model_ctx_buf_bytes(const model_ctx *c) { return c->buf_bytes; }
thread_pool *model_ctx_pool(model_ctx *c) { return c->tp; }

/* Sets sequence s to hold n positions (n <= n_past); recurrent state
 * cannot be rewound, so with recurrent layers any n < n_past restarts the
 * sequence: n_past 0 and its state zeroed. */
static void rs_zero(model_ctx *c, int32_t s) {
  const uint64_t per = model_rs_seq_bytes(&c->m->hp);
  memset((uint8_t *)c->rs + (size_t)s * per, 0, (size_t)per);
}
static void seq_rewind(model_ctx *c, int32_t s, int64_t n) {
  if (n >= c->n_past[s]) {
    c->n_past[s] = n;
    return;
  }
  if (c->rs) {
    rs_zero(c, s);
    n = 0;
  }
  c->n_past[s] = n;
}

void model_ctx_seq_truncate(model_ctx *c, int32_t seq, int64_t n) {
  if (seq >= 0 && seq < c->n_seq && n >= 0 && n < c->n_past[seq]) seq_rewind(c, seq, n);
}
void model_ctx_truncate(model_ctx *c, int64_t n) { model_ctx_seq_truncate(c, 0, n); }

static int rs_check(const model_ctx *c, int32_t seq) {
  if (!c->rs) return err_set(ERR_UNSUPPORTED, "the model has no recurrent layers: no state to save or restore");
  if (seq < 0 || seq >= c->n_seq)
    return err_set(ERR_RANGE, "sequence %d is not in 0..%d", seq, c->n_seq - 1);
  return 0;
}

int model_ctx_seq_state_save(const model_ctx *c, int32_t seq, void *dst) {
  int rc = rs_check(c, seq);
  if (rc) return rc;
  const uint64_t per = model_rs_seq_bytes(&c->m->hp);
  memcpy(dst, (const uint8_t *)c->rs + (size_t)seq * per, (size_t)per);
  return 0;
}

/* The attention layers' cache needs nothing: positions >= n are forgotten
 * by n_past, those below are the caller's promise. */
int model_ctx_seq_state_restore(model_ctx *c, int32_t seq, int64_t n, const void *src) {
  int rc = rs_check(c, seq);
  if (rc) return rc;
  if (n < 0 || n > c->n_past[seq])
    return err_set(ERR_RANGE, "restore sequence %d to %lld positions, but it holds %lld", seq, (long long)n,
                   (long long)c->n_past[seq]);
  const uint64_t per = model_rs_seq_bytes(&c->m->hp);
  memcpy((uint8_t *)c->rs + (size_t)seq * per, src, (size_t)per);
  c->n_past[seq] = n;
  return 0;
}

/* Position of token i: given, or where its sequence continues (seq_next
 * holds -1 before the sequence's first token in the batch). */
static inline int64_t batch_pos(const model_ctx *c, const model_batch *b, int64_t i, int32_t s) {
  if (b->pos) return b->pos[i];
  return c->seq_next[s] >= 0 ? c->seq_next[s] : c->n_past[s];
}

int model_decode(model_ctx *c, const model_batch *b, float *logits) {
  const model_hparams *hp = &c->m->hp;
  if (b->n <= 0) return err_set(ERR_RANGE, "model_decode: %lld tokens", (long long)b->n);
  if (b->logits != MODEL_LOGITS_LAST && b->logits != MODEL_LOGITS_ALL && b->logits != MODEL_LOGITS_NONE)
    return err_set(ERR_RANGE, "model_decode: unknown logits mode %d", (int)b->logits);
  /* validate everything before touching the cache */
  for (int32_t s = 0; s < c->n_seq; s++) c->seq_next[s] = c->seq_last[s] = -1;
  int64_t n_want = 0;
  for (int64_t i = 0; i < b->n; i++) {
    int32_t s = b->seq ? b->seq[i] : 0;
    if (s < 0 || s >= c->n_seq)
      return err_set(ERR_RANGE, "token %lld: sequence %d is not in 0..%d", (long long)i, s, c->n_seq - 1);
    if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_vocab)
      return err_set(ERR_RANGE, "token %d at index %lld is outside the vocabulary of %lld", b->tokens[i],
                     (long long)i, (long long)hp->n_vocab);
    int64_t p = batch_pos(c, b, i, s);
    if (c->seq_next[s] < 0 && (p < 0 || p > c->n_past[s]))
      return err_set(ERR_RANGE, "token %lld of sequence %d: position %lld, but the sequence holds %lld positions",
                     (long long)i, s, (long long)p, (long long)c->n_past[s]);
    if (c->seq_next[s] < 0 && c->rs && p > 0 && p < c->n_past[s])
      return err_set(ERR_RANGE,
                     "token %lld of sequence %d: position %lld rewinds a sequence of %lld positions, but a model with "
                     "recurrent layers cannot rewind (only position 0 restarts it)",
                     (long long)i, s, (long long)p, (long long)c->n_past[s]);
    if (c->seq_next[s] >= 0 && p != c->seq_next[s])
      return err_set(ERR_RANGE, "token %lld of sequence %d: position %lld, expected %lld (consecutive)", (long long)i,
                     s, (long long)p, (long long)c->seq_next[s]);
    if (p >= c->n_ctx)
      return err_set(ERR_CONTEXT, "sequence %d needs position %lld, but the context holds %lld positions", s,
                     (long long)p, (long long)c->n_ctx);
    c->seq_next[s] = p + 1;
    c->seq_last[s] = i;
    if (b->want ? b->want[i] : b->logits == MODEL_LOGITS_ALL) n_want++;
  }
  if (!b->want && b->logits == MODEL_LOGITS_LAST)
    for (int32_t s = 0; s < c->n_seq; s++) n_want += c->seq_last[s] >= 0;
  if (n_want && !logits) return err_set(ERR_INVALID, "model_decode: logits is NULL");

  /* rewind each sequence to its first position in the batch */
  for (int32_t s = 0; s < c->n_seq; s++) c->seq_next[s] = -1;
  for (int64_t i = 0; i < b->n; i++) {
    int32_t s = b->seq ? b->seq[i] : 0;
    if (c->seq_next[s] < 0) {
      seq_rewind(c, s, batch_pos(c, b, i, s));
      c->seq_next[s] = c->n_past[s];
    }
  }
  for (int32_t s = 0; s < c->n_seq; s++) c->seq_next[s] = -1;
  float *out = logits;
  int64_t most = 0; /* the largest step */
  for (int64_t done = 0; done < b->n;) {
    int64_t step = b->n - done < c->n_batch ? b->n - done : c->n_batch;
    model_step st = {.n = step, .tokens = b->tokens + done, .seq = c->step_seq, .pos = c->step_pos,
                     .out = c->step_out};
    for (int64_t t = 0; t < step; t++) {
      int64_t i = done + t;
      int32_t s = b->seq ? b->seq[i] : 0;
      c->step_seq[t] = s;
      c->step_pos[t] = batch_pos(c, b, i, s);
      c->seq_next[s] = c->step_pos[t] + 1;
      bool w = b->want ? b->want[i]
               : b->logits == MODEL_LOGITS_ALL ? true
               : b->logits == MODEL_LOGITS_LAST ? c->seq_last[s] == i
                                                : false;
      if (w) c->step_out[st.n_out++] = t;
    }
    /* the pass issues hundreds of small jobs: keep the workers awake
     * between them (tpool_hold_begin) */
    tpool_hold_begin(c->tp);
    model_prof_start(c);
    int rc = c->m->ops->forward(c, &st, out);
    tpool_hold_end(c->tp);
    if (rc) { /* n_past still holds the positions before the step */
      if (c->rs) /* but the state may be half advanced: restart those sequences */
        for (int64_t t = 0; t < step; t++) {
          rs_zero(c, c->step_seq[t]);
          c->n_past[c->step_seq[t]] = 0;
        }
      return rc;
    }
    for (int64_t t = 0; t < step; t++) c->n_past[c->step_seq[t]] = c->step_pos[t] + 1;
    if (st.n_out) out += st.n_out * hp->n_vocab;
    done += step;
    if (step > most) most = step;
  }
  if (most > MODEL_TRIM_TOKENS && c->m->ops->trim) c->m->ops->trim(c);
  return 0;
}

int model_forward(model_ctx *c, const int32_t *tokens, int64_t n, int64_t pos, float *logits,
                  enum model_logits mode) {
  const model_hparams *hp = &c->m->hp;
  if (n <= 0) return err_set(ERR_RANGE, "model_forward: %lld tokens", (long long)n);
  if (pos < 0 || pos > c->n_past[0])
    return err_set(ERR_RANGE, "model_forward: position %lld is past the %lld cached tokens", (long long)pos,
                   (long long)c->n_past[0]);
  if (n > c->n_ctx - pos)
    return err_set(ERR_CONTEXT, "%lld tokens at position %lld need %lld positions, but the context holds %lld",
                   (long long)n, (long long)pos, (long long)(pos + n), (long long)c->n_ctx);
  for (int64_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
      return err_set(ERR_RANGE, "token %d at index %lld is outside the vocabulary of %lld", tokens[i], (long long)i,
                     (long long)hp->n_vocab);
  if (mode != MODEL_LOGITS_NONE && !logits) return err_set(ERR_INVALID, "model_forward: logits is NULL");
  if (c->rs && pos > 0 && pos < c->n_past[0])
    return err_set(ERR_RANGE,
                   "model_forward: position %lld rewinds %lld cached tokens, but a model with recurrent layers cannot "
                   "rewind (only position 0 restarts)",
                   (long long)pos, (long long)c->n_past[0]);
  /* everything model_decode checks holds now; rewind, then continue at pos */
  seq_rewind(c, 0, pos);
  model_batch b = {.n = n, .tokens = tokens, .logits = mode};
  return model_decode(c, &b, logits);
}

/* ---- KV cache ------------------------------------------------------------- */

/* F16 rows are stored through kern_f32_to_f16_sat: saturating at +-65504,
 * so the cache never holds an infinity (0 * inf would be NaN). */

/* One head row of hd values (a multiple of 32) to Q8_0 blocks, saturated
 * at +-65504 first as the F16 cache is, so that the f16 scale stays
 * finite; otherwise exactly ref_quant_q8_0 (absmax / 127, round to
 * nearest). */
static void q8_row_store(const float *x, int64_t hd, uint8_t *dst) {
  float blk[QK8_0];
  for (int64_t b = 0; b < hd / QK8_0; b++) {
    for (int j = 0; j < QK8_0; j++) {
      float y = x[b * QK8_0 + j];
      blk[j] = y > 65504.0f ? 65504.0f : y < -65504.0f ? -65504.0f : y;
    }
    ref_quant_q8_0(blk, dst + (size_t)b * sizeof(block_q8_0), QK8_0);
  }
}

void model_kv_store(model_ctx *c, int64_t l, const model_step *st, const float *k, const float *v) {
  const model_hparams *hp = &c->m->hp;
  int64_t hd = hp->head_dim, nkv = hp->n_head_kv;
  for (int64_t t = 0; t < st->n; t++) {
    uint8_t *kb = model_kv_block(c, st->seq[t], l, 0), *vb = model_kv_block(c, st->seq[t], l, 1);
    int64_t p = st->pos[t];
    for (int64_t g = 0; g < nkv; g++) {
      const float *ks = k + t * nkv * hd + g * hd, *vs = v + t * nkv * hd + g * hd;
      size_t ki = model_kv_k_index(c, g, p, 0);
      if (c->kv_type == MODEL_KV_Q8_0) {
        q8_row_store(ks, hd, kb + model_kv_row_off(c, g, p));
        q8_row_store(vs, hd, vb + model_kv_row_off(c, g, p));
      } else if (c->kv_type == MODEL_KV_F32) {
        memcpy((float *)kb + ki, ks, (size_t)hd * sizeof(float));
        for (int64_t d = 0; d < hd; d++) ((float *)vb)[model_kv_v_index(c, g, p, d)] = vs[d];
      } else {
        kern_f32_to_f16_sat(ks, (uint16_t *)kb + ki, hd);
        uint16_t vh[256]; /* the value row, then scattered into its tile column */
        for (int64_t d0 = 0; d0 < hd; d0 += 256) {
          int64_t nd = hd - d0 < 256 ? hd - d0 : 256;
          kern_f32_to_f16_sat(vs + d0, vh, nd);
          for (int64_t d = 0; d < nd; d++) ((uint16_t *)vb)[model_kv_v_index(c, g, p, d0 + d)] = vh[d];
        }
      }
    }
  }
}

int model_ctx_seq_copy(model_ctx *c, int32_t dst, int32_t src, int64_t n) {
  if (dst < 0 || dst >= c->n_seq || src < 0 || src >= c->n_seq || dst == src)
    return err_set(ERR_RANGE, "model_ctx_seq_copy: sequences %d -> %d (context has %d)", src, dst, c->n_seq);
  if (n < 0 || n > c->n_past[src])
    return err_set(ERR_RANGE, "model_ctx_seq_copy: %lld positions, sequence %d holds %lld", (long long)n, src,
                   (long long)c->n_past[src]);
  const model_hparams *hp = &c->m->hp;
  if (c->rs) {
    if (n != c->n_past[src])
      return err_set(ERR_RANGE,
                     "model_ctx_seq_copy: %lld of the %lld positions of sequence %d, but a model with recurrent layers "
                     "has state only for the whole sequence",
                     (long long)n, (long long)c->n_past[src], src);
    const size_t per = (size_t)model_rs_seq_bytes(hp);
    memcpy((uint8_t *)c->rs + (size_t)dst * per, (const uint8_t *)c->rs + (size_t)src * per, per);
  }
  size_t row = c->kv_row;
  int64_t full = n / ATT_TILE_POS * ATT_TILE_POS; /* whole value tiles */
  for (int64_t l = 0; l < hp->n_layer_kv; l++) {
    uint8_t *kd = model_kv_block_at(c, dst, l, 0), *vd = model_kv_block_at(c, dst, l, 1);
    const uint8_t *ks = model_kv_block_at(c, src, l, 0), *vs = model_kv_block_at(c, src, l, 1);
    for (int64_t g = 0; g < hp->n_head_kv; g++) {
      size_t k0 = model_kv_row_off(c, g, 0);
      size_t v0 = c->kv_type == MODEL_KV_Q8_0 ? model_kv_row_off(c, g, 0) : model_kv_v_index(c, g, 0, 0) * c->kv_elem;
      memcpy(kd + k0, ks + k0, (size_t)n * row);
      if (c->kv_type == MODEL_KV_Q8_0) { /* values are rows too */
        memcpy(vd + v0, vs + v0, (size_t)n * row);
        continue;
      }
      memcpy(vd + v0, vs + v0, (size_t)full * row);
      for (int64_t p = full; p < n; p++)
        for (int64_t d = 0; d < hp->head_dim; d++) {
          size_t vi = model_kv_v_index(c, g, p, d) * c->kv_elem;
          memcpy(vd + vi, vs + vi, c->kv_elem);
        }
    }
  }
  c->n_past[dst] = n;
  return 0;
}
