/*
 * generate.c - POST /api/generate, and the Ollama renderer of the canonical
 * generation layer shared with /api/chat.
 *
 * Request path (generate): check the fields (raw vs template/system/context,
 * images, suffix, think, format, options, keep_alive), then
 *   - empty prompt: load only (`done_reason: "load"`), or with keep_alive 0
 *     unload without loading (`"unload"`);
 *   - raw: the prompt tokenized verbatim;
 *   - template given (or a created model's TEMPLATE): the Go-template
 *     subset of gotmpl.c with .System/.Prompt/.Suffix;
 *   - suffix: the vocabulary's fill-in-the-middle tokens;
 *   - otherwise a one-turn conversation (system + user) through the model's
 *     own chat template (gen_chat_prompt), as Ollama renders .Prompt.
 * `context` token ids are prepended (their text came from a previous
 * answer). Then gen_run with the sink below.
 *
 * Response path: streamed records {model, created_at, response|message,
 * done:false} per delta (thinking in `thinking`), tool calls as complete
 * objects once their arguments end, then one `done:true` record with
 * done_reason, context (generate, not raw) and the six timings in
 * nanoseconds; not streamed, the same final record carrying the whole text.
 * An error after the stream began is a final {"error": ...} line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"

struct ol {
  ollama_run run;
  char *model;
  tok_ids prompt;       /* for `context` */
  json_t *logprobs;     /* not streamed: every entry; streamed: pending */
  json_t *calls;        /* not streamed: collected tool calls */
};

static void ol_free(void *ctx) {
  struct ol *o = ctx;
  if (!o) return;
  free(o->model);
  tok_ids_free(&o->prompt);
  json_decref(o->logprobs);
  json_decref(o->calls);
  free(o);
}

/* {model, created_at} plus the body of a record. */
static json_t *record(struct ol *o, const char *text, size_t len, const char *thinking, size_t tlen) {
  char ts[48];
  ollama_time(ollama_now_ns(), ts, sizeof ts);
  json_t *r = json_pack("{s:s, s:s}", "model", o->model, "created_at", ts);
  if (!r) return NULL;
  if (o->run.kind == OLLAMA_CHAT) {
    json_t *m = json_pack("{s:s, s:s%}", "role", "assistant", "content", text ? text : "", text ? len : 0);
    if (m && thinking && tlen) json_object_set_new(m, "thinking", json_stringn(thinking, tlen));
    json_object_set_new(r, "message", m ? m : json_object());
  } else {
    json_object_set_new(r, "response", json_stringn(text ? text : "", text ? len : 0));
    if (thinking && tlen) json_object_set_new(r, "thinking", json_stringn(thinking, tlen));
  }
  return r;
}

static int send_record(gen_job *j, struct ol *o, json_t *r) {
  if (!r) return ERR_NOMEM;
  json_object_set_new(r, "done", json_false());
  if (o->logprobs && json_array_size(o->logprobs)) {
    json_object_set(r, "logprobs", o->logprobs);
    json_decref(o->logprobs);
    o->logprobs = json_array();
  }
  int rc = gen_job_write_ndjson(j, r);
  json_decref(r);
  return rc;
}

static int ol_text(void *ctx, gen_job *j, int choice, bool reasoning, const char *text, size_t len) {
  (void)choice;
  struct ol *o = ctx;
  if (reasoning && o->run.think_off) return 0;
  json_t *r = reasoning ? record(o, "", 0, text, len) : record(o, text, len, NULL, 0);
  return send_record(j, o, r);
}

/* "call_" + 8 lowercase alphanumerics (the prefix clients look for). */
static void call_id(char out[16]) {
  static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char rnd[8];
  if (rand_bytes(rnd, sizeof rnd)) memset(rnd, 7, sizeof rnd);
  memcpy(out, "call_", 5);
  for (int i = 0; i < 8; i++) out[5 + i] = al[rnd[i] % 36];
  out[13] = '\0';
}

/* One Ollama tool call from a canonical one (arguments text -> object). */
static json_t *tool_call(const json_t *canon, int index) {
  const json_t *fn = json_object_get(canon, "function");
  const char *args = json_string_value(json_object_get(fn, "arguments"));
  json_t *obj = args && *args ? json_loads(args, JSON_DECODE_ANY, NULL) : json_object();
  if (!json_is_object(obj)) { /* not an object: keep the text where clients look */
    json_decref(obj);
    obj = json_pack("{s:s}", "value", args ? args : "");
  }
  char id[16];
  call_id(id);
  const char *name = json_string_value(json_object_get(fn, "name"));
  return json_pack("{s:s, s:{s:i, s:s, s:o}}", "id", id, "function", "index", index, "name", name ? name : "",
                   "arguments", obj ? obj : json_object());
}

static int ol_tool_end(void *ctx, gen_job *j, int choice, int tool_index) {
  struct ol *o = ctx;
  const gen_result *res = gen_job_result(j);
  const json_t *canon = json_array_get(res->ch[choice].tool_calls, (size_t)tool_index);
  if (!canon || o->run.kind != OLLAMA_CHAT) return 0;
  json_t *r = record(o, "", 0, NULL, 0);
  json_t *call = tool_call(canon, tool_index);
  if (r && call) json_object_set_new(json_object_get(r, "message"), "tool_calls", json_pack("[o]", call));
  else json_decref(call);
  return send_record(j, o, r);
}

/* {token, logprob, bytes, top_logprobs} per sampled token. */
static json_t *logprob_entry(const tok *t, const sample_result *r, int32_t n_top) {
  buf piece = BUF_INIT;
  json_t *e = NULL, *top = json_array();
  for (int32_t k = -1; top && k < n_top && k < r->n_top; k++) {
    int32_t id = k < 0 ? r->token : r->top[k].token;
    float lp = k < 0 ? r->logprob : r->top[k].logprob;
    buf_reset(&piece);
    tok_decode_piece(t, id, 0, &piece);
    json_t *bytes = json_array();
    for (size_t i = 0; bytes && i < piece.len; i++) json_array_append_new(bytes, json_integer((unsigned char)piece.data[i]));
    json_t *s = json_stringn(piece.data ? piece.data : "", piece.len);
    json_t *item = json_pack("{s:o, s:f, s:o}", "token", s ? s : json_string(""), "logprob",
                             isfinite(lp) ? (double)lp : -9999.0, "bytes", bytes ? bytes : json_array());
    if (k < 0) e = item;
    else if (item) json_array_append_new(top, item);
  }
  buf_free(&piece);
  if (!e) {
    json_decref(top);
    return NULL;
  }
  if (n_top > 0) json_object_set_new(e, "top_logprobs", top);
  else json_decref(top);
  return e;
}

static int ol_logprobs(void *ctx, gen_job *j, int choice, const sample_result *r, size_t n) {
  (void)choice;
  struct ol *o = ctx;
  if (!o->run.logprobs) return 0;
  if (!o->logprobs) o->logprobs = json_array();
  for (size_t i = 0; o->logprobs && i < n; i++)
    json_array_append_new(o->logprobs, logprob_entry(gen_job_model(j)->t, &r[i], o->run.top_logprobs));
  return 0;
}

static int64_t at_least_1(int64_t v) { return v > 0 ? v : 1; }

/* The final record: done_reason, context, timings. */
static json_t *final_record(struct ol *o, const gen_result *r, gen_job *j) {
  const gen_choice *c = r->n ? &r->ch[0] : NULL;
  bool stream = o->run.stream;
  json_t *rec = stream || !c ? record(o, "", 0, NULL, 0)
                             : record(o, c->content.data, c->content.len, c->reasoning.data,
                                      o->run.think_off ? 0 : c->reasoning.len);
  if (!rec) return NULL;
  if (!stream && o->run.kind == OLLAMA_CHAT && c && gen_choice_has_calls(c)) {
    json_t *calls = json_array();
    size_t i;
    json_t *canon;
    json_array_foreach(c->tool_calls, i, canon) json_array_append_new(calls, tool_call(canon, (int)i));
    json_object_set_new(json_object_get(rec, "message"), "tool_calls", calls);
  }
  json_object_set_new(rec, "done", json_true());
  json_object_set_new(rec, "done_reason", json_string(c && c->finish == ENGINE_FINISH_LENGTH ? "length" : "stop"));
  if (o->run.context && c) {
    json_t *ctxa = json_array();
    for (size_t i = 0; ctxa && i < o->prompt.n; i++) json_array_append_new(ctxa, json_integer(o->prompt.ids[i]));
    for (size_t i = 0; ctxa && i < c->n_tokens; i++) json_array_append_new(ctxa, json_integer(c->tokens[i]));
    if (ctxa) json_object_set_new(rec, "context", ctxa);
  }
  uint64_t first = r->t_first_ns ? r->t_first_ns : r->t_end_ns;
  json_object_set_new(rec, "total_duration", json_integer(at_least_1((int64_t)(r->t_end_ns - o->run.t0_ns))));
  json_object_set_new(rec, "load_duration", json_integer(at_least_1((int64_t)o->run.load_ns)));
  if (r->n_prompt) json_object_set_new(rec, "prompt_eval_count", json_integer(r->n_prompt));
  json_object_set_new(rec, "prompt_eval_duration", json_integer(at_least_1((int64_t)(first - r->t_start_ns))));
  if (r->n_completion) json_object_set_new(rec, "eval_count", json_integer(r->n_completion));
  json_object_set_new(rec, "eval_duration", json_integer(at_least_1((int64_t)(r->t_end_ns - first))));
  if (o->logprobs && json_array_size(o->logprobs)) json_object_set(rec, "logprobs", o->logprobs);
  (void)j;
  return rec;
}

static void ol_end(void *ctx, gen_job *j, const gen_result *r) {
  struct ol *o = ctx;
  if (r->err_code) {
    const char *msg = r->err_msg ? r->err_msg : err_message(r->err_code);
    if (!o->run.stream) {
      api_error(gen_job_req(j), 0, r->err_code, msg, NULL);
      return;
    }
    json_t *e = json_pack("{s:s}", "error", msg);
    if (e) gen_job_write_ndjson(j, e);
    json_decref(e);
    return;
  }
  json_t *rec = final_record(o, r, j);
  if (!rec) {
    if (!o->run.stream) api_error(gen_job_req(j), 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  if (o->run.stream) gen_job_write_ndjson(j, rec);
  else ollama_json(gen_job_req(j), 200, rec);
  json_decref(rec);
}

static const gen_sink ol_sink = {
    .on_text = ol_text,
    .on_tool_end = ol_tool_end,
    .on_logprobs = ol_logprobs,
    .on_end = ol_end,
    .free = ol_free,
};

void ollama_generate_run(http_req *req, manager_model *mm, gen_params *g, const tok_ids *ids,
                         const outparse_config *pc, const ollama_run *run) {
  struct ol *o = calloc(1, sizeof *o);
  if (o) {
    o->run = *run;
    o->model = str_dup(run->model ? run->model : mm->name);
    o->run.model = NULL;
    if (run->context)
      for (size_t i = 0; i < ids->n; i++)
        if (tok_ids_push(&o->prompt, ids->ids[i])) break;
  }
  if (!o || !o->model || (run->context && o->prompt.n != ids->n)) {
    ol_free(o);
    gen_params_free(g);
    manager_release(mm);
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  g->er.logprobs = run->logprobs;
  g->er.sample.n_logprobs = run->logprobs ? run->top_logprobs : 0;
  gen_opts opts = {.stream = run->stream,
                   .stream_kind = HTTP_STREAM_NDJSON,
                   .content_type = "application/x-ndjson",
                   .prompt_param = run->kind == OLLAMA_CHAT ? "messages" : "prompt"};
  gen_run(req, mm, g, ids, pc, &opts, &ol_sink, o);
}

void ollama_answer_load(http_req *req, enum ollama_kind kind, const char *mname, const char *reason) {
  char ts[48];
  ollama_time(ollama_now_ns(), ts, sizeof ts);
  json_t *r = kind == OLLAMA_CHAT
                  ? json_pack("{s:s, s:s, s:{s:s, s:s}, s:b, s:s}", "model", mname, "created_at", ts, "message", "role",
                              "assistant", "content", "", "done", 1, "done_reason", reason)
                  : json_pack("{s:s, s:s, s:s, s:b, s:s}", "model", mname, "created_at", ts, "response", "", "done",
                              1, "done_reason", reason);
  if (r) ollama_json(req, 200, r);
  else api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
  json_decref(r);
}

bool ollama_debug_render(http_req *req, const json_t *body, const manager_model *mm, enum ollama_kind kind,
                         const char *name, const tok_ids *ids) {
  if (!json_is_true(json_object_get(body, "_debug_render_only"))) return false;
  buf text = BUF_INIT;
  tok_decode(mm->t, ids->ids, ids->n, TOK_DECODE_SPECIAL | TOK_DECODE_STRIP_SPACE, &text);
  char ts[48];
  ollama_time(ollama_now_ns(), ts, sizeof ts);
  json_t *r = json_pack("{s:s, s:s, s:b, s:{s:s%, s:i}}", "model", name, "created_at", ts, "done", 1, "_debug_info",
                        "rendered_template", text.data ? text.data : "", text.len, "image_count", 0);
  if (r && kind == OLLAMA_CHAT) json_object_set_new(r, "message", json_pack("{s:s, s:s}", "role", "assistant", "content", ""));
  else if (r) json_object_set_new(r, "response", json_string(""));
  if (r) ollama_json(req, 200, r);
  else ollama_err(req, 500, ERR_NOMEM, "out of memory");
  json_decref(r);
  buf_free(&text);
  return true;
}

void ollama_error_manager(http_req *req, int rc, const char *name) {
  if (rc == ERR_NOT_FOUND) ollama_err(req, 404, rc, "model '%s' not found", name ? name : "");
  else if (rc == ERR_OVERLOADED) /* busy models hold the memory another load needs */
    ollama_err(req, 503, rc, "server busy, please try again: %s", err_detail());
  else api_error(req, 0, rc, err_detail(), NULL);
}

/* ---- fill in the middle -------------------------------------------------- */

/* The prefix/suffix/middle tokens of the vocabulary, when it has a set. */
static bool fim_tokens(const tok *t, int32_t out[3]) {
  static const char *const sets[][3] = {
      {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},
      {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
      {"<PRE>", "<SUF>", "<MID>"},
      {"<|fim_begin|>", "<|fim_hole|>", "<|fim_end|>"},
      {"[PREFIX]", "[SUFFIX]", "[MIDDLE]"},
  };
  for (size_t s = 0; s < ARRAY_LEN(sets); s++) {
    bool all = true;
    for (int k = 0; k < 3 && all; k++) all = (out[k] = tok_lookup(t, sets[s][k], strlen(sets[s][k]))) >= 0;
    if (all) return true;
  }
  return false;
}

/* PRE prompt SUF suffix MID, with the BOS the vocabulary wants. */
static int fim_prompt(const tok *t, const char *prompt, const char *suffix, tok_ids *ids) {
  int32_t f[3];
  if (!fim_tokens(t, f)) return err_set(ERR_UNSUPPORTED, "the vocabulary has no fill-in-the-middle tokens");
  int32_t bos = tok_special(t, TOK_SPECIAL_BOS);
  int rc = 0;
  if (tok_add_bos(t) && bos >= 0) rc = tok_ids_push(ids, bos);
  if (!rc) rc = tok_ids_push(ids, f[0]);
  if (!rc) rc = tok_encode(t, prompt, strlen(prompt), 0, ids);
  if (!rc) rc = tok_ids_push(ids, f[1]);
  if (!rc) rc = tok_encode(t, suffix, strlen(suffix), 0, ids);
  if (!rc) rc = tok_ids_push(ids, f[2]);
  return rc;
}

/* ---- the handler ----------------------------------------------------------- */

/* A string field, "" when absent; 400 when of another type. */
static int opt_str(http_req *req, const json_t *body, const char *key, const char **out) {
  *out = "";
  int rc = api_json_str(body, "", key, false, out);
  if (rc == ERR_NOT_FOUND) {
    *out = "";
    return 0;
  }
  if (rc) api_error_last(req, rc, key);
  return rc;
}

int ollama_logprobs_fields(const json_t *body, bool *lp, int32_t *top) {
  *lp = false;
  *top = 0;
  const json_t *t = json_object_get(body, "top_logprobs");
  if (t && !json_is_null(t)) {
    if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > 20)
      return err_set(ERR_RANGE, "top_logprobs must be between 0 and 20");
    *top = (int32_t)json_integer_value(t);
  }
  int rc = api_json_bool(body, "", "logprobs", false, lp);
  if (rc && rc != ERR_NOT_FOUND) return rc;
  if (*top > 0) *lp = true;
  return 0;
}

void ollama_generate(http_req *req, void *ctx) {
  ollama_ctx *oc = ctx;
  uint64_t t0 = time_mono_ns();
  json_t *body = ollama_body(req);
  if (!body) return;
  manager_model *mm = NULL;
  json_t *over = NULL, *msgs = NULL;
  tok_ids ids = TOK_IDS_INIT;
  gen_params g;
  ollama_params_init(&g);
  buf text = BUF_INIT;
  const char *mname = NULL, *prompt, *suffix, *system, *tmpl_text;
  bool raw = false, stream = true, lp = false, ka_set = false;
  int32_t top = 0;
  int64_t ka_ms = 0;
  int think = -1;
  enum gen_effort effort = GEN_EFFORT_DEFAULT;
  int rc = api_json_str(body, "", "model", false, &mname);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "model");
    goto done;
  }
  if ((rc = ollama_logprobs_fields(body, &lp, &top))) {
    ollama_answer(req, rc);
    goto done;
  }
  if (!mname || !*mname) {
    ollama_err(req, 404, ERR_NOT_FOUND, "model '' not found");
    goto done;
  }
  if (!ollama_name_valid(mname)) {
    ollama_err(req, 400, ERR_INVALID, "invalid model name");
    goto done;
  }
  if (opt_str(req, body, "prompt", &prompt) || opt_str(req, body, "suffix", &suffix) ||
      opt_str(req, body, "system", &system) || opt_str(req, body, "template", &tmpl_text))
    goto done;
  rc = api_json_bool(body, "", "raw", false, &raw);
  if (rc && rc != ERR_NOT_FOUND) {
    api_error_last(req, rc, "raw");
    goto done;
  }
  const json_t *context = json_object_get(body, "context");
  if (context && !json_is_null(context) && !json_is_array(context)) {
    ollama_err(req, 400, ERR_TYPE, "context: expected array of token ids, got %s", api_json_type_name(context));
    goto done;
  }
  bool has_context = json_array_size(context) > 0;
  if (raw && (*tmpl_text || *system || has_context)) {
    ollama_err(req, 400, ERR_INVALID, "raw mode does not support template, system, or context");
    goto done;
  }
  const json_t *images = json_object_get(body, "images");
  if (images && !json_is_null(images) && !json_is_array(images)) {
    ollama_err(req, 400, ERR_TYPE, "images: expected array of base64 strings, got %s", api_json_type_name(images));
    goto done;
  }
  for (size_t i = 0; i < json_array_size(images); i++) {
    const json_t *im = json_array_get(images, i);
    if (!json_is_string(im) || !ollama_base64_valid(json_string_value(im), json_string_length(im))) {
      ollama_err(req, 400, ERR_INVALID, "images[%zu]: illegal base64 data", i);
      goto done;
    }
  }
  if ((rc = ollama_stream(body, &stream)) || (rc = ollama_think(json_object_get(body, "think"), &think, &effort)) ||
      (rc = ollama_keep_alive(json_object_get(body, "keep_alive"), &ka_set, &ka_ms)) ||
      (rc = ollama_format(json_object_get(body, "format"), &g))) {
    ollama_answer(req, rc);
    goto done;
  }
  over = ollama_overlay_get(oc, mname);
  if ((over && (rc = ollama_options(json_object_get(over, "parameters"), &g))) ||
      (rc = ollama_options(json_object_get(body, "options"), &g))) {
    ollama_answer(req, rc);
    goto done;
  }

  /* keep_alive 0 with nothing to generate: unload without loading */
  if (!*prompt && !*suffix && ka_set && ka_ms == 0) {
    ollama_model_unload(oc, mname);
    ollama_answer_load(req, OLLAMA_GENERATE, mname, "unload");
    goto done;
  }
  uint64_t tl = time_mono_ns();
  if ((rc = ollama_model_get(oc, mname, ka_set, ka_ms, &mm))) {
    ollama_error_manager(req, rc, mname);
    goto done;
  }
  uint64_t load_ns = time_mono_ns() - tl;
  if (!mm->eng) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support generate", mname);
    goto done;
  }
  if (think == 1 && !(mm->fam.caps & FAMILY_CAP_REASONING)) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support thinking", mname);
    goto done;
  }
  if (json_array_size(images) && !(mm->fam.caps & FAMILY_CAP_VISION)) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "\"%s\" does not support images (images[0]): the model has no vision input",
               mname);
    goto done;
  }
  if (json_array_size(images)) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "images: image input is not supported by parley's runtime yet");
    goto done;
  }
  if (!*prompt && !*suffix) {
    ollama_answer_load(req, OLLAMA_GENERATE, mname, "load");
    goto done;
  }
  if (!*system && over) system = json_string_value(json_object_get(over, "system")) ?: "";
  if (!*tmpl_text && over && !raw) tmpl_text = json_string_value(json_object_get(over, "template")) ?: "";

  outparse_config pc = {.format = OUTPARSE_PLAIN};
  const outparse_config *pcp = NULL;
  if (raw) {
    rc = gen_tokenize(mm->t, prompt, strlen(prompt), true, &ids);
  } else if (*suffix) {
    if (!(mm->fam.caps & FAMILY_CAP_INSERT)) {
      char full[1100];
      ollama_full_name(mname, full, sizeof full);
      ollama_err(req, 400, ERR_UNSUPPORTED, "%s does not support insert", full);
      goto done;
    }
    rc = *tmpl_text ? ollama_gotmpl_render(tmpl_text, system, prompt, suffix, &text) : fim_prompt(mm->t, prompt, suffix, &ids);
    if (!rc && *tmpl_text) rc = gen_tokenize(mm->t, text.data ? text.data : "", text.len, true, &ids);
  } else if (*tmpl_text) {
    if ((rc = ollama_gotmpl_render(tmpl_text, system, prompt, "", &text))) {
      /* the request's (or its created model's) template: a client error */
      ollama_err(req, rc == ERR_NOMEM ? 500 : 400, rc, "%s", err_detail());
      goto done;
    }
    rc = gen_tokenize(mm->t, text.data ? text.data : "", text.len, true, &ids);
  } else if (mm->chat) {
    msgs = json_array();
    if (*system) json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", system));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", prompt));
    gen_chat chat = {.messages = msgs, .thinking = think, .effort = effort};
    if (!(rc = gen_chat_prompt(mm, &chat, NULL, &ids, &pc))) pcp = &pc;
  } else {
    buf_appendf(&text, "%s%s", system, prompt);
    rc = gen_tokenize(mm->t, text.data ? text.data : "", text.len, true, &ids);
  }
  if (rc) {
    ollama_err(req, rc == ERR_NOMEM ? 500 : 400, rc, "%s", err_detail());
    goto done;
  }
  if (has_context) { /* the earlier conversation's tokens go first */
    tok_ids all = TOK_IDS_INIT;
    int32_t n_vocab = tok_n_vocab(mm->t);
    int32_t bos = tok_special(mm->t, TOK_SPECIAL_BOS);
    for (size_t i = 0; !rc && i < json_array_size(context); i++) {
      const json_t *v = json_array_get(context, i);
      if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
        ollama_err(req, 400, ERR_RANGE, "context[%zu]: not a token id of this model (0 to %d)", i, n_vocab - 1);
        rc = ERR_RANGE;
      } else rc = tok_ids_push(&all, (int32_t)json_integer_value(v));
    }
    size_t skip = ids.n && bos >= 0 && ids.ids[0] == bos ? 1 : 0;
    for (size_t i = skip; !rc && i < ids.n; i++) rc = tok_ids_push(&all, ids.ids[i]);
    tok_ids_free(&ids);
    ids = all;
    if (rc) {
      if (rc != ERR_RANGE) ollama_err(req, 500, rc, "out of memory");
      goto done;
    }
  }
  if (ollama_debug_render(req, body, mm, OLLAMA_GENERATE, mname, &ids)) goto done;
  ollama_run run = {.kind = OLLAMA_GENERATE, .model = mname, .stream = stream, .context = !raw,
                    .logprobs = lp, .think_off = think == 0, .top_logprobs = top, .t0_ns = t0, .load_ns = load_ns};
  ollama_generate_run(req, mm, &g, &ids, pcp, &run);
  mm = NULL;
done:
  manager_release(mm);
  gen_params_free(&g);
  tok_ids_free(&ids);
  buf_free(&text);
  json_decref(msgs);
  json_decref(over);
  json_decref(body);
}
