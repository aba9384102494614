/*
 * read.c - Deepgram text intelligence, POST /v1/read (spec section 7): a
 * summary, topics, intents and sentiment of a text (or of a fetched url),
 * computed by the server's default language model through the canonical
 * generation layer (api/gen.h).
 *
 * Each requested feature is one greedy generation from a short instruction
 * and the text: the summary is free text; topics, intents and sentiment are
 * JSON documents forced by a schema (custom_topic / custom_intent with mode
 * "strict" become the schema's enum, "extended" only join the instruction).
 * A confidence is the geometric mean of the chosen tokens' probabilities
 * (exp of the mean logprob): what the model itself believed, not a made-up
 * number. Deepgram returns the input unchanged as the summary of a text
 * under ~50 words; so do we. Segments cover the whole text (word 0 to the
 * last word): sentence-level segmentation is later work.
 *
 * The same features run on /listen transcripts (listen.c calls
 * dg_intel_run); only the summary's shape differs ({"text"} here,
 * {"result", "short"} there), and there a failure is a warning, not an
 * error, since the transcript is still worth returning.
 *
 * Threads: the handler runs the generations one after another as detached
 * jobs and waits for each on a condition variable (like a non-streamed chat
 * it holds its HTTP pool thread for the length of the generation); /listen
 * runs them on its producer thread after the transcription.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/deepgram/deepgram.h"
#include "api/gen.h"
#include "base/err.h"
#include "base/util.h"

/* One generation's outcome, filled by the sink on the job's thread. */
struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  buf text;
  int err;
  char msg[512];
  double lp_sum;    /* sum of the sampled tokens' logprobs */
  size_t lp_n;
  int64_t n_in, n_out;
};

static int w_logprobs(void *ctx, gen_job *j, int choice, const sample_result *r, size_t n) {
  (void)j;
  (void)choice;
  struct waiter *w = ctx;
  for (size_t i = 0; i < n; i++)
    if (isfinite(r[i].logprob)) w->lp_sum += r[i].logprob, w->lp_n++;
  return 0;
}

static void w_end(void *ctx, gen_job *j, const gen_result *r) {
  (void)j;
  struct waiter *w = ctx;
  pthread_mutex_lock(&w->mu);
  if (r->err_code) {
    w->err = r->err_code;
    snprintf(w->msg, sizeof w->msg, "%s", r->err_msg ? r->err_msg : err_message(r->err_code));
  } else if (r->n && r->ch[0].content.len) {
    buf_append(&w->text, r->ch[0].content.data, r->ch[0].content.len);
  }
  w->n_in = r->n_prompt;
  w->n_out = r->n_completion;
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* The waiter lives on the handler's stack until done: no free callback. */
static const gen_sink w_sink = {.on_logprobs = w_logprobs, .on_end = w_end};

/* Runs one greedy generation of `instruction` over text on the default
 * model; schema (may be NULL) forces a JSON document. Fills w. */
static int run_one(manager *mgr, const char *lm, const char *instruction, const char *text, const json_t *schema,
                   int64_t max_tokens, struct waiter *w) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  manager_model *mm = NULL;
  int rc = manager_get(mgr, lm, &mm);
  if (rc) return err_set(rc, "/read needs a language model: %s", err_detail());
  json_t *msgs = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", instruction, "role", "user",
                           "content", text);
  gen_chat chat = {.messages = msgs, .thinking = 0};
  tok_ids ids = TOK_IDS_INIT;
  outparse_config pc;
  rc = msgs ? gen_chat_prompt(mm, &chat, NULL, &ids, &pc) : err_set(ERR_NOMEM, "out of memory");
  json_decref(msgs);
  if (rc) {
    manager_release(mm);
    tok_ids_free(&ids);
    return rc;
  }
  gen_params g;
  gen_params_init(&g);
  g.er.sample.temperature = 0;
  g.er.max_tokens = max_tokens;
  g.er.logprobs = true;
  if (schema) gen_params_set_format(&g, GEN_FORMAT_SCHEMA, schema, "read");
  gen_opts opts = {.detached = true, .prompt_param = "text"};
  rc = gen_run(NULL, mm, &g, &ids, &pc, &opts, &w_sink, w); /* takes mm and g */
  tok_ids_free(&ids);
  if (rc) return rc;
  pthread_mutex_lock(&w->mu);
  while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
  if (w->err) return err_set(w->err, "%s", w->msg);
  return 0;
}

static void waiter_free(struct waiter *w) {
  buf_free(&w->text);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
}

static double confidence(const struct waiter *w) {
  return w->lp_n ? exp(w->lp_sum / (double)w->lp_n) : 0.0;
}

static size_t count_words(const char *s) {
  size_t n = 0;
  bool in = false;
  for (; *s; s++) {
    bool space = *s == ' ' || *s == '\n' || *s == '\t' || *s == '\r';
    if (!space && !in) n++;
    in = !space;
  }
  return n;
}

static json_t *info_json(const char *model_uuid, const struct waiter *w) {
  return json_pack("{s:s, s:I, s:I}", "model_uuid", model_uuid, "input_tokens", (json_int_t)w->n_in, "output_tokens",
                   (json_int_t)w->n_out);
}

/* ---- the features, shared by /read and /listen ---------------------------- */

static void labels_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
}

void dg_intel_free(dg_intel *o) {
  labels_free(o->custom_topic, o->n_custom_topic);
  labels_free(o->custom_intent, o->n_custom_intent);
  memset(o, 0, sizeof *o);
}

bool dg_intel_any(const dg_intel *o) { return o->summarize || o->topics || o->intents || o->sentiment; }

/* custom_<what> (repeated, copied) and custom_<what>_mode; 400 on a bad mode. */
static int parse_custom(http_req *req, const char *what, char **out, size_t *n, bool *strict) {
  char qname[32], qmode[40];
  snprintf(qname, sizeof qname, "custom_%s", what);
  snprintf(qmode, sizeof qmode, "%s_mode", qname);
  const char *v[DG_INTEL_MAX_LABELS];
  size_t k = http_req_query_all(req, qname, v, DG_INTEL_MAX_LABELS);
  *n = 0;
  for (size_t i = 0; i < k; i++)
    if (*v[i] && (out[*n] = str_dup(v[i]))) (*n)++;
  const char *mode = http_req_query(req, qmode);
  if (mode && strcmp(mode, "strict") != 0 && strcmp(mode, "extended") != 0) {
    dg_bad_request(req, qmode, "%s: expected strict or extended, got '%.40s'", qmode, mode);
    return ERR_INVALID;
  }
  *strict = mode && strcmp(mode, "strict") == 0;
  return 0;
}

int dg_intel_parse(http_req *req, dg_intel *o) {
  memset(o, 0, sizeof *o);
  const char *sv = http_req_query(req, "summarize");
  if (sv && (strcmp(sv, "v2") == 0 || strcmp(sv, "v1") == 0)) o->summarize = true;
  else if (dg_query_bool(req, "summarize", false, &o->summarize)) return ERR_INVALID;
  if (dg_query_bool(req, "topics", false, &o->topics) || dg_query_bool(req, "intents", false, &o->intents) ||
      dg_query_bool(req, "sentiment", false, &o->sentiment))
    return ERR_INVALID;
  if (parse_custom(req, "topic", o->custom_topic, &o->n_custom_topic, &o->topic_strict) ||
      parse_custom(req, "intent", o->custom_intent, &o->n_custom_intent, &o->intent_strict))
    return ERR_INVALID;
  /* Deepgram: custom topics/intents turn their feature on */
  if (o->n_custom_topic) o->topics = true;
  if (o->n_custom_intent) o->intents = true;
  return 0;
}

/* The schema of a list feature ("topics"/"intents"): 1 to 3 short labels,
 * or only the custom ones in strict mode. */
static json_t *labels_schema(const char *key, char *const *custom, size_t n_custom, bool strict) {
  json_t *item = json_pack("{s:s, s:i, s:i}", "type", "string", "minLength", 1, "maxLength", 48);
  if (strict && n_custom) {
    json_t *en = json_array();
    for (size_t i = 0; i < n_custom; i++) json_array_append_new(en, json_string(custom[i]));
    json_decref(item);
    item = json_pack("{s:o}", "enum", en);
  }
  return json_pack("{s:s, s:{s:{s:s, s:o, s:i, s:i}}, s:[s], s:b}", "type", "object", "properties", key, "type",
                   "array", "items", item, "minItems", 1, "maxItems", 3, "required", key, "additionalProperties", 0);
}

/* Runs a topics/intents feature and sets results.<feature> =
 * {"segments": [...]} and metadata.<feature>_info. */
static int label_feature(manager *mgr, const char *lm, const dg_intel *o, bool topics, const char *text,
                         size_t n_words, const char *model_uuid, json_t *results, json_t *metadata) {
  const char *feature = topics ? "topics" : "intents", *label_key = topics ? "topic" : "intent";
  char *const *custom = topics ? o->custom_topic : o->custom_intent;
  size_t n_custom = topics ? o->n_custom_topic : o->n_custom_intent;
  bool strict = topics ? o->topic_strict : o->intent_strict;
  buf instr = BUF_INIT;
  buf_append_str(&instr,
                 topics ? "List the main topics of the user's text as short noun phrases. Answer as JSON: "
                          "{\"topics\": [...]}."
                        : "List what the speaker of the user's text wants to do, as short verb phrases. Answer as "
                          "JSON: {\"intents\": [...]}.");
  if (n_custom) {
    buf_append_str(&instr, strict ? " Use only these labels: " : " Prefer these labels where they fit: ");
    for (size_t i = 0; i < n_custom; i++) buf_appendf(&instr, "%s%s", i ? ", " : "", custom[i]);
    buf_append_str(&instr, ".");
  }
  json_t *schema = labels_schema(feature, custom, n_custom, strict);
  struct waiter w;
  int rc = schema && instr.data ? run_one(mgr, lm, instr.data, text, schema, 96, &w)
                                : err_set(ERR_NOMEM, "out of memory");
  bool ran = schema && instr.data;
  buf_free(&instr);
  json_decref(schema);
  if (rc) {
    if (ran) waiter_free(&w);
    return rc;
  }
  json_t *doc = json_loadb(w.text.data ? w.text.data : "", w.text.len, 0, NULL);
  json_t *labels = json_array();
  double conf = confidence(&w);
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(doc, feature), i, v) {
    if (json_is_string(v))
      json_array_append_new(labels, json_pack("{s:O, s:f}", label_key, v, "confidence_score", conf));
  }
  json_decref(doc);
  json_t *seg = json_pack("{s:s, s:i, s:I, s:o}", "text", text, "start_word", 0, "end_word",
                          (json_int_t)(n_words ? n_words - 1 : 0), feature, labels);
  json_object_set_new(results, feature, json_pack("{s:[o]}", "segments", seg));
  char info[32];
  snprintf(info, sizeof info, "%s_info", feature);
  json_object_set_new(metadata, info, info_json(model_uuid, &w));
  waiter_free(&w);
  return 0;
}

/* results.summary ({"text"} or {"result", "short"}) and metadata.summary_info. */
static int summary_feature(manager *mgr, const char *lm, const char *text, size_t n_words,
                           enum dg_summary_shape shape, const char *model_uuid, json_t *results, json_t *metadata) {
  struct waiter w;
  memset(&w, 0, sizeof w);
  bool ran = n_words >= 50; /* Deepgram: short inputs come back unchanged */
  if (!ran) {
    buf_append_str(&w.text, text);
  } else {
    int rc = run_one(mgr, lm, "Summarize the user's text in one or two sentences.", text, NULL, 160, &w);
    if (rc) {
      waiter_free(&w);
      return rc;
    }
  }
  const char *t = w.text.data ? w.text.data : "";
  json_object_set_new(results, "summary",
                      shape == DG_SUMMARY_V2 ? json_pack("{s:s, s:s%}", "result", "success", "short", t, w.text.len)
                                             : json_pack("{s:s%}", "text", t, w.text.len));
  json_object_set_new(metadata, "summary_info", info_json(model_uuid, &w));
  if (ran) waiter_free(&w);
  else buf_free(&w.text);
  return 0;
}

/* results.sentiments and metadata.sentiment_info. */
static int sentiment_feature(manager *mgr, const char *lm, const char *text, size_t n_words, const char *model_uuid,
                             json_t *results, json_t *metadata) {
  json_t *schema = json_pack("{s:s, s:{s:{s:[s, s, s]}}, s:[s], s:b}", "type", "object", "properties", "sentiment",
                             "enum", "positive", "negative", "neutral", "required", "sentiment",
                             "additionalProperties", 0);
  if (!schema) return err_set(ERR_NOMEM, "out of memory");
  struct waiter w;
  int rc = run_one(mgr, lm,
                   "Classify the sentiment of the user's text as positive, negative or neutral. Answer as JSON: "
                   "{\"sentiment\": ...}.",
                   text, schema, 24, &w);
  json_decref(schema);
  if (rc) {
    waiter_free(&w);
    return rc;
  }
  json_t *doc = json_loadb(w.text.data ? w.text.data : "", w.text.len, 0, NULL);
  const char *s = json_string_value(json_object_get(doc, "sentiment"));
  if (!s) s = "neutral";
  double conf = confidence(&w);
  double score = strcmp(s, "positive") == 0 ? conf : strcmp(s, "negative") == 0 ? -conf : 0.0;
  json_t *seg = json_pack("{s:s, s:i, s:I, s:s, s:f}", "text", text, "start_word", 0, "end_word",
                          (json_int_t)(n_words ? n_words - 1 : 0), "sentiment", s, "sentiment_score", score);
  json_object_set_new(results, "sentiments",
                      json_pack("{s:[o], s:{s:s, s:f}}", "segments", seg, "average", "sentiment", s,
                                "sentiment_score", score));
  json_object_set_new(metadata, "sentiment_info", info_json(model_uuid, &w));
  json_decref(doc);
  waiter_free(&w);
  return 0;
}

int dg_intel_run(manager *mgr, const dg_intel *o, const char *text, enum dg_summary_shape shape, json_t *results,
                 json_t *metadata, json_t *warnings, const char **failed) {
  static const char *const NAMES[4] = {"summarize", "topics", "intents", "sentiment"};
  bool on[4] = {o->summarize, o->topics, o->intents, o->sentiment};
  *failed = NULL;
  size_t n_words = count_words(text);
  manager_model *mm = NULL;
  int rc = mgr ? manager_get_chat(mgr, &mm) : err_set(ERR_UNAVAILABLE, "no model manager");
  if (rc) {
    rc = err_set(rc, "text intelligence needs a language model: %s", err_detail());
    for (int f = 0; f < 4 && warnings; f++)
      if (on[f]) dg_warn(warnings, NAMES[f], "unsupported_feature", err_detail());
    if (!warnings) *failed = "model";
    return warnings ? 0 : rc;
  }
  char model_uuid[37];
  dg_model_uuid(mm->name, model_uuid);
  /* every feature runs on this instance, found by its id while mm holds
   * it loaded (each generation takes a reference of its own) */
  const char *lm = mm->instance_id;
  rc = 0;
  for (int f = 0; f < 4; f++) {
    if (!on[f]) continue;
    rc = f == 0   ? summary_feature(mgr, lm, text, n_words, shape, model_uuid, results, metadata)
         : f == 3 ? sentiment_feature(mgr, lm, text, n_words, model_uuid, results, metadata)
                  : label_feature(mgr, lm, o, f == 1, text, n_words, model_uuid, results, metadata);
    if (!rc) continue;
    if (!warnings) {
      *failed = NAMES[f];
      break;
    }
    dg_warn(warnings, NAMES[f], "processing_failed", err_detail());
    rc = 0;
  }
  manager_release(mm);
  return rc;
}

/* ---- POST /read ------------------------------------------------------------ */

void dg_read_post(http_req *req, void *ctx) {
  api_speech *sp = ctx;
  manager *mgr = api_speech_manager(sp);
  json_t *body = api_parse_body(req);
  if (!body) return;
  uint8_t *fetched = NULL;
  size_t fetched_len = 0;
  char *text = NULL;
  json_t *out = NULL;
  dg_intel in;
  if (dg_intel_parse(req, &in)) goto done;
  const char *lang = http_req_query(req, "language");
  if (lang && strcmp(lang, "en") != 0) {
    dg_bad_request(req, "language", "language: only 'en' is supported for text intelligence, got '%.32s'", lang);
    goto done;
  }
  if (http_req_query(req, "callback")) {
    dg_bad_request(req, "callback", "callback: asynchronous /read is not supported; omit callback to get the result");
    goto done;
  }
  const json_t *jt = json_object_get(body, "text"), *ju = json_object_get(body, "url");
  if (json_is_string(jt)) {
    text = str_ndup(json_string_value(jt), json_string_length(jt));
  } else if (json_is_string(ju)) {
    int rc = dg_url_check(api_speech_fetch_hosts(sp), json_string_value(ju), "url");
    if (!rc) rc = dg_fetch(api_speech_fetch_hosts(sp), json_string_value(ju), api_speech_fetch_max(sp), &fetched, &fetched_len);
    if (rc) {
      api_error(req, rc == ERR_IO ? 400 : 0, rc, err_detail(), "url");
      goto done;
    }
    text = str_ndup((const char *)fetched, fetched_len);
  } else {
    dg_bad_request(req, "text", "body: expected {\"text\": \"...\"} or {\"url\": \"...\"}");
    goto done;
  }
  if (!text || !count_words(text)) {
    dg_bad_request(req, "text", "text: the text is empty");
    goto done;
  }
  if (!dg_intel_any(&in)) {
    dg_bad_request(req, "summarize", "no analysis requested: set summarize, topics, intents or sentiment to true");
    goto done;
  }
  char request_id[37], created[40];
  dg_request_uuid(req, request_id);
  api_speech_rfc3339_now(created, sizeof created);
  json_t *metadata = json_pack("{s:s, s:s, s:s}", "request_id", request_id, "created", created, "language", "en");
  json_t *results = json_object();
  out = json_pack("{s:o, s:o}", "metadata", metadata, "results", results);
  if (!out) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    goto done;
  }
  const char *failed = NULL;
  int rc = dg_intel_run(mgr, &in, text, DG_SUMMARY_TEXT, results, metadata, NULL, &failed);
  if (rc == ERR_UNAVAILABLE && failed && strcmp(failed, "model") == 0) {
    api_error(req, 503, ERR_UNAVAILABLE, err_detail(), NULL);
    goto done;
  }
  if (rc) {
    api_error(req, 0, rc, err_detail(), failed);
    goto done;
  }
  api_speech_respond_json(req, 200, out);
done:
  dg_intel_free(&in);
  json_decref(out);
  free(text);
  free(fetched);
  json_decref(body);
}
