/*
 * fuzz_ollama_gotmpl.c - libFuzzer harness for the Ollama Go-template
 * subset (api/ollama/gotmpl.c), which renders the `template` field of
 * /api/generate and a created model's TEMPLATE: any input must render or
 * fail with ERR_PARSE, and a rendering never holds more text than the
 * template plus the variables it can insert.
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/ollama/ollama.h"
#include "base/buf.h"


FUZZ_TARGET(ollama_gotmpl) {
  char *t = malloc(size + 1);
  if (!t) return 0;
  memcpy(t, data, size);
  t[size] = '\0';
  static const char sys[] = "SYS", prompt[] = "PROMPT", suffix[] = "SUF";
  buf out = BUF_INIT;
  if (ollama_gotmpl_render(t, sys, prompt, suffix, &out) == 0) {
    /* each action inserts at most one variable (6 bytes) and is >= 4 bytes */
    size_t n_actions = 0;
    for (const char *p = t; (p = strstr(p, "{{")) != NULL; p += 2) n_actions++;
    if (out.len > strlen(t) + 6 * n_actions) abort();
  }
  buf_free(&out);
  free(t);
  return 0;
}
