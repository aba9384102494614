/*
 * stt_catalog.c - which speech-to-text models are installed: the table of
 * STT backends (speech.h, stt_backends) and the scan that finds the model
 * files of those that read files.
 *
 * Whisper models are whisper.cpp's files, named ggml-<size>.bin by its
 * download script and the Hugging Face repository that publishes them;
 * they are found in the models directory (not below it: the GGUF scan
 * owns the subfolders) and at --stt-model. Each is named
 * whisper-<size> ("ggml-base.en.bin" -> "whisper-base.en"). pocketsphinx
 * reads Debian's package (pocketsphinx-en-us) and is always listed last:
 * the default only when no Whisper file is installed.
 *
 * The scan reads only directory entries and file sizes; a file is opened
 * when a request first uses it (whisper_file_open checks it then).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/util.h"
#include "speech/speech.h"

static const stt_backend_row BACKENDS[] = {
    {.name = "whisper", .file_prefix = "ggml-", .file_suffix = ".bin", .model_prefix = "whisper-",
     .package = "a whisper.cpp model file (ggml-base.en.bin, ...) in the models directory or --stt-model"},
    {.name = "pocketsphinx", .model = "pocketsphinx-en-us", .package = "pocketsphinx-en-us"},
};

const stt_backend_row *stt_backends(size_t *n) {
  *n = ARRAY_LEN(BACKENDS);
  return BACKENDS;
}

void stt_models_free(stt_model_info *m, size_t n) {
  for (size_t i = 0; m && i < n; i++) {
    free(m[i].name);
    free(m[i].path);
  }
  free(m);
}

/* The model name of file base name b for row r: prefix + the stem between
 * the file prefix and suffix. NULL when b is not such a file. */
static char *model_name(const stt_backend_row *r, const char *b) {
  size_t n = strlen(b), lp = strlen(r->file_prefix), ls = strlen(r->file_suffix);
  if (n <= lp + ls || strncmp(b, r->file_prefix, lp) != 0 || strcasecmp(b + n - ls, r->file_suffix) != 0) return NULL;
  size_t stem = n - lp - ls, cap = strlen(r->model_prefix) + stem + 1;
  char *s = malloc(cap);
  if (s) snprintf(s, cap, "%s%.*s", r->model_prefix, (int)stem, b + lp);
  return s;
}

static int add(stt_model_info **m, size_t *n, const stt_backend_row *r, const char *name, const char *path) {
  for (size_t i = 0; i < *n; i++)
    if (strcmp((*m)[i].name, name) == 0) return 0; /* --stt-model first, then the folder */
  struct stat st;
  if (path && stat(path, &st) != 0) return 0;
  stt_model_info *nm = realloc(*m, (*n + 1) * sizeof *nm);
  if (!nm) return err_set(ERR_NOMEM, "stt models");
  *m = nm;
  stt_model_info *e = &nm[*n];
  *e = (stt_model_info){.name = str_dup(name), .path = path ? str_dup(path) : NULL, .backend = r->name,
                        .size = path ? (int64_t)st.st_size : 0, .mtime = path ? (int64_t)st.st_mtime : 0};
  if (!e->name || (path && !e->path)) {
    free(e->name);
    free(e->path);
    return err_set(ERR_NOMEM, "stt models");
  }
  (*n)++;
  return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Files of row r in dir, in name order. */
static int scan_dir(const stt_backend_row *r, const char *dir, stt_model_info **m, size_t *n) {
  DIR *d = dir && *dir ? opendir(dir) : NULL;
  if (!d) return 0; /* no folder: nothing installed there */
  char **names = NULL;
  size_t k = 0;
  int rc = 0;
  for (struct dirent *de; !rc && (de = readdir(d));) {
    char *nm = model_name(r, de->d_name);
    if (!nm) continue;
    free(nm);
    char **nn = realloc(names, (k + 1) * sizeof *nn);
    if (!nn || !(nn[k] = str_dup(de->d_name))) rc = err_set(ERR_NOMEM, "stt models");
    if (nn) names = nn;
    if (!rc) k++;
  }
  closedir(d);
  if (k) qsort(names, k, sizeof *names, cmp_names);
  for (size_t i = 0; !rc && i < k; i++) {
    size_t cap = strlen(dir) + strlen(names[i]) + 2;
    char *path = malloc(cap), *nm = model_name(r, names[i]);
    if (path && nm) {
      snprintf(path, cap, "%s/%s", dir, names[i]);
      rc = add(m, n, r, nm, path);
    } else {
      rc = err_set(ERR_NOMEM, "stt models");
    }
    free(path);
    free(nm);
  }
  for (size_t i = 0; i < k; i++) free(names[i]);
  free(names);
  return rc;
}

int stt_models_scan(const char *models_dir, const char *stt_model, stt_model_info **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  stt_model_info *m = NULL;
  size_t n = 0;
  int rc = 0;
  for (size_t i = 0; !rc && i < ARRAY_LEN(BACKENDS); i++) {
    const stt_backend_row *r = &BACKENDS[i];
    if (!r->file_prefix) {
      rc = add(&m, &n, r, r->model, NULL);
      continue;
    }
    if (stt_model && *stt_model) {
      const char *b = strrchr(stt_model, '/');
      char *nm = model_name(r, b ? b + 1 : stt_model);
      if (!nm) { /* any other file name: whisper-<its stem> */
        b = b ? b + 1 : stt_model;
        size_t cap = strlen(r->model_prefix) + strlen(b) + 1;
        if ((nm = malloc(cap))) snprintf(nm, cap, "%s%s", r->model_prefix, b);
        char *dot = nm ? strrchr(nm, '.') : NULL;
        if (dot && dot > nm + strlen(r->model_prefix)) *dot = 0;
      }
      struct stat st;
      if (!nm) rc = err_set(ERR_NOMEM, "stt models");
      else if (stat(stt_model, &st) != 0) rc = err_set(ERR_NOT_FOUND, "--stt-model %s: no such file", stt_model);
      else rc = add(&m, &n, r, nm, stt_model);
      free(nm);
    }
    if (!rc) rc = scan_dir(r, models_dir, &m, &n);
  }
  if (rc) {
    stt_models_free(m, n);
    return rc;
  }
  *out = m;
  *n_out = n;
  return 0;
}
