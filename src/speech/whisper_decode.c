/*
 * whisper_decode.c - Whisper's decoding rules (contracts and the
 * differences from OpenAI's implementation in whisper_decode.h).
 *
 * Start at whisper_decode_window: the language (given, or detected from the
 * logits after a lone SOT), then one attempt per temperature until one
 * passes the compression-ratio and log-probability checks (or the window
 * is judged silence). An attempt feeds the prompt in two calls, up to SOT
 * (whose logits give the no-speech probability) and the rest, then samples
 * one token per call, each row of logits passed through
 * whisper_filter_logits first. Log-probabilities are of the filtered
 * logits at temperature 1, in double, as Whisper scores its candidates.
 *
 * Token layout (whisper.cpp's, by vocabulary size): text tokens below EOT
 * (50256 English-only, 50257 multilingual), then SOT, the language tokens,
 * translate, transcribe, start-of-LM, previous-text, no-speech,
 * no-timestamps, and 1501 timestamps from 0.00 to 30.00 s.
 */
#include "speech/whisper_decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/err.h"
#include "speech/whisper_model.h"

#define TS_STEP 0.02 /* seconds per timestamp token */
#define N_TS 1501    /* timestamp tokens: 0.00 .. 30.00 s */

/* Whisper's language codes in token order (tokenizer.py LANGUAGES). */
static const char *const langs[WHISPER_MAX_LANGS] = {
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id",
    "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg",
    "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br",
    "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so",
    "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt",
    "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};

/* Their English names, as the OpenAI API reports a language. */
static const char *const lang_names[WHISPER_MAX_LANGS] = {
    "english", "chinese", "german", "spanish", "russian", "korean", "french", "japanese", "portuguese",
    "turkish", "polish", "catalan", "dutch", "arabic", "swedish", "italian", "indonesian", "hindi", "finnish",
    "vietnamese", "hebrew", "ukrainian", "greek", "malay", "czech", "romanian", "danish", "hungarian",
    "tamil", "norwegian", "thai", "urdu", "croatian", "bulgarian", "lithuanian", "latin", "maori",
    "malayalam", "welsh", "slovak", "telugu", "persian", "latvian", "bengali", "serbian", "azerbaijani",
    "slovenian", "kannada", "estonian", "macedonian", "breton", "basque", "icelandic", "armenian", "nepali",
    "mongolian", "bosnian", "kazakh", "albanian", "swahili", "galician", "marathi", "punjabi", "sinhala",
    "khmer", "shona", "yoruba", "somali", "afrikaans", "occitan", "georgian", "belarusian", "tajik", "sindhi",
    "gujarati", "amharic", "yiddish", "lao", "uzbek", "faroese", "haitian creole", "pashto", "turkmen",
    "nynorsk", "maltese", "sanskrit", "luxembourgish", "myanmar", "tibetan", "tagalog", "malagasy",
    "assamese", "tatar", "hawaiian", "lingala", "hausa", "bashkir", "javanese", "sundanese", "cantonese",};

const char *whisper_lang_name(int index) { return index >= 0 && index < WHISPER_MAX_LANGS ? lang_names[index] : NULL; }

int whisper_lang_index(const char *code) {
  for (int i = 0; code && i < WHISPER_MAX_LANGS; i++)
    if (strcmp(langs[i], code) == 0) return i;
  return -1;
}

const char *whisper_lang_code(int index) { return index >= 0 && index < WHISPER_MAX_LANGS ? langs[index] : NULL; }

int whisper_vocab_init(int32_t n_vocab, whisper_token_text_fn text, void *text_ctx, whisper_vocab *out) {
  memset(out, 0, sizeof *out);
  if (n_vocab < 51864 || n_vocab > 51765 + 1 + WHISPER_MAX_LANGS)
    return err_set(ERR_UNSUPPORTED, "whisper vocabulary: %d tokens is not a Whisper vocabulary (51864..51866)",
                   n_vocab);
  const int32_t ml = n_vocab >= 51865;
  out->n_vocab = n_vocab;
  out->multilingual = ml;
  out->n_langs = n_vocab - 51765 - ml;
  out->eot = 50256 + ml;
  out->sot = 50257 + ml;
  out->translate = 50357 + ml + (out->n_langs - 99);
  out->transcribe = out->translate + 1;
  out->solm = out->translate + 2;
  out->prev = out->translate + 3;
  out->nosp = out->translate + 4;
  out->notimestamps = out->translate + 5;
  out->ts_begin = out->translate + 6;
  out->text = text;
  out->text_ctx = text_ctx;
  out->blank = -1;
  for (int32_t t = 0; text && t < out->eot && out->blank < 0; t++) {
    size_t len = 0;
    const char *s = text(text_ctx, t, &len);
    if (s && len == 1 && s[0] == ' ') out->blank = t;
  }
  return 0;
}

whisper_decode_opts whisper_decode_defaults(void) {
  whisper_decode_opts o = {.task = WHISPER_TASK_TRANSCRIBE, .lang = -1, .timestamps = true, .suppress_blank = true,
                           .temps = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f}, .n_temps = 6,
                           .compression_ratio_max = 2.4f, .logprob_min = -1.0f, .no_speech_min = 0.6f,
                           .max_initial_ts = 1.0f, .max_tokens = 224, .n_text_ctx = 448, .seed = 1};
  return o;
}

void whisper_result_free(whisper_result *r) {
  if (!r) return;
  free(r->tokens);
  free(r->logprobs);
  free(r->ts_tok);
  free(r->ts_prob);
  r->tokens = NULL;
  r->logprobs = NULL;
  r->ts_tok = NULL;
  r->ts_prob = NULL;
  r->n_tokens = 0;
}

/* ---- helpers ------------------------------------------------------------ */

/* lp[i] = log softmax(x)[i], in double; -inf entries stay -inf. */
static void log_softmax(const float *x, int32_t n, double *lp) {
  double mx = -INFINITY, sum = 0;
  for (int32_t i = 0; i < n; i++)
    if (x[i] > mx) mx = x[i];
  for (int32_t i = 0; i < n; i++) sum += exp((double)x[i] - mx);
  double lse = mx + log(sum);
  for (int32_t i = 0; i < n; i++) lp[i] = (double)x[i] - lse;
}

/* log(sum(exp(x))) over x[n], exponentials in float (summed in double);
 * -inf when every entry is. */
static double log_sum_exp(const float *x, int32_t n) {
  float mx = -INFINITY;
  for (int32_t i = 0; i < n; i++)
    if (x[i] > mx) mx = x[i];
  if (mx == -INFINITY) return -INFINITY;
  double sum = 0;
  for (int32_t i = 0; i < n; i++) sum += expf(x[i] - mx);
  return (double)mx + log(sum);
}

static void mask(float *x, int32_t lo, int32_t hi) {
  for (int32_t i = lo; i < hi; i++) x[i] = -INFINITY;
}

static double compression_ratio(const whisper_vocab *v, const int32_t *toks, int n) {
  if (!v->text) return 0;
  size_t len = 0, cap = 256;
  unsigned char *b = malloc(cap);
  for (int i = 0; b && i < n; i++) {
    size_t tl = 0;
    const char *s = toks[i] < v->eot ? v->text(v->text_ctx, toks[i], &tl) : NULL;
    if (!s || !tl) continue;
    if (len + tl > cap) {
      while (len + tl > cap) cap *= 2;
      unsigned char *nb = realloc(b, cap);
      if (!nb) break;
      b = nb;
    }
    memcpy(b + len, s, tl);
    len += tl;
  }
  uLongf zl = compressBound((uLong)len);
  unsigned char *z = b ? malloc(zl) : NULL;
  double r = 0;
  if (z && compress2(z, &zl, b, (uLong)len, Z_DEFAULT_COMPRESSION) == Z_OK && zl) r = (double)len / (double)zl;
  free(z);
  free(b);
  return r;
}

/* ---- prompt, filters, language ----------------------------------------- */

int whisper_build_prompt(const whisper_vocab *v, const whisper_decode_opts *o, int lang, int32_t *out, int cap,
                         int *n, int *sot_at) {
  int k = 0, need = 4 + (o->n_prompt > 0 ? 1 : 0);
  int keep = o->n_prompt;
  if (keep > o->n_text_ctx / 2 - 1) keep = o->n_text_ctx / 2 - 1; /* Whisper keeps the last n_text_ctx/2 - 1 */
  if (keep < 0) keep = 0;
  if (cap < need + keep) return err_set(ERR_TOO_LARGE, "whisper prompt: %d tokens do not fit in %d", need + keep, cap);
  if (keep) {
    out[k++] = v->prev;
    memcpy(out + k, o->prompt + (o->n_prompt - keep), (size_t)keep * sizeof *out);
    k += keep;
  }
  *sot_at = k;
  out[k++] = v->sot;
  if (v->multilingual) {
    out[k++] = v->sot + 1 + lang;
    out[k++] = o->task == WHISPER_TASK_TRANSLATE ? v->translate : v->transcribe;
  }
  if (!o->timestamps) out[k++] = v->notimestamps;
  *n = k;
  return 0;
}

void whisper_filter_logits(const whisper_vocab *v, const whisper_decode_opts *o, const int32_t *sampled, int n,
                           float *x) {
  const int32_t tb = v->ts_begin, V = v->n_vocab;
  mask(x, v->eot + 1, tb); /* every special token but EOT */
  for (int i = 0; i < o->n_suppress; i++)
    if (o->suppress[i] >= 0 && o->suppress[i] < V) x[o->suppress[i]] = -INFINITY;
  if (o->suppress_blank && n == 0) {
    if (v->blank >= 0) x[v->blank] = -INFINITY;
    x[v->eot] = -INFINITY;
  }
  if (!o->timestamps) {
    mask(x, tb, V);
    return;
  }
  /* timestamps come in pairs (begin, end), except right before EOT */
  const bool last_ts = n >= 1 && sampled[n - 1] >= tb, pen_ts = n < 2 || sampled[n - 2] >= tb;
  if (last_ts) {
    if (pen_ts) mask(x, tb, V);   /* a pair just closed: text (or EOT) next */
    else mask(x, 0, v->eot);      /* a segment just ended: a timestamp or EOT */
  }
  /* they never decrease, and a segment is never empty */
  for (int i = n - 1; i >= 0; i--)
    if (sampled[i] >= tb) {
      mask(x, tb, last_ts && !pen_ts ? sampled[i] : sampled[i] + 1);
      break;
    }
  if (n == 0) {
    mask(x, 0, tb); /* the window starts with a timestamp */
    if (o->max_initial_ts >= 0) {
      int32_t last = tb + (int32_t)lround(o->max_initial_ts / TS_STEP);
      if (last + 1 < V) mask(x, last + 1, V);
    }
  }
  /* when the timestamps together outweigh every single text token, emit
   * one (log-sum-exp against max: the softmax's normalizer cancels) */
  double mx_ts = -INFINITY, sum = 0, mx_text = -INFINITY;
  for (int32_t i = tb; i < V; i++)
    if (x[i] > mx_ts) mx_ts = x[i];
  if (mx_ts > -INFINITY)
    for (int32_t i = tb; i < V; i++) sum += exp((double)x[i] - mx_ts);
  double ts_lse = mx_ts > -INFINITY ? mx_ts + log(sum) : -INFINITY;
  for (int32_t i = 0; i < tb; i++)
    if (x[i] > mx_text) mx_text = x[i];
  if (ts_lse > mx_text) mask(x, 0, tb);
}

int whisper_detect_language(const whisper_vocab *v, whisper_logits_fn fn, void *ctx, float *probs, int *lang,
                            float *prob) {
  if (!v->multilingual) return err_set(ERR_UNSUPPORTED, "whisper: an English-only model cannot detect the language");
  float *x = malloc((size_t)v->n_vocab * sizeof *x);
  if (!x) return err_set(ERR_NOMEM, "whisper: out of memory");
  int rc = fn(ctx, &v->sot, 1, 0, x, false);
  if (rc) {
    free(x);
    return rc;
  }
  const float *l = x + v->sot + 1;
  double mx = -INFINITY, sum = 0;
  int best = 0;
  for (int i = 0; i < v->n_langs; i++)
    if (l[i] > mx) mx = l[i], best = i;
  for (int i = 0; i < v->n_langs; i++) sum += exp((double)l[i] - mx);
  for (int i = 0; probs && i < v->n_langs; i++) probs[i] = (float)(exp((double)l[i] - mx) / sum);
  *lang = best;
  if (prob) *prob = (float)(1.0 / sum);
  free(x);
  return 0;
}

/* ---- sampling -------------------------------------------------------------- */

static double uniform(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return (double)((*s * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-53;
}

/* argmax at t = 0, else a draw from softmax(x / t). */
static int32_t pick(const float *x, int32_t n, float t, uint64_t *rng) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  if (t <= 0) return best;
  double sum = 0;
  float mx = x[best], it = 1.0f / t;
  for (int32_t i = 0; i < n; i++) sum += expf((x[i] - mx) * it);
  double u = uniform(rng) * sum, c = 0;
  for (int32_t i = 0; i < n; i++) {
    c += expf((x[i] - mx) * it);
    if (u < c && x[i] > -INFINITY) return i;
  }
  return best;
}

/* ---- beam search ------------------------------------------------------------- */

#define BEAM_MAX 8

/* One hypothesis: its sampled tokens (EOT not included) with what the
 * greedy path records per token, and its summed log-probability. */
typedef struct beam {
  int32_t *tok, *ts_tok;  /* [cap] */
  float *lp, *ts_prob;    /* [cap] */
  int n;
  double sum;
  bool ended;
} beam;

typedef struct cand {
  int parent;
  int32_t tok, ts_tok;
  float lp, ts_prob;
  double score;
} cand;

static void beam_copy(beam *d, const beam *s) {
  memcpy(d->tok, s->tok, (size_t)s->n * sizeof *d->tok);
  memcpy(d->ts_tok, s->ts_tok, (size_t)s->n * sizeof *d->ts_tok);
  memcpy(d->lp, s->lp, (size_t)s->n * sizeof *d->lp);
  memcpy(d->ts_prob, s->ts_prob, (size_t)s->n * sizeof *d->ts_prob);
  d->n = s->n;
  d->sum = s->sum;
  d->ended = s->ended;
}

/* Beam search of B hypotheses after the prompt (np tokens; x0 the logits
 * after it), as Whisper's BeamSearchDecoder: per live beam its B + 1 best
 * next tokens, the B best continuations by summed log-probability live
 * on, those ending in EOT are finished until B are; at the length limit
 * the live ones count as finished. The winner is the best sum / length.
 * The logits source holds one sequence: a beam's logits re-feed its tokens
 * from where it parts from the source's (cached[n_cached]). */
static int beam_search(const whisper_vocab *v, whisper_logits_fn fn, void *ctx, const whisper_decode_opts *o, int np,
                       const float *x0, float *x, whisper_result *r, double *sum_out) {
  const int32_t V = v->n_vocab;
  const int B = o->beam_size > BEAM_MAX ? BEAM_MAX : o->beam_size, cap = o->max_tokens + 1;
  beam cur[BEAM_MAX], nxt[BEAM_MAX], fin[BEAM_MAX];
  beam *all[3] = {cur, nxt, fin};
  size_t per = (size_t)cap * (2 * sizeof(int32_t) + 2 * sizeof(float));
  char *mem = malloc(per * 3 * (size_t)B + (size_t)cap * sizeof(int32_t));
  cand cs[BEAM_MAX * (BEAM_MAX + 1)];
  if (!mem) return err_set(ERR_NOMEM, "whisper: out of memory");
  for (int k = 0; k < 3; k++)
    for (int b = 0; b < B; b++) {
      char *p = mem + per * (size_t)(k * B + b);
      all[k][b] = (beam){.tok = (int32_t *)(void *)p, .ts_tok = (int32_t *)(void *)(p + (size_t)cap * 4),
                         .lp = (float *)(void *)(p + (size_t)cap * 8), .ts_prob = (float *)(void *)(p + (size_t)cap * 12)};
    }
  int32_t *cached = (int32_t *)(void *)(mem + per * 3 * (size_t)B);
  int n_cached = 0, n_live = 1, n_fin = 0, rc = 0;
  for (int step = 0; !rc && n_live > 0 && n_fin < B; step++) {
    int n_c = 0;
    for (int b = 0; !rc && b < n_live; b++) {
      beam *h = &cur[b];
      if (h->n == 0) {
        memcpy(x, x0, (size_t)V * sizeof *x);
      } else {
        int p = 0;
        while (p < h->n && p < n_cached && cached[p] == h->tok[p]) p++;
        if (p == h->n) p--; /* the same sequence: its last token's row again */
        if ((rc = fn(ctx, h->tok + p, h->n - p, np + p, x, false))) break;
        memcpy(cached, h->tok, (size_t)h->n * sizeof *cached);
        n_cached = h->n;
      }
      whisper_filter_logits(v, o, h->tok, h->n, x);
      double lse = log_sum_exp(x, V);
      int32_t best_ts = v->ts_begin;
      for (int32_t i = v->ts_begin + 1; i < V; i++)
        if (x[i] > x[best_ts]) best_ts = i;
      float ts_prob = (float)exp((double)x[best_ts] - lse);
      /* the B + 1 likeliest tokens, best first */
      int32_t top[BEAM_MAX + 1];
      int n_top = 0;
      for (int32_t i = 0; i < V; i++) {
        if (x[i] == -INFINITY || (n_top == B + 1 && x[i] <= x[top[n_top - 1]])) continue;
        int at = n_top < B + 1 ? n_top++ : B;
        while (at > 0 && x[top[at - 1]] < x[i]) top[at] = top[at - 1], at--;
        top[at] = i;
      }
      for (int i = 0; i < n_top; i++) {
        float lp = (float)((double)x[top[i]] - lse);
        cs[n_c++] = (cand){.parent = b, .tok = top[i], .ts_tok = best_ts, .lp = lp, .ts_prob = ts_prob,
                           .score = h->sum + lp};
      }
    }
    if (rc) break;
    for (int i = 1; i < n_c; i++) /* by score, best first; ties keep their order */
      for (int j = i; j > 0 && cs[j].score > cs[j - 1].score; j--) {
        cand t = cs[j];
        cs[j] = cs[j - 1];
        cs[j - 1] = t;
      }
    int n_next = 0;
    for (int i = 0; i < n_c && (n_next < B || n_fin < B); i++) {
      const beam *pa = &cur[cs[i].parent];
      if (cs[i].tok == v->eot) {
        if (n_fin == B) continue;
        beam_copy(&fin[n_fin], pa);
        fin[n_fin].sum = cs[i].score;
        fin[n_fin++].ended = true;
      } else if (n_next < B) {
        beam *d = &nxt[n_next++];
        beam_copy(d, pa);
        d->tok[d->n] = cs[i].tok;
        d->ts_tok[d->n] = cs[i].ts_tok;
        d->lp[d->n] = cs[i].lp;
        d->ts_prob[d->n] = cs[i].ts_prob;
        d->n++;
        d->sum = cs[i].score;
      }
    }
    for (int b = 0; b < n_next; b++) beam_copy(&cur[b], &nxt[b]);
    n_live = n_next;
    /* the length limit: what is still live is finished as it stands */
    if (n_live && (step + 1 == o->max_tokens || np + cur[0].n >= o->n_text_ctx)) {
      for (int b = 0; b < n_live && n_fin < B; b++) beam_copy(&fin[n_fin++], &cur[b]);
      n_live = 0;
    }
  }
  if (!rc && n_fin == 0) rc = err_set(ERR_INTERNAL, "whisper: beam search finished no hypothesis");
  if (!rc) {
    int best = 0;
    for (int b = 1; b < n_fin; b++)
      if (fin[b].sum / (fin[b].n ? fin[b].n : 1) > fin[best].sum / (fin[best].n ? fin[best].n : 1)) best = b;
    const beam *h = &fin[best];
    memcpy(r->tokens, h->tok, (size_t)h->n * sizeof *r->tokens);
    memcpy(r->ts_tok, h->ts_tok, (size_t)h->n * sizeof *r->ts_tok);
    memcpy(r->logprobs, h->lp, (size_t)h->n * sizeof *r->logprobs);
    memcpy(r->ts_prob, h->ts_prob, (size_t)h->n * sizeof *r->ts_prob);
    r->n_tokens = h->n;
    r->ended = h->ended;
    *sum_out = h->sum;
  }
  free(mem);
  return rc;
}

/* One attempt at temperature t with prompt[np] (SOT at sot_at). */
static int attempt(const whisper_vocab *v, whisper_logits_fn fn, void *ctx, const whisper_decode_opts *o,
                   const int32_t *prompt, int np, int sot_at, float t, uint64_t *rng, whisper_result *r) {
  const int32_t V = v->n_vocab;
  float *x = malloc((size_t)V * sizeof *x);
  double *lp = malloc((size_t)V * sizeof *lp);
  r->tokens = malloc((size_t)(o->max_tokens + 1) * sizeof *r->tokens);
  r->logprobs = malloc((size_t)(o->max_tokens + 1) * sizeof *r->logprobs);
  r->ts_tok = malloc((size_t)(o->max_tokens + 1) * sizeof *r->ts_tok);
  r->ts_prob = malloc((size_t)(o->max_tokens + 1) * sizeof *r->ts_prob);
  int rc = x && lp && r->tokens && r->logprobs && r->ts_tok && r->ts_prob ? 0
                                                                          : err_set(ERR_NOMEM, "whisper: out of memory");
  if (!rc) rc = fn(ctx, prompt, sot_at + 1, 0, x, false);
  if (!rc) {
    log_softmax(x, V, lp);
    r->no_speech_prob = exp(lp[v->nosp]);
  }
  if (!rc && np > sot_at + 1) rc = fn(ctx, prompt + sot_at + 1, np - sot_at - 1, sot_at + 1, x, false);
  double sum = 0;
  const bool beamed = t <= 0 && o->beam_size > 1;
  if (!rc && beamed) {
    float *x0 = malloc((size_t)V * sizeof *x0);
    if (!x0) rc = err_set(ERR_NOMEM, "whisper: out of memory");
    if (!rc) {
      memcpy(x0, x, (size_t)V * sizeof *x0);
      rc = beam_search(v, fn, ctx, o, np, x0, x, r, &sum);
    }
    free(x0);
  }
  for (int k = 0; !rc && !beamed && k < o->max_tokens; k++) {
    whisper_filter_logits(v, o, r->tokens, r->n_tokens, x);
    /* only the normalizer is needed per step: one pass of expf (the full
     * log-softmax in double was most of a step's time on small models) */
    double lse = log_sum_exp(x, V);
    int32_t tok = pick(x, V, t, rng);
    double lp_tok = (double)x[tok] - lse;
    sum += lp_tok;
    if (tok == v->eot) {
      r->ended = true;
      break;
    }
    /* the timestamp this step found likeliest: where in time the token sits
     * (whisper.cpp's token-level timestamps read the same distribution) */
    int32_t best_ts = v->ts_begin;
    for (int32_t i = v->ts_begin + 1; i < V; i++)
      if (x[i] > x[best_ts]) best_ts = i;
    r->ts_tok[r->n_tokens] = best_ts;
    r->ts_prob[r->n_tokens] = (float)exp((double)x[best_ts] - lse);
    r->tokens[r->n_tokens] = tok;
    r->logprobs[r->n_tokens++] = (float)lp_tok;
    if (np + r->n_tokens >= o->n_text_ctx || k + 1 == o->max_tokens) break; /* no room for another */
    rc = fn(ctx, &tok, 1, np + r->n_tokens - 1, x, false);
  }
  if (!rc) {
    r->temperature = t;
    r->avg_logprob = sum / (r->n_tokens + 1);
    r->compression_ratio = compression_ratio(v, r->tokens, r->n_tokens);
  }
  free(x);
  free(lp);
  return rc;
}

int whisper_decode_window(const whisper_vocab *v, whisper_logits_fn fn, void *ctx, const whisper_decode_opts *o,
                          whisper_result *out) {
  memset(out, 0, sizeof *out);
  if (o->n_temps < 1 || o->n_temps > WHISPER_MAX_TEMPS || o->max_tokens < 1 || o->n_text_ctx < 8 ||
      o->beam_size < 0 || o->beam_size > BEAM_MAX ||
      (o->n_prompt > 0 && !o->prompt) || (o->n_suppress > 0 && !o->suppress))
    return err_set(ERR_INVALID, "whisper decode: bad options (%d temperatures, %d max tokens, context %d, beam %d)",
                   o->n_temps, o->max_tokens, o->n_text_ctx, o->beam_size);
  int lang = o->lang;
  float lang_prob = 1.0f;
  if (v->multilingual && (lang < -1 || lang >= v->n_langs))
    return err_set(ERR_INVALID, "whisper decode: language index %d (the model has %d)", lang, v->n_langs);
  if (!v->multilingual) lang = 0; /* English-only: no language or task tokens */
  int rc = 0;
  if (lang < 0 && (rc = whisper_detect_language(v, fn, ctx, NULL, &lang, &lang_prob))) return rc;
  int32_t prompt[512];
  int np = 0, sot_at = 0;
  if ((rc = whisper_build_prompt(v, o, lang, prompt, (int)(sizeof prompt / sizeof prompt[0]), &np, &sot_at)))
    return rc;
  uint64_t rng = o->seed * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < o->n_temps; i++) {
    whisper_result r;
    memset(&r, 0, sizeof r);
    if ((rc = attempt(v, fn, ctx, o, prompt, np, sot_at, o->temps[i], &rng, &r))) {
      whisper_result_free(&r);
      whisper_result_free(out);
      return rc;
    }
    bool low_lp = o->logprob_min < 0 && r.avg_logprob < o->logprob_min;
    bool fallback = (o->compression_ratio_max > 0 && r.compression_ratio > o->compression_ratio_max) || low_lp;
    r.no_speech = o->no_speech_min > 0 && r.no_speech_prob > o->no_speech_min && low_lp;
    if (r.no_speech) fallback = false; /* silence: no temperature will find words */
    whisper_result_free(out);
    *out = r;
    out->n_attempts = i + 1;
    if (!fallback) break;
  }
  out->lang = lang;
  out->lang_prob = lang_prob;
  return 0;
}

int whisper_nonspeech_tokens(const whisper_vocab *v, int32_t *out, int cap) {
  /* tokenizer.py non_speech_tokens: these symbols alone or after a space,
   * and " -", " '" */
  static const char *const sym[] = {"\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\",
                                    "]", "^", "_", "`", "{", "|", "}", "~", "「", "」", "『", "』", "<<", ">>",
                                    "<<<", ">>>", "--", "---", "-(", "-[", "('", "(\"", "((", "))", "(((", ")))",
                                    "[[", "]]", "{{", "}}", "♪♪", "♪♪♪", "♩", "♪", "♫", "♬", "♭", "♮", "♯"};
  int k = 0;
  if (!v->text) return 0;
  for (int32_t t = 0; t < v->eot && k < cap; t++) {
    size_t len = 0;
    const char *s = v->text(v->text_ctx, t, &len);
    if (!s || !len) continue;
    const char *b = s;
    size_t bl = len;
    if (bl > 1 && b[0] == ' ') b++, bl--;
    bool hit = (len == 2 && s[0] == ' ' && (s[1] == '-' || s[1] == '\''));
    for (size_t i = 0; !hit && i < sizeof sym / sizeof sym[0]; i++) hit = strlen(sym[i]) == bl && !memcmp(sym[i], b, bl);
    if (hit) out[k++] = t;
  }
  return k;
}

int whisper_state_logits(void *state, const int32_t *toks, int n, int n_past, float *logits, bool all) {
  return whisper_decode(state, toks, n, n_past, logits, all ? WHISPER_LOGITS_ALL : WHISPER_LOGITS_LAST);
}
