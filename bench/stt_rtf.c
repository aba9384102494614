/*
 * stt_rtf.c - A/B measurement of the STT backend's speed and accuracy on
 * Debian's pocketsphinx-testdata recordings (librivox, cards, goforward),
 * for tuning the decoder options (docs/speech.md, docs/perf.md).
 *
 *   bench/stt_rtf.sh ROUNDS NAME "OPTS" [NAME "OPTS" ...]
 *   e.g. bench/stt_rtf.sh 3 base "" ds2 "-ds 2"
 *
 * OPTS are pocketsphinx name/value pairs on top of our defaults
 * (stt_config.options); a first word "split=SECONDS" sets
 * stt_config.split_min_s (split=-1: never split one clip across two
 * decoders; without it, the default). Each round
 * runs every configuration in turn over every clip (alternating, so load
 * from other processes falls on all alike). Reported per configuration and
 * set ("librivox joined" is the five librivox clips as one 25 s recording,
 * the case a split across two decoders is for): WER (word Levenshtein / reference words, first round), and the
 * medians over rounds of CPU RTF (process CPU seconds / audio seconds: all
 * threads, so a parallel split costs what it uses) and wall RTF.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio/audio.h"
#include "base/err.h"
#include "base/util.h"
#include "speech/speech.h"
#include "../tests/unit/wer.h"

#define PS_DATA "/usr/share/pocketsphinx/test/data"
#define MAX_CLIPS 16
#define MAX_CFG 6
#define MAX_ROUNDS 15

typedef struct clip {
  char name[96], ref[512];
  int16_t *pcm;
  size_t n;
  int set; /* 0 librivox, 1 cards, 2 goforward, 3 librivox joined */
} clip;

#define N_SETS 4
static const char *SETS[N_SETS] = {"librivox", "cards", "goforward", "librivox joined"};

static double now_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t load_corpus(const char *dir, const char *trans, int set, clip *out, size_t max) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, trans);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  size_t n = 0;
  while (n < max && fgets(line, sizeof line, f)) {
    char *open = strrchr(line, '('), *close = open ? strchr(open, ')') : NULL;
    if (!open || !close) continue;
    *close = *open = '\0';
    char *ref = strstr(line, "<s>");
    ref = ref ? ref + 3 : line;
    char *end = strstr(ref, "</s>");
    if (end) *end = '\0';
    clip *c = &out[n];
    snprintf(c->name, sizeof c->name, "%s", open + 1);
    snprintf(c->ref, sizeof c->ref, "%.500s", ref);
    snprintf(path, sizeof path, "%s/%s.wav", dir, open + 1);
    FILE *w = fopen(path, "rb");
    if (!w) continue;
    fseek(w, 0, SEEK_END);
    long len = ftell(w);
    fseek(w, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)len);
    size_t got = bytes ? fread(bytes, 1, (size_t)len, w) : 0;
    fclose(w);
    audio_decode_opts o = {.target_rate = 16000, .target_channels = 1, .fmt = AUDIO_SAMPLE_S16};
    audio_pcm p;
    int rc = got == (size_t)len ? audio_decode(bytes, got, &o, &p) : -1;
    free(bytes);
    if (rc) continue;
    c->pcm = p.data;
    c->n = p.n_frames;
    c->set = set;
    n++;
  }
  fclose(f);
  return n;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 2) % 2) {
    fprintf(stderr, "usage: %s ROUNDS NAME \"OPTS\" [NAME \"OPTS\" ...]\n", argv[0]);
    return 2;
  }
  int rounds = atoi(argv[1]), n_cfg = (argc - 2) / 2;
  if (rounds < 1 || rounds > MAX_ROUNDS || n_cfg > MAX_CFG) return 2;
  static clip clips[MAX_CLIPS];
  size_t n = load_corpus(PS_DATA "/librivox", "transcription", 0, clips, MAX_CLIPS);
  n += load_corpus(PS_DATA "/cards", "cards.transcription", 1, clips + n, MAX_CLIPS - n);
  FILE *g = fopen(PS_DATA "/goforward.raw", "rb");
  if (g && n < MAX_CLIPS) {
    clip *c = &clips[n];
    c->pcm = malloc(200000);
    c->n = fread(c->pcm, 2, 100000, g);
    snprintf(c->name, sizeof c->name, "goforward");
    snprintf(c->ref, sizeof c->ref, "go forward ten meters");
    c->set = 2;
    n++;
  }
  if (g) fclose(g);
  size_t n_lv = 0, tot = 0;
  for (size_t i = 0; i < n; i++)
    if (clips[i].set == 0) n_lv++, tot += clips[i].n;
  if (n_lv && n < MAX_CLIPS) {
    clip *c = &clips[n];
    c->pcm = malloc(tot * sizeof *c->pcm);
    snprintf(c->name, sizeof c->name, "librivox-joined");
    c->set = 3;
    for (size_t i = 0; i < n; i++)
      if (clips[i].set == 0) {
        memcpy(c->pcm + c->n, clips[i].pcm, clips[i].n * sizeof *c->pcm);
        c->n += clips[i].n;
        size_t l = strlen(c->ref);
        snprintf(c->ref + l, sizeof c->ref - l, "%s%s", l ? " " : "", clips[i].ref);
      }
    n++;
  }
  stt *s[MAX_CFG];
  double split[MAX_CFG];
  char *optv[MAX_CFG][33];
  for (int k = 0; k < n_cfg; k++) {
    char *o = strdup(argv[3 + 2 * k]);
    int m = 0;
    split[k] = 0;
    for (char *t = strtok(o, " "); t && m < 32; t = strtok(NULL, " ")) {
      if (m == 0 && !strncmp(t, "split=", 6)) split[k] = atof(t + 6);
      else optv[k][m++] = t;
    }
    optv[k][m] = NULL;
    stt_config cfg = {.options = m ? (const char *const *)optv[k] : NULL, .n_preload = 2, .n_max = 2,
                      .split_min_s = split[k]};
    if (stt_open(&s[k], &cfg)) {
      fprintf(stderr, "%s: cannot open: %s\n", argv[2 + 2 * k], err_detail());
      return 1;
    }
  }
  static double cpu[MAX_CFG][N_SETS][MAX_ROUNDS], wall[MAX_CFG][N_SETS][MAX_ROUNDS];
  double audio[N_SETS] = {0};
  size_t errs[MAX_CFG][N_SETS] = {{0}}, words[N_SETS] = {0};
  for (size_t i = 0; i < n; i++) audio[clips[i].set] += clips[i].n / 16000.0;
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < n_cfg; k++)
      for (size_t i = 0; i < n; i++) {
        stt_result res;
        double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID), w0 = now_s(CLOCK_MONOTONIC);
        int rc = stt_transcribe(s[k], clips[i].pcm, clips[i].n, &res);
        cpu[k][clips[i].set][r] += now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        wall[k][clips[i].set][r] += now_s(CLOCK_MONOTONIC) - w0;
        if (rc) {
          fprintf(stderr, "%s: %s\n", clips[i].name, err_detail());
          continue;
        }
        if (r == 0) {
          size_t nr;
          errs[k][clips[i].set] += word_errors(clips[i].ref, res.text, &nr);
          if (k == 0) words[clips[i].set] += nr;
          if (getenv("STT_RTF_VERBOSE")) printf("%s %s: %s\n", argv[2 + 2 * k], clips[i].name, res.text);
        }
        stt_result_free(&res);
      }
  printf("| config | set | audio s | words | WER | CPU RTF (median of %d) | wall RTF |\n|---|---|---|---|---|---|---|\n",
         rounds);
  for (int k = 0; k < n_cfg; k++)
    for (int set = 0; set < N_SETS; set++) {
      qsort(cpu[k][set], (size_t)rounds, sizeof(double), cmp_d);
      qsort(wall[k][set], (size_t)rounds, sizeof(double), cmp_d);
      printf("| %s `%s` | %s | %.1f | %zu | %.1f%% | %.3f | %.3f |\n", argv[2 + 2 * k], argv[3 + 2 * k], SETS[set],
             audio[set], words[set], words[set] ? 100.0 * errs[k][set] / words[set] : 0.0,
             cpu[k][set][rounds / 2] / audio[set], wall[k][set][rounds / 2] / audio[set]);
    }
  for (int k = 0; k < n_cfg; k++) stt_close(s[k]);
  for (size_t i = 0; i < n; i++) free(clips[i].pcm);
  return 0;
}
