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
 * Threads: the handler runs the generations one after another as detached
 * jobs and waits for each on a condition variable (like a non-streamed chat
 * it holds its HTTP pool thread for the length of the generation).
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
static int run_one(manager *mgr, const char *instruction, const char *text, const json_t *schema, int64_t max_tokens,
                   struct waiter *w) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  manager_model *mm = NULL;
  int rc = manager_get(mgr, NULL, &mm);
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

/* The custom labels of one feature (repeated query parameter). */
static size_t custom_labels(http_req *req, const char *name, const char **out, size_t max) {
  return http_req_query_all(req, name, out, max);
}

/* The schema of a list feature ("topics"/"intents"): 1 to 3 short labels,
 * or only the custom ones in strict mode. */
static json_t *labels_schema(const char *key, const char *const *custom, size_t n_custom, bool strict) {
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

/* Runs a topics/intents feature and builds its {"segments": [...]} result. */
static int label_feature(http_req *req, manager *mgr, const char *feature, const char *label_key, const char *text,
                         size_t n_words, const char *model_uuid, json_t *results, json_t *metadata) {
  char qname[32], qmode[40];
  snprintf(qname, sizeof qname, "custom_%s", strcmp(feature, "topics") == 0 ? "topic" : "intent");
  snprintf(qmode, sizeof qmode, "%s_mode", qname);
  const char *custom[16];
  size_t n_custom = custom_labels(req, qname, custom, 16);
  const char *mode = http_req_query(req, qmode);
  if (mode && strcmp(mode, "strict") != 0 && strcmp(mode, "extended") != 0) {
    dg_bad_request(req, qmode, "%s: expected strict or extended, got '%.40s'", qmode, mode);
    return ERR_INVALID;
  }
  bool strict = mode && strcmp(mode, "strict") == 0;
  buf instr = BUF_INIT;
  buf_appendf(&instr,
              strcmp(feature, "topics") == 0
                  ? "List the main topics of the user's text as short noun phrases. Answer as JSON: {\"topics\": [...]}."
                  : "List what the speaker of the user's text wants to do, as short verb phrases. Answer as JSON: "
                    "{\"intents\": [...]}.");
  if (n_custom) {
    buf_append_str(&instr, strict ? " Use only these labels: " : " Prefer these labels where they fit: ");
    for (size_t i = 0; i < n_custom; i++) buf_appendf(&instr, "%s%s", i ? ", " : "", custom[i]);
    buf_append_str(&instr, ".");
  }
  json_t *schema = labels_schema(feature, custom, n_custom, strict);
  struct waiter w;
  int rc = schema ? run_one(mgr, instr.data, text, schema, 96, &w) : err_set(ERR_NOMEM, "out of memory");
  buf_free(&instr);
  json_decref(schema);
  if (rc) {
    if (schema) waiter_free(&w);
    api_error(req, 0, rc, err_detail(), feature);
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
  snprintf(info, sizeof info, "%s_info", strcmp(feature, "topics") == 0 ? "topics" : "intents");
  json_object_set_new(metadata, info, info_json(model_uuid, &w));
  waiter_free(&w);
  return 0;
}

void dg_read_post(http_req *req, void *ctx) {
  api_speech *sp = ctx;
  manager *mgr = api_speech_manager(sp);
  json_t *body = api_parse_body(req);
  if (!body) return;
  uint8_t *fetched = NULL;
  size_t fetched_len = 0;
  char *text = NULL;
  json_t *out = NULL;
  bool summarize, topics, intents, sentiment;
  if (dg_query_bool(req, "summarize", false, &summarize) || dg_query_bool(req, "topics", false, &topics) ||
      dg_query_bool(req, "intents", false, &intents) || dg_query_bool(req, "sentiment", false, &sentiment))
    goto done;
  const char *v2 = http_req_query(req, "summarize");
  if (v2 && strcmp(v2, "v2") == 0) summarize = true;
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
    if (!rc) rc = dg_fetch(json_string_value(ju), api_speech_fetch_max(sp), &fetched, &fetched_len);
    if (rc) {
      api_error(req, rc == ERR_IO ? 400 : 0, rc, err_detail(), "url");
      goto done;
    }
    text = str_ndup((const char *)fetched, fetched_len);
  } else {
    dg_bad_request(req, "text", "body: expected {\"text\": \"...\"} or {\"url\": \"...\"}");
    goto done;
  }
  size_t n_words = text ? count_words(text) : 0;
  if (!n_words) {
    dg_bad_request(req, "text", "text: the text is empty");
    goto done;
  }
  if (!summarize && !topics && !intents && !sentiment) {
    dg_bad_request(req, "summarize", "no analysis requested: set summarize, topics, intents or sentiment to true");
    goto done;
  }
  manager_model *mm = NULL;
  if (manager_get(mgr, NULL, &mm)) {
    api_error(req, 503, ERR_UNAVAILABLE,
              "/read needs a language model: start parley with --default-model (or --model) naming one", NULL);
    goto done;
  }
  char model_uuid[37];
  dg_model_uuid(mm->name, model_uuid);
  manager_release(mm);

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
  if (summarize) {
    struct waiter w;
    memset(&w, 0, sizeof w);
    int rc = 0;
    if (n_words < 50) { /* Deepgram: short inputs come back unchanged */
      buf_append_str(&w.text, text);
    } else if ((rc = run_one(mgr, "Summarize the user's text in one or two sentences.", text, NULL, 160, &w))) {
      waiter_free(&w);
      api_error(req, 0, rc, err_detail(), "summarize");
      goto done;
    }
    json_object_set_new(results, "summary", json_pack("{s:s%}", "text", w.text.data ? w.text.data : "", w.text.len));
    json_object_set_new(metadata, "summary_info", info_json(model_uuid, &w));
    if (n_words < 50) buf_free(&w.text);
    else waiter_free(&w);
  }
  if (topics && label_feature(req, mgr, "topics", "topic", text, n_words, model_uuid, results, metadata)) goto done;
  if (intents && label_feature(req, mgr, "intents", "intent", text, n_words, model_uuid, results, metadata))
    goto done;
  if (sentiment) {
    json_t *schema = json_pack("{s:s, s:{s:{s:[s, s, s]}}, s:[s], s:b}", "type", "object", "properties",
                               "sentiment", "enum", "positive", "negative", "neutral", "required", "sentiment",
                               "additionalProperties", 0);
    struct waiter w;
    int rc = schema ? run_one(mgr,
                              "Classify the sentiment of the user's text as positive, negative or neutral. Answer as "
                              "JSON: {\"sentiment\": ...}.",
                              text, schema, 24, &w)
                    : err_set(ERR_NOMEM, "out of memory");
    json_decref(schema);
    if (rc) {
      if (schema) waiter_free(&w);
      api_error(req, 0, rc, err_detail(), "sentiment");
      goto done;
    }
    json_t *doc = json_loadb(w.text.data ? w.text.data : "", w.text.len, 0, NULL);
    const char *s = json_string_value(json_object_get(doc, "sentiment"));
    if (!s) s = "neutral";
    double conf = confidence(&w);
    double score = strcmp(s, "positive") == 0 ? conf : strcmp(s, "negative") == 0 ? -conf : 0.0;
    json_t *seg = json_pack("{s:s, s:i, s:I, s:s, s:f}", "text", text, "start_word", 0, "end_word",
                            (json_int_t)(n_words - 1), "sentiment", s, "sentiment_score", score);
    json_object_set_new(results, "sentiments",
                        json_pack("{s:[o], s:{s:s, s:f}}", "segments", seg, "average", "sentiment", s,
                                  "sentiment_score", score));
    json_object_set_new(metadata, "sentiment_info", info_json(model_uuid, &w));
    json_decref(doc);
    waiter_free(&w);
  }
  api_speech_respond_json(req, 200, out);
done:
  json_decref(out);
  free(text);
  free(fetched);
  json_decref(body);
}
