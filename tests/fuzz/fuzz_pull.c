/*
 * fuzz_pull.c - the pure parsers of model/pull.h on hostile input. The first
 * byte picks the target, the rest is its input:
 *   0  pull_ollama_manifest_parse (a registry's manifest)
 *   1  pull_ref_parse (a user's model name) and pull_dir_name of the result
 *   2  pull_hf_select over newline-separated repository paths; the first
 *      line is the quant or, when it starts with '=', a pattern
 * Properties: every accepted manifest layer has a well-formed digest and a
 * non-negative size; an accepted Ollama name always has a folder name that
 * holds no '/' and does not start with '.'; chosen HF indexes are in range
 * and the model shards come first.
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/pull.h"

static void check_manifest(const uint8_t *d, size_t n) {
  pull_layer l[16];
  size_t k = 0;
  if (pull_ollama_manifest_parse((const char *)d, n, l, 16, &k) != 0) return;
  if (k == 0 || k > 16) abort();
  for (size_t i = 0; i < k; i++)
    if (strncmp(l[i].digest, "sha256:", 7) != 0 || strlen(l[i].digest) != 71 || l[i].size < 0) abort();
}

static void check_ref(const uint8_t *d, size_t n) {
  char *s = malloc(n + 1);
  if (!s) return;
  memcpy(s, d, n);
  s[n] = 0;
  char *pat = strchr(s, '\n');
  if (pat) *pat++ = 0;
  pull_ref r;
  if (pull_ref_parse(s, pat, &r) == 0 && r.name[0]) {
    char dir[PULL_NAME_CAP * 2];
    int rc = pull_dir_name(r.name, dir, sizeof dir);
    if (r.src == PULL_SOURCE_OLLAMA && rc != 0) abort();
    if (rc == 0 && (strchr(dir, '/') || dir[0] == '.')) abort();
  }
  free(s);
}

static void check_hf(const uint8_t *d, size_t n) {
  char *s = malloc(n + 1);
  if (!s) return;
  memcpy(s, d, n);
  s[n] = 0;
  const char *paths[64];
  size_t np = 0;
  char *first = s, *nl = strchr(s, '\n');
  if (nl) *nl = 0;
  for (char *p = nl ? nl + 1 : NULL; p && np < 64;) {
    char *e = strchr(p, '\n');
    if (e) *e = 0;
    paths[np++] = p;
    p = e ? e + 1 : NULL;
  }
  const char *quant = first[0] == '=' ? NULL : first;
  const char *pattern = first[0] == '=' ? first + 1 : NULL;
  size_t idx[8], nm = 0, no = 0;
  if (pull_hf_select(paths, np, quant, pattern, idx, 8, &nm, &no) == 0) {
    if (nm == 0 || nm > no || no > 8) abort();
    for (size_t i = 0; i < no; i++)
      if (idx[i] >= np) abort();
  }
  free(s);
}

FUZZ_TARGET(pull) {
  if (size < 1) return 0;
  switch (data[0] % 3) {
  case 0: check_manifest(data + 1, size - 1); break;
  case 1: check_ref(data + 1, size - 1); break;
  default: check_hf(data + 1, size - 1); break;
  }
  return 0;
}
