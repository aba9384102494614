/*
 * sha1.c - SHA-1 (FIPS 180-4) and base64, only for the WebSocket handshake's
 * Sec-WebSocket-Accept (RFC 6455 section 4.2.2). SHA-1 is not used for
 * anything that needs collision resistance. Written from the FIPS text.
 */
#include <string.h>

#include "base/err.h"
#include "http/http_int.h"

static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void sha1_block(uint32_t h[5], const uint8_t *p) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999u;
    else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1u;
    else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDCu;
    else f = b ^ c ^ d, k = 0xCA62C1D6u;
    uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d, d = c, c = rol(b, 30), b = a, a = t;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

void sha1_digest(const void *data, size_t len, uint8_t out[20]) {
  uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
  const uint8_t *p = data;
  size_t n = len;
  while (n >= 64) {
    sha1_block(h, p);
    p += 64;
    n -= 64;
  }
  uint8_t tail[128];
  memset(tail, 0, sizeof tail);
  memcpy(tail, p, n);
  tail[n] = 0x80;
  size_t tl = n + 1 + 8 <= 64 ? 64 : 128;
  uint64_t bits = (uint64_t)len * 8;
  for (int i = 0; i < 8; i++) tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
  sha1_block(h, tail);
  if (tl == 128) sha1_block(h, tail + 64);
  for (int i = 0; i < 5; i++) {
    out[4 * i] = (uint8_t)(h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(h[i] >> 8);
    out[4 * i + 3] = (uint8_t)h[i];
  }
}

void base64_encode(const uint8_t *in, size_t n, char *out) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0, i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    out[o++] = tab[v >> 18], out[o++] = tab[(v >> 12) & 63], out[o++] = tab[(v >> 6) & 63], out[o++] = tab[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)in[i] << 16;
    out[o++] = tab[v >> 18], out[o++] = tab[(v >> 12) & 63], out[o++] = '=', out[o++] = '=';
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
    out[o++] = tab[v >> 18], out[o++] = tab[(v >> 12) & 63], out[o++] = tab[(v >> 6) & 63], out[o++] = '=';
  }
  out[o] = '\0';
}

int ws_accept_key(const char *key, char out[29]) {
  static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  char tmp[128 + sizeof guid];
  size_t kl = strlen(key);
  if (kl > 128) return err_set(ERR_INVALID, "Sec-WebSocket-Key is %zu bytes (max 128)", kl);
  memcpy(tmp, key, kl);
  memcpy(tmp + kl, guid, sizeof guid - 1);
  uint8_t d[20];
  sha1_digest(tmp, kl + sizeof guid - 1, d);
  base64_encode(d, 20, out);
  return 0;
}
