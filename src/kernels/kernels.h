/*
 * kernels.h - the compute kernels the model runtime calls: a thread pool and
 * a matrix multiplication y = W x for every weight type, with run-time
 * dispatch to the best SIMD variant the CPU has.
 *
 * Correctness is defined by the scalar reference kernels (kernels/ref.h);
 * the fast variants are tested against them (tests/unit/test_kernels*.c).
 * See docs/runtime.md, "Kernels and dispatch".
 */
#ifndef PARLEY_KERNELS_KERNELS_H
#define PARLEY_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- thread pool --------------------------------------------------------
 * n_threads - 1 worker threads are created by tpool_new and live until
 * tpool_free; the thread calling tpool_run works as thread 0. A pool serves
 * one caller at a time (tpool_run is not reentrant and must not be called
 * from inside fn). Workers spin briefly after a job, then sleep. */
typedef struct thread_pool thread_pool;
/* n_threads >= 1 (ERR_RANGE otherwise); ERR_NOMEM / ERR_INTERNAL when memory
 * or threads cannot be had. */
int tpool_new(int n_threads, thread_pool **out);
void tpool_free(thread_pool *tp);
int tpool_n_threads(const thread_pool *tp);
/* Runs fn(ctx, ith, nth) for ith = 0..nth-1 (nth = tpool_n_threads) across
 * the pool and returns when all are done. tp NULL runs fn(ctx, 0, 1). */
void tpool_run(thread_pool *tp, void (*fn)(void *ctx, int ith, int nth), void *ctx);
/* A hold scope, opened by the pool's caller around a burst of jobs (a
 * forward pass): until the matching tpool_hold_end, waiting threads spin
 * for the next job for up to a few milliseconds instead of 20 us, so that
 * a worker is awake for every job of the burst; opening one also wakes
 * sleeping workers. After the end they spin about a millisecond more (the
 * gap between two generated tokens), then sleep. Scopes nest; an end
 * without a begin is ignored. Changes timing only, never results. tp NULL
 * or one thread: no-op. */
void tpool_hold_begin(thread_pool *tp);
void tpool_hold_end(thread_pool *tp);
/* True when no worker is asleep (all spinning inside a hold scope), so a
 * job of a few microseconds of work pays: a sleeping worker costs the
 * caller a futex wake, tens of microseconds on a busy host. False for
 * tp NULL or one thread. A hint for choosing between tpool_run and
 * running fn(ctx, 0, 1) in the caller; never changes results when fn's
 * result does not depend on nth. */
bool tpool_workers_awake(const thread_pool *tp);
/* Per-thread counters since tpool_new (thread 0 is the caller). busy_ns
 * and sleep_ns stay 0 unless PARLEY_TPOOL_STATS=1 was set when the pool
 * was made (it also prints them to stderr at tpool_free). tp NULL or ith
 * out of range: all 0. */
typedef struct tpool_stats {
  uint64_t n_tasks;  /* tasks (fn calls) this thread ran */
  uint64_t n_sleeps; /* times it went to sleep on a condition variable
                        (counted on entry): a worker waiting for a job,
                        the caller for a job's end */
  uint64_t busy_ns;  /* time inside fn */
  uint64_t sleep_ns; /* time asleep */
} tpool_stats;
void tpool_get_stats(const thread_pool *tp, int ith, tpool_stats *out);
/* A timeline of jobs, for measuring (bench/decode_wall.c): while set, every
 * tpool_run fills *t (CLOCK_MONOTONIC ns): when it published the job, when
 * each thread (ith < TPOOL_TRACE_MAX) started its first and ended its last
 * task of it (0: ran none), and when the caller saw every task done. Costs
 * one branch per task when NULL (the default). One caller at a time, as
 * tpool_run. */
#define TPOOL_TRACE_MAX 4
typedef struct tpool_trace {
  int64_t publish_ns, done_ns;
  int64_t first_ns[TPOOL_TRACE_MAX], last_ns[TPOOL_TRACE_MAX];
  int n_jobs; /* jobs run while set (counted, the times are the last one's) */
} tpool_trace;
void tpool_set_trace(thread_pool *tp, tpool_trace *t);

/* ---- matrix multiplication ----------------------------------------------
 * y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens, r < n_rows.
 * W: n_rows rows of n_cols elements of type `type` (enum tensor_type),
 * row-major, rows contiguous (a GGUF 2-D tensor with dims[0] = n_cols,
 * dims[1] = n_rows). x: n_tokens x n_cols float32; y: n_tokens x n_rows
 * float32 (must not overlap x or W).
 *
 * Splits rows (and tokens when there are few rows) across the pool; tp may
 * be NULL (runs on the calling thread). Scratch for the quantized
 * activations is kept in the pool, or for tp NULL per calling thread (freed
 * when the thread exits), so steady-state calls do not allocate. Calls with
 * tp NULL may run concurrently from several threads (e.g. inside another
 * tpool_run); a pool serves one caller at a time. Results do not depend on
 * the number of threads, nor on how many other tokens are in the call.
 *
 * Errors: ERR_UNSUPPORTED naming the type for types without a kernel,
 * ERR_RANGE when n_cols is not a multiple of the block size or a count is
 * negative, ERR_NOMEM when scratch cannot be allocated.
 *
 * Precision: F32/F16/BF16 weights multiply f32 activations (f32 FMA
 * accumulation). Quantized weights multiply activations quantized once per
 * call to 8 bits (Q8_0 blocks of 32 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, Q8_K
 * blocks of 256 for the K-quants), as llama.cpp does: the relative error
 * this adds is about 0.4% of sum |w x| at worst, far below the weight
 * quantization error. The reference path (kern_force_reference) computes
 * every dot product in double with ref_vec_dot. */
int kern_matmul(thread_pool *tp, int type, const void *W, int64_t n_rows, int64_t n_cols,
                const float *x, int64_t n_tokens, float *y);

/* ---- weights repacked at load time (kernels/packed.c) ---------------------
 * Some types have a faster layout than the GGUF rows for this CPU (today
 * Q4_0, Q8_0 and Q4_K on x86 AVX2: 8 rows interleaved in 4-byte groups,
 * same size as the rows). kern_pack copies W (n_rows x n_cols of `type`, rows as for
 * kern_matmul) into that layout in memory it allocates; *out is NULL (and 0
 * returned) when the type has no packed layout on this CPU or the reference
 * kernels are forced, and the caller keeps using kern_matmul on W. Free
 * with kern_packed_free (one malloc'd block: free() does the same). kern_matmul_packed computes exactly what
 * kern_matmul computes on the original rows within the same precision
 * (bit-identical results for a given row and token whatever the thread
 * count and the other tokens of the call); with the reference kernels
 * forced it unpacks each row and uses the reference dot products.
 * Errors: as kern_matmul, and ERR_NOMEM. */
typedef struct kern_packed kern_packed;
int kern_pack(int type, const void *W, int64_t n_rows, int64_t n_cols, kern_packed **out);
/* kern_pack that calls done(src, bytes, ctx) after each slice of rows it has
 * copied (src..src + bytes of W, in order, covering W once), so a caller can
 * release the source pages as it goes and never hold two copies of a big
 * tensor. done may be NULL. */
int kern_pack_ex(int type, const void *W, int64_t n_rows, int64_t n_cols,
                 void (*done)(const void *src, size_t bytes, void *ctx), void *ctx,
                 kern_packed **out);
void kern_packed_free(kern_packed *p);
/* Memory for weights the caller copies out of a mapping: 64-byte aligned,
 * and from 2 MiB on 2 MiB-aligned with its whole huge pages advised
 * MADV_HUGEPAGE (decode streams the weights; 4 KiB pages cost a TLB miss
 * and a hardware-prefetch restart every 4 KiB). NULL when out of memory;
 * free with free(). kern_pack allocates its copies with it. */
void *kern_weights_alloc(size_t n);
/* Row r of the packed matrix dequantized to n_cols f32 (the values
 * ref_dequantize_row gives for the original GGUF row): embedding lookups
 * of a tied token_embd that is kept only packed. ERR_RANGE for r out of
 * range. */
int kern_packed_row_f32(const kern_packed *p, int64_t r, float *out);
/* Bytes the packed copy holds (for memory accounting). */
size_t kern_packed_bytes(const kern_packed *p);
int kern_matmul_packed(thread_pool *tp, const kern_packed *p, const float *x, int64_t n_tokens,
                       float *y);

/* ---- several products of one input in one pool job (kernels/multi.c) ----
 * y_i = W_i x for the n_parts (1..KERN_MULTI_MAX) parts, all W_i with n_cols
 * columns: a part is packed weights (packed non-NULL; type, W and n_rows are
 * then ignored) or GGUF rows (type, W, n_rows as for kern_matmul); its y is
 * n_tokens x its n_rows. One pool job for all (the rows of every part split
 * across the threads as one row space), and x quantized once per distinct
 * activation format. Each y_i is bit-identical to what kern_matmul /
 * kern_matmul_packed gives for that part alone. Errors: as those two (the
 * message names the part, counting from 1), and ERR_RANGE for a packed part
 * whose columns are not n_cols or n_parts out of range. */
#define KERN_MULTI_MAX 4
typedef struct kern_mm_part {
  const kern_packed *packed; /* packed weights, or NULL: the GGUF rows below */
  int type;                  /* enum tensor_type of W */
  const void *W;             /* n_rows x n_cols of type */
  int64_t n_rows;
  float *y;                  /* [n_tokens][n_rows of this part] */
} kern_mm_part;
int kern_matmul_multi(thread_pool *tp, const kern_mm_part *parts, int n_parts, int64_t n_cols, const float *x,
                      int64_t n_tokens);

/* Forces the scalar reference kernels everywhere (tests and `--reference`);
 * also on when the environment has PARLEY_KERNELS=reference at first use. */
void kern_force_reference(bool on);
/* What dispatch chose: "avx512-vnni", "avx2", "neon", "scalar", or
 * "reference" while the reference kernels are forced. */
const char *kern_isa(void);
/* Switches dispatch to the variant named isa ("avx2", "avx512-vnni",
 * "neon", "scalar"), or back to the best one with NULL, so that tests can
 * run every variant the CPU has. Weights packed by kern_pack keep their
 * layout across variants. Not safe while kernels run: call it between
 * calls, from one thread. False (dispatch unchanged) when the CPU lacks
 * the variant. PARLEY_KERNELS=isa at first use does the same. */
bool kern_use_isa(const char *isa);
/* True when kern_matmul has a fast (non-reference) kernel for type on this
 * CPU. */
bool kern_has_fast(int type);

#endif
