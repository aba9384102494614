/*
 * cmd_pull.c - `parley pull NAME` and `parley rm NAME` (model/pull.h).
 *
 * pull: starts one download job and follows it, printing progress on
 * stderr (a rewritten line on a terminal, a line a second otherwise) and
 * the model's registry name on stdout when done. A job this data dir
 * already holds for NAME (a pull that was killed) is resumed: its .partial
 * files continue with HTTP Range requests. When a running server holds the
 * data directory, the pull still runs (the files are locked one by one)
 * but is not recorded as a job in that server's store.
 *
 * rm: deletes a model parley pulled; refuses models of other tools,
 * --model paths and files placed in the models dir by hand.
 *
 * Exit status: 0; 1 when the pull or removal failed (the reason on stderr);
 * 2 for usage errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/commands.h"
#include "app/config.h"
#include "base/err.h"
#include "model/pull.h"
#include "model/registry.h"
#include "store/store.h"

static void pull_usage(FILE *out) {
  fprintf(out,
          "usage: parley pull NAME [--file PATTERN] [--quant QUANT] [--quiet] [--data-dir DIR] [--models-dir DIR]\n"
          "  NAME is an Ollama name (llama3.2:1b, namespace/model:tag) or a Hugging Face one\n"
          "  (hf.co/OWNER/REPO[:QUANT], OWNER/REPO/FILE.gguf, or OWNER/REPO with --file).\n"
          "  --file PATTERN   HF: the file to download (a path or a pattern like '*Q8_0.gguf')\n"
          "  --quant QUANT    HF: the quantization to pick (Q4_K_M, Q8_0, ...)\n"
          "Endpoints: HF_ENDPOINT (https://huggingface.co), PARLEY_OLLAMA_REGISTRY\n"
          "(https://registry.ollama.ai); HF_TOKEN for gated repositories.\n"
          "usage: parley rm NAME [--data-dir DIR] [--models-dir DIR]   (only models parley pulled)\n");
}

/* "1.3 GB" in decimal units. */
static void human(double v, char *out, size_t cap) {
  static const char *const u[] = {"B", "KB", "MB", "GB", "TB"};
  size_t k = 0;
  while (v >= 1000.0 && k + 1 < sizeof u / sizeof *u) {
    v /= 1000.0;
    k++;
  }
  snprintf(out, cap, k ? "%.1f %s" : "%.0f %s", v, u[k]);
}

/* Splits argv into NAME, our options and the rest (for config_load). */
typedef struct pull_args {
  const char *name, *file, *quant;
  bool quiet;
  char **rest;
  int n_rest;
} pull_args;

static int parse_args(const char *cmd, int argc, char **argv, bool pull, pull_args *a) {
  memset(a, 0, sizeof *a);
  if (!(a->rest = calloc((size_t)argc + 1, sizeof *a->rest))) return 1;
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
      pull_usage(stdout);
      return -1;
    }
    if (pull && (strcmp(s, "--file") == 0 || strcmp(s, "--quant") == 0)) {
      if (i + 1 >= argc) {
        fprintf(stderr, "parley %s: %s needs a value\n", cmd, s);
        return 2;
      }
      if (s[2] == 'f') a->file = argv[++i];
      else a->quant = argv[++i];
    } else if (pull && strncmp(s, "--file=", 7) == 0) {
      a->file = s + 7;
    } else if (pull && strncmp(s, "--quant=", 8) == 0) {
      a->quant = s + 8;
    } else if (pull && strcmp(s, "--quiet") == 0) {
      a->quiet = true;
    } else if (s[0] != '-' && !a->name) {
      a->name = s;
    } else {
      a->rest[a->n_rest++] = argv[i];
      /* config flags take a value unless written --flag=value */
      if (s[0] == '-' && !strchr(s, '=') && i + 1 < argc && argv[i + 1][0] != '-') a->rest[a->n_rest++] = argv[++i];
    }
  }
  if (!a->name) {
    fprintf(stderr, "parley %s: a model name is required\n", cmd);
    pull_usage(stderr);
    return 2;
  }
  return 0;
}

/* Registry over the models dir (and the other stores, for lookups). */
static int make_registry(const config *cfg, registry **out) {
  int rc = registry_new(out);
  if (!rc) rc = registry_set_models_dir(*out, cfg->models_dir);
  if (!rc) rc = registry_refresh(*out);
  return rc;
}

static void print_progress(const pull_status *s, bool tty, bool final) {
  char done[32], total[32], rate[32];
  human((double)s->bytes_done, done, sizeof done);
  human((double)s->bytes_total, total, sizeof total);
  human(s->rate, rate, sizeof rate);
  const char *file = s->current < s->n_files ? s->files[s->current].file : NULL;
  int pct = s->bytes_total > 0 ? (int)(100.0 * (double)s->bytes_done / (double)s->bytes_total) : 0;
  if (s->state == PULL_QUEUED) {
    fprintf(stderr, "%squeued%s", tty ? "\r\033[K" : "", tty ? "" : "\n");
  } else if (s->state == PULL_VERIFYING) {
    fprintf(stderr, "%sverifying and writing %s%s", tty ? "\r\033[K" : "", s->model ? s->model : s->name,
            tty ? "" : "\n");
  } else if (!s->n_files) {
    fprintf(stderr, "%spulling manifest%s", tty ? "\r\033[K" : "", tty ? "" : "\n");
  } else {
    fprintf(stderr, "%spulling %s  %s / %s  %3d%%  %s/s%s", tty ? "\r\033[K" : "", file ? file : "files", done,
            total, pct, rate, tty ? "" : "\n");
  }
  if (final && tty) fputc('\n', stderr);
  fflush(stderr);
}

int cmd_pull(int argc, char **argv) {
  pull_args a;
  int st = parse_args("pull", argc, argv, true, &a);
  if (st) {
    free(a.rest);
    return st < 0 ? 0 : st;
  }
  config cfg;
  if (config_load(&cfg, a.n_rest, a.rest)) {
    fprintf(stderr, "parley pull: %s\n", err_detail());
    config_free(&cfg);
    free(a.rest);
    return 2;
  }
  free(a.rest);
  store *s = NULL;
  int rc = store_open(cfg.data_dir, &s);
  if (rc == ERR_CONFLICT) {
    fprintf(stderr, "parley pull: note: %s; pulling without recording a job\n", err_detail());
    s = NULL;
  } else if (rc) {
    fprintf(stderr, "parley pull: cannot open the data directory %s: %s\n", cfg.data_dir, err_detail());
    config_free(&cfg);
    return 1;
  }
  registry *reg = NULL;
  puller *p = NULL;
  rc = make_registry(&cfg, &reg);
  pull_config pc = {.models_dir = cfg.models_dir, .st = s, .reg = reg};
  if (!rc) rc = puller_new(&pc, &p);
  char id[PULL_ID_CAP];
  bool already = false;
  pull_opts opts = {.file = a.file, .quant = a.quant};
  if (!rc) rc = pull_start(p, a.name, &opts, id, sizeof id, &already);
  int status = 0;
  if (rc) {
    fprintf(stderr, "parley pull: %s\n", err_detail());
    status = rc == ERR_INVALID ? 2 : 1;
  } else {
    bool tty = isatty(2) && !a.quiet;
    uint64_t last_line = 0;
    pull_status ps;
    for (;;) {
      pull_wait(p, id, 250);
      if (pull_get(p, id, &ps)) {
        fprintf(stderr, "parley pull: %s\n", err_detail());
        status = 1;
        break;
      }
      bool fin = pull_state_is_final(ps.state);
      uint64_t now = (uint64_t)time(NULL);
      if (!a.quiet && (tty || fin || now != last_line)) {
        if (!fin || ps.state == PULL_COMPLETED) print_progress(&ps, tty, fin);
        last_line = now;
      }
      if (fin) {
        if (ps.state == PULL_COMPLETED) {
          fprintf(stderr, "success: %s\n", ps.model ? ps.model : ps.name);
          printf("%s\n", ps.model ? ps.model : ps.name);
        } else {
          if (tty) fputc('\n', stderr);
          fprintf(stderr, "parley pull: %s\n", ps.error ? ps.error : pull_state_name(ps.state));
          status = 1;
        }
        pull_status_free(&ps);
        break;
      }
      pull_status_free(&ps);
    }
  }
  puller_free(p);
  registry_free(reg);
  store_close(s);
  config_free(&cfg);
  return status;
}

int cmd_rm(int argc, char **argv) {
  pull_args a;
  int st = parse_args("rm", argc, argv, false, &a);
  if (st) {
    free(a.rest);
    return st < 0 ? 0 : st;
  }
  config cfg;
  if (config_load(&cfg, a.n_rest, a.rest)) {
    fprintf(stderr, "parley rm: %s\n", err_detail());
    config_free(&cfg);
    free(a.rest);
    return 2;
  }
  free(a.rest);
  registry *reg = NULL;
  puller *p = NULL;
  int rc = make_registry(&cfg, &reg);
  pull_config pc = {.models_dir = cfg.models_dir, .reg = reg};
  if (!rc) rc = puller_new(&pc, &p);
  char removed[PULL_NAME_CAP];
  if (!rc) rc = pull_remove(p, a.name, removed, sizeof removed);
  if (rc) fprintf(stderr, "parley rm: %s\n", err_detail());
  else printf("deleted '%s'\n", removed);
  puller_free(p);
  registry_free(reg);
  config_free(&cfg);
  return rc ? 1 : 0;
}
