/*
 * cmd_tokenize.c - `parley tokenize MODEL.gguf TEXT [--json] [--no-special]
 * [--no-bos]`: prints the token ids of TEXT under the model's tokenizer and
 * the piece of text each id stands for. For checking a tokenizer against
 * another implementation, and for debugging prompts.
 *
 *   text mode  one "ID<TAB>PIECE" line per token
 *   --json     {"ids":[...],"pieces":[...]} on one line
 *   --no-special  do not recognise special tokens written in TEXT
 *   --no-bos      do not add BOS/EOS (CLS/SEP) around the ids
 * TEXT "-" reads the text from standard input.
 *
 * Pieces show special tokens as their text. A piece that is not whole UTF-8
 * (a byte token, part of a multi-byte character) shows those bytes as \xNN;
 * in text mode, control characters and the backslash are escaped too (\n,
 * \t, \r, \\), so that every token stays on one line.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/commands.h"
#include "base/buf.h"
#include "base/err.h"
#include "gguf/gguf.h"
#include "tok/tok.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: parley tokenize MODEL.gguf TEXT [--json] [--no-special] [--no-bos]\n"
          "  TEXT          the text to tokenize (\"-\" reads standard input)\n"
          "  --json        print {\"ids\":[...],\"pieces\":[...]}\n"
          "  --no-special  treat special-token text such as <|im_start|> as plain text\n"
          "  --no-bos      do not add the BOS/EOS tokens the model asks for\n");
}

/* Length of the valid UTF-8 character at p (n bytes left), 0 if invalid. */
static size_t utf8_char(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len;
  unsigned lo = 0x80, hi = 0xBF;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3;
  else if (c >= 0xF0 && c <= 0xF4) len = 4;
  else return 0;
  if (c == 0xE0) lo = 0xA0;
  if (c == 0xED) hi = 0x9F;
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F;
  if (len > n || p[1] < lo || p[1] > hi) return 0;
  for (size_t k = 2; k < len; k++)
    if ((p[k] & 0xC0) != 0x80) return 0;
  return len;
}

/* Escapes a piece into valid UTF-8 text (see the file comment). */
static int piece_escape(const char *s, size_t n, bool text_mode, buf *out) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t l = utf8_char(p + i, n - i);
    int rc = 0;
    if (l == 0) {
      rc = buf_appendf(out, "\\x%02X", p[i]);
      l = 1;
    } else if (l == 1 && text_mode && (p[i] < 0x20 || p[i] == 0x7F || p[i] == '\\')) {
      if (p[i] == '\n') rc = buf_append_str(out, "\\n");
      else if (p[i] == '\t') rc = buf_append_str(out, "\\t");
      else if (p[i] == '\r') rc = buf_append_str(out, "\\r");
      else if (p[i] == '\\') rc = buf_append_str(out, "\\\\");
      else rc = buf_appendf(out, "\\x%02X", p[i]);
    } else if (l == 1 && p[i] == 0) {
      rc = buf_append_str(out, "\\x00"); /* keep JSON strings free of NUL */
    } else {
      rc = buf_append(out, s + i, l);
    }
    if (rc) return rc;
    i += l;
  }
  return 0;
}

static int read_stdin(buf *b) {
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
    if (buf_append(b, chunk, n)) return ERR_NOMEM;
  return ferror(stdin) ? err_set(ERR_IO, "reading standard input") : 0;
}

int cmd_tokenize(int argc, char **argv) {
  const char *model = NULL, *text = NULL;
  bool json = false, parse_special = true, add_bos = true;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) json = true;
    else if (strcmp(a, "--no-special") == 0) parse_special = false;
    else if (strcmp(a, "--no-bos") == 0) add_bos = false;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "parley tokenize: unknown option %s\n", a);
      usage(stderr);
      return 2;
    } else if (!model) model = a;
    else if (!text) text = a;
    else {
      fprintf(stderr, "parley tokenize: unexpected argument \"%s\"\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!model || !text) {
    usage(stderr);
    return 2;
  }

  int status = 1;
  buf input = BUF_INIT, line = BUF_INIT;
  gguf_file *gf = NULL;
  tok *t = NULL;
  tok_ids ids = TOK_IDS_INIT;
  json_t *root = NULL;
  size_t text_len = strlen(text);
  if (strcmp(text, "-") == 0) {
    if (read_stdin(&input)) {
      fprintf(stderr, "parley tokenize: %s\n", err_detail());
      goto done;
    }
    text = input.data ? input.data : "";
    text_len = input.len;
  }
  if (gguf_open(model, &gf)) {
    fprintf(stderr, "parley tokenize: cannot open %s: %s\n", model, err_detail());
    goto done;
  }
  if (tok_load(gf, &t)) {
    fprintf(stderr, "parley tokenize: %s: %s\n", model, err_detail());
    goto done;
  }
  unsigned flags = (add_bos ? TOK_ENCODE_ADD_SPECIAL : 0) | (parse_special ? TOK_ENCODE_PARSE_SPECIAL : 0);
  if (tok_encode(t, text, text_len, flags, &ids)) {
    fprintf(stderr, "parley tokenize: %s\n", err_detail());
    goto done;
  }

  json_t *jids = NULL, *jpieces = NULL;
  if (json) {
    root = json_object();
    jids = json_array();
    jpieces = json_array();
    if (!root || !jids || !jpieces || json_object_set_new(root, "ids", jids) ||
        json_object_set_new(root, "pieces", jpieces)) {
      fprintf(stderr, "parley tokenize: out of memory\n");
      goto done;
    }
  }
  buf piece = BUF_INIT;
  for (size_t i = 0; i < ids.n; i++) {
    buf_reset(&piece);
    buf_reset(&line);
    if (tok_decode_piece(t, ids.ids[i], TOK_DECODE_SPECIAL, &piece) ||
        piece_escape(piece.data ? piece.data : "", piece.len, !json, &line)) {
      fprintf(stderr, "parley tokenize: %s\n", err_detail());
      buf_free(&piece);
      goto done;
    }
    if (json) {
      json_array_append_new(jids, json_integer(ids.ids[i]));
      json_array_append_new(jpieces, json_stringn(line.data ? line.data : "", line.len));
    } else {
      printf("%d\t%s\n", (int)ids.ids[i], line.data ? line.data : "");
    }
  }
  buf_free(&piece);
  if (json) {
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!s) {
      fprintf(stderr, "parley tokenize: out of memory\n");
      goto done;
    }
    printf("%s\n", s);
    free(s);
  }
  status = fflush(stdout) == 0 ? 0 : 1;
done:
  json_decref(root);
  tok_ids_free(&ids);
  tok_free(t);
  gguf_close(gf);
  buf_free(&input);
  buf_free(&line);
  return status;
}
