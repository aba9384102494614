/*
 * multi.c - kern_matmul_multi: several matrix products that read the same
 * input x (a layer's Q, K and V projections; its FFN gate and up) in one
 * thread-pool job instead of one job each.
 *
 * Why: in generation (one token) every pool job costs a wake-up of the
 * workers, a barrier at its end, where threads wait for the slowest, and
 * the activation quantization done by thread 0 alone while the others
 * spin. Three jobs for Q, K, V (and two for gate, up) paid that three (two)
 * times per layer and quantized the same x three (two) times.
 *
 * How: each part is set up exactly as kern_matmul (kern_mm_setup) or
 * kern_matmul_packed (kern_pk_setup) would set it up; x is quantized once
 * per distinct activation format (a Q4_K_M layer's Q4_K q, k and Q6_K v need
 * two); the parts' rows form one row space in units of KERN_PACK_ROWS rows
 * (a packed group; 8 rows of GGUF rows, the last unit of a part possibly
 * short), split by the same kern_split plan as the single products, so a
 * thread's chunk may span the end of one matrix and the start of the next.
 * When a packed part's tile takes two groups at a time, every part starts
 * at an even unit (an empty unit after a part of odd length) and the plan
 * cuts at even units only (kern_pk_align), so no chunk splits a pair.
 * Every (row, token) result is computed by the same rect function with the
 * same activations as the separate call would use, and a rect's per-element
 * arithmetic does not depend on the chunk (kernels_impl.h), so results are
 * bit-identical to separate kern_matmul / kern_matmul_packed calls.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"

struct multi_part {
  bool packed;
  struct kern_mm mm; /* !packed */
  struct kern_pk pk; /* packed */
  int64_t n_rows;
  int64_t u0, n_units; /* its units in the job's row space */
  int act;             /* index of its activation format in the job (-1: none) */
};

struct multi_job {
  struct multi_part part[KERN_MULTI_MAX];
  int n_parts;
  struct kern_split split;
  atomic_int failed; /* reference path of a packed part: no row buffer */
};

static void multi_worker(void *arg, int ith, int nth) {
  (void)ith;
  (void)nth;
  struct multi_job *j = arg;
  int64_t u0, u1, t0, t1;
  while (kern_split_next(&j->split, &u0, &u1, &t0, &t1)) {
    for (int i = 0; i < j->n_parts; i++) {
      const struct multi_part *p = &j->part[i];
      int64_t a = u0 > p->u0 ? u0 : p->u0, b = u1 < p->u0 + p->n_units ? u1 : p->u0 + p->n_units;
      if (a >= b) continue;
      a -= p->u0;
      b -= p->u0;
      if (p->packed) {
        kern_pk_rect(&p->pk, a, b, t0, t1);
      } else {
        int64_t r1 = b * KERN_PACK_ROWS < p->n_rows ? b * KERN_PACK_ROWS : p->n_rows;
        kern_mm_rect(&p->mm, a * KERN_PACK_ROWS, r1, t0, t1);
      }
    }
  }
}

int kern_matmul_multi(thread_pool *tp, const kern_mm_part *parts, int n_parts, int64_t n_cols, const float *x,
                      int64_t n_tokens) {
  if (n_parts < 1 || n_parts > KERN_MULTI_MAX)
    return err_set(ERR_RANGE, "matmul: %d products in one call (1..%d)", n_parts, KERN_MULTI_MAX);
  struct multi_job j;
  memset(&j, 0, sizeof j);
  j.n_parts = n_parts;
  atomic_init(&j.failed, 0);
  /* distinct activation formats: quantizer and bytes per token */
  kern_quant_fn fmt_fn[KERN_MULTI_MAX];
  size_t fmt_stride[KERN_MULTI_MAX], fmt_off[KERN_MULTI_MAX], total = 0;
  int n_fmt = 0, tnt = 1;
  int64_t n_units = 0, align = 1;
  for (int i = 0; i < n_parts; i++) {
    struct multi_part *p = &j.part[i];
    kern_quant_fn q;
    size_t stride;
    int rc, ptnt;
    if (parts[i].packed) {
      p->packed = true;
      rc = kern_pk_setup(&p->pk, parts[i].packed, x, n_tokens, parts[i].y);
      if (!rc && p->pk.n_cols != n_cols)
        rc = err_set(ERR_RANGE, "matmul: packed weights of %lld columns, x has %lld", (long long)p->pk.n_cols,
                     (long long)n_cols);
      p->pk.failed = &j.failed;
      p->n_rows = p->pk.n_rows;
      q = p->pk.quant;
      stride = p->pk.xa_stride;
      ptnt = p->pk.tnt;
    } else {
      rc = kern_mm_setup(&p->mm, parts[i].type, parts[i].W, parts[i].n_rows, n_cols, x, n_tokens, parts[i].y);
      p->n_rows = parts[i].n_rows;
      q = p->mm.quant;
      stride = p->mm.xa_stride;
      ptnt = p->mm.tnt;
    }
    if (rc) {
      char why[200];
      snprintf(why, sizeof why, "%s", err_detail());
      return err_set(rc, "product %d of %d: %s", i + 1, n_parts, why);
    }
    p->n_units = (p->n_rows + KERN_PACK_ROWS - 1) / KERN_PACK_ROWS;
    if (p->packed && kern_pk_align(&p->pk) > align) align = kern_pk_align(&p->pk);
    if (ptnt > tnt) tnt = ptnt;
    p->act = -1;
    if (!q) continue;
    for (int f = 0; f < n_fmt && p->act < 0; f++)
      if (fmt_fn[f] == q && fmt_stride[f] == stride) p->act = f;
    if (p->act < 0) {
      size_t bytes = stride * (size_t)n_tokens; /* checked by the setup */
      fmt_fn[n_fmt] = q;
      fmt_stride[n_fmt] = stride;
      fmt_off[n_fmt] = total;
      total += (bytes + 63) & ~(size_t)63;
      p->act = n_fmt++;
    }
  }
  for (int i = 0; i < n_parts; i++) { /* the parts' places in the row space */
    j.part[i].u0 = (n_units + align - 1) / align * align;
    n_units = j.part[i].u0 + j.part[i].n_units;
  }
  if (n_tokens == 0 || n_units == 0) return 0;
  if (n_fmt) {
    uint8_t *scratch = kern_act_scratch(tp, total ? total : 1);
    if (!scratch) return err_set(ERR_NOMEM, "matmul: %zu bytes of quantized activations", total);
    for (int f = 0; f < n_fmt; f++)
      kern_quant_rows(tp, fmt_fn[f], x, n_tokens, n_cols, scratch + fmt_off[f], fmt_stride[f]);
    for (int i = 0; i < n_parts; i++) {
      struct multi_part *p = &j.part[i];
      if (p->act < 0) continue;
      if (p->packed) {
        p->pk.xq = scratch + fmt_off[p->act];
      } else {
        p->mm.xq = scratch + fmt_off[p->act];
        p->mm.xa = p->mm.xq;
      }
    }
  }
  size_t wbytes = 0; /* weight bytes of all parts, for the mean bytes per unit */
  for (int i = 0; i < n_parts; i++)
    wbytes += j.part[i].packed ? kern_packed_bytes(j.part[i].pk.p)
                               : j.part[i].mm.row_bytes * (size_t)j.part[i].n_rows;
  kern_split_plan(&j.split, tpool_n_threads(tp), n_units, kern_split_min_units(wbytes / (size_t)n_units, n_tokens),
                  align, n_tokens, tnt);
  tpool_run(tp, multi_worker, &j);
  if (atomic_load(&j.failed)) return err_set(ERR_NOMEM, "matmul: a row buffer for the reference path");
  return 0;
}
