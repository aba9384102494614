/*
 * whisper_transcribe.c - the window loop of OpenAI's transcribe.py over
 * whisper_decode_window (contract in whisper_transcribe.h).
 *
 * Per window at frame `seek`: the window callback prepares min(W, rest)
 * frames, one window is decoded (the language detected on the first when
 * not given, then kept), and its tokens are cut into segments where two
 * timestamps follow each other. A window whose last segment is closed by
 * a lone timestamp at the end was decoded to its end: the next window
 * starts after it. Otherwise the last segment was cut off, and the next
 * window starts at the last closing timestamp, so the cut speech is heard
 * again from its start. A window without such a pair is one segment up
 * to its last timestamp (or the window's end). Silent windows (the
 * no-speech judgement) are skipped whole. Every token decoded becomes
 * part of the next window's prompt, unless the accepted temperature was
 * above 0.5 (a window that needed sampling should not steer the next).
 *
 * Differences from transcribe.py: a seek that would not move (a window
 * whose closing timestamp is <|0.00|>) moves by the whole window instead
 * of looping; segments without a text token are dropped.
 */
#include "speech/whisper_transcribe.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#define TS_STEP 0.02      /* seconds per timestamp token */
#define FRAME_S 0.01      /* seconds per mel frame */
#define FRAMES_PER_TS 2   /* mel frames per timestamp step */

void whisper_transcript_free(whisper_transcript *t) {
  if (!t) return;
  for (int i = 0; i < t->n_segs; i++) {
    free(t->segs[i].tokens);
    free(t->segs[i].logprobs);
    free(t->segs[i].tok_time);
  }
  free(t->segs);
  memset(t, 0, sizeof *t);
}

/* Growable token list: the conditioning history. */
typedef struct toklist {
  int32_t *t;
  int n, cap;
} toklist;

static int toklist_add(toklist *l, const int32_t *t, int n) {
  if (l->n + n > l->cap) {
    int cap = l->cap ? l->cap : 256;
    while (cap < l->n + n) cap *= 2;
    int32_t *nt = realloc(l->t, (size_t)cap * sizeof *nt);
    if (!nt) return err_set(ERR_NOMEM, "whisper: prompt history");
    l->t = nt;
    l->cap = cap;
  }
  if (n) memcpy(l->t + l->n, t, (size_t)n * sizeof *t);
  l->n += n;
  return 0;
}

/* Appends the segment of r's tokens [a, b) (timestamps included, they
 * give the times) to out; windows start at seek. */
static int add_segment(whisper_transcript *out, const whisper_transcribe_cfg *c, const whisper_result *r, int a,
                       int b, int64_t seek, double start, double end, double audio_end) {
  const int32_t tb = c->v->ts_begin;
  int n_text = 0;
  for (int i = a; i < b; i++) n_text += r->tokens[i] < c->v->eot;
  if (!n_text) return 0;
  whisper_segment *segs = realloc(out->segs, (size_t)(out->n_segs + 1) * sizeof *segs);
  if (!segs) return err_set(ERR_NOMEM, "whisper: segments");
  out->segs = segs;
  whisper_segment *s = &segs[out->n_segs];
  memset(s, 0, sizeof *s);
  s->tokens = malloc((size_t)n_text * sizeof *s->tokens);
  s->logprobs = malloc((size_t)n_text * sizeof *s->logprobs);
  s->tok_time = malloc((size_t)n_text * sizeof *s->tok_time);
  if (!s->tokens || !s->logprobs || !s->tok_time) {
    free(s->tokens);
    free(s->logprobs);
    free(s->tok_time);
    return err_set(ERR_NOMEM, "whisper: segments");
  }
  double offset = (double)seek * FRAME_S;
  for (int i = a; i < b; i++) {
    if (r->tokens[i] >= c->v->eot) continue;
    double at = -1;
    if (r->ts_prob && r->ts_prob[i] > c->anchor_min && r->ts_tok[i] >= tb) {
      at = offset + (r->ts_tok[i] - tb) * TS_STEP;
      if (at > audio_end) at = audio_end;
    }
    s->tokens[s->n_tokens] = r->tokens[i];
    s->logprobs[s->n_tokens] = r->logprobs[i];
    s->tok_time[s->n_tokens++] = at;
  }
  /* a timestamp past the end of the audio (the window is zero-padded to
   * 30 s) means its end */
  if (start > audio_end) start = audio_end;
  if (end > audio_end) end = audio_end;
  s->seek = seek;
  s->start = start;
  s->end = end > start ? end : start;
  s->temperature = r->temperature;
  s->avg_logprob = r->avg_logprob;
  s->compression_ratio = r->compression_ratio;
  s->no_speech_prob = r->no_speech_prob;
  out->n_segs++;
  return c->on_segment && c->on_segment(c->user, s) ? err_set(ERR_CANCELLED, "whisper: transcription stopped") : 0;
}

/* Cuts window r (at seek, size frames) into segments; returns the frames
 * to advance by, or a negative error. */
static int64_t cut_window(whisper_transcript *out, const whisper_transcribe_cfg *c, const whisper_result *r,
                          int64_t seek, int64_t size) {
  const int32_t tb = c->v->ts_begin;
  const int n = r->n_tokens;
  const double offset = (double)seek * FRAME_S, ae = (double)(seek + size) * FRAME_S;
#define IS_TS(i) (r->tokens[(i)] >= tb)
  bool single_end = n >= 2 && !IS_TS(n - 2) && IS_TS(n - 1);
  int last = 0, rc;
  bool any_pair = false;
  for (int k = 1; k < n; k++) {
    if (!(IS_TS(k - 1) && IS_TS(k))) continue;
    any_pair = true;
    /* tokens [last, k) are one segment from its first to its last timestamp */
    if (k > last) {
      double t0 = offset + (r->tokens[last] >= tb ? r->tokens[last] - tb : 0) * TS_STEP;
      double t1 = offset + (r->tokens[k - 1] - tb) * TS_STEP;
      if ((rc = add_segment(out, c, r, last, k, seek, t0, t1, ae))) return rc;
    }
    last = k;
  }
  if (any_pair) {
    if (single_end) {
      if (n > last) {
        double t0 = offset + (IS_TS(last) ? r->tokens[last] - tb : 0) * TS_STEP;
        double t1 = offset + (r->tokens[n - 1] - tb) * TS_STEP;
        if ((rc = add_segment(out, c, r, last, n, seek, t0, t1, ae))) return rc;
      }
      return size;
    }
    /* the rest was cut off: start the next window at the last closing timestamp */
    int64_t adv = (int64_t)(r->tokens[last - 1] - tb) * FRAMES_PER_TS;
    return adv > 0 ? adv : size;
  }
  double dur = (double)size * FRAME_S;
  for (int i = n - 1; i >= 0; i--)
    if (IS_TS(i)) {
      if (r->tokens[i] != tb) dur = (r->tokens[i] - tb) * TS_STEP;
      break;
    }
#undef IS_TS
  if ((rc = add_segment(out, c, r, 0, n, seek, offset, offset + dur, ae))) return rc;
  return size;
}

int whisper_transcribe(const whisper_transcribe_cfg *c, int64_t n_frames, whisper_transcript *out) {
  memset(out, 0, sizeof *out);
  if (!c || !c->v || !c->logits || !c->window || c->window_frames < 2 || n_frames < 0)
    return err_set(ERR_INVALID, "whisper transcribe: bad arguments");
  whisper_decode_opts o = c->opts;
  toklist hist = {0};
  int rc = toklist_add(&hist, o.prompt, o.prompt ? o.n_prompt : 0);
  int reset_at = 0;
  out->lang = o.lang;
  out->lang_prob = 1;
  for (int64_t seek = 0; !rc && seek < n_frames;) {
    int64_t size = n_frames - seek < c->window_frames ? n_frames - seek : c->window_frames;
    if ((rc = c->window(c->ctx, seek, size))) break;
    o.prompt = hist.n > reset_at ? hist.t + reset_at : NULL;
    o.n_prompt = hist.n - reset_at;
    whisper_result r;
    if ((rc = whisper_decode_window(c->v, c->logits, c->ctx, &o, &r))) break;
    if (out->n_windows++ == 0) {
      out->lang = r.lang;
      out->lang_prob = r.lang_prob;
      o.lang = r.lang; /* detected once, on the first window */
    }
    int64_t adv = size;
    if (!r.no_speech) {
      adv = cut_window(out, c, &r, seek, size);
      if (adv < 0) rc = (int)adv;
      if (!rc) rc = toklist_add(&hist, r.tokens, r.n_tokens);
      if (!c->condition_on_previous || r.temperature > 0.5f) reset_at = hist.n;
    }
    whisper_result_free(&r);
    seek += adv;
  }
  free(hist.t);
  if (rc) whisper_transcript_free(out);
  return rc;
}
