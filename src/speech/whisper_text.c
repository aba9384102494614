/*
 * whisper_text.c - the text side of a Whisper transcript (contracts in
 * whisper_transcribe.h): token bytes to well-formed UTF-8, words with
 * times, and prompts tokenized by greedy longest match.
 *
 * Token texts are bytes (a multi-byte character may be split across
 * tokens), so text is always built from a run of tokens' bytes and only
 * then made well-formed.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/util.h"
#include "speech/whisper_transcribe.h"

/* Appends token tok's bytes without NULs. */
static int put_token(const whisper_vocab *v, int32_t tok, buf *b) {
  size_t len = 0;
  const char *s = v->text && tok >= 0 && tok < v->eot ? v->text(v->text_ctx, tok, &len) : NULL;
  for (size_t i = 0; s && i < len; i++)
    if (s[i] && buf_append_byte(b, (uint8_t)s[i])) return ERR_NOMEM;
  return 0;
}

/* b's bytes (NUL-free) as a malloc'd well-formed string. */
static char *lossy(buf *b) {
  if (buf_append_byte(b, 0)) return NULL;
  return str_utf8_lossy((const char *)b->data);
}

char *whisper_tokens_text(const whisper_vocab *v, const int32_t *toks, int n) {
  buf b = BUF_INIT;
  for (int i = 0; i < n; i++)
    if (put_token(v, toks[i], &b)) {
      buf_free(&b);
      return NULL;
    }
  char *s = lossy(&b);
  buf_free(&b);
  return s;
}

void whisper_words_free(whisper_word *w, int n) {
  for (int i = 0; w && i < n; i++) free(w[i].text);
  free(w);
}

/* Time at character position p by linear interpolation between the fixed
 * points (pos[k], t[k]), k < n, positions increasing. */
static double time_at(const double *pos, const double *t, int n, double p) {
  for (int k = 1; k < n; k++)
    if (p <= pos[k]) return pos[k] > pos[k - 1] ? t[k - 1] + (t[k] - t[k - 1]) * (p - pos[k - 1]) / (pos[k] - pos[k - 1]) : t[k];
  return t[n - 1];
}

int whisper_segment_words(const whisper_vocab *v, const whisper_segment *s, whisper_word **out) {
  *out = NULL;
  int n = s->n_tokens;
  if (n == 0) return 0;
  /* character position of each token's start (token byte lengths) */
  double *pos = malloc((size_t)(n + 2) * sizeof *pos), *fx = malloc((size_t)(n + 2) * sizeof *fx),
         *ft = malloc((size_t)(n + 2) * sizeof *ft);
  whisper_word *w = calloc((size_t)n, sizeof *w);
  int rc = pos && fx && ft && w ? 0 : err_set(ERR_NOMEM, "whisper: words");
  double total = 0;
  for (int i = 0; !rc && i < n; i++) {
    size_t len = 0;
    const char *t = v->text && s->tokens[i] < v->eot ? v->text(v->text_ctx, s->tokens[i], &len) : NULL;
    pos[i] = total;
    total += t ? (double)len : 0;
  }
  /* fixed points: the segment's ends and the anchors that keep time in order */
  int nf = 0;
  if (!rc) {
    fx[nf] = 0, ft[nf++] = s->start;
    for (int i = 0; i < n; i++) {
      double a = s->tok_time[i];
      if (a < 0 || pos[i] <= fx[nf - 1] || a < ft[nf - 1] || a > s->end) continue;
      fx[nf] = pos[i], ft[nf++] = a;
    }
    if (total > fx[nf - 1]) fx[nf] = total, ft[nf++] = s->end;
    else ft[nf - 1] = ft[nf - 1] > s->end ? s->end : ft[nf - 1];
  }
  int nw = 0;
  for (int i = 0; !rc && i < n;) {
    /* a word: a token opening with a space (or the first), then those that do not */
    int j = i + 1;
    for (; j < n; j++) {
      size_t len = 0;
      const char *t = v->text && s->tokens[j] < v->eot ? v->text(v->text_ctx, s->tokens[j], &len) : NULL;
      if (t && len && t[0] == ' ') break;
    }
    buf b = BUF_INIT;
    double lp = 0;
    for (int k = i; k < j && !rc; k++) {
      rc = put_token(v, s->tokens[k], &b);
      lp += s->logprobs[k];
    }
    char *txt = rc ? NULL : lossy(&b);
    buf_free(&b);
    if (!rc && !txt) rc = err_set(ERR_NOMEM, "whisper: words");
    if (!rc) {
      char *p = txt;
      while (*p == ' ') p++;
      if (*p) {
        memmove(txt, p, strlen(p) + 1);
        double end_pos = j < n ? pos[j] : total;
        w[nw] = (whisper_word){.text = txt, .start = time_at(fx, ft, nf, pos[i]), .end = time_at(fx, ft, nf, end_pos),
                               .prob = exp(lp / (j - i)), .first_token = i, .n_tokens = j - i};
        nw++;
      } else {
        free(txt);
      }
    }
    i = j;
  }
  free(pos);
  free(fx);
  free(ft);
  if (rc) {
    whisper_words_free(w, nw);
    return rc;
  }
  if (!nw) {
    free(w);
    return 0;
  }
  *out = w;
  return nw;
}

/* ---- prompt tokenizer ------------------------------------------------------ */

typedef struct tok_entry {
  const char *s; /* the token's bytes (in the vocabulary) */
  size_t len;
  int32_t id;
} tok_entry;

struct whisper_tokenizer {
  tok_entry *e; /* text tokens sorted by bytes, then id */
  int n;
  size_t max_len;
};

static int cmp_bytes(const char *a, size_t la, const char *b, size_t lb) {
  int c = memcmp(a, b, la < lb ? la : lb);
  return c ? c : (la > lb) - (la < lb);
}

static int cmp_entries(const void *pa, const void *pb) {
  const tok_entry *a = pa, *b = pb;
  int c = cmp_bytes(a->s, a->len, b->s, b->len);
  return c ? c : (a->id > b->id) - (a->id < b->id);
}

int whisper_tokenizer_new(const whisper_vocab *v, whisper_tokenizer **out) {
  *out = NULL;
  if (!v->text) return err_set(ERR_INVALID, "whisper tokenizer: the vocabulary has no token texts");
  whisper_tokenizer *t = calloc(1, sizeof *t);
  if (t) t->e = malloc((size_t)v->eot * sizeof *t->e);
  if (!t || !t->e) {
    free(t);
    return err_set(ERR_NOMEM, "whisper tokenizer");
  }
  for (int32_t i = 0; i < v->eot; i++) {
    size_t len = 0;
    const char *s = v->text(v->text_ctx, i, &len);
    if (!s || !len) continue;
    t->e[t->n++] = (tok_entry){s, len, i};
    if (len > t->max_len) t->max_len = len;
  }
  qsort(t->e, (size_t)t->n, sizeof *t->e, cmp_entries);
  *out = t;
  return 0;
}

void whisper_tokenizer_free(whisper_tokenizer *t) {
  if (!t) return;
  free(t->e);
  free(t);
}

/* The lowest id whose bytes equal s[len], -1 when none. */
static int32_t find(const whisper_tokenizer *t, const char *s, size_t len) {
  int lo = 0, hi = t->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (cmp_bytes(t->e[mid].s, t->e[mid].len, s, len) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo < t->n && t->e[lo].len == len && memcmp(t->e[lo].s, s, len) == 0 ? t->e[lo].id : -1;
}

int whisper_tokenize(const whisper_tokenizer *t, const char *text, int32_t *out, int cap, int *n) {
  *n = 0;
  size_t len = text ? strlen(text) : 0;
  for (size_t i = 0; i < len;) {
    size_t l = len - i < t->max_len ? len - i : t->max_len;
    int32_t id = -1;
    for (; l > 0 && id < 0; l--) id = find(t, text + i, l);
    if (id < 0) {
      i++; /* no token has this byte */
      continue;
    }
    if (*n >= cap) return err_set(ERR_TOO_LARGE, "whisper prompt: more than %d tokens", cap);
    out[(*n)++] = id;
    i += l + 1;
  }
  return 0;
}
