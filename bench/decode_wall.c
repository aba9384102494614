/*
 * bench/decode_wall.c - where one generated token's wall time goes at N
 * threads, and how it compares with only reading the same weight bytes.
 *
 * Why: decode should be bound by reading the weights, but every model
 * decoded at ~15-18 GB/s of weights while the standalone probe read
 * 20-39 GB/s; the probe swings so much between minutes on this shared
 * host that a ratio against it says little. Here the comparison is made
 * in the same process, interleaved token by token:
 *   decode   one token (model_decode, profiled: model_prof events)
 *   jobs     the same weight buffers read by the bw_probe loop (bwp_read)
 *            on the context's own pool, one pool job per product of the
 *            pass, in the pass's order (same barriers, no serial work)
 *   stream   the same bytes read in one pool job (the floor: memory only)
 * and the token's time is split into the products' jobs (activation
 * quantization before the job, the job itself, the two threads' end
 * times) and everything else (norms, rope, attention, adds, swiglu).
 * Reported: medians over the tokens of each quantity, and the ratios
 * stream / decode (the real efficiency of decode) and jobs / products.
 *
 * Run: bash bench/decode_wall.sh MODEL.gguf [-t 2] [-n 48] [-p 0]
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "bw_probe.h"
#include "model/model.h"

#define RD_CHUNK ((size_t)64 << 10) /* bytes a thread takes at a time */

typedef struct rd_chunk {
  const uint8_t *p;
  size_t n;
} rd_chunk;

typedef struct rd_job {
  rd_chunk *ch;
  size_t n_ch;
  atomic_size_t next;
  uint64_t sink[8];
} rd_job;

static void rd_worker(void *ctx, int ith, int nth) {
  (void)nth;
  rd_job *j = ctx;
  uint64_t x = 0;
  for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n_ch;) x ^= bwp_read(j->ch[i].p, j->ch[i].n);
  j->sink[ith & 7] ^= x;
}

/* Appends [p, p + n) cut into RD_CHUNK pieces (multiples of 512 bytes,
 * what bwp_read's 512-bit loop takes). */
static size_t add_chunks(rd_chunk *ch, size_t k, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t o = 0; o + 512 <= n; o += RD_CHUNK) {
    size_t m = n - o < RD_CHUNK ? n - o : RD_CHUNK;
    ch[k++] = (rd_chunk){b + o, m & ~(size_t)511};
  }
  return k;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n ? v[n / 2] : 0;
}

enum {
  Q_DECODE, Q_PROD, Q_PROD_QUANT, Q_PROD_JOB, Q_PROD_TAIL, Q_PROD_IMBAL, Q_PROD_WAKE, Q_OTHER, Q_JOBS, Q_STREAM,
  Q_COUNT
};
static const char *const q_names[Q_COUNT] = {
    "decode token (model_decode)",
    "  products (call to return)",
    "    before the job (quantize x)",
    "    pool job (publish to done)",
    "    after the job",
    "    |thread 0 end - thread 1 end|",
    "    worker start latency",
    "  other (norms, rope, attn, adds, swiglu)",
    "read jobs (same buffers, one job per product)",
    "read stream (same bytes, one job)"};

int main(int argc, char **argv) {
  const char *path = "build/bench-models/tinyllama-Q4_0.gguf";
  int n_threads = 2, n_gen = 48, n_prompt = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_gen = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-p") && i + 1 < argc) n_prompt = atoi(argv[++i]);
    else path = argv[i];
  }
  if (n_gen < 4 || n_gen > 4096) n_gen = 48;
  model *m = NULL;
  if (model_open(path, &m)) {
    fprintf(stderr, "%s: %s\n", path, err_detail());
    return 1;
  }
  model_ctx_params cp = model_ctx_default_params();
  cp.n_ctx = n_prompt + n_gen + 8;
  cp.n_threads = n_threads;
  model_ctx *c = NULL;
  if (model_ctx_new(m, &cp, &c)) {
    fprintf(stderr, "ctx: %s\n", err_detail());
    return 1;
  }
  thread_pool *tp = model_ctx_pool(c);
  const int64_t n_vocab = model_get_hparams(m)->n_vocab;
  float *logits = malloc((size_t)n_vocab * sizeof(float));
  int32_t tok = 1;
  int64_t pos = 0;
  for (; pos < n_prompt; pos++) { /* prompt tokens one by one (any token works) */
    int32_t t = (int32_t)(3 + pos * 7 % (n_vocab - 3));
    if (model_forward(c, &t, 1, pos, logits, MODEL_LOGITS_LAST)) return 1;
  }

  enum { CAP = 4096 };
  model_prof_ev *ev = calloc(CAP, sizeof *ev);
  model_prof prof = {.ev = ev, .cap = CAP};
  double *q[Q_COUNT], seg_sum[MODEL_PROF_COUNT] = {0};
  for (int i = 0; i < Q_COUNT; i++) q[i] = calloc((size_t)n_gen, sizeof(double));
  rd_chunk *stream = NULL, *jobch = NULL;
  size_t n_stream = 0;
  uint64_t bytes = 0;
  int n_prod = 0, nq = 0;
  size_t *job_first = NULL; /* [n_prod + 1] chunk index of each product's job in jobch */
  int *prod_seg = NULL;      /* [n_prod] the segment of each product */
  /* per segment kind, summed over tokens: products' wall, job wall, read
   * jobs' wall, worker start latency, thread end difference */
  double seg_prod[MODEL_PROF_COUNT] = {0}, seg_job[MODEL_PROF_COUNT] = {0}, seg_read[MODEL_PROF_COUNT] = {0},
         seg_wake[MODEL_PROF_COUNT] = {0}, seg_imb[MODEL_PROF_COUNT] = {0};

  for (int it = 0; it < n_gen; it++, pos++) {
    /* one decode token, profiled */
    prof.n = 0;
    model_ctx_set_prof(c, &prof);
    int64_t t0 = now_ns();
    if (model_forward(c, &tok, 1, pos, logits, MODEL_LOGITS_LAST)) {
      fprintf(stderr, "decode: %s\n", err_detail());
      return 1;
    }
    int64_t t1 = now_ns();
    model_ctx_set_prof(c, NULL);
    int32_t best = 0;
    for (int64_t v = 1; v < n_vocab; v++)
      if (logits[v] > logits[best]) best = (int32_t)v;
    tok = best;

    if (!stream) { /* the buffers of the first pass, in its order */
      size_t cap = 0;
      for (int e = 0; e < prof.n; e++)
        for (int w = 0; w < ev[e].n_w; w++) {
          cap += ev[e].w_bytes[w] / RD_CHUNK + 2;
          bytes += ev[e].w_bytes[w];
        }
      stream = calloc(cap, sizeof *stream);
      jobch = calloc(cap, sizeof *jobch);
      job_first = calloc((size_t)prof.n + 1, sizeof *job_first);
      prod_seg = calloc((size_t)prof.n + 1, sizeof *prod_seg);
      size_t k = 0;
      for (int e = 0; e < prof.n; e++) {
        if (!ev[e].n_w) continue;
        prod_seg[n_prod] = ev[e].seg;
        job_first[n_prod++] = k;
        for (int w = 0; w < ev[e].n_w; w++) k = add_chunks(jobch, k, ev[e].w[w], ev[e].w_bytes[w]);
      }
      job_first[n_prod] = k;
      n_stream = k;
      memcpy(stream, jobch, k * sizeof *stream);
      printf("model %s, %d threads, %d tokens from position %d\n", path, n_threads, n_gen, n_prompt);
      printf("%d products per token reading %.1f MiB of weights (%d events)\n", n_prod, (double)bytes / 1048576.0,
             prof.n);
    }

    double prod = 0, quant = 0, job = 0, tail = 0, imbal = 0, wake = 0;
    for (int e = 0; e < prof.n; e++) {
      const model_prof_ev *x = &ev[e];
      double d = (double)(x->t1_ns - x->t0_ns) * 1e-6;
      seg_sum[x->seg] += d;
      if (!x->n_w) continue;
      prod += d;
      seg_prod[x->seg] += d;
      if (!x->n_jobs) continue;
      quant += (double)(x->job.publish_ns - x->t0_ns) * 1e-6;
      job += (double)(x->job.done_ns - x->job.publish_ns) * 1e-6;
      seg_job[x->seg] += (double)(x->job.done_ns - x->job.publish_ns) * 1e-6;
      tail += (double)(x->t1_ns - x->job.done_ns) * 1e-6;
      if (n_threads > 1) {
        int64_t a = x->job.last_ns[0], b = x->job.last_ns[1];
        if (a && b) {
          imbal += (double)(a > b ? a - b : b - a) * 1e-6;
          seg_imb[x->seg] += (double)(a > b ? a - b : b - a) * 1e-6;
        }
        if (x->job.first_ns[1]) {
          wake += (double)(x->job.first_ns[1] - x->job.publish_ns) * 1e-6;
          seg_wake[x->seg] += (double)(x->job.first_ns[1] - x->job.publish_ns) * 1e-6;
        }
      }
    }
    q[Q_DECODE][nq] = (double)(t1 - t0) * 1e-6;
    q[Q_PROD][nq] = prod;
    q[Q_PROD_QUANT][nq] = quant;
    q[Q_PROD_JOB][nq] = job;
    q[Q_PROD_TAIL][nq] = tail;
    q[Q_PROD_IMBAL][nq] = imbal;
    q[Q_PROD_WAKE][nq] = wake;
    q[Q_OTHER][nq] = (double)(t1 - t0) * 1e-6 - prod;

    /* the same bytes, read: one job per product, then one stream */
    tpool_hold_begin(tp);
    int64_t r0 = now_ns();
    for (int p = 0; p < n_prod; p++) {
      rd_job j = {.ch = jobch + job_first[p], .n_ch = job_first[p + 1] - job_first[p]};
      atomic_init(&j.next, 0);
      int64_t a = now_ns();
      tpool_run(tp, rd_worker, &j);
      seg_read[prod_seg[p]] += (double)(now_ns() - a) * 1e-6;
    }
    int64_t r1 = now_ns();
    rd_job js = {.ch = stream, .n_ch = n_stream};
    atomic_init(&js.next, 0);
    tpool_run(tp, rd_worker, &js);
    int64_t r2 = now_ns();
    tpool_hold_end(tp);
    q[Q_JOBS][nq] = (double)(r1 - r0) * 1e-6;
    q[Q_STREAM][nq] = (double)(r2 - r1) * 1e-6;
    nq++;
  }

  /* ratios per token before taking medians (same minute) */
  double *eff = calloc((size_t)nq, sizeof *eff), *peff = calloc((size_t)nq, sizeof *peff);
  for (int i = 0; i < nq; i++) {
    eff[i] = q[Q_STREAM][i] / q[Q_DECODE][i];
    peff[i] = q[Q_JOBS][i] / q[Q_PROD][i];
  }
  printf("\nmedians over %d tokens, ms per token:\n", nq);
  double med[Q_COUNT];
  for (int i = 0; i < Q_COUNT; i++) {
    med[i] = median(q[i], nq);
    printf("  %-46s %8.3f\n", q_names[i], med[i]);
  }
  printf("\nmeans, ms per token by piece: wall, and for products: pool job, read job of the same buffers,\n"
         "worker start latency, |thread end difference|\n");
  for (int s = 0; s < MODEL_PROF_COUNT; s++) {
    printf("  %-10s %8.3f", model_prof_seg_name(s), seg_sum[s] / nq);
    if (seg_prod[s] > 0)
      printf("  job %8.3f  read %8.3f (%.2f)  wake %6.3f  imbal %6.3f", seg_job[s] / nq, seg_read[s] / nq,
             seg_read[s] / seg_prod[s], seg_wake[s] / nq, seg_imb[s] / nq);
    printf("\n");
  }
  printf("\ndecode %.2f t/s = %.1f GB/s of weights; stream read %.1f GB/s; jobs read %.1f GB/s\n",
         1e3 / med[Q_DECODE], (double)bytes / med[Q_DECODE] * 1e-6, (double)bytes / med[Q_STREAM] * 1e-6,
         (double)bytes / med[Q_JOBS] * 1e-6);
  printf("EFFICIENCY stream/decode %.3f   jobs/products %.3f   (medians of per-token ratios)\n", median(eff, nq),
         median(peff, nq));
  model_ctx_free(c);
  model_free(m);
  return 0;
}
