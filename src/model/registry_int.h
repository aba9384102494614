/*
 * registry_int.h - what the registry core (registry.c) and its source
 * scanners (registry_scan.c) share; not for other modules.
 *
 * A refresh builds a reg_scan: each scanner walks one source and calls
 * reg_scan_add() for every model file it finds. reg_scan_add() stats the
 * file, reads its GGUF header through the registry's cache and returns the
 * new entry so that the scanner can name it and attach a projector, a digest
 * or an error. Names are made unique by the core after all scanners ran.
 */
#ifndef PARLEY_MODEL_REGISTRY_INT_H
#define PARLEY_MODEL_REGISTRY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/registry.h"

#define REG_MAX_DEPTH 3          /* subfolder levels scanned in the models dir */
#define REG_MAX_MANIFEST (1u << 20) /* bytes; an Ollama manifest is ~1 KB */

typedef struct reg_scan {
  struct registry *r;          /* owner of the header cache */
  registry_entry *items;
  size_t n, cap;
} reg_scan;

/* Adds a model file found by a scanner. Stats path (following symlinks),
 * reads its header (cached), fills size, mtime, quant, arch, family, caps,
 * context length, executable, a fnv1a64 digest and an error when the file
 * cannot be read. name may be NULL (the scanner sets e->name later, with
 * malloc). *out points into s->items and is valid until the next add.
 * Fails only with ERR_NOMEM. */
int reg_scan_add(reg_scan *s, registry_source src, const char *path, const char *name, registry_entry **out);
/* Sets e->error (replacing one) from a printf format; ERR_NOMEM on failure. */
int reg_entry_set_error(registry_entry *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds an entry that cannot be used (a manifest that does not parse): no
 * stat, no header read; e->error from the format. */
int reg_scan_add_error(reg_scan *s, registry_source src, const char *path, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Scanners: each walks its source's directory (absent directories are not
 * an error) and adds what it finds. Fail only with ERR_NOMEM. */
int reg_scan_models_dir(reg_scan *s, const char *dir);
int reg_scan_ollama(reg_scan *s, const char *dir);
int reg_scan_lmstudio(reg_scan *s, const char *dir);
int reg_scan_hf(reg_scan *s, const char *dir);
/* A folder of the models dir holding REGISTRY_PULL_MANIFEST: adds its model
 * under the manifest's name with `pulled` set (registry_pulled.c). */
int reg_scan_pulled(reg_scan *s, const char *dir);

/* Sorted names of the entries of dir (no "." / ".." / dot files); *out is
 * NULL and *n 0 when dir cannot be read. Free with reg_names_free. */
int reg_list_dir(const char *dir, char ***out, size_t *n);
void reg_names_free(char **names, size_t n);

/* Helpers on file names. */
bool reg_is_gguf(const char *filename);       /* ends in .gguf (any case) */
bool reg_is_projector(const char *filename);  /* contains "mmproj" (any case) */
/* A split file "X-00002-of-00003.gguf": true for every shard; *index gets the
 * 1-based shard number, *count the total, *stem_len the length of "X". */
bool reg_split_parse(const char *filename, unsigned *index, unsigned *count, size_t *stem_len);
bool reg_is_dir(const char *path);
bool reg_is_file(const char *path);  /* follows symlinks */
/* malloc'd "a/b" (and "a/b/c" when c is not NULL); NULL when out of memory. */
char *reg_path_join(const char *a, const char *b, const char *c);

#endif
