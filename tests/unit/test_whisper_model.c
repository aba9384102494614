/*
 * test_whisper_model.c - the Whisper forward pass (speech/whisper_model.h)
 * against the numpy reference tools/ref_whisper.py (float64, its own parse
 * of the ggml file, no cache) on random-weight files from the writer of two
 * shapes, "small" (S 64, 2 + 2 layers, 80 mels, 32 audio positions) and
 * "tiny" (whisper tiny's real shape: S 384, 4 + 4 layers, 1500 positions,
 * 51865 tokens): the encoder output, the decoder logits of a token prefix
 * fed in two calls through the cache, and greedy continuations one token
 * at a time; the same across thread counts; and the errors of bad calls.
 *
 * The mel input is whisper_mel of a fixed clip, so the values have the
 * range and structure the encoder sees in use.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/tensor_type.h"
#include "model/testgen_whisper.h"
#include "model_ref.h"
#include "speech/whisper_file.h"
#include "speech/whisper_mel.h"
#include "speech/whisper_model.h"
#include "test.h"

#define WREF "tools/ref_whisper.py"

/* NMSE bounds. F32 and F16 weights: the only differences are f32 against
 * float64 arithmetic (measured 1e-13 on small and tiny, 3e-13 over 1500
 * positions). Quantized weights: numpy decodes the same blocks, so what
 * remains is that the fast kern_matmul quantizes each activation row to
 * Q8_0 (8 bits per 32 values, kernels.h); through the layers that gives
 * 5e-5 on the encoder output and 1e-4 on the logits for every quantized
 * type on small and for Q8_0 on tiny (with the reference kernels forced it
 * drops to 2e-14: whisper_model_small_quant_reference_kernels). The bound
 * leaves a factor of 10 over the measured gap. */
#define NMSE_EXACT 1e-4
#define NMSE_QUANT 1e-3

typedef struct fixture {
  char path[512];
  whisper_file *f;
  whisper_model *m;
  const whisper_hparams *hp;
  float *mel;
  int64_t n_frames;
  char mel_path[512];
} fixture;

/* A deterministic clip: a chirp, a tone from the middle, a quiet stretch,
 * a little noise. */
static void clip(float *x, size_t n) {
  uint64_t r = 0x2545f4914f6cdd1dull;
  for (size_t i = 0; i < n; i++) {
    double t = (double)i / WHISPER_SAMPLE_RATE;
    double v = 0.4 * sin(2 * M_PI * (150.0 + 900.0 * t) * t);
    if (i > n / 2) v += 0.3 * sin(2 * M_PI * 523.0 * t);
    if (i > n / 5 && i < n / 3) v *= 0.01;
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    x[i] = (float)(v + 0.02 * ((double)(r >> 11) * 0x1.0p-53 - 0.5));
  }
}

/* Writes g, opens it, makes the mel of n_frames frames and stores
 * it beside. Returns 0, or records a failure. */
static int fixture_open(fixture *fx, const whisper_testgen *g, int64_t n_frames) {
  memset(fx, 0, sizeof *fx);
  snprintf(fx->path, sizeof fx->path, "%s/w-%d-%s.bin", test_tmpdir(), (int)g->n_state, tensor_type_name(g->type));
  if (whisper_testgen_write(g, fx->path) || whisper_file_open(fx->path, &fx->f) ||
      whisper_model_new(fx->f, &fx->m))
    return test_fail_at(__FILE__, __LINE__, "%s: %s", fx->path, err_detail()), -1;
  fx->hp = whisper_model_hparams(fx->m);
  fx->n_frames = n_frames;
  size_t ns = (size_t)n_frames * WHISPER_HOP;
  float *pcm = malloc(ns * sizeof *pcm);
  fx->mel = malloc((size_t)fx->hp->n_mels * (size_t)n_frames * sizeof *fx->mel);
  clip(pcm, ns);
  int rc = whisper_mel(pcm, ns, whisper_file_mel_filters(fx->f), fx->hp->n_mels, fx->mel);
  free(pcm);
  if (rc) return test_fail_at(__FILE__, __LINE__, "whisper_mel: %s", err_detail()), -1;
  snprintf(fx->mel_path, sizeof fx->mel_path, "%s/w-mel.f32", test_tmpdir());
  FILE *fp = fopen(fx->mel_path, "wb");
  if (!fp) return test_fail_at(__FILE__, __LINE__, "cannot write %s", fx->mel_path), -1;
  fwrite(fx->mel, sizeof *fx->mel, (size_t)fx->hp->n_mels * (size_t)n_frames, fp);
  fclose(fp);
  return 0;
}

static void fixture_close(fixture *fx) {
  whisper_model_free(fx->m);
  whisper_file_close(fx->f);
  free(fx->mel);
}

/* What the reference gives for one file: the encoder output, the prefix's
 * logits and n_gen greedy tokens, from one run. */
typedef struct ref_out {
  float *enc, *logits;
  int32_t greedy[64];
  int n_greedy;
} ref_out;

static int run_ref(const fixture *fx, const int32_t *toks, int n, int n_gen, ref_out *r) {
  memset(r, 0, sizeof *r);
  char ts[4096], out[512], p[600], cmd[8192];
  ref_toks_str(toks, n, ts, sizeof ts);
  snprintf(out, sizeof out, "%s/w-ref", test_tmpdir());
  snprintf(cmd, sizeof cmd, REF_PY " " WREF " %s %s %lld %s %d %s", fx->path, fx->mel_path, (long long)fx->n_frames,
           ts, n_gen, out);
  const size_t n_ctx = (size_t)(fx->n_frames + 1) / 2;
  snprintf(p, sizeof p, "%s.enc.f32", out);
  if (!(r->enc = ref_run_floats(cmd, p, n_ctx * (size_t)fx->hp->n_audio_state))) return -1;
  snprintf(p, sizeof p, "%s.logits.f32", out);
  if (!(r->logits = ref_read_floats(p, (size_t)n * (size_t)fx->hp->n_vocab))) return -1;
  snprintf(p, sizeof p, "%s.greedy.txt", out);
  FILE *fp = fopen(p, "r");
  if (!fp) return -1;
  while (r->n_greedy < n_gen && r->n_greedy < 64 && fscanf(fp, "%d,", &r->greedy[r->n_greedy]) == 1) r->n_greedy++;
  fclose(fp);
  return 0;
}

static void ref_out_free(ref_out *r) {
  free(r->enc);
  free(r->logits);
}

static int32_t argmax(const float *v, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = (int32_t)i;
  return best;
}

/* The whole comparison on one file: encoder output, the prefix's logits
 * (fed as two calls: the first n1 tokens, then the rest after them),
 * greedy continuation of n_gen tokens. */
static void check_file(const char *shape, const whisper_testgen *g, int64_t n_frames, const int32_t *prefix,
                       int n_prefix, int n1, int n_gen, double tol) {
  const uint32_t type = g->type;
  fixture fx;
  if (fixture_open(&fx, g, n_frames)) return fixture_close(&fx);
  const int64_t S = fx.hp->n_audio_state, V = fx.hp->n_vocab, n_ctx = (n_frames + 1) / 2;
  thread_pool *tp = NULL;
  whisper_state *st = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  ASSERT_INT_EQ(whisper_state_new(fx.m, tp, &st), 0);
  ASSERT_INT_EQ(whisper_encode(st, fx.mel, n_frames), 0);
  int64_t got_ctx = 0;
  const float *enc = whisper_encoder_output(st, &got_ctx);
  EXPECT_INT_EQ(got_ctx, n_ctx);
  ref_out ref;
  if (run_ref(&fx, prefix, n_prefix, n_gen, &ref)) test_fail_at(__FILE__, __LINE__, "%s failed on %s", WREF, fx.path);
  const float *renc = ref.enc, *rlg = ref.logits;
  if (renc && enc) {
    double e = ref_nmse(enc, renc, (size_t)(n_ctx * S));
    printf("    %s %s: encoder [%lld][%lld] nmse %.3g\n", shape, tensor_type_name(type), (long long)n_ctx,
           (long long)S, e);
    EXPECT_TRUE(e < tol);
  }
  /* logits of the prefix through the cache in two calls */
  float *lg = malloc((size_t)n_prefix * (size_t)V * sizeof *lg);
  ASSERT_INT_EQ(whisper_decode(st, prefix, n1, 0, lg, WHISPER_LOGITS_ALL), 0);
  ASSERT_INT_EQ(whisper_decode(st, prefix + n1, n_prefix - n1, n1, lg + (size_t)n1 * (size_t)V, WHISPER_LOGITS_ALL),
                0);
  if (rlg) {
    double e = ref_nmse(lg, rlg, (size_t)n_prefix * (size_t)V);
    printf("    %s %s: logits [%d][%lld] nmse %.3g\n", shape, tensor_type_name(type), n_prefix, (long long)V, e);
    EXPECT_TRUE(e < tol);
  }
  /* greedy, one token per call after the prefix */
  int32_t got[64];
  const int32_t *want = ref.greedy;
  ASSERT_TRUE(n_gen <= 64);
  EXPECT_INT_EQ(ref.n_greedy, n_gen);
  ASSERT_INT_EQ(whisper_decode(st, prefix, n_prefix, 0, lg, WHISPER_LOGITS_LAST), 0);
  int rc = 0;
  for (int i = 0; i < n_gen && !rc; i++) {
    got[i] = argmax(lg, V);
    if (i + 1 < n_gen) rc = whisper_decode(st, &got[i], 1, n_prefix + i, lg, WHISPER_LOGITS_LAST);
  }
  EXPECT_INT_EQ(rc, 0);
  int same = 0;
  while (!rc && same < n_gen && got[same] == want[same]) same++;
  printf("    %s %s: greedy %d of %d tokens identical\n", shape, tensor_type_name(type), same, n_gen);
  EXPECT_INT_EQ(same, n_gen);
  free(lg);
  ref_out_free(&ref);
  whisper_state_free(st);
  tpool_free(tp);
  fixture_close(&fx);
}

static void check_model(const char *shape, uint32_t type, int64_t n_frames, const int32_t *prefix, int n_prefix,
                        int n1, int n_gen, double tol) {
  whisper_testgen g;
  if (whisper_testgen_shape(shape, type, &g)) return test_fail_at(__FILE__, __LINE__, "%s", err_detail());
  check_file(shape, &g, n_frames, prefix, n_prefix, n1, n_gen, tol);
}

static const int32_t small_prefix[] = {258, 7, 99, 12, 201, 3};

TEST(whisper_model_small_f32) {
  NEED_REF_PY(WREF);
  /* the full window: 64 frames, 32 positions; the prefix in calls of 4 + 2 */
  check_model("small", TENSOR_TYPE_F32, 64, small_prefix, 6, 4, 10, NMSE_EXACT);
}

TEST(whisper_model_small_short_mel) {
  NEED_REF_PY(WREF);
  /* an odd frame count: conv2's last position reads one padding column */
  check_model("small", TENSOR_TYPE_F32, 23, small_prefix, 6, 1, 8, NMSE_EXACT);
}

TEST(whisper_model_small_types) {
  NEED_REF_PY(WREF);
  check_model("small", TENSOR_TYPE_F16, 64, small_prefix, 6, 3, 6, NMSE_EXACT);
  const uint32_t q[] = {TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1};
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) check_model("small", q[i], 64, small_prefix, 6, 3, 6, NMSE_QUANT);
}

/* The quantized types again with the reference kernels forced (every dot
 * product in double on unquantized activations): the gap to numpy closes
 * to the F32 level, so what NMSE_QUANT allows is the activation rounding
 * of the fast kernels, not an error in the weights' use. */
TEST(whisper_model_small_quant_reference_kernels) {
  NEED_REF_PY(WREF);
  kern_force_reference(true);
  check_model("small", TENSOR_TYPE_Q5_0, 64, small_prefix, 6, 2, 4, NMSE_EXACT);
  check_model("small", TENSOR_TYPE_Q4_1, 64, small_prefix, 6, 2, 4, NMSE_EXACT);
  kern_force_reference(false);
}

/* A whole 30 s window: the small shape with whisper's 1500 encoder
 * positions, fed 3000 frames (attention over 12 tiles of keys). */
TEST(whisper_model_small_30s) {
  NEED_REF_PY(WREF);
  whisper_testgen g = whisper_testgen_small();
  g.n_audio_ctx = 1500;
  check_file("small-1500", &g, 3000, small_prefix, 6, 5, 8, NMSE_EXACT);
}

/* whisper tiny's shape (6 heads of 64, 51865 tokens) on 4 s and 2 s of frames (the
 * full 1500 positions in float64 numpy take minutes); SOT, en, transcribe,
 * notimestamps as the prefix. */
static const int32_t tiny_prefix[] = {50258, 50259, 50359, 50363};

TEST(whisper_model_tiny_f32) {
  NEED_REF_PY(WREF);
  check_model("tiny", TENSOR_TYPE_F32, 400, tiny_prefix, 4, 3, 8, NMSE_EXACT);
}

TEST(whisper_model_tiny_q8_0) {
  NEED_REF_PY(WREF);
  check_model("tiny", TENSOR_TYPE_Q8_0, 200, tiny_prefix, 4, 2, 8, NMSE_QUANT);
}

/* Thread count and call shape do not change a value: 1 thread against 2,
 * and a prefix fed whole against one token per call. */
TEST(whisper_model_threads_and_chunks) {
  fixture fx;
  whisper_testgen g = whisper_testgen_small();
  g.type = TENSOR_TYPE_Q8_0;
  if (fixture_open(&fx, &g, 64)) return fixture_close(&fx);
  const int64_t S = fx.hp->n_audio_state, V = fx.hp->n_vocab;
  thread_pool *tp = NULL;
  whisper_state *a = NULL, *b = NULL;
  ASSERT_INT_EQ(tpool_new(2, &tp), 0);
  ASSERT_INT_EQ(whisper_state_new(fx.m, NULL, &a), 0);
  ASSERT_INT_EQ(whisper_state_new(fx.m, tp, &b), 0);
  ASSERT_INT_EQ(whisper_encode(a, fx.mel, 64), 0);
  ASSERT_INT_EQ(whisper_encode(b, fx.mel, 64), 0);
  int64_t na = 0, nb = 0;
  const float *ea = whisper_encoder_output(a, &na), *eb = whisper_encoder_output(b, &nb);
  ASSERT_INT_EQ(na, 32);
  ASSERT_INT_EQ(nb, 32);
  EXPECT_MEM_EQ(ea, eb, (size_t)(32 * S) * sizeof(float));
  float *la = malloc(6 * (size_t)V * sizeof *la), *lb = malloc(6 * (size_t)V * sizeof *lb);
  ASSERT_INT_EQ(whisper_decode(a, small_prefix, 6, 0, la, WHISPER_LOGITS_ALL), 0);
  for (int i = 0; i < 6; i++) ASSERT_INT_EQ(whisper_decode(b, small_prefix + i, 1, i, lb + i * V, WHISPER_LOGITS_LAST), 0);
  double e = ref_nmse(lb, la, 6 * (size_t)V);
  printf("    whole prefix vs token by token: nmse %.3g\n", e);
  EXPECT_TRUE(e < 1e-10);
  /* a second encode of other audio changes the output; the first again restores it */
  float *mel2 = malloc((size_t)fx.hp->n_mels * 64 * sizeof *mel2);
  for (int64_t i = 0; i < (int64_t)fx.hp->n_mels * 64; i++) mel2[i] = fx.mel[(i * 7) % ((int64_t)fx.hp->n_mels * 64)];
  ASSERT_INT_EQ(whisper_encode(b, mel2, 64), 0);
  EXPECT_TRUE(memcmp(whisper_encoder_output(b, NULL), ea, (size_t)(32 * S) * sizeof(float)) != 0);
  ASSERT_INT_EQ(whisper_encode(b, fx.mel, 64), 0);
  EXPECT_MEM_EQ(whisper_encoder_output(b, NULL), ea, (size_t)(32 * S) * sizeof(float));
  free(mel2);
  free(la);
  free(lb);
  whisper_state_free(a);
  whisper_state_free(b);
  tpool_free(tp);
  fixture_close(&fx);
}

TEST(whisper_model_bad_calls) {
  fixture fx;
  whisper_testgen g = whisper_testgen_small();
  if (fixture_open(&fx, &g, 64)) return fixture_close(&fx);
  const whisper_hparams *h = fx.hp;
  whisper_state *s = NULL;
  ASSERT_INT_EQ(whisper_state_new(fx.m, NULL, &s), 0);
  float *lg = malloc((size_t)(h->n_text_ctx + 1) * (size_t)h->n_vocab * sizeof *lg);
  int32_t toks[64] = {0};
  /* decode before any encode */
  EXPECT_INT_EQ(whisper_decode(s, toks, 1, 0, lg, WHISPER_LOGITS_LAST), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "encode first");
  EXPECT_TRUE(whisper_encoder_output(s, NULL) == NULL);
  /* zero-length and over-30 s mel */
  EXPECT_INT_EQ(whisper_encode(s, fx.mel, 0), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "0 mel frames");
  EXPECT_INT_EQ(whisper_encode(s, fx.mel, -5), ERR_RANGE);
  EXPECT_INT_EQ(whisper_encode(s, fx.mel, 2 * h->n_audio_ctx + 1), ERR_TOO_LARGE);
  EXPECT_STR_CONTAINS(err_detail(), "65 mel frames");
  EXPECT_INT_EQ(whisper_encode(s, NULL, 10), ERR_INVALID);
  /* a good encode, then a failed one: decoding is refused again */
  ASSERT_INT_EQ(whisper_encode(s, fx.mel, 64), 0);
  EXPECT_INT_EQ(whisper_decode(s, toks, 1, 0, lg, WHISPER_LOGITS_LAST), 0);
  EXPECT_INT_EQ(whisper_encode(s, fx.mel, 0), ERR_RANGE);
  EXPECT_INT_EQ(whisper_decode(s, toks, 1, 0, lg, WHISPER_LOGITS_LAST), ERR_INVALID);
  ASSERT_INT_EQ(whisper_encode(s, fx.mel, 64), 0);
  /* a prompt longer than n_text_ctx (16), at once and after a cache */
  EXPECT_INT_EQ(whisper_decode(s, toks, h->n_text_ctx + 1, 0, lg, WHISPER_LOGITS_ALL), ERR_CONTEXT);
  EXPECT_STR_CONTAINS(err_detail(), "text context of 16");
  EXPECT_INT_EQ(whisper_decode(s, toks, h->n_text_ctx, 0, lg, WHISPER_LOGITS_ALL), 0);
  EXPECT_INT_EQ(whisper_decode(s, toks, 1, h->n_text_ctx, lg, WHISPER_LOGITS_LAST), ERR_CONTEXT);
  EXPECT_INT_EQ(whisper_decode(s, toks, 10, 8, lg, WHISPER_LOGITS_LAST), ERR_CONTEXT);
  /* tokens outside the vocabulary, and bad counts */
  toks[2] = h->n_vocab;
  EXPECT_INT_EQ(whisper_decode(s, toks, 3, 0, lg, WHISPER_LOGITS_LAST), ERR_RANGE);
  EXPECT_STR_CONTAINS(err_detail(), "token 2 is 300");
  toks[2] = -1;
  EXPECT_INT_EQ(whisper_decode(s, toks, 3, 0, lg, WHISPER_LOGITS_LAST), ERR_RANGE);
  toks[2] = 0;
  EXPECT_INT_EQ(whisper_decode(s, toks, 0, 0, lg, WHISPER_LOGITS_LAST), ERR_INVALID);
  EXPECT_INT_EQ(whisper_decode(s, toks, 1, -1, lg, WHISPER_LOGITS_LAST), ERR_INVALID);
  EXPECT_INT_EQ(whisper_decode(s, NULL, 1, 0, lg, WHISPER_LOGITS_LAST), ERR_INVALID);
  free(lg);
  whisper_state_free(s);
  fixture_close(&fx);
}
