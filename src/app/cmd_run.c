/*
 * cmd_run.c - `parley run MODEL.gguf`: a raw completion on the terminal.
 *
 *   parley run MODEL.gguf -p TEXT | --tokens 1,450,4996 [-n N] [--temp T]
 *              [--seed S] [--top-k K] [--top-p P] [--min-p P]
 *              [--repeat-penalty R] [-c CTX] [-t THREADS] [--ignore-eos]
 *              [--reference] [--ids]
 *
 * -p TEXT is encoded with the file's tokenizer (tok/, with BOS as the
 * vocabulary asks); --tokens gives the ids directly (also for files without
 * a vocabulary, such as the random test models). The prompt runs as one
 * batch, then N tokens are sampled one at a time and printed as they come,
 * through the streaming detokenizer (whole UTF-8 characters only), or as
 * ids with --ids or when the file has no tokenizer. Generation stops at an
 * end-of-generation token (tok_is_eog) unless --ignore-eos. No chat
 * template: a raw completion. Timings go to stderr at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/commands.h"
#include "base/err.h"
#include "base/util.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "sample/sample.h"
#include "tok/tok.h"

static void run_usage(FILE *out) {
  fprintf(out,
          "usage: parley run MODEL.gguf (-p TEXT | --tokens ID,ID,...) [options]\n"
          "  -p TEXT              prompt text, encoded with the model's tokenizer\n"
          "  --tokens LIST        prompt as comma-separated token ids\n"
          "  -n N                 tokens to generate (default 64)\n"
          "  --temp T             temperature, 0 = greedy (default 0.8)\n"
          "  --seed S             random seed (default 0)\n"
          "  --top-k K            (default 40)   --top-p P (default 0.95)   --min-p P (default 0.05)\n"
          "  --repeat-penalty R   over the last 64 tokens (default 1 = off)\n"
          "  -c N                 context size (default: the model's, at most 4096)\n"
          "  -t N                 threads (default 2)\n"
          "  --cache-type T       KV cache: f16 (default), q8_0 or f32\n"
          "  --ignore-eos         keep generating after the end-of-sequence token\n"
          "  --reference          use the scalar reference kernels\n"
          "  --ids                print token ids instead of text\n");
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_f(const char *s, float *out) {
  char *end = NULL;
  errno = 0;
  float v = strtof(s, &end);
  if (errno || end == s || *end) return -1;
  *out = v;
  return 0;
}

/* "1,2,3" -> malloc'd ids; n_vocab unknown here, the model checks. */
static int parse_tokens(const char *s, int32_t **out, int64_t *n) {
  size_t cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  int32_t *t = malloc(cap * sizeof *t);
  if (!t) return -1;
  int64_t k = 0;
  const char *p = s;
  while (*p) {
    char *end = NULL;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
      free(t);
      return -1;
    }
    t[k++] = (int32_t)v;
    p = *end ? end + 1 : end;
  }
  if (k == 0) {
    free(t);
    return -1;
  }
  *out = t;
  *n = k;
  return 0;
}

/* Prints a token: through the detokenizer stream when there is one,
 * otherwise as " id". */
static void print_token(tok_stream *ts, buf *out, int32_t id, bool ids) {
  if (ids || !ts) {
    printf(" %d", id);
    return;
  }
  buf_reset(out);
  if (tok_stream_feed(ts, id, out) == 0 && out->len) fwrite(out->data, 1, out->len, stdout);
}

int cmd_run(int argc, char **argv) {
  const char *path = NULL, *tokens_arg = NULL, *prompt = NULL;
  int64_t n_gen = 64, n_ctx = 0, n_threads = 2;
  bool ignore_eos = false, reference = false, ids = false;
  enum model_kv_type kv_type = MODEL_KV_F16;
  sample_params sp = sample_default_params();
  sp.temperature = 0.8f;
  sp.top_k = 40;
  sp.top_p = 0.95f;
  sp.min_p = 0.05f;
  sp.penalty_last_n = 64;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    int64_t iv = 0;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      run_usage(stdout);
      return 0;
    } else if (strcmp(a, "--ignore-eos") == 0) {
      ignore_eos = true;
      continue;
    } else if (strcmp(a, "--reference") == 0) {
      reference = true;
      continue;
    } else if (strcmp(a, "--ids") == 0) {
      ids = true;
      continue;
    } else if (a[0] != '-') {
      if (path) {
        fprintf(stderr, "parley run: unexpected argument '%s'\n", a);
        return 2;
      }
      path = a;
      continue;
    }
    if (!v) {
      fprintf(stderr, "parley run: %s needs a value\n", a);
      return 2;
    }
    i++;
    if (strcmp(a, "--tokens") == 0) tokens_arg = v;
    else if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) prompt = v;
    else if (strcmp(a, "-n") == 0) bad = parse_i64(v, 0, 1 << 24, &n_gen);
    else if (strcmp(a, "-c") == 0 || strcmp(a, "--ctx") == 0) bad = parse_i64(v, 0, INT32_MAX, &n_ctx);
    else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) bad = parse_i64(v, 1, 256, &n_threads);
    else if (strcmp(a, "--temp") == 0) bad = parse_f(v, &sp.temperature);
    else if (strcmp(a, "--cache-type") == 0) bad = model_kv_type_parse(v, &kv_type) ? 1 : 0;
    else if (strcmp(a, "--seed") == 0) {
      bad = parse_i64(v, 0, INT64_MAX, &iv);
      sp.seed = (uint64_t)iv;
    } else if (strcmp(a, "--top-k") == 0) {
      bad = parse_i64(v, 0, INT32_MAX, &iv);
      sp.top_k = (int32_t)iv;
    } else if (strcmp(a, "--top-p") == 0) bad = parse_f(v, &sp.top_p);
    else if (strcmp(a, "--min-p") == 0) bad = parse_f(v, &sp.min_p);
    else if (strcmp(a, "--repeat-penalty") == 0) bad = parse_f(v, &sp.repeat_penalty);
    else {
      fprintf(stderr, "parley run: unknown option '%s'\n", a);
      run_usage(stderr);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "parley run: bad value '%s' for %s\n", v, a);
      return 2;
    }
  }
  if (!path) {
    run_usage(stderr);
    return 2;
  }
  if (!tokens_arg && !prompt) {
    fprintf(stderr, "parley run: no prompt: give -p TEXT or --tokens 1,2,3\n");
    return 2;
  }
  int32_t *prompt_ids = NULL;
  int64_t n_prompt = 0;
  if (tokens_arg && parse_tokens(tokens_arg, &prompt_ids, &n_prompt)) {
    fprintf(stderr, "parley run: --tokens must be comma-separated non-negative integers\n");
    return 2;
  }
  if (reference) kern_force_reference(true);

  int status = 1;
  model *m = NULL;
  model_ctx *ctx = NULL;
  sampler *smp = NULL;
  float *logits = NULL;
  tok *tk = NULL;
  tok_ids enc = TOK_IDS_INIT;
  buf piece = BUF_INIT;
  tok_stream stream, *ts = NULL;
  uint64_t t0 = time_mono_ns();
  if (model_open(path, &m)) {
    fprintf(stderr, "parley run: cannot load %s: %s\n", path, err_detail());
    goto done;
  }
  const model_hparams *hp = model_get_hparams(m);
  model_ctx_params cp = model_ctx_default_params();
  cp.n_ctx = n_ctx ? n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
  cp.n_threads = (int)n_threads;
  cp.kv_type = kv_type;
  if (model_ctx_new(m, &cp, &ctx) || sample_new(&sp, (int32_t)hp->n_vocab, &smp)) {
    fprintf(stderr, "parley run: %s\n", err_detail());
    goto done;
  }
  logits = malloc((size_t)hp->n_vocab * sizeof *logits);
  if (!logits) goto done;
  if (tok_load(model_gguf(m), &tk)) {
    if (prompt) {
      fprintf(stderr, "parley run: -p needs the model's tokenizer: %s\n", err_detail());
      goto done;
    }
    tk = NULL; /* ids only */
  }
  if (prompt) {
    if (tok_encode(tk, prompt, strlen(prompt), TOK_ENCODE_ADD_SPECIAL, &enc) || enc.n == 0) {
      fprintf(stderr, "parley run: cannot encode the prompt%s\n", enc.n ? "" : " (no tokens)");
      goto done;
    }
    free(prompt_ids);
    prompt_ids = enc.ids;
    n_prompt = (int64_t)enc.n;
    enc.ids = NULL;
    enc.n = enc.cap = 0;
  }
  if (tk) {
    tok_stream_init(&stream, tk, 0);
    ts = &stream;
  }
  uint64_t t1 = time_mono_ns();

  if (prompt && !ids) {
    fputs(prompt, stdout);
    for (int64_t i = 0; i < n_prompt; i++) sample_accept(smp, prompt_ids[i]);
  } else {
    for (int64_t i = 0; i < n_prompt; i++) {
      sample_accept(smp, prompt_ids[i]);
      print_token(ts, &piece, prompt_ids[i], ids);
    }
  }
  fflush(stdout);
  /* the prompt's pieces are out; generated text continues the stream */
  if (model_forward(ctx, prompt_ids, n_prompt, 0, logits, MODEL_LOGITS_LAST)) {
    fprintf(stderr, "\nparley run: %s\n", err_detail());
    goto done;
  }
  uint64_t t2 = time_mono_ns();
  int64_t n_done = 0;
  for (; n_done < n_gen; n_done++) {
    sample_result r;
    if (sample_next(smp, logits, false, &r)) {
      fprintf(stderr, "\nparley run: %s\n", err_detail());
      goto done;
    }
    if (!ignore_eos && tk && tok_is_eog(tk, r.token)) break;
    print_token(ts, &piece, r.token, ids);
    fflush(stdout);
    sample_accept(smp, r.token);
    if (n_done + 1 == n_gen) {
      n_done++;
      break;
    }
    int64_t pos = model_ctx_n_past(ctx);
    if (pos >= model_ctx_n_ctx(ctx)) {
      n_done++;
      fprintf(stderr, "\nparley run: context of %lld tokens is full\n", (long long)model_ctx_n_ctx(ctx));
      break;
    }
    if (model_forward(ctx, &r.token, 1, pos, logits, MODEL_LOGITS_LAST)) {
      fprintf(stderr, "\nparley run: %s\n", err_detail());
      goto done;
    }
  }
  uint64_t t3 = time_mono_ns();
  if (ts && !ids) {
    buf_reset(&piece);
    if (tok_stream_flush(ts, &piece) == 0 && piece.len) fwrite(piece.data, 1, piece.len, stdout);
  }
  printf("\n");
  fflush(stdout);
  double pp_s = (double)(t2 - t1) / 1e9, tg_s = (double)(t3 - t2) / 1e9;
  fprintf(stderr, "load %.2f s | prompt %lld tokens %.2f s (%.1f t/s) | generated %lld tokens %.2f s (%.1f t/s) | %s\n",
          (double)(t1 - t0) / 1e9, (long long)n_prompt, pp_s, pp_s > 0 ? (double)n_prompt / pp_s : 0.0,
          (long long)n_done, tg_s, tg_s > 0 ? (double)n_done / tg_s : 0.0, kern_isa());
  status = 0;
done:
  free(logits);
  free(prompt_ids);
  tok_ids_free(&enc);
  buf_free(&piece);
  tok_free(tk);
  sample_free(smp);
  model_ctx_free(ctx);
  model_free(m);
  return status;
}
