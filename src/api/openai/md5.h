/*
 * md5.h - MD5 (RFC 1321), only to check the optional `md5` of
 * POST /v1/uploads/{id}/complete against the assembled bytes. Not for
 * anything that needs a secure hash.
 */
#ifndef PARLEY_API_OPENAI_MD5_H
#define PARLEY_API_OPENAI_MD5_H

#include <stddef.h>
#include <stdint.h>

typedef struct openai_md5 {
  uint32_t h[4];     /* chaining state A, B, C, D */
  uint64_t n_bytes;  /* total bytes fed so far */
  uint8_t block[64]; /* pending partial block */
} openai_md5;

void openai_md5_init(openai_md5 *m);
void openai_md5_update(openai_md5 *m, const void *data, size_t len);
/* Writes the digest as 32 lowercase hex digits and a NUL (hex needs 33 bytes). */
void openai_md5_final_hex(openai_md5 *m, char hex[33]);

#endif
