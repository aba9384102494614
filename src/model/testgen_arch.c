/*
 * testgen_arch.c - random-weight qwen2 / qwen3 / bert / gemma2 / gemma3 /
 * phi3 / granite / smollm3 / mistral3 GGUF files (see testgen_arch.h); olmo2 and glm4
 * tensors are testgen_dense.c's.
 *
 * Tensors are generated in f32 from one xorshift64* stream seeded from
 * g->seed, in file order (so a seed names a model), then converted to their
 * type with the reference quantizer. The writer borrows tensor data until
 * the file is written, so all buffers live until the end.
 */
#include "model/testgen_arch.h"
#include "model/testgen_int.h"
#include "model/testgen.h"
#include "model/testgen_dense.h"
#include "model/testgen_qwen35.h"
#include "model/testgen_gemma4.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/util.h"
#include "gguf/gguf.h"
#include "kernels/ref.h"
#include "kernels/tensor_type.h"

model_testgen_arch model_testgen_arch_small(enum model_arch arch) {
  model_testgen_arch g;
  memset(&g, 0, sizeof g);
  g.arch = arch;
  g.n_embd = 64;
  g.n_layer = 2;
  g.n_head = 4;
  const bool enc = arch == MODEL_ARCH_BERT || arch == MODEL_ARCH_NOMIC_BERT;
  g.n_head_kv = enc ? 4 : 2;
  g.n_ff = enc ? 128 : 160;
  g.n_vocab = 300;
  g.n_ctx = 128;
  g.head_dim = arch == MODEL_ARCH_QWEN3 || arch == MODEL_ARCH_QWEN3MOE || arch == MODEL_ARCH_GPT_OSS ? 32 : 0;
  g.tied = arch == MODEL_ARCH_QWEN3;
  g.norm_w = -1;
  if (arch == MODEL_ARCH_LLAMA_MOE) g.head_dim = 0;
  if (testgen_moe_arch(arch)) {
    g.n_expert = 4;
    g.n_expert_used = 2;
    g.n_ff_exp = 32;
  }
  if (arch == MODEL_ARCH_QWEN2MOE) g.n_ff_shexp = 48;
  if (arch == MODEL_ARCH_OLMOE || arch == MODEL_ARCH_GRANITEMOE) g.n_ff = g.n_ff_exp; /* the experts' width */
  g.type = g.type_embd = TENSOR_TYPE_F32;
  g.pooling_type = enc ? MODEL_POOLING_MEAN : -1;
  g.sliding_window = -1;
  g.rope_finetuned = -1;
  g.seed = 1;
  if (arch == MODEL_ARCH_GEMMA2 || arch == MODEL_ARCH_GEMMA3 || arch == MODEL_ARCH_GEMMA_EMBEDDING) {
    const bool g3 = arch != MODEL_ARCH_GEMMA2;
    g.tied = true;
    g.head_dim = g3 ? 32 : 16;
    g.n_layer = g3 ? 6 : 2;
    g.sliding_window = 8;
    g.attn_softcap = g3 ? 0.0f : 5.0f;
    g.final_softcap = g3 ? 0.0f : 8.0f;
    g.rope_freq_base = g3 ? 1000000.0f : 10000.0f;
  }
  if (arch == MODEL_ARCH_GEMMA4) {
    static const uint8_t swa[6] = {1, 1, 0, 1, 1, 0};
    g.tied = true;
    g.n_layer = 6;
    g.head_dim = 32;
    g.swa_layers = swa;
    g.sliding_window = 8;
    g.final_softcap = 8.0f;
    g.rope_freq_base = 1000000.0f;
    g.g4.head_dim_swa = 16;
    g.g4.n_shared = 3;
    g.g4.n_pl = 16;
    g.g4.n_ff_shared = 320;
    g.g4.out_scale = true;
  }
  if (arch == MODEL_ARCH_GEMMA_EMBEDDING) {
    g.pooling_type = MODEL_POOLING_MEAN;
    g.n_dense = 96;
    g.dense_keys = 1;
  }
  if (arch == MODEL_ARCH_PHI3) {
    g.head_dim = 16;
    g.n_rot = 12;
    g.sliding_window = 8;
    g.rope_factors = 1;
    g.n_ctx_orig = 32;
    g.rope_attn_factor = 1.2f;
  }
  if (arch == MODEL_ARCH_GRANITE || arch == MODEL_ARCH_GRANITEMOE) {
    g.tied = true;
    g.embd_scale = 12.0f;
    g.resid_scale = 0.22f;
    g.attn_scale = 0.15f;
    g.logit_scale = 8.0f;
  }
  if (arch == MODEL_ARCH_LFM2) {
    g.n_layer = 4;
    g.attn_layers = 1u << 2;
    g.d_conv = 3;
    g.tied = true;
  }
  if (testgen_qwen35_arch(arch)) { /* 4 layers, the last attends (interval 4) */
    g.n_layer = 4;
    g.head_dim = 16;
    g.n_rot = 8;
    g.d_conv = 4;
    g.gdn.d_state = 16;
    g.gdn.n_group = 2;
    g.gdn.dt_rank = 4;
    g.gdn.d_inner = 64;
    g.gdn.interval = 4;
    g.gdn.sections[0] = 2; /* Qwen3.5's 11/11/10 of 32 pairs, scaled to 4 */
    g.gdn.sections[1] = g.gdn.sections[2] = 1;
    if (arch == MODEL_ARCH_QWEN3NEXT) g.gdn.sections[0] = g.gdn.sections[1] = g.gdn.sections[2] = 0;
    g.tied = arch == MODEL_ARCH_QWEN35;
    g.n_ctx = 256;
    if (arch != MODEL_ARCH_QWEN35) g.n_ff_shexp = 48;
  }
  if (arch == MODEL_ARCH_GPT_OSS) {
    g.sliding_window = 8;
    /* YaRN as the released files (factor 32 over 4096 of 131072), scaled
     * down so the ramp spans pairs 0..2 of 16 at base 10000 */
    g.rope_yarn = 8.0f;
    g.n_ctx_orig = 16;
  }
  if (arch == MODEL_ARCH_SMOLLM3) {
    g.tied = true;
    g.n_layer = 4;
  }
  if (arch == MODEL_ARCH_MISTRAL3) {
    g.rope_freq_base = 1000.0f;
    g.rope_yarn = 4.0f;
    g.n_ctx_orig = 16;
    g.yarn_beta_fast = 4.0f;
    g.yarn_beta_slow = 0.5f;
    g.yarn_log_mul = 1.0f;
    g.attn_temp_scale = 0.1f;
  }
  if (arch == MODEL_ARCH_GLM4) g.n_rot = 8; /* half of head_dim 16, as GLM-4 files */
  if (arch == MODEL_ARCH_NOMIC_BERT) g.rope_freq_base = 1000.0f; /* nomic-embed-text's */
  return g;
}

model_testgen_arch model_testgen_arch_qwen25_05b(uint32_t t, bool k_m) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_QWEN2);
  g.n_embd = 896;
  g.n_layer = 24;
  g.n_head = 14;
  g.n_head_kv = 2;
  g.n_ff = 4864;
  g.n_vocab = 151936;
  g.n_ctx = 4096;
  g.tied = true;
  g.rope_freq_base = 1000000.0f;
  g.norm_eps = 1e-6f;
  g.type = g.type_embd = t;
  if (k_m) model_testgen_arch_qwen_k_m(&g);
  return g;
}

int model_testgen_arch_moe_shape(const char *name, int64_t n_layer, model_testgen_arch *out) {
  model_testgen_arch g;
  if (strcmp(name, "gpt-oss-20b") == 0) {
    g = model_testgen_arch_small(MODEL_ARCH_GPT_OSS);
    g.n_embd = 2880;
    g.n_layer = 24;
    g.n_head = 64;
    g.n_head_kv = 8;
    g.head_dim = 64;
    g.n_ff = g.n_ff_exp = 2880;
    g.n_expert = 32;
    g.n_expert_used = 4;
    g.sliding_window = 128;
    g.n_vocab = 201088;
    g.rope_freq_base = 150000.0f;
    g.rope_yarn = 32.0f;
    g.n_ctx_orig = 4096;
    g.norm_eps = 1e-5f;
    g.type = g.type_embd = TENSOR_TYPE_Q8_0;
    g.type_exps = TENSOR_TYPE_MXFP4;
  } else if (strcmp(name, "qwen3-30b-a3b") == 0) {
    g = model_testgen_arch_small(MODEL_ARCH_QWEN3MOE);
    g.n_embd = 2048;
    g.n_layer = 48;
    g.n_head = 32;
    g.n_head_kv = 4;
    g.head_dim = 128;
    g.n_ff = 6144;
    g.n_ff_exp = 768;
    g.n_expert = 128;
    g.n_expert_used = 8;
    g.n_vocab = 151936;
    g.rope_freq_base = 1000000.0f;
    g.type = g.type_embd = TENSOR_TYPE_Q4_K;
    g.mixed = true;
    g.type_v[0] = g.type_down[0] = TENSOR_TYPE_Q4_K;
    g.type_v[1] = g.type_down[1] = TENSOR_TYPE_Q6_K;
  } else {
    return err_set(ERR_NOT_FOUND, "testgen: no mixture-of-experts shape '%s' (gpt-oss-20b, qwen3-30b-a3b)", name);
  }
  g.n_ctx = 4096;
  g.tied = false;
  if (n_layer > 0 && n_layer < g.n_layer) g.n_layer = n_layer;
  *out = g;
  return 0;
}

int model_testgen_arch_dense_shape(const char *name, const char *type, model_testgen_arch *out) {
  const bool k_m = strcasecmp(type, "Q4_K_M") == 0;
  enum tensor_type t = TENSOR_TYPE_F32;
  if (!k_m && tensor_type_from_name(type, &t)) return err_set(ERR_RANGE, "testgen: unknown type '%s'", type);
  model_testgen_arch g;
  if (strcmp(name, "gemma-3-1b") == 0) {
    g = model_testgen_arch_small(MODEL_ARCH_GEMMA3);
    g.n_embd = 1152;
    g.n_layer = 26;
    g.n_head = 4;
    g.n_head_kv = 1;
    g.head_dim = 256;
    g.n_ff = 6912;
    g.n_vocab = 262144;
    g.n_ctx = 32768;
    g.sliding_window = 512;
    g.type = g.type_embd = t;
    if (k_m) model_testgen_arch_qwen_k_m(&g);
  } else if (strcmp(name, "phi-4-mini") == 0) {
    g = model_testgen_arch_small(MODEL_ARCH_PHI3);
    g.n_embd = 3072;
    g.n_layer = 32;
    g.n_head = 24;
    g.n_head_kv = 8;
    g.head_dim = 128;
    g.n_rot = 96;
    g.n_ff = 8192;
    g.n_vocab = 200064;
    g.n_ctx = 131072;
    g.n_ctx_orig = 4096;
    g.rope_attn_factor = 1.1902381f; /* sqrt(1 + ln(131072 / 4096) / ln 4096), as the converter computes */
    g.sliding_window = 262144;
    g.norm_eps = 1e-5f;
    g.tied = true;
    g.type = g.type_embd = t;
    if (k_m) {
      g.type = TENSOR_TYPE_Q4_K;
      g.type_qkv = TENSOR_TYPE_Q5_K;
      g.type_embd = TENSOR_TYPE_Q6_K;
      g.mixed = true;
      g.type_v[0] = g.type_down[0] = TENSOR_TYPE_Q4_K;
      g.type_v[1] = g.type_down[1] = TENSOR_TYPE_Q6_K;
    }
  } else {
    return err_set(ERR_NOT_FOUND, "testgen: no dense shape '%s' (gemma-3-1b, phi-4-mini)", name);
  }
  *out = g;
  return 0;
}

model_testgen_arch model_testgen_arch_lfm2_12b(uint32_t t, bool k_m) {
  model_testgen_arch g = model_testgen_arch_small(MODEL_ARCH_LFM2);
  g.n_embd = 2048;
  g.n_layer = 16;
  g.n_head = 32;
  g.n_head_kv = 8;
  g.n_ff = 8192;
  g.n_vocab = 65536;
  g.n_ctx = 128000;
  g.attn_layers = (1u << 2) | (1u << 5) | (1u << 8) | (1u << 10) | (1u << 12) | (1u << 14);
  g.d_conv = 3;
  g.tied = true;
  g.rope_freq_base = 1000000.0f;
  g.norm_eps = 1e-5f;
  g.type = g.type_embd = t;
  if (k_m) { /* llama.cpp's Q4_K_M mix: Q6_K for the embedding and the more-bits layers' v and down */
    g.type = TENSOR_TYPE_Q4_K;
    g.type_embd = TENSOR_TYPE_Q6_K;
    g.mixed = true;
    g.type_v[0] = g.type_down[0] = TENSOR_TYPE_Q4_K;
    g.type_v[1] = g.type_down[1] = TENSOR_TYPE_Q6_K;
  }
  return g;
}

void model_testgen_arch_qwen_k_m(model_testgen_arch *g) {
  g->type = TENSOR_TYPE_Q5_0;
  g->type_embd = TENSOR_TYPE_Q8_0;
  g->mixed = true;
  g->type_v[0] = TENSOR_TYPE_Q5_0;
  g->type_v[1] = TENSOR_TYPE_Q8_0;
  g->type_down[0] = TENSOR_TYPE_Q4_K;
  g->type_down[1] = TENSOR_TYPE_Q6_K;
}

bool testgen_moe_arch(enum model_arch a) {
  return a == MODEL_ARCH_QWEN3MOE || a == MODEL_ARCH_LLAMA_MOE || a == MODEL_ARCH_GPT_OSS || a == MODEL_ARCH_QWEN2MOE ||
         a == MODEL_ARCH_OLMOE || a == MODEL_ARCH_GRANITEMOE || a == MODEL_ARCH_QWEN35MOE || a == MODEL_ARCH_QWEN3NEXT;
}

/* llama.cpp's use_more_bits: the layers a K_M mix gives more bits. */
static bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* Layer i's mixture-of-experts tensors, in the converter's order. The
 * router's rows are three times the usual scale so that logits spread over
 * several units: the top-k choice is clear-cut, not a near tie that
 * rounding could flip. Experts' down matrices are scaled up by sqrt(k) so
 * the weighted sum keeps the residual of order one. */
int testgen_add_experts(testgen_gen *s, const model_testgen_arch *g, int i, int mb) {
  const int64_t E = g->n_embd, F = g->n_ff_exp, X = g->n_expert, S = g->n_ff_shexp;
  const float a_e = sqrtf(3.0f / (float)E), a_f = sqrtf(3.0f / (float)F);
  const uint32_t tx = g->type_exps ? g->type_exps : g->type, td = g->mixed ? g->type_down[mb] : tx;
  char name[96];
  int rc;
#define N(fmt) (snprintf(name, sizeof name, fmt, i), name)
  const bool oss = g->arch == MODEL_ARCH_GPT_OSS;
  const float gain = oss && g->gate_gain > 0 ? g->gate_gain : 1.0f;
  if ((rc = testgen_add_tensor(s, N("blk.%d.ffn_gate_inp.weight"), TENSOR_TYPE_F32, E, X, 0.0f, 3.0f * a_e)))
    return rc;
  if (oss && (rc = testgen_add_tensor(s, N("blk.%d.ffn_gate_inp.bias"), TENSOR_TYPE_F32, X, 0, 0.0f, 0.5f)))
    return rc;
  if (g->sel_bias && (rc = testgen_add_tensor(s, N("blk.%d.exp_probs_b.bias"), TENSOR_TYPE_F32, X, 0, 0.0f, 0.3f)))
    return rc;
  if (g->fused_gate_up) {
    if ((rc = testgen_add_tensor3(s, N("blk.%d.ffn_gate_up_exps.weight"), tx, E, 2 * F, X, 0.0f, a_e)))
      return rc;
  } else if ((rc = testgen_add_tensor3(s, N("blk.%d.ffn_gate_exps.weight"), tx, E, F, X, 0.0f, gain * a_e)) ||
             (rc = testgen_add_tensor3(s, N("blk.%d.ffn_up_exps.weight"), tx, E, F, X, 0.0f, gain * a_e))) {
    return rc;
  }
  if ((rc = testgen_add_tensor3(s, N("blk.%d.ffn_down_exps.weight"), td, F, E, X, 0.0f,
                                a_f * sqrtf((float)g->n_expert_used) / gain)))
    return rc;
  /* gpt-oss: a bias per expert row, [n_ff_exp, n_expert] and [n_embd,
   * n_expert], F32 as the converter writes them */
  if (oss && ((rc = testgen_add_tensor(s, N("blk.%d.ffn_gate_exps.bias"), TENSOR_TYPE_F32, F, X, 0.0f, 0.5f)) ||
              (rc = testgen_add_tensor(s, N("blk.%d.ffn_up_exps.bias"), TENSOR_TYPE_F32, F, X, 0.0f, 0.5f)) ||
              (rc = testgen_add_tensor(s, N("blk.%d.ffn_down_exps.bias"), TENSOR_TYPE_F32, E, X, 0.0f, 0.2f))))
    return rc;
  if (S > 0 && ((rc = testgen_add_tensor(s, N("blk.%d.ffn_gate_inp_shexp.weight"), TENSOR_TYPE_F32, E, 0, 0.0f,
                                         a_e)) ||
                (rc = testgen_add_tensor(s, N("blk.%d.ffn_gate_shexp.weight"), g->type, E, S, 0.0f, a_e)) ||
                (rc = testgen_add_tensor(s, N("blk.%d.ffn_up_shexp.weight"), g->type, E, S, 0.0f, a_e)) ||
                (rc = testgen_add_tensor(s, N("blk.%d.ffn_down_shexp.weight"), td, S, E, 0.0f,
                                         sqrtf(3.0f / (float)S)))))
    return rc;
#undef N
  return 0;
}

int model_testgen_arch_write(const model_testgen_arch *g_in, const char *path) {
  model_testgen_arch g_copy = *g_in; /* n_vocab follows a copied vocabulary */
  const model_testgen_arch *g = &g_copy;
  const char *an = g->arch == MODEL_ARCH_QWEN2    ? "qwen2"
                   : g->arch == MODEL_ARCH_QWEN3  ? "qwen3"
                   : g->arch == MODEL_ARCH_BERT   ? "bert"
                   : g->arch == MODEL_ARCH_GEMMA2 ? "gemma2"
                   : g->arch == MODEL_ARCH_GEMMA3 ? "gemma3"
                   : g->arch == MODEL_ARCH_GEMMA_EMBEDDING ? "gemma-embedding"
                   : g->arch == MODEL_ARCH_PHI3 || g->arch == MODEL_ARCH_GRANITE || g->arch == MODEL_ARCH_SMOLLM3 ||
                           g->arch == MODEL_ARCH_MISTRAL3 || testgen_dense_arch(g->arch) ||
                           g->arch == MODEL_ARCH_QWEN2MOE || g->arch == MODEL_ARCH_OLMOE ||
                           g->arch == MODEL_ARCH_GRANITEMOE || testgen_qwen35_arch(g->arch) ||
                           g->arch == MODEL_ARCH_GEMMA4
                       ? model_arch_name(g->arch)
                   : g->arch == MODEL_ARCH_QWEN3MOE ? "qwen3moe"
                   : g->arch == MODEL_ARCH_LLAMA_MOE ? "llama"
                   : g->arch == MODEL_ARCH_LFM2      ? "lfm2"
                   : g->arch == MODEL_ARCH_GPT_OSS ? "gpt-oss"
                       : NULL;
  if (!an)
    return err_set(ERR_UNSUPPORTED,
                   "testgen: architecture %d is not qwen2, qwen3, bert, gemma2, gemma3, gemma-embedding, phi3, granite, smollm3, qwen3moe, "
                   "olmo2, glm4, nomic-bert, mistral3, gpt-oss, qwen2moe, olmoe, granitemoe or llama with experts",
                   (int)g->arch);
  const bool phi3 = g->arch == MODEL_ARCH_PHI3;
  const bool gemma = g->arch == MODEL_ARCH_GEMMA2 || g->arch == MODEL_ARCH_GEMMA3 ||
                     g->arch == MODEL_ARCH_GEMMA_EMBEDDING;
  const bool oss = g->arch == MODEL_ARCH_GPT_OSS;
  const bool moe = testgen_moe_arch(g->arch);
  /* olmoe and granitemoe files carry the experts' width as
   * feed_forward_length (their converters write no expert length) */
  const bool ff_is_exp = g->arch == MODEL_ARCH_OLMOE || g->arch == MODEL_ARCH_GRANITEMOE;
  if (ff_is_exp && g->n_ff != g->n_ff_exp)
    return err_set(ERR_RANGE, "testgen: %s needs n_ff == n_ff_exp", model_arch_name(g->arch));
  if (moe && (g->n_expert <= 0 || g->n_expert_used <= 0 || g->n_ff_exp <= 0))
    return err_set(ERR_RANGE, "testgen: a mixture of experts needs n_expert, n_expert_used and n_ff_exp");
  if (g->n_embd <= 0 || g->n_layer <= 0 || g->n_head <= 0 || g->n_head_kv <= 0 || g->n_ff <= 0 || g->n_vocab <= 0 ||
      g->n_ctx <= 0 || g->n_head % g->n_head_kv || (!g->head_dim && g->n_embd % g->n_head))
    return err_set(ERR_RANGE, "testgen: inconsistent shape");
  const bool bert = g->arch == MODEL_ARCH_BERT || g->arch == MODEL_ARCH_NOMIC_BERT; /* encoders' keys */
  testgen_gen s;
  int rc = testgen_gen_init(&s, g->seed, 0x7654321ull);
  s.bad = g->bad_tensor;
  s.missing = g->missing_tensor;
  if (rc) return rc;
  const int64_t E = g->n_embd, hd = g->head_dim ? g->head_dim : E / g->n_head, Q = g->n_head * hd,
                KV = g->n_head_kv * hd, F = g->n_ff;
  const float eps = g->norm_eps > 0 ? g->norm_eps : bert ? 1e-12f : 1e-6f;
  char key[128], name[96];
#define CK(x) \
  if ((rc = (x))) goto done
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", an, suffix), key)
  CK(gguf_writer_add_str(s.w, "general.architecture", an));
  CK(gguf_writer_add_str(s.w, "general.name", "parley random model"));
  if (g->vocab_path) {
    CK(model_testgen_copy_vocab(s.w, g->vocab_path, g->chat_template != NULL, &g_copy.n_vocab));
  } else {
    CK(model_testgen_mark_no_vocab(s.w, an, g->n_vocab));
  }
  if (g->chat_template) CK(gguf_writer_add_str(s.w, "tokenizer.chat_template", g->chat_template));
  CK(gguf_writer_add_u32(s.w, KEY("context_length"), (uint32_t)g->n_ctx));
  CK(gguf_writer_add_u32(s.w, KEY("embedding_length"), (uint32_t)E));
  CK(gguf_writer_add_u32(s.w, KEY("block_count"), (uint32_t)g->n_layer));
  if (!(g->arch == MODEL_ARCH_GEMMA4 && g->g4.n_ff_shared > 0)) /* else per layer: testgen_gemma4.c */
    CK(gguf_writer_add_u32(s.w, KEY("feed_forward_length"), (uint32_t)F));
  CK(gguf_writer_add_u32(s.w, KEY("attention.head_count"), (uint32_t)g->n_head));
  const bool lfm2 = g->arch == MODEL_ARCH_LFM2;
  if (lfm2) { /* one count per layer, 0 for the convolution layers */
    if (g->n_layer > 64 || g->d_conv < 2) {
      rc = err_set(ERR_RANGE, "testgen: lfm2 needs at most 64 layers and d_conv >= 2");
      goto done;
    }
    uint32_t kv[64];
    for (int64_t l = 0; l < g->n_layer; l++) kv[l] = (g->attn_layers >> l) & 1 ? (uint32_t)g->n_head_kv : 0;
    CK(gguf_writer_add_arr(s.w, KEY("attention.head_count_kv"), GGUF_TYPE_UINT32, kv, (size_t)g->n_layer));
    CK(gguf_writer_add_u32(s.w, KEY("shortconv.l_cache"), (uint32_t)g->d_conv));
  } else {
    CK(gguf_writer_add_u32(s.w, KEY("attention.head_count_kv"), (uint32_t)g->n_head_kv));
  }
  if (g->head_dim) {
    CK(gguf_writer_add_u32(s.w, KEY("attention.key_length"), (uint32_t)hd));
    CK(gguf_writer_add_u32(s.w, KEY("attention.value_length"), (uint32_t)hd));
  }
  if (bert) {
    CK(gguf_writer_add_f32(s.w, KEY("attention.layer_norm_epsilon"), eps));
    CK(gguf_writer_add_bool(s.w, KEY("attention.causal"), false));
    if (g->rope_freq_base > 0) CK(gguf_writer_add_f32(s.w, KEY("rope.freq_base"), g->rope_freq_base));
  } else {
    CK(gguf_writer_add_f32(s.w, KEY("attention.layer_norm_rms_epsilon"), eps));
    if (g->rope_freq_base > 0) CK(gguf_writer_add_f32(s.w, KEY("rope.freq_base"), g->rope_freq_base));
    if (g->rope_scale_linear > 0) {
      CK(gguf_writer_add_str(s.w, KEY("rope.scaling.type"), "linear"));
      CK(gguf_writer_add_f32(s.w, KEY("rope.scaling.factor"), g->rope_scale_linear));
    }
    if (g->rope_yarn != 0) {
      CK(gguf_writer_add_str(s.w, KEY("rope.scaling.type"), "yarn"));
      CK(gguf_writer_add_f32(s.w, KEY("rope.scaling.factor"), g->rope_yarn));
    }
    if (g->yarn_beta_fast != 0) CK(gguf_writer_add_f32(s.w, KEY("rope.scaling.yarn_beta_fast"), g->yarn_beta_fast));
    if (g->yarn_beta_slow != 0) CK(gguf_writer_add_f32(s.w, KEY("rope.scaling.yarn_beta_slow"), g->yarn_beta_slow));
    if (g->yarn_ext_factor != 0)
      CK(gguf_writer_add_f32(s.w, KEY("rope.scaling.yarn_ext_factor"), g->yarn_ext_factor));
    if (g->yarn_log_mul != 0)
      CK(gguf_writer_add_f32(s.w, KEY("rope.scaling.yarn_log_multiplier"), g->yarn_log_mul));
    if (g->attn_temp_scale != 0)
      CK(gguf_writer_add_f32(s.w, KEY("attention.temperature_scale"), g->attn_temp_scale));
  }
  if (g->sliding_window >= 0)
    CK(gguf_writer_add_u32(s.w, KEY("attention.sliding_window"), (uint32_t)g->sliding_window));
  if (g->swa_layers) {
    CK(gguf_writer_add_arr(s.w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL, g->swa_layers,
                           (size_t)(g->swa_layers_n ? g->swa_layers_n : g->n_layer)));
  } else if (g->swa_pattern > 0) {
    CK(gguf_writer_add_u32(s.w, KEY("attention.sliding_window_pattern"), (uint32_t)g->swa_pattern));
  }
  if (g->nextn > 0) CK(gguf_writer_add_u32(s.w, KEY("nextn_predict_layers"), (uint32_t)g->nextn));
  if (g->attn_softcap != 0) CK(gguf_writer_add_f32(s.w, KEY("attn_logit_softcapping"), g->attn_softcap));
  if (g->final_softcap != 0) CK(gguf_writer_add_f32(s.w, KEY("final_logit_softcapping"), g->final_softcap));
  if (g->pooling_type >= 0) CK(gguf_writer_add_u32(s.w, KEY("pooling_type"), (uint32_t)g->pooling_type));
  if (g->n_dense > 0 && g->dense_keys) {
    CK(gguf_writer_add_u32(s.w, KEY("dense_2_feat_in"), (uint32_t)E));
    CK(gguf_writer_add_u32(s.w, KEY("dense_2_feat_out"), (uint32_t)(g->n_dense + (g->dense_keys == 2))));
    CK(gguf_writer_add_u32(s.w, KEY("dense_3_feat_in"), (uint32_t)g->n_dense));
    CK(gguf_writer_add_u32(s.w, KEY("dense_3_feat_out"), (uint32_t)E));
  }
  if (g->n_rot > 0) CK(gguf_writer_add_u32(s.w, KEY("rope.dimension_count"), (uint32_t)g->n_rot));
  if (g->n_ctx_orig > 0)
    CK(gguf_writer_add_u32(s.w, KEY("rope.scaling.original_context_length"), (uint32_t)g->n_ctx_orig));
  if (g->rope_attn_factor != 0) CK(gguf_writer_add_f32(s.w, KEY("rope.scaling.attn_factor"), g->rope_attn_factor));
  if (g->embd_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("embedding_scale"), g->embd_scale));
  if (g->resid_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("residual_scale"), g->resid_scale));
  if (g->attn_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("attention.scale"), g->attn_scale));
  if (g->logit_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("logit_scale"), g->logit_scale));
  if (g->rope_finetuned >= 0) CK(gguf_writer_add_bool(s.w, KEY("rope.scaling.finetuned"), g->rope_finetuned != 0));
  if (moe) {
    CK(gguf_writer_add_u32(s.w, KEY("expert_count"),
                           (uint32_t)(g->expert_count_key > 0 ? g->expert_count_key : g->n_expert)));
    CK(gguf_writer_add_u32(s.w, KEY("expert_used_count"), (uint32_t)g->n_expert_used));
    if (!ff_is_exp) CK(gguf_writer_add_u32(s.w, KEY("expert_feed_forward_length"), (uint32_t)g->n_ff_exp));
    if (g->n_ff_shexp > 0)
      CK(gguf_writer_add_u32(s.w, KEY("expert_shared_feed_forward_length"), (uint32_t)g->n_ff_shexp));
    if (g->gating) CK(gguf_writer_add_u32(s.w, KEY("expert_gating_func"), (uint32_t)g->gating));
    if (g->norm_w >= 0) CK(gguf_writer_add_bool(s.w, KEY("expert_weights_norm"), g->norm_w != 0));
    if (g->w_scale != 0) CK(gguf_writer_add_f32(s.w, KEY("expert_weights_scale"), g->w_scale));
  }
#undef KEY

  const float a_e = sqrtf(3.0f / (float)E), a_q = sqrtf(3.0f / (float)Q), a_f = sqrtf(3.0f / (float)F);
#define T(fmt, type, cols, rows, c, a)             \
  do {                                             \
    snprintf(name, sizeof name, fmt, i);           \
    CK(testgen_add_tensor(&s, name, type, cols, rows, c, a)); \
  } while (0)
#define T0(nm, type, cols, rows, c, a) CK(testgen_add_tensor(&s, nm, type, cols, rows, c, a))
  if (testgen_dense_arch(g->arch)) {
    CK(testgen_dense_write(&s, g));
  } else if (testgen_qwen35_arch(g->arch)) {
    CK(testgen_qwen35_write(&s, g));
  } else if (g->arch == MODEL_ARCH_GEMMA4) {
    CK(testgen_gemma4_write(&s, g));
  } else if (bert) {
    int i;
    T0("token_embd.weight", g->type_embd, E, g->n_vocab, 0.0f, 1.0f);
    T0("token_types.weight", g->type_embd, E, 2, 0.0f, 0.5f);
    T0("position_embd.weight", g->type_embd, E, g->n_ctx, 0.0f, 0.5f);
    T0("token_embd_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    T0("token_embd_norm.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f);
    for (i = 0; i < (int)g->n_layer; i++) {
      T("blk.%d.attn_q.weight", g->type, E, Q, 0.0f, 2.0f * a_e); /* sharper attention than uniform */
      T("blk.%d.attn_q.bias", TENSOR_TYPE_F32, Q, 0, 0.0f, 0.1f);
      T("blk.%d.attn_k.weight", g->type, E, KV, 0.0f, 2.0f * a_e);
      T("blk.%d.attn_k.bias", TENSOR_TYPE_F32, KV, 0, 0.0f, 0.1f);
      T("blk.%d.attn_v.weight", g->type, E, KV, 0.0f, a_e);
      T("blk.%d.attn_v.bias", TENSOR_TYPE_F32, KV, 0, 0.0f, 0.1f);
      T("blk.%d.attn_output.weight", g->type, Q, E, 0.0f, a_q);
      T("blk.%d.attn_output.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f);
      T("blk.%d.attn_output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
      T("blk.%d.attn_output_norm.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f);
      T("blk.%d.ffn_up.weight", g->type, E, F, 0.0f, a_e);
      T("blk.%d.ffn_up.bias", TENSOR_TYPE_F32, F, 0, 0.0f, 0.1f);
      T("blk.%d.ffn_down.weight", g->type, F, E, 0.0f, a_f);
      T("blk.%d.ffn_down.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f);
      T("blk.%d.layer_output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
      T("blk.%d.layer_output_norm.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f);
    }
  } else {
    int i;
    const float a_embd = g->tied ? 3.0f * a_e : sqrtf(3.0f);
    T0("token_embd.weight", g->type_embd, E, g->n_vocab, 0.0f, a_embd);
    if (g->rope_factors) { /* pairs of the rotated dims: short near 1, long 2..6 */
      const int64_t nr = (g->n_rot > 0 ? g->n_rot : hd) / 2;
      T0("rope_factors_short.weight", TENSOR_TYPE_F32, nr, 0, 1.0f, 0.2f);
      /* 2: all negative, for the loader's check */
      T0("rope_factors_long.weight", TENSOR_TYPE_F32, nr, 0, g->rope_factors == 2 ? -1.0f : 4.0f,
         g->rope_factors == 2 ? 0.5f : 2.0f);
    }
    for (i = 0; i < (int)g->n_layer; i++) {
      T("blk.%d.attn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
      const int mb = more_bits(i, g->n_layer);
      const bool conv_layer = lfm2 && !((g->attn_layers >> i) & 1);
      if (conv_layer) { /* short convolution: [B | C | u] rows, taps */
        T("blk.%d.shortconv.in_proj.weight", g->type, E, 3 * E, 0.0f, 2.0f * a_e);
        T("blk.%d.shortconv.conv.weight", TENSOR_TYPE_F32, g->d_conv, E, 0.0f, 0.6f);
        T("blk.%d.shortconv.out_proj.weight", g->type, E, E, 0.0f, 2.0f * a_e);
      } else if (phi3 && !g->separate_qkv) { /* [q | k | v] rows */
        T("blk.%d.attn_qkv.weight", g->type_qkv ? g->type_qkv : g->type, E, Q + 2 * KV, 0.0f, a_e);
      } else {
        T("blk.%d.attn_q.weight", g->type, E, Q, 0.0f, a_e);
        T("blk.%d.attn_k.weight", g->type, E, KV, 0.0f, a_e);
        T("blk.%d.attn_v.weight", g->mixed ? g->type_v[mb] : g->type, E, KV, 0.0f, a_e);
      }
      if (g->arch == MODEL_ARCH_QWEN2 || g->arch == MODEL_ARCH_QWEN2MOE || oss) {
        T("blk.%d.attn_q.bias", TENSOR_TYPE_F32, Q, 0, 0.0f, 0.5f);
        T("blk.%d.attn_k.bias", TENSOR_TYPE_F32, KV, 0, 0.0f, 0.5f);
        T("blk.%d.attn_v.bias", TENSOR_TYPE_F32, KV, 0, 0.0f, 0.5f);
      } else if (!conv_layer && (g->arch == MODEL_ARCH_QWEN3 || g->arch == MODEL_ARCH_GEMMA3 ||
                                 g->arch == MODEL_ARCH_GEMMA_EMBEDDING ||
                                 g->arch == MODEL_ARCH_QWEN3MOE || lfm2)) {
        T("blk.%d.attn_q_norm.weight", TENSOR_TYPE_F32, hd, 0, 1.0f, 0.3f);
        T("blk.%d.attn_k_norm.weight", TENSOR_TYPE_F32, hd, 0, 1.0f, 0.3f);
      } else if (g->arch == MODEL_ARCH_OLMOE) { /* over the whole projection */
        T("blk.%d.attn_q_norm.weight", TENSOR_TYPE_F32, Q, 0, 1.0f, 0.3f);
        T("blk.%d.attn_k_norm.weight", TENSOR_TYPE_F32, KV, 0, 1.0f, 0.3f);
      }
      if (!conv_layer) T("blk.%d.attn_output.weight", g->type, Q, E, 0.0f, a_q);
      if (oss) {
        T("blk.%d.attn_output.bias", TENSOR_TYPE_F32, E, 0, 0.0f, 0.1f);
        const bool dflt = g->sink_mid == 0 && g->sink_spread == 0;
        T("blk.%d.attn_sinks.weight", TENSOR_TYPE_F32, g->n_head, 0, g->sink_mid, dflt ? 1.0f : g->sink_spread);
      }
      /* gemma's norms as the converter stores them: the checkpoint's
       * weight + 1 */
      if (gemma) T("blk.%d.post_attention_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
      T(oss ? "blk.%d.post_attention_norm.weight" : "blk.%d.ffn_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
      if (moe) {
        CK(testgen_add_experts(&s, g, i, mb));
        continue;
      }
      if (phi3) { /* [gate | up] rows */
        T("blk.%d.ffn_up.weight", g->type, E, 2 * F, 0.0f, a_e);
      } else {
        T("blk.%d.ffn_gate.weight", g->type, E, F, 0.0f, a_e);
        T("blk.%d.ffn_up.weight", g->type, E, F, 0.0f, a_e);
      }
      T("blk.%d.ffn_down.weight", g->mixed ? g->type_down[mb] : g->type, F, E, 0.0f, a_f);
      if (gemma) T("blk.%d.post_ffw_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    }
    T0(lfm2 ? "token_embd_norm.weight" : "output_norm.weight", TENSOR_TYPE_F32, E, 0, 1.0f, 0.1f);
    if (!g->tied) T0("output.weight", g->type, E, g->n_vocab, 0.0f, 3.0f * a_e);
    if (g->n_dense > 0) { /* sentence-transformers' Dense modules, after pooling */
      T0("dense_2.weight", g->type, E, g->n_dense, 0.0f, a_e);
      T0("dense_3.weight", g->type, g->n_dense, E, 0.0f, sqrtf(3.0f / (float)g->n_dense));
    }
  }
#undef T
#undef T0
#undef CK
  return testgen_gen_finish(&s, path);
done:
  testgen_gen_finish(&s, NULL);
  return rc;
}
