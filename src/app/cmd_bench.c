/*
 * cmd_bench.c - `parley bench MODEL.gguf`: prompt-processing and generation
 * speed, and `parley gen-model`: random-weight models of real shapes to
 * benchmark with.
 *
 *   parley bench MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3] [-d DEPTH] [--cache-type T] [--json] [--reference]
 *     ppP: one forward of P random tokens as a single batch from an empty
 *          cache (logits of the last token only, as a prompt needs);
 *     tgN: N forwards of one token each from an empty cache, as generation.
 *     Each test runs r times after a warm-up; tokens/s median, min, max and
 *     standard deviation are printed (or one JSON object with --json), with
 *     the weight bytes a generated token reads (all weights, but one row of
 *     an untied token_embd) and two RSS splits: the peak (ru_maxrss, the
 *     whole run: load, the pp batch's compute buffers) and the RSS right
 *     after the last generation run (/proc/self/statm), the figure that
 *     matters while serving. "weights" counts every bound tensor in full,
 *     but only the rows of token_embd that were read are resident, so
 *     "other" is a lower bound of what is not weights or KV cache (it can
 *     be negative: F16 TinyLlama).
 *     -d DEPTH: both tests start with DEPTH positions already in the cache
 *     (filled once, in batches, before the repetitions): the speed at a long
 *     context. --cache-type: the KV cache type (default f16).
 *
 *   parley gen-model OUT.gguf [--shape small|tinyllama|qwen2.5-0.5b] [--type F16|Q8_0|Q4_0|Q4_K_M|...] [--seed S]
 *                    [--vocab VOCAB.gguf] [--chat-template FILE]: copy a real tokenizer
 *                    (tokenizer.* keys; n_vocab follows it) and embed a chat template;
 *                    [--arch NAME]: testgen_arch's small shape of that general.architecture
 *                    (qwen2, qwen3, bert, gemma2, gemma3, phi3, granite, smollm3, qwen3moe, lfm2, olmo2,
 *                    glm4, nomic-bert, mistral3, gpt-oss, gemma-embedding, exaone4, gemma4; mixtral: a llama file with experts;
 *                    whisper: a whisper.cpp file) instead, [--pooling none|mean|cls|last] written as its
 *                    ARCH.pooling_type;
 *                    [--shape gpt-oss-20b|qwen3-30b-a3b] with --arch gpt-oss|qwen3moe: a released
 *                    MoE shape (testgen_arch.h), [--layers N] of its layers;
 *                    [--shape gemma-3-1b|phi-4-mini] with --arch gemma3|phi3 and any --type
 *                    (Q4_K_M: llama.cpp's mix): a released dense shape;
 *                    [--ctx N]: the trained context written
 *
 * The numbers are tokens per second of wall-clock time (CLOCK_MONOTONIC).
 * Sampling is not included: it is the model's speed.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "app/commands.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "kernels/kernels.h"
#include "kernels/tensor_type.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/testgen.h"
#include "model/testgen_arch.h"
#include "model/testgen_ssm.h"
#include "model/testgen_whisper.h"

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/* Resident and file-backed resident bytes of this process now
 * (/proc/self/statm: pages; "shared" counts file-backed and shmem pages,
 * here the model mapping and the libraries). 0 on success, -1 without
 * /proc. */
static int statm_now(uint64_t *rss, uint64_t *file) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  unsigned long long size, res, shared;
  int n = fscanf(f, "%llu %llu %llu", &size, &res, &shared);
  fclose(f);
  if (n != 3) return -1;
  long pg = sysconf(_SC_PAGESIZE);
  *rss = (uint64_t)res * (uint64_t)pg;
  *file = (uint64_t)shared * (uint64_t)pg;
  return 0;
}

/* CPU seconds of the whole process (all threads, user + system). */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

struct stats {
  double median, min, max, sd;
};

static struct stats summarize(double *v, int n) {
  struct stats s = {0, 0, 0, 0};
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  s.min = v[0];
  s.max = v[n - 1];
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  double mean = 0;
  for (int i = 0; i < n; i++) mean += v[i];
  mean /= n;
  for (int i = 0; i < n; i++) s.sd += (v[i] - mean) * (v[i] - mean);
  s.sd = n > 1 ? sqrt(s.sd / (n - 1)) : 0;
  return s;
}

static void bench_usage(FILE *out) {
  fprintf(out, "usage: parley bench MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3] [-d DEPTH] [--cache-type f16|q8_0|f32]"
               " [--json] [--reference]\n");
}

int cmd_bench(int argc, char **argv) {
  const char *path = NULL;
  int64_t n_pp = 512, n_tg = 128, n_threads = 2, reps = 3, depth = 0;
  enum model_kv_type kv_type = MODEL_KV_F16;
  bool json = false, reference = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (strcmp(a, "--reference") == 0) {
      reference = true;
    } else if (strcmp(a, "--cache-type") == 0) {
      if (i + 1 >= argc || model_kv_type_parse(argv[i + 1], &kv_type)) {
        fprintf(stderr, "parley bench: --cache-type: %s\n", i + 1 < argc ? err_detail() : "missing value");
        return 2;
      }
      i++;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      bench_usage(stdout);
      return 0;
    } else if (a[0] != '-') {
      if (path) {
        fprintf(stderr, "parley bench: unexpected argument '%s'\n", a);
        return 2;
      }
      path = a;
    } else {
      int64_t *dst = strcmp(a, "-p") == 0 ? &n_pp : strcmp(a, "-n") == 0 ? &n_tg
                     : strcmp(a, "-t") == 0 ? &n_threads : strcmp(a, "-r") == 0 ? &reps
                     : strcmp(a, "-d") == 0 ? &depth : NULL;
      int64_t lo = dst == &n_threads || dst == &reps ? 1 : 0;
      if (!dst || i + 1 >= argc || parse_i64(argv[i + 1], lo, dst == &n_threads ? 256 : 1 << 20, dst)) {
        fprintf(stderr, "parley bench: bad option '%s'\n", a);
        bench_usage(stderr);
        return 2;
      }
      i++;
    }
  }
  if (!path) {
    bench_usage(stderr);
    return 2;
  }
  if (reference) kern_force_reference(true);

  int status = 1;
  model *m = NULL;
  model_ctx *ctx = NULL;
  int32_t *toks = NULL;
  double *pp_tps = calloc((size_t)reps, sizeof(double)), *tg_tps = calloc((size_t)reps, sizeof(double));
  double *tg_cpu = calloc((size_t)reps, sizeof(double)); /* CPU seconds per generated token */
  float *logits = NULL;
  if (model_open(path, &m)) {
    fprintf(stderr, "parley bench: cannot load %s: %s\n", path, err_detail());
    goto done;
  }
  const model_hparams *hp = model_get_hparams(m);
  int64_t need = depth + (n_pp > n_tg ? n_pp : n_tg);
  if (need < 1) need = 1;
  if (need > hp->n_ctx_train) {
    fprintf(stderr, "parley bench: %lld tokens do not fit the model's context of %lld\n", (long long)need,
            (long long)hp->n_ctx_train);
    goto done;
  }
  model_ctx_params cp = model_ctx_default_params();
  cp.n_ctx = need;
  cp.n_batch = n_pp > 0 ? n_pp : depth > 0 ? 512 : 1;
  cp.n_threads = (int)n_threads;
  cp.kv_type = kv_type;
  if (model_ctx_new(m, &cp, &ctx)) {
    fprintf(stderr, "parley bench: %s\n", err_detail());
    goto done;
  }
  toks = malloc((size_t)need * sizeof *toks);
  logits = malloc((size_t)hp->n_vocab * sizeof *logits);
  if (!toks || !logits || !pp_tps || !tg_tps || !tg_cpu) goto done;
  uint64_t st = 0x2545f4914f6cdd1dull;
  for (int64_t i = 0; i < need; i++) {
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    toks[i] = (int32_t)(st % (uint64_t)hp->n_vocab);
  }
  /* warm-up: touches the weights (page-ins) and wakes the pool */
  int64_t warm = n_pp > 0 ? (n_pp < 16 ? n_pp : 16) : 1;
  if (model_forward(ctx, toks, warm, 0, logits, MODEL_LOGITS_LAST)) goto fail;
  /* -d: the cache holds depth positions, filled once in steps of n_batch */
  for (int64_t p = 0; p < depth; p += cp.n_batch) {
    int64_t n = depth - p < cp.n_batch ? depth - p : cp.n_batch;
    if (model_forward(ctx, toks + p, n, p, logits, MODEL_LOGITS_NONE)) goto fail;
  }
  uint64_t gen_rss = 0, gen_file = 0; /* resident right after the last tg run */
  for (int64_t r = 0; r < reps; r++) {
    if (n_pp > 0) {
      uint64_t t0 = time_mono_ns();
      if (model_forward(ctx, toks + depth, n_pp, depth, logits, MODEL_LOGITS_LAST)) goto fail;
      pp_tps[r] = (double)n_pp / ((double)(time_mono_ns() - t0) / 1e9);
    }
    if (n_tg > 0) {
      uint64_t t0 = time_mono_ns();
      double c0 = cpu_s();
      for (int64_t i = 0; i < n_tg; i++)
        if (model_forward(ctx, &toks[depth + i], 1, depth + i, logits, MODEL_LOGITS_LAST)) goto fail;
      tg_tps[r] = (double)n_tg / ((double)(time_mono_ns() - t0) / 1e9);
      tg_cpu[r] = (cpu_s() - c0) / (double)n_tg;
      if (statm_now(&gen_rss, &gen_file)) gen_rss = gen_file = 0;
    }
  }
  struct stats pp = {0, 0, 0, 0}, tg = {0, 0, 0, 0};
  if (n_pp > 0) pp = summarize(pp_tps, (int)reps);
  if (n_tg > 0) tg = summarize(tg_tps, (int)reps);
  double wmib = (double)model_weight_bytes(m) / (1024.0 * 1024.0);
  /* What a generated token reads: every weight once, except an untied
   * token_embd, of which it reads one row, and the experts it is not
   * routed to (k of n_expert: the bandwidth bound's divisor). */
  uint64_t tok_bytes = model_weight_bytes(m) - model_file_idle_expert_bytes(model_gguf(m), model_arch_name(model_arch_of(m)));
  const gguf_tensor *te = gguf_find_tensor(model_gguf(m), "token_embd.weight");
  if (te && gguf_find_tensor(model_gguf(m), "output.weight") && te->n_bytes < tok_bytes && te->dims[1] > 0)
    tok_bytes -= te->n_bytes - te->n_bytes / te->dims[1];
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double rss_mib = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
  double kv_mib = (double)model_ctx_kv_bytes(ctx) / (1024.0 * 1024.0);
  if (json) {
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(path));
    json_object_set_new(o, "arch", json_string(model_arch_name(model_arch_of(m))));
    json_object_set_new(o, "weight_bytes", json_integer((json_int_t)model_weight_bytes(m)));
    json_object_set_new(o, "token_read_bytes", json_integer((json_int_t)tok_bytes));
    json_object_set_new(o, "kv_bytes", json_integer((json_int_t)model_ctx_kv_bytes(ctx)));
    json_object_set_new(o, "kv_type", json_string(model_kv_type_name(model_ctx_kv_type(ctx))));
    json_object_set_new(o, "n_ctx", json_integer(model_ctx_n_ctx(ctx)));
    json_object_set_new(o, "depth", json_integer(depth));
    json_object_set_new(o, "buf_bytes", json_integer((json_int_t)model_ctx_buf_bytes(ctx)));
    json_object_set_new(o, "peak_rss_bytes", json_integer((json_int_t)ru.ru_maxrss * 1024));
    if (gen_rss) {
      json_object_set_new(o, "gen_rss_bytes", json_integer((json_int_t)gen_rss));
      json_object_set_new(o, "gen_rss_file_bytes", json_integer((json_int_t)gen_file));
    }
    json_object_set_new(o, "threads", json_integer(n_threads));
    json_object_set_new(o, "isa", json_string(kern_isa()));
    json_object_set_new(o, "repetitions", json_integer(reps));
    json_t *res = json_array();
    struct { const char *kind; int64_t n; struct stats *s; } rows[2] = {{"pp", n_pp, &pp}, {"tg", n_tg, &tg}};
    for (int k = 0; k < 2; k++) {
      if (rows[k].n <= 0) continue;
      char name[32];
      snprintf(name, sizeof name, "%s%lld", rows[k].kind, (long long)rows[k].n);
      json_t *e = json_object();
      json_object_set_new(e, "test", json_string(name));
      json_object_set_new(e, "n_tokens", json_integer(rows[k].n));
      json_object_set_new(e, "tps_median", json_real(rows[k].s->median));
      json_object_set_new(e, "tps_min", json_real(rows[k].s->min));
      json_object_set_new(e, "tps_max", json_real(rows[k].s->max));
      json_object_set_new(e, "tps_sd", json_real(rows[k].s->sd));
      json_array_append_new(res, e);
    }
    json_object_set_new(o, "results", res);
    char *txt = json_dumps(o, JSON_INDENT(2));
    if (txt) printf("%s\n", txt);
    free(txt);
    json_decref(o);
  } else {
    printf("model   %s (%s, %lld layers, n_embd %lld, vocab %lld, weights %.1f MiB)\n", path,
           model_arch_name(model_arch_of(m)), (long long)hp->n_layer, (long long)hp->n_embd, (long long)hp->n_vocab,
           wmib);
    printf("kernels %s, %lld threads, %lld repetitions, KV cache %s, depth %lld\n", kern_isa(), (long long)n_threads,
           (long long)reps, model_kv_type_name(model_ctx_kv_type(ctx)), (long long)depth);
    printf("%-8s %12s %10s %10s %8s\n", "test", "t/s median", "min", "max", "sd");
    if (n_pp > 0) printf("pp%-6lld %12.2f %10.2f %10.2f %8.2f\n", (long long)n_pp, pp.median, pp.min, pp.max, pp.sd);
    if (n_tg > 0) printf("tg%-6lld %12.2f %10.2f %10.2f %8.2f\n", (long long)n_tg, tg.median, tg.min, tg.max, tg.sd);
    if (n_tg > 0) {
      qsort(tg_cpu, (size_t)reps, sizeof *tg_cpu, cmp_d);
      printf("tg CPU time per token %.2f ms (median, all threads: with -t 1 a figure other processes disturb "
             "less than t/s)\n", tg_cpu[reps / 2] * 1e3);
    }
    printf("each generated token reads %.1f MiB of weights (%.0f bytes)\n", (double)tok_bytes / (1024.0 * 1024.0),
           (double)tok_bytes);
    printf("peak RSS %.1f MiB = weights %.1f + KV cache %.1f + %.1f other (compute buffers %.1f)\n", rss_mib, wmib,
           kv_mib, rss_mib - wmib - kv_mib, (double)model_ctx_buf_bytes(ctx) / (1024.0 * 1024.0));
    if (gen_rss)
      printf("RSS while generating %.1f MiB = weights %.1f + KV cache %.1f + %.1f other (file-backed %.1f: the "
             "model's mapping and the libraries)\n",
             (double)gen_rss / (1024.0 * 1024.0), wmib, kv_mib, (double)gen_rss / (1024.0 * 1024.0) - wmib - kv_mib,
             (double)gen_file / (1024.0 * 1024.0));
  }
  status = 0;
  goto done;
fail:
  fprintf(stderr, "parley bench: %s\n", err_detail());
done:
  free(toks);
  free(logits);
  free(pp_tps);
  free(tg_tps);
  free(tg_cpu);
  model_ctx_free(ctx);
  model_free(m);
  return status;
}

/* The text of a --chat-template file (malloc'd), or NULL after printing
 * why it cannot be read. */
static char *read_template(const char *path) {
  FILE *f = fopen(path, "rb");
  buf b = BUF_INIT;
  char chunk[4096];
  size_t n;
  while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < (16u << 20)) buf_append(&b, chunk, n);
  if (!f || ferror(f) || !b.data) {
    fprintf(stderr, "parley gen-model: cannot read the chat template '%s'\n", path);
    if (f) fclose(f);
    buf_free(&b);
    return NULL;
  }
  fclose(f);
  return buf_detach(&b, NULL);
}

static int gen_model_llama(const char *out, const char *shape, const char *type, const char *vocab,
                           const char *tmpl_text, const char *gname, int64_t seed, int64_t n_ctx);

/* The hybrids' released shapes, written whole in any tensor type or
 * llama.cpp's Q4_K_M mix (testgen_arch.h): the #30 benchmark files. */
static const struct hybrid_shape {
  int arch;
  const char *shape;
  model_testgen_arch (*make)(uint32_t type, bool k_m);
} HYBRID_SHAPES[] = {
    {MODEL_ARCH_LFM2, "lfm2-1.2b", model_testgen_arch_lfm2_12b},
    {MODEL_ARCH_QWEN35, "qwen3.5-4b", model_testgen_arch_qwen35_4b},
};
/* gen-model --arch mamba2|granitehybrid|nemotron_h (testgen_ssm.h): the
 * small shape ("small", granitehybrid also "small-moe" with experts) in
 * F32 or F16, optionally with a real vocabulary and chat template. */
static int gen_model_ssm(enum model_arch a, const char *out, const char *shape, const char *type, const char *vocab,
                         const char *tmpl_text, int64_t seed, int64_t n_ctx) {
  const bool moe = a == MODEL_ARCH_GRANITEHYBRID && strcmp(shape, "small-moe") == 0;
  enum tensor_type t = TENSOR_TYPE_F32;
  if ((!moe && strcmp(shape, "small") != 0) || tensor_type_from_name(type, &t) ||
      (t != TENSOR_TYPE_F32 && t != TENSOR_TYPE_F16)) {
    fprintf(stderr, "parley gen-model: --arch %s takes --shape small%s and --type F32 or F16\n", model_arch_name(a),
            a == MODEL_ARCH_GRANITEHYBRID ? " or small-moe" : "");
    return 2;
  }
  model_testgen_ssm g = model_testgen_ssm_small(a, moe);
  g.type = t;
  g.seed = (uint64_t)seed;
  g.vocab_path = vocab;
  g.chat_template = tmpl_text;
  if (n_ctx) g.n_ctx = n_ctx;
  if (model_testgen_ssm_write(&g, out)) {
    fprintf(stderr, "parley gen-model: %s\n", err_detail());
    return 1;
  }
  return 0;
}

/* gen-model --arch NAME (any architecture but llama, by its
 * general.architecture name, or mixtral: a "llama" file with experts): the
 * small F32 shape of testgen_arch (bert: an embedding model with mean
 * pooling; gemma, phi3: sliding window 8; qwen3moe: 4 experts, top-2),
 * optionally with a real vocabulary and chat template. */
static int gen_model_arch(const char *out, const char *arch, const char *shape, const char *type, int64_t n_layer,
                          const char *vocab, const char *tmpl_text, int64_t seed, int64_t n_ctx, int pooling) {
  /* 0 is llama, written by testgen.c; LLAMA_MOE's name is "llama" too,
   * so it goes by mixtral */
  int a = 1;
  while (a < MODEL_ARCH_COUNT && strcmp(arch, a == MODEL_ARCH_LLAMA_MOE ? "mixtral" : model_arch_name((enum model_arch)a)))
    a++;
  if (a == MODEL_ARCH_COUNT) {
    fprintf(stderr, "parley gen-model: unknown architecture '%s' (llama", arch);
    for (int i = 1; i < MODEL_ARCH_COUNT; i++)
      fprintf(stderr, ", %s", i == MODEL_ARCH_LLAMA_MOE ? "mixtral" : model_arch_name((enum model_arch)i));
    fprintf(stderr, ")\n");
    return 2;
  }
  if (a == MODEL_ARCH_MAMBA2 || a == MODEL_ARCH_GRANITEHYBRID || a == MODEL_ARCH_NEMOTRON_H)
    return gen_model_ssm((enum model_arch)a, out, shape, type, vocab, tmpl_text, seed, n_ctx);
  model_testgen_arch g = model_testgen_arch_small((enum model_arch)a);
  int dense = ERR_NOT_FOUND;
  const struct hybrid_shape *hs = NULL;
  for (size_t i = 0; i < sizeof HYBRID_SHAPES / sizeof *HYBRID_SHAPES; i++)
    if (HYBRID_SHAPES[i].arch == a && strcmp(shape, HYBRID_SHAPES[i].shape) == 0) hs = &HYBRID_SHAPES[i];
  if (hs) {
    bool k_m = strcasecmp(type, "Q4_K_M") == 0;
    enum tensor_type t = TENSOR_TYPE_F32;
    if (!k_m && tensor_type_from_name(type, &t)) {
      fprintf(stderr, "parley gen-model: unknown type '%s'\n", type);
      return 2;
    }
    g = hs->make(t, k_m);
  } else if (strcmp(shape, "small") != 0 && (dense = model_testgen_arch_dense_shape(shape, type, &g)) != ERR_NOT_FOUND) {
    if (dense) {
      fprintf(stderr, "parley gen-model: %s\n", err_detail());
      return 2;
    }
    if (g.arch != (enum model_arch)a) {
      fprintf(stderr, "parley gen-model: --shape %s is a %s model, not %s\n", shape, model_arch_name(g.arch), arch);
      return 2;
    }
    if (n_layer > 0 && n_layer < g.n_layer) g.n_layer = n_layer;
  } else if (strcmp(shape, "small") != 0 && strcasecmp(type, "F32") == 0) {
    if (model_testgen_arch_moe_shape(shape, n_layer, &g)) {
      fprintf(stderr, "parley gen-model: %s\n", err_detail());
      return 2;
    }
    if (g.arch != (enum model_arch)a) {
      fprintf(stderr, "parley gen-model: --shape %s is a %s model, not %s\n", shape, model_arch_name(g.arch), arch);
      return 2;
    }
  } else if (strcmp(shape, "small") != 0 || strcasecmp(type, "F32") != 0) {
    fprintf(stderr, "parley gen-model: --arch %s takes --shape small%s (or a MoE shape) and --type F32 only%s\n", arch,
            a == MODEL_ARCH_LFM2 ? " or lfm2-1.2b" : "", a == MODEL_ARCH_LFM2 ? " (any type with lfm2-1.2b)" : "");
    return 2;
  }
  g.seed = (uint64_t)seed;
  g.vocab_path = vocab;
  g.chat_template = tmpl_text;
  if (n_ctx) g.n_ctx = n_ctx;
  if (pooling >= 0) g.pooling_type = pooling;
  if (model_testgen_arch_write(&g, out)) {
    fprintf(stderr, "parley gen-model: %s\n", err_detail());
    return 1;
  }
  return 0;
}

/* gen-model --arch whisper: a whisper.cpp ggml file (testgen_whisper.h) of
 * the test shape or a released model's, matrices in type. */
static int gen_model_whisper(const char *out, const char *shape, const char *type, int64_t seed) {
  enum tensor_type t = TENSOR_TYPE_F32;
  if (tensor_type_from_name(type, &t)) {
    fprintf(stderr, "parley gen-model: unknown type '%s'\n", type);
    return 2;
  }
  whisper_testgen g;
  if (whisper_testgen_shape(shape, t, &g)) {
    fprintf(stderr, "parley gen-model: %s\n", err_detail());
    return 2;
  }
  g.seed = (uint64_t)seed;
  if (whisper_testgen_write(&g, out)) {
    fprintf(stderr, "parley gen-model: %s\n", err_detail());
    return 1;
  }
  return 0;
}

int cmd_gen_model(int argc, char **argv) {
  const char *out = NULL, *shape = "small", *type = "F32", *vocab = NULL, *tmpl_file = NULL, *arch = "llama",
             *gname = NULL;
  int64_t seed = 1, n_ctx = 0, n_layer = 0;
  int pooling = -1; /* the architecture's own */
  static const char *const POOLINGS[] = {"none", "mean", "cls", "last"};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      out = a;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "parley gen-model: %s needs a value\n", a);
      return 2;
    }
    const char *v = argv[++i];
    if (strcmp(a, "--shape") == 0) shape = v;
    else if (strcmp(a, "--type") == 0) type = v;
    else if (strcmp(a, "--vocab") == 0) vocab = v;
    else if (strcmp(a, "--arch") == 0) arch = v;
    else if (strcmp(a, "--ctx") == 0 && parse_i64(v, 8, 1 << 20, &n_ctx) == 0) continue;
    else if (strcmp(a, "--layers") == 0 && parse_i64(v, 1, 4096, &n_layer) == 0) continue;
    else if (strcmp(a, "--chat-template") == 0) tmpl_file = v;
    else if (strcmp(a, "--name") == 0) gname = v;
    else if (strcmp(a, "--pooling") == 0) {
      for (pooling = 3; pooling >= 0 && strcmp(v, POOLINGS[pooling]); pooling--) {}
      if (pooling < 0) {
        fprintf(stderr, "parley gen-model: --pooling is none, mean, cls or last, not '%s'\n", v);
        return 2;
      }
    } else if (strcmp(a, "--seed") == 0 && parse_i64(v, 0, INT64_MAX, &seed) == 0) continue;
    else {
      fprintf(stderr, "parley gen-model: bad option '%s'\n", a);
      return 2;
    }
  }
  if (!out) {
    fprintf(stderr,
            "usage: parley gen-model OUT.gguf [--shape small|tinyllama|qwen2.5-0.5b|lfm2-1.2b (--arch lfm2)] [--type F32|F16|Q8_0|Q4_0|Q4_K_M|...] "
            "(--shape qwen3.5-4b with --arch qwen35) [--seed S] [--vocab VOCAB.gguf] [--chat-template FILE] [--name GENERAL_NAME] [--arch ARCH: any general.architecture parley runs, mixtral (llama with experts) or whisper] [--ctx N] [--pooling none|mean|cls|last]\n"
            "       (--arch whisper: --shape small|micro|nano|nano.en|tiny|base|base.en|large-v3|large-v3-turbo, --type F32|F16|Q4_0|Q4_1|Q5_0|Q5_1|Q8_0)\n"
            "       (--arch mamba2|granitehybrid|nemotron_h: --shape small, granitehybrid also small-moe, --type F32|F16)\n"
            "       (--arch gpt-oss --shape gpt-oss-20b, --arch qwen3moe --shape qwen3-30b-a3b: the released shape in its\n"
            "        released types, [--layers N] of its layers)\n"
            "       (--arch gemma3 --shape gemma-3-1b, --arch phi3 --shape phi-4-mini: the released shape, any --type)\n");
    return 2;
  }
  if (strcmp(arch, "whisper") == 0) return gen_model_whisper(out, shape, type, seed);
  char *tmpl_text = NULL;
  if (tmpl_file && !(tmpl_text = read_template(tmpl_file))) return 1;
  int rc = strcmp(arch, "llama") != 0 ? gen_model_arch(out, arch, shape, type, n_layer, vocab, tmpl_text, seed, n_ctx, pooling)
                                      : gen_model_llama(out, shape, type, vocab, tmpl_text, gname, seed, n_ctx);
  free(tmpl_text);
  return rc;
}

/* gen-vocab OUT.gguf spm|wpm|fim: a vocabulary file for --vocab (testgen_vocab.c);
 * prints its token count. */
int cmd_gen_vocab(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: parley gen-vocab OUT.gguf spm|wpm|fim\n");
    return 2;
  }
  int64_t n = 0;
  if (model_testgen_vocab_write(argv[0], argv[1], &n)) {
    fprintf(stderr, "parley gen-vocab: %s\n", err_detail());
    return 1;
  }
  printf("%lld tokens\n", (long long)n); /* the tests size their expectations by it */
  return 0;
}

/* gen-model for the llama writer (testgen.h) and qwen2.5-0.5b's shape. */
static int gen_model_llama(const char *out, const char *shape, const char *type, const char *vocab,
                           const char *tmpl_text, const char *gname, int64_t seed, int64_t n_ctx) {
  bool k_m = strcasecmp(type, "Q4_K_M") == 0;
  enum tensor_type t = TENSOR_TYPE_F32;
  if (!k_m && tensor_type_from_name(type, &t)) {
    fprintf(stderr, "parley gen-model: unknown type '%s'\n", type);
    return 2;
  }
  if (k_m) t = TENSOR_TYPE_Q4_K;
  if (strcmp(shape, "qwen2.5-0.5b") == 0) {
    if (vocab || tmpl_text || n_ctx) {
      fprintf(stderr, "parley gen-model: --shape qwen2.5-0.5b takes only --type and --seed\n");
      return 2;
    }
    model_testgen_arch qg = model_testgen_arch_qwen25_05b(t, k_m);
    qg.seed = (uint64_t)seed;
    if (model_testgen_arch_write(&qg, out)) {
      fprintf(stderr, "parley gen-model: %s\n", err_detail());
      return 1;
    }
    return 0;
  }
  model_testgen g;
  if (strcmp(shape, "tinyllama") == 0) {
    g = model_testgen_tinyllama(t);
  } else if (strcmp(shape, "small") == 0) {
    g = model_testgen_small();
    g.type = g.type_embd = g.type_output = g.type_ffn_down = t;
    if (tensor_type_get(t)->block_size > (uint32_t)g.n_embd) { /* 256-blocks: rows of 64 do not fit */
      g.n_embd = 256;
      g.n_ff = 512;
    }
  } else {
    fprintf(stderr, "parley gen-model: unknown shape '%s' (small, tinyllama, qwen2.5-0.5b)\n", shape);
    return 2;
  }
  if (!k_m && t == TENSOR_TYPE_Q4_K) g.type_output = g.type_ffn_down = t; /* plain Q4_K everywhere */
  g.seed = (uint64_t)seed;
  g.vocab_path = vocab;
  g.name = gname;
  if (n_ctx) g.n_ctx = n_ctx;
  g.chat_template = tmpl_text;
  if (model_testgen_write(&g, out)) {
    fprintf(stderr, "parley gen-model: %s\n", err_detail());
    return 1;
  }
  return 0;
}
