/*
 * kern_neon.c - neon tile kernels (placeholder: reports unavailable, so the
 * reference path serves every type until the kernels land).
 */
#include "kernels/kernels_impl.h"

int kern_ops_neon(struct kern_ops *ops) {
  (void)ops;
  return 0;
}
