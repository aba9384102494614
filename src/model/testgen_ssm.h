/*
 * testgen_ssm.h - random-weight GGUF files of the Mamba-2 architectures
 * (mamba2, granitehybrid, nemotron_h; src/model/mamba2.c), for the tests
 * that hold mamba2.c to tools/ref_mamba2.py and for `parley gen-model
 * --arch mamba2|granitehybrid|nemotron_h`. Keys and tensor names are the
 * ones llama.cpp's converter writes (see mamba2.c); weights follow
 * testgen.h's scaling rules, ssm_a = -exp(A_log) negative as the converter
 * stores it.
 */
#ifndef PARLEY_MODEL_TESTGEN_SSM_H
#define PARLEY_MODEL_TESTGEN_SSM_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

typedef struct model_testgen_ssm {
  enum model_arch arch;    /* MODEL_ARCH_MAMBA2, GRANITEHYBRID or NEMOTRON_H */
  const char *layers;      /* one letter per layer: 'M' Mamba-2, '*'
                              attention, '-' MLP (nemotron_h); its length
                              is the block count */
  int64_t n_embd, n_vocab, n_ctx;
  int64_t n_head, n_head_kv, head_dim; /* attention layers */
  int64_t n_ff;            /* granitehybrid's FFN / nemotron_h's MLP width */
  int64_t d_conv, d_inner, d_state, n_ssm_head, n_group;
  bool conv_bias;          /* write ssm_conv1d.bias (mamba2 requires it) */
  int64_t n_expert, n_expert_used, n_ff_shexp; /* granitehybrid experts
                              (width n_ff), shared expert; 0 = none */
  float embd_scale, resid_scale, attn_scale, logit_scale; /* granitehybrid;
                              0 = absent */
  int rope_finetuned;      /* granitehybrid: rope.scaling.finetuned 0/1, -1 absent */
  uint32_t type;           /* enum tensor_type of the matrices */
  bool tied;               /* no output.weight */
  float ssm_a_sign;        /* tests: +1 writes a positive ssm_a (refused) */
  const char *bad_tensor;  /* tests: one row too many */
  const char *missing_tensor; /* tests: left out */
  int64_t bad_heads;       /* tests: > 0 is written as ssm.time_step_rank */
  uint64_t seed;
  const char *vocab_path;  /* NULL, or a GGUF whose tokenizer.* keys are copied */
  const char *chat_template;
} model_testgen_ssm;

/* The small shapes: n_embd 64, vocab 300, context 128, F32, d_conv 4,
 * d_inner 128 in 8 heads of 16, d_state 16. mamba2: "MMM", 2 groups, tied.
 * granitehybrid: "MM*M", 1 group, 4 heads on 2 KV heads, n_ff 96, the
 * multipliers (embedding 6, residual 0.5, attention 0.2, logits / 4), no
 * RoPE, untied; experts: 4 of width 32, top 2 and a shared expert of 48.
 * nemotron_h: "M-*M-", 2 groups, 4 heads of 16 on 2 KV heads, MLP 96,
 * untied. n_layer of the letters. */
model_testgen_ssm model_testgen_ssm_small(enum model_arch arch, bool experts);
/* Writes the file (path.tmp, then renamed). */
int model_testgen_ssm_write(const model_testgen_ssm *g, const char *path);

#endif
