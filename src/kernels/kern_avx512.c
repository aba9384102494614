/*
 * kern_avx512.c - avx512 tile kernels (placeholder: reports unavailable, so the
 * reference path serves every type until the kernels land).
 */
#include "kernels/kernels_impl.h"

int kern_ops_avx512(struct kern_ops *ops) {
  (void)ops;
  return 0;
}
