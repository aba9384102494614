/*
 * md5.c - MD5 after RFC 1321 section 3: 64-byte blocks of 16 little-endian
 * words, four rounds of 16 steps, padding with 0x80, zeros and the bit
 * length as a little-endian 64-bit number. The 64 additive constants are
 * floor(|sin(i + 1)| * 2^32), as the RFC defines them; double precision
 * gives them exactly, so they are computed once rather than typed in.
 */
#include "api/openai/md5.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static uint32_t K[64];
static pthread_once_t K_once = PTHREAD_ONCE_INIT;
static void k_init(void) {
  for (int i = 0; i < 64; i++) K[i] = (uint32_t)floor(fabs(sin((double)(i + 1))) * 4294967296.0);
}

/* Per-step left rotations: four per round, repeated four times. */
static const uint8_t SHIFT[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

static uint32_t rotl(uint32_t x, unsigned s) { return (x << s) | (x >> (32 - s)); }

static void md5_block(uint32_t h[4], const uint8_t *p) {
  uint32_t w[16];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
           (uint32_t)p[4 * i + 3] << 24;
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
  for (int i = 0; i < 64; i++) {
    uint32_t f;
    int g;
    switch (i / 16) {
      case 0: f = (b & c) | (~b & d); g = i; break;
      case 1: f = (d & b) | (~d & c); g = (5 * i + 1) % 16; break;
      case 2: f = b ^ c ^ d; g = (3 * i + 5) % 16; break;
      default: f = c ^ (b | ~d); g = (7 * i) % 16; break;
    }
    f += a + K[i] + w[g];
    a = d;
    d = c;
    c = b;
    b += rotl(f, SHIFT[i / 16][i % 4]);
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d;
}

void openai_md5_init(openai_md5 *m) {
  pthread_once(&K_once, k_init);
  m->h[0] = 0x67452301u, m->h[1] = 0xefcdab89u, m->h[2] = 0x98badcfeu, m->h[3] = 0x10325476u;
  m->n_bytes = 0;
}

void openai_md5_update(openai_md5 *m, const void *data, size_t len) {
  const uint8_t *p = data;
  size_t have = (size_t)(m->n_bytes % 64);
  m->n_bytes += len;
  if (have) {
    size_t take = 64 - have < len ? 64 - have : len;
    memcpy(m->block + have, p, take);
    p += take, len -= take, have += take;
    if (have < 64) return;
    md5_block(m->h, m->block);
  }
  for (; len >= 64; p += 64, len -= 64) md5_block(m->h, p);
  if (len) memcpy(m->block, p, len);
}

void openai_md5_final_hex(openai_md5 *m, char hex[33]) {
  uint64_t bits = m->n_bytes * 8;
  static const uint8_t pad[64] = {0x80};
  size_t have = (size_t)(m->n_bytes % 64);
  openai_md5_update(m, pad, have < 56 ? 56 - have : 120 - have);
  uint8_t len_le[8];
  for (int i = 0; i < 8; i++) len_le[i] = (uint8_t)(bits >> (8 * i));
  openai_md5_update(m, len_le, 8);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) snprintf(hex + 8 * i + 2 * j, 3, "%02x", (unsigned)(m->h[i] >> (8 * j)) & 0xffu);
}
