/*
 * cmd_list.c - `parley list [--json]`: every model the registry finds, merged
 * from parley's models directory, --model paths, Ollama, LM Studio and the
 * Hugging Face cache (model/registry.h), one line each:
 *
 *   NAME                         SIZE     QUANT    FAMILY    SOURCE
 *   llama3.2:1b                  1.3 GB   Q4_K_M   llama3    ollama
 *
 * Files that cannot be used are listed too, with their error below the
 * table, then the aliases and the default. --json prints
 * {"models":[{...}], "aliases":{ALIAS: MODEL|null}, "default": NAME|null}
 * with every field of an entry (docs/models.md); an alias maps to the model
 * it resolves to now, null when none.
 *
 * Options: --json; --model PATH or --model NAME=PATH (repeatable);
 * --alias NAME=MODEL (repeatable); --default NAME; and every configuration
 * option (--models-dir, --data-dir, ...), handed to config_load().
 * Exit status: 0, 1 when the registry cannot be built, 2 for usage errors.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/commands.h"
#include "app/config.h"
#include "base/err.h"
#include "model/family.h"
#include "model/registry.h"

static void list_usage(FILE *out) {
  fprintf(out,
          "usage: parley list [--json] [--model [NAME=]PATH]... [--alias NAME=MODEL]... [--default NAME]\n"
          "                   [--models-dir DIR] [other configuration options]\n"
          "  --json            print the list as JSON\n"
          "  --model PATH      also list this GGUF file (NAME=PATH names it)\n"
          "  --alias N=MODEL   another name for a model\n"
          "  --default NAME    the model used when a request names none\n"
          "Also read: OLLAMA_MODELS, HF_HUB_CACHE, HF_HOME, PARLEY_LMSTUDIO_MODELS,\n"
          "PARLEY_NO_EXTERNAL_MODELS=1 (only parley's own models and --model).\n");
}

/* "1.3 GB" in decimal units, as Ollama and LM Studio show sizes. */
static void human_size(uint64_t n, char *out, size_t cap) {
  static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = (double)n;
  size_t u = 0;
  while (v >= 1000.0 && u + 1 < sizeof units / sizeof *units) {
    v /= 1000.0;
    u++;
  }
  if (u == 0) snprintf(out, cap, "%llu B", (unsigned long long)n);
  else snprintf(out, cap, "%.1f %s", v, units[u]);
}

/* --model value: "NAME=PATH" when the whole text is not an existing file and
 * holds a '=', else a path. */
static int add_model_arg(registry *r, const char *v) {
  struct stat st;
  const char *eq = strchr(v, '=');
  if (eq && eq != v && stat(v, &st) != 0) {
    char name[512];
    snprintf(name, sizeof name, "%.*s", (int)(eq - v), v);
    return registry_add_model(r, eq + 1, name);
  }
  return registry_add_model(r, v, NULL);
}

static json_t *entry_json(const registry_entry *e) {
  json_t *caps = json_array();
  for (uint32_t bit = 1; bit < (1u << FAMILY_CAP_COUNT_); bit <<= 1)
    if ((e->caps & bit) && family_cap_name(bit)) json_array_append_new(caps, json_string(family_cap_name(bit)));
  return json_pack("{s:s, s:s, s:s, s:s?, s:I, s:s, s:s, s:s, s:o, s:b, s:I, s:I, s:I, s:I, s:s, s:s?, s:b}", "name",
                   e->name, "source", registry_source_name(e->source), "path", e->path, "projector", e->projector,
                   "size", (json_int_t)e->size, "quant", e->quant, "arch", e->arch, "family",
                   family_name(e->family), "capabilities", caps, "executable", e->executable, "context_length",
                   (json_int_t)e->context_length, "parameters", (json_int_t)e->n_params, "active_parameters",
                   (json_int_t)e->n_params_active, "modified_at", (json_int_t)e->mtime, "digest", e->digest,
                   "error", e->error, "pulled", e->pulled);
}

/* Three significant digits: "494M", "30.5B", "4.19M"; with experts the
 * active count after a slash: "30.5B/3.34B". */
static void human_params(const registry_entry *e, char *out, size_t cap) {
  const uint64_t v[2] = {e->n_params, e->n_params_active};
  if (!v[0]) {
    snprintf(out, cap, "-");
    return;
  }
  size_t o = 0;
  for (int i = 0; i < (v[0] != v[1] ? 2 : 1) && o < cap; i++) {
    const double x = (double)v[i];
    const double d = x >= 1e9 ? 1e9 : x >= 1e6 ? 1e6 : x >= 1e3 ? 1e3 : 1;
    const char *unit = x >= 1e9 ? "B" : x >= 1e6 ? "M" : x >= 1e3 ? "K" : "";
    o += (size_t)snprintf(out + o, cap - o, "%s%.3g%s", i ? "/" : "", x / d, unit);
  }
}

/* The name an alias resolves to now, or NULL when it names no model. */
static char *alias_resolved(registry *r, const char *alias) {
  char name[1024];
  if (registry_resolve(r, alias, name, sizeof name)) return NULL;
  return strdup(name);
}

static void print_table(registry *r, registry_snapshot *s) {
  size_t w = 4;
  for (size_t i = 0; i < registry_snapshot_count(s); i++) {
    size_t l = strlen(registry_snapshot_at(s, i)->name);
    if (l > w) w = l;
  }
  printf("%-*s  %-9s  %-13s  %-8s  %-12s  %s\n", (int)w, "NAME", "SIZE", "PARAMS", "QUANT", "FAMILY", "SOURCE");
  size_t n_err = 0;
  for (size_t i = 0; i < registry_snapshot_count(s); i++) {
    const registry_entry *e = registry_snapshot_at(s, i);
    char sz[32], pc[48];
    human_size(e->size, sz, sizeof sz);
    human_params(e, pc, sizeof pc);
    printf("%-*s  %-9s  %-13s  %-8s  %-12s  %s%s\n", (int)w, e->name, sz, pc, e->quant[0] ? e->quant : "-",
           e->error ? "-" : family_name(e->family), e->pulled ? "pulled" : registry_source_name(e->source),
           e->error ? "  (error)" : "");
    n_err += e->error != NULL;
  }
  if (!registry_snapshot_count(s)) printf("(no models found)\n");
  if (n_err) {
    printf("\n");
    for (size_t i = 0; i < registry_snapshot_count(s); i++) {
      const registry_entry *e = registry_snapshot_at(s, i);
      if (e->error) printf("%s: %s\n", e->name, e->error);
    }
  }
  registry_alias *al = NULL;
  size_t n_al = 0;
  if (registry_aliases(r, &al, &n_al) == 0 && n_al) {
    printf("\n");
    for (size_t i = 0; i < n_al; i++) {
      char *to = alias_resolved(r, al[i].alias);
      printf("alias %s -> %s%s\n", al[i].alias, to ? to : al[i].target, to ? "" : " (not found)");
      free(to);
    }
  }
  registry_aliases_free(al, n_al);
  char *def = registry_default_name(r);
  if (def) {
    char *to = alias_resolved(r, def);
    printf("%sdefault: %s%s%s\n", n_al ? "" : "\n", def, to && strcmp(to, def) ? " -> " : "",
           to ? (strcmp(to, def) ? to : "") : " (not found)");
    free(to);
  }
  free(def);
}

int cmd_list(int argc, char **argv) {
  bool json = false;
  const char *def = NULL;
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  registry *r = NULL;
  if (!rest || registry_new(&r)) {
    fprintf(stderr, "parley list: out of memory\n");
    free(rest);
    return 1;
  }
  int n_rest = 0, status = 0;
  for (int i = 0; i < argc && !status; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    int which = 0; /* 1 model, 2 alias, 3 default */
    if (strcmp(a, "--json") == 0) {
      json = true;
      continue;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      list_usage(stdout);
      free(rest);
      registry_free(r);
      return 0;
    }
    static const char *const mine[] = {"--model", "--alias", "--default"};
    for (int k = 0; k < 3 && !which; k++) {
      size_t l = strlen(mine[k]);
      if (strcmp(a, mine[k]) == 0) {
        if (i + 1 >= argc) {
          fprintf(stderr, "parley list: %s needs a value\n", a);
          status = 2;
          break;
        }
        which = k + 1;
        val = argv[++i];
      } else if (strncmp(a, mine[k], l) == 0 && a[l] == '=') {
        which = k + 1;
        val = a + l + 1;
      }
    }
    if (status) break;
    int rc = 0;
    if (which == 1) rc = add_model_arg(r, val);
    else if (which == 2) rc = registry_add_alias_spec(r, val);
    else if (which == 3) def = val;
    else rest[n_rest++] = argv[i];
    if (rc) {
      fprintf(stderr, "parley list: %s\n", err_detail());
      status = 2;
    }
  }
  config cfg;
  if (!status && config_load(&cfg, n_rest, rest)) {
    fprintf(stderr, "parley list: %s\n", err_detail());
    list_usage(stderr);
    config_free(&cfg);
    status = 2;
  }
  free(rest);
  if (status) {
    registry_free(r);
    return status;
  }
  int rc = registry_set_models_dir(r, cfg.models_dir);
  if (!rc && def) rc = registry_set_default(r, def);
  if (!rc) rc = registry_refresh(r);
  config_free(&cfg);
  if (rc) {
    fprintf(stderr, "parley list: %s\n", err_detail());
    registry_free(r);
    return 1;
  }
  registry_snapshot *s = registry_snapshot_acquire(r);
  if (json) {
    json_t *arr = json_array();
    for (size_t i = 0; i < registry_snapshot_count(s); i++)
      json_array_append_new(arr, entry_json(registry_snapshot_at(s, i)));
    json_t *aliases = json_object();
    registry_alias *al = NULL;
    size_t n_al = 0;
    if (registry_aliases(r, &al, &n_al) == 0)
      for (size_t i = 0; i < n_al; i++) {
        char *to = alias_resolved(r, al[i].alias);
        json_object_set_new(aliases, al[i].alias, to ? json_string(to) : json_null());
        free(to);
      }
    registry_aliases_free(al, n_al);
    json_t *doc = json_pack("{s:o, s:o, s:s?}", "models", arr, "aliases", aliases, "default", def);
    char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (text) printf("%s\n", text);
    else status = 1;
    free(text);
    json_decref(doc);
  } else {
    print_table(r, s);
  }
  registry_snapshot_release(s);
  registry_free(r);
  return status;
}
