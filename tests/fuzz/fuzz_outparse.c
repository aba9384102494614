/*
 * fuzz_outparse.c - libFuzzer harness for the streaming output parsers: the
 * first byte picks the format and whether a <think> block is open, the
 * second the chunk size; the rest is model output fed in those chunks. Any
 * output must give events or a clean ERR_*, with bounded memory, and every
 * event must be well formed (tool calls carry an id and a name).
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdlib.h>

#include "tmpl/outparse.h"


static void check_event(void *ctx, const outparse_event *ev) {
  (void)ctx;
  if (ev->kind == OUTPARSE_TOOL_CALL_BEGIN && (!ev->id || !ev->name)) abort();
  if ((ev->kind == OUTPARSE_TEXT || ev->kind == OUTPARSE_REASONING) && ev->len && !ev->text) abort();
}

FUZZ_TARGET(outparse) {
  if (size < 2) return 0;
  outparse_config cfg = {0};
  cfg.format = (enum outparse_format)(data[0] % OUTPARSE_FORMAT_COUNT_);
  if (data[0] & 0x80) {
    cfg.think_open = "<think>";
    cfg.think_close = "</think>";
    cfg.starts_in_reasoning = (data[0] & 0x40) != 0;
  }
  cfg.tools_enabled = true;
  size_t chunk = (size_t)(data[1] % 16) + 1;
  outparse *p = NULL;
  if (outparse_new(&cfg, check_event, NULL, &p) != 0) return 0;
  const char *text = (const char *)data + 2;
  size_t n = size - 2;
  for (size_t off = 0; off < n; off += chunk) {
    size_t len = n - off < chunk ? n - off : chunk;
    if (outparse_feed(p, text + off, len) != 0) break;
  }
  outparse_finish(p);
  outparse_free(p);
  return 0;
}
