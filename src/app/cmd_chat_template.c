/*
 * cmd_chat_template.c - `parley chat-template`: print exactly the prompt text
 * a model would see for an OpenAI-style chat request body.
 *
 *   parley chat-template (--model MODEL.gguf | --template FILE.jinja)
 *                        --request FILE.json [--chat-template FILE.jinja]
 *                        [--bos TOKEN] [--eos TOKEN] [-v]
 *
 * For users debugging a template and for tests. The request is read as
 * POST /v1/chat/completions reads it (openai_chat_body: roles checked,
 * text parts joined, developer as system, tool_choice, reasoning_effort,
 * chat_template_kwargs, add_generation_prompt, continue_final_message) and
 * rendered by the server's own conversion (gen_chat_render: tool-call
 * arguments parsed to objects, the generic tool prompt for a template that
 * shows no tools), so the text is exactly the prompt the server renders.
 *
 * With --model the template comes from the GGUF file: the
 * tokenizer.chat_template.tool_use variant when the request has tools and the
 * file has that variant, else tokenizer.chat_template, else the default of
 * the model's family (model/family.h); --chat-template FILE overrides all of
 * them. bos_token/eos_token are the vocabulary entries named by
 * tokenizer.ggml.bos_token_id / eos_token_id unless --bos/--eos are given.
 * With --template there is no vocabulary: bos/eos are undefined unless given.
 *
 * Output: the rendered text on stdout, nothing else (no trailing newline is
 * added). -v reports the family, the template's origin and how tools are
 * shown on stderr.
 * Exit status: 0, 1 for an error (message on stderr naming the file and the
 * problem: missing file, JSON line/column, template line:column), 2 for usage.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gen.h"
#include "api/openai/openai.h"
#include "app/commands.h"
#include "base/buf.h"
#include "base/err.h"
#include "gguf/gguf.h"
#include "model/family.h"
#include "tmpl/tmpl.h"

#define CT_MAX_FILE (64u << 20) /* templates and requests larger than this are refused */

static void ct_usage(FILE *out) {
  fputs("usage: parley chat-template (--model MODEL.gguf | --template FILE.jinja) --request FILE.json\n"
        "                            [--chat-template FILE.jinja] [--bos TOKEN] [--eos TOKEN] [-v]\n"
        "Prints the prompt text the model sees for an OpenAI-style chat request body.\n",
        out);
}

/* Reads a whole file; 0 or an error with a message naming the path. */
static int ct_read_file(const char *path, const char *what, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(ERR_IO, "cannot read %s '%s': %s", what, path, strerror(errno));
  buf b = BUF_INIT;
  char tmp[65536];
  size_t n;
  int rc = 0;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) {
    if (b.len + n > CT_MAX_FILE) {
      rc = err_set(ERR_TOO_LARGE, "%s '%s' is larger than %u bytes", what, path, CT_MAX_FILE);
      break;
    }
    if (buf_append(&b, tmp, n)) {
      rc = err_set(ERR_NOMEM, "out of memory reading %s '%s'", what, path);
      break;
    }
  }
  if (!rc && ferror(f)) rc = err_set(ERR_IO, "cannot read %s '%s': %s", what, path, strerror(errno));
  fclose(f);
  if (rc) {
    buf_free(&b);
    return rc;
  }
  *out = buf_detach(&b, len);
  return *out ? 0 : err_set(ERR_NOMEM, "out of memory reading %s '%s'", what, path);
}

/* tokens[key's id] copied NUL-terminated into *out (NULL when absent). */
static int ct_vocab_token(const gguf_file *f, const char *key, char **out) {
  *out = NULL;
  uint32_t id;
  if (gguf_get_u32(f, key, &id) != 0) return 0;
  const gguf_value *toks = NULL;
  if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks) != 0)
    return err_set(ERR_NOT_FOUND, "%s is %u but the file has no tokenizer.ggml.tokens", key, id);
  if (id >= toks->v.arr.n)
    return err_set(ERR_RANGE, "%s is %u, outside the vocabulary of %llu tokens", key, id,
                   (unsigned long long)toks->v.arr.n);
  const gguf_str *s = &toks->v.arr.strs[id];
  *out = malloc(s->len + 1);
  if (!*out) return err_set(ERR_NOMEM, "out of memory");
  memcpy(*out, s->data, s->len);
  (*out)[s->len] = '\0';
  return 0;
}

int cmd_chat_template(int argc, char **argv) {
  const char *model_path = NULL, *tmpl_path = NULL, *request = NULL, *override = NULL, *bos_arg = NULL, *eos_arg = NULL;
  bool verbose = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char **slot = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      ct_usage(stdout);
      return 0;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      verbose = true;
      continue;
    } else if (!strcmp(a, "--model")) slot = &model_path;
    else if (!strcmp(a, "--template")) slot = &tmpl_path;
    else if (!strcmp(a, "--request")) slot = &request;
    else if (!strcmp(a, "--chat-template")) slot = &override;
    else if (!strcmp(a, "--bos")) slot = &bos_arg;
    else if (!strcmp(a, "--eos")) slot = &eos_arg;
    else {
      fprintf(stderr, "parley chat-template: unknown option '%s'\n", a);
      ct_usage(stderr);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "parley chat-template: %s needs a value\n", a);
      return 2;
    }
    *slot = argv[++i];
  }
  if ((!model_path) == (!tmpl_path) || !request) {
    fprintf(stderr, "parley chat-template: give exactly one of --model and --template, and --request\n");
    ct_usage(stderr);
    return 2;
  }
  if (tmpl_path && override) {
    fprintf(stderr, "parley chat-template: --chat-template overrides a model's template; use it with --model\n");
    return 2;
  }

  int rc = 0;
  char *req_text = NULL, *src_owned = NULL, *bos = NULL, *eos = NULL;
  size_t req_len = 0, src_len = 0;
  const char *src = NULL, *origin = NULL;
  json_t *req = NULL;
  gguf_file *gf = NULL;
  tmpl *t = NULL;
  gen_chat_template ct = {0};
  buf out = BUF_INIT;
  gen_request creq;
  gen_request_init(&creq);

  /* the request */
  if ((rc = ct_read_file(request, "request file", &req_text, &req_len))) goto fail;
  json_error_t jerr;
  req = json_loadb(req_text, req_len, 0, &jerr);
  if (!req) {
    rc = err_set(ERR_PARSE, "request file '%s' is not valid JSON: line %d, column %d: %s", request, jerr.line,
                 jerr.column, jerr.text);
    goto fail;
  }
  if (!json_is_object(req)) {
    rc = err_set(ERR_INVALID, "request file '%s' must hold a JSON object (a chat request body)", request);
    goto fail;
  }
  if ((rc = openai_chat_body(req, &creq))) {
    char d[512];
    snprintf(d, sizeof d, "%s", err_detail());
    rc = err_set(rc, "request file '%s': %s", request, d);
    goto fail;
  }
  gen_chat chat = creq.chat;
  bool has_tools = json_array_size(chat.tools) > 0;
  bool measured = true; /* the template's facts: measured here, or family detection's */

  /* the template */
  if (model_path) {
    if ((rc = gguf_open(model_path, &gf))) {
      char d[512];
      snprintf(d, sizeof d, "%s", err_detail());
      rc = err_set(rc, "cannot open model '%s': %s", model_path, d);
      goto fail;
    }
    family_info fam;
    if ((rc = family_detect(gf, &fam))) goto fail;
    if (override) {
      if ((rc = ct_read_file(override, "chat template", &src_owned, &src_len))) goto fail;
      src = src_owned;
      origin = override;
    } else if ((rc = family_chat_template(gf, &fam, has_tools, &src, &origin))) {
      goto fail;
    } else {
      src_len = strlen(src);
      measured = false;
    }
    if (!bos_arg && (rc = ct_vocab_token(gf, "tokenizer.ggml.bos_token_id", &bos))) goto fail;
    if (!eos_arg && (rc = ct_vocab_token(gf, "tokenizer.ggml.eos_token_id", &eos))) goto fail;
    ct.renders_tools = (fam.caps & FAMILY_CAP_TOOLS) != 0;
    ct.renders_system = fam.template_renders_system;
    if (verbose) {
      char caps[256];
      family_caps_str(fam.caps, caps, sizeof caps);
      fprintf(stderr, "family: %s (%s), architecture '%s'%s, capabilities: %s\ntemplate: %s\n", fam.display,
              fam.name, fam.arch, fam.executable ? "" : " (not executable)", caps, origin);
    }
  } else {
    if ((rc = ct_read_file(tmpl_path, "template file", &src_owned, &src_len))) goto fail;
    src = src_owned;
    origin = tmpl_path;
  }
  if (bos_arg) bos = strdup(bos_arg);
  if (eos_arg) eos = strdup(eos_arg);
  if ((bos_arg && !bos) || (eos_arg && !eos)) {
    rc = err_set(ERR_NOMEM, "out of memory");
    goto fail;
  }

  if ((rc = tmpl_compile(src, src_len, &t))) {
    char d[512];
    snprintf(d, sizeof d, "%s", err_detail());
    rc = err_set(rc, "chat template %s: %s", origin, d);
    goto fail;
  }
  ct.chat = t;
  ct.bos = bos;
  ct.eos = eos;
  if (measured) gen_chat_template_measure(&ct);
  if (verbose && has_tools)
    fprintf(stderr, "tools: %s\n", ct.renders_tools ? "shown by the template"
                                                    : "the generic tool prompt (the template shows none)");
  if ((rc = gen_chat_render(&ct, &chat, &out))) {
    char d[512];
    snprintf(d, sizeof d, "%s", err_detail());
    rc = err_set(rc, "rendering chat template %s: %s", origin, d);
    goto fail;
  }
  if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) {
    rc = err_set(ERR_IO, "cannot write the prompt to stdout: %s", strerror(errno));
    goto fail;
  }
  if (fflush(stdout) != 0) rc = err_set(ERR_IO, "cannot write the prompt to stdout: %s", strerror(errno));

fail:
  if (rc) fprintf(stderr, "parley chat-template: %s\n", err_detail());
  buf_free(&out);
  gen_request_free(&creq);
  tmpl_free(t);
  gguf_close(gf);
  json_decref(req);
  free(req_text);
  free(src_owned);
  free(bos);
  free(eos);
  return rc ? 1 : 0;
}
