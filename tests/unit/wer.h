/*
 * wer.h - word error counting for the speech-to-text checks: the WER test
 * (tests/unit/test_speech_wer.c) and the real-time-factor benchmark
 * (bench/stt_rtf.c) score transcripts the same way, so both include this.
 * Header-only (static functions) because the benchmark links no test code.
 */
#ifndef PARLEY_TESTS_WER_H
#define PARLEY_TESTS_WER_H

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Splits lower-cased text into words (letters, digits, apostrophes); words
 * longer than 31 characters are cut. */
static size_t wer_split_words(const char *s, char words[][32], size_t max) {
  size_t n = 0;
  while (*s && n < max) {
    while (*s && !isalnum((unsigned char)*s) && *s != '\'') s++;
    size_t k = 0;
    while (*s && (isalnum((unsigned char)*s) || *s == '\'')) {
      if (k < 31) words[n][k++] = (char)tolower((unsigned char)*s);
      s++;
    }
    if (k) words[n][k] = '\0', n++;
  }
  return n;
}

/* Word-level Levenshtein distance (substitutions + deletions + insertions)
 * between the first 256 words of ref and hyp; *n_ref = ref words. Not
 * reentrant (static word tables). */
static size_t word_errors(const char *ref, const char *hyp, size_t *n_ref) {
  static char r[256][32], h[256][32];
  size_t nr = wer_split_words(ref, r, 256), nh = wer_split_words(hyp, h, 256);
  *n_ref = nr;
  size_t prev[257], cur[257];
  for (size_t j = 0; j <= nh; j++) prev[j] = j;
  for (size_t i = 1; i <= nr; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= nh; j++) {
      size_t sub = prev[j - 1] + (strcmp(r[i - 1], h[j - 1]) != 0), del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, (nh + 1) * sizeof *prev);
  }
  return prev[nh];
}

#endif
