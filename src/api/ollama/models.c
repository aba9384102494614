/*
 * models.c - the Ollama model-management routes and the route table:
 * /api/version, /api/status, /api/tags, /api/show, /api/copy, /api/delete,
 * /api/create, HEAD|POST /api/blobs/:digest, /api/push; and the overlay of
 * models Ollama clients made (see ollama.h), kept in
 * data_dir/ollama/models.json (rewritten whole, through a temp file and a
 * rename, after every change).
 *
 * What parley does differently from Ollama: models are read in place, so
 * /api/copy makes an alias (with the source's settings), /api/create
 * registers the GGUF file (a local path, or an uploaded blob) under the new
 * name, and /api/delete removes what the overlay made or the puller
 * downloaded (pull_remove); it refuses to delete other tools' model files.
 * /api/push has no registry to push to.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "gguf/gguf.h"
#include "kernels/tensor_type.h"

/* ---- the overlay ------------------------------------------------------------ */

static char *path_join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", a, b);
  return p;
}

/* Writes the overlay file (caller holds c->lock). */
static int overlay_save(ollama_ctx *c) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", c->overlay_path);
  if (json_dump_file(c->overlay, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
    return err_set(ERR_IO, "cannot write %s", tmp);
  if (rename(tmp, c->overlay_path)) return err_set(ERR_IO, "cannot rename %s: %s", tmp, strerror(errno));
  return 0;
}

/* Registers one overlay entry with the registry. */
static int overlay_register(ollama_ctx *c, const json_t *m) {
  const char *name = json_string_value(json_object_get(m, "name"));
  const char *path = json_string_value(json_object_get(m, "path"));
  const char *from = json_string_value(json_object_get(m, "from"));
  if (!name) return err_set(ERR_INVALID, "overlay entry without a name");
  if (path) return registry_add_model(c->reg, path, name);
  if (from) return registry_add_alias(c->reg, name, from);
  return err_set(ERR_INVALID, "overlay entry '%s' has neither path nor from", name);
}

/* Index of name in the overlay (caller holds the lock), or -1. */
static long overlay_index(ollama_ctx *c, const char *name) {
  size_t i;
  json_t *m;
  json_array_foreach(json_object_get(c->overlay, "models"), i, m) {
    const char *n = json_string_value(json_object_get(m, "name"));
    if (n && strcasecmp(n, name) == 0) return (long)i;
  }
  return -1;
}

/* Adds or replaces an entry (steals m), registers it and saves. */
static int overlay_put(ollama_ctx *c, json_t *m) {
  const char *name = json_string_value(json_object_get(m, "name"));
  pthread_mutex_lock(&c->lock);
  json_t *models = json_object_get(c->overlay, "models");
  long at = overlay_index(c, name);
  bool refresh = false;
  if (at >= 0) {
    const json_t *old = json_array_get(models, (size_t)at);
    refresh = json_object_get(old, "path") != NULL;
    registry_remove_name(c->reg, json_string_value(json_object_get(old, "name")));
    json_array_remove(models, (size_t)at);
  }
  int rc = overlay_register(c, m);
  if (!rc) {
    refresh |= json_object_get(m, "path") != NULL;
    json_array_append_new(models, m);
    rc = overlay_save(c);
  } else {
    json_decref(m);
  }
  pthread_mutex_unlock(&c->lock);
  if (refresh) registry_refresh(c->reg);
  return rc;
}

/* Removes an entry; ERR_NOT_FOUND when absent. */
static int overlay_remove(ollama_ctx *c, const char *name) {
  pthread_mutex_lock(&c->lock);
  long at = overlay_index(c, name);
  bool refresh = false;
  int rc = ERR_NOT_FOUND;
  if (at >= 0) {
    json_t *models = json_object_get(c->overlay, "models");
    const json_t *old = json_array_get(models, (size_t)at);
    refresh = json_object_get(old, "path") != NULL;
    registry_remove_name(c->reg, json_string_value(json_object_get(old, "name")));
    json_array_remove(models, (size_t)at);
    rc = overlay_save(c);
  }
  pthread_mutex_unlock(&c->lock);
  if (refresh) registry_refresh(c->reg);
  return rc;
}

int ollama_init(ollama_ctx *c, registry *reg, manager *mgr, const char *data_dir) {
  memset(c, 0, sizeof *c);
  c->reg = reg;
  c->mgr = mgr;
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->info_lock, NULL);
  c->info_cache = json_object();
  c->dir = path_join(data_dir, "ollama");
  c->blob_dir = c->dir ? path_join(c->dir, "blobs") : NULL;
  c->overlay_path = c->dir ? path_join(c->dir, "models.json") : NULL;
  if (!c->info_cache || !c->blob_dir || !c->overlay_path) return err_set(ERR_NOMEM, "out of memory");
  if ((mkdir(c->dir, 0700) && errno != EEXIST) || (mkdir(c->blob_dir, 0700) && errno != EEXIST))
    return err_set(ERR_IO, "cannot create %s: %s", c->blob_dir, strerror(errno));
  json_error_t jerr;
  c->overlay = access(c->overlay_path, F_OK) == 0 ? json_load_file(c->overlay_path, 0, &jerr) : NULL;
  if (!json_is_array(json_object_get(c->overlay, "models"))) {
    if (access(c->overlay_path, F_OK) == 0)
      LOG_WARN("ollama", "%s is unreadable (%s); starting with no created models", c->overlay_path, jerr.text);
    json_decref(c->overlay);
    c->overlay = json_pack("{s:[]}", "models");
    if (!c->overlay) return err_set(ERR_NOMEM, "out of memory");
  }
  bool files = false;
  size_t i;
  json_t *m;
  json_array_foreach(json_object_get(c->overlay, "models"), i, m) {
    if (overlay_register(c, m))
      LOG_WARN("ollama", "%s: cannot register '%s': %s", c->overlay_path,
               json_string_value(json_object_get(m, "name")) ?: "?", err_detail());
    files |= json_object_get(m, "path") != NULL;
  }
  if (files) registry_refresh(reg);
  return 0;
}

void ollama_free(ollama_ctx *c) {
  if (!c) return;
  /* pull progress threads end within a poll once the server cancelled
   * their streams; they use the puller, which is freed after this */
  for (int waited = 0; c->n_pull_streams > 0 && waited < 5000; waited += 10) usleep(10000);
  json_decref(c->overlay);
  json_decref(c->info_cache);
  free(c->dir);
  free(c->blob_dir);
  free(c->overlay_path);
  pthread_mutex_destroy(&c->lock);
  pthread_mutex_destroy(&c->info_lock);
  memset(c, 0, sizeof *c);
}

/* "name" -> "name:latest" when the model part has no tag. */
static void with_tag(const char *name, char *out, size_t cap) {
  const char *slash = strrchr(name, '/');
  const char *last = slash ? slash + 1 : name;
  snprintf(out, cap, strchr(last, ':') ? "%s" : "%s:latest", name);
}

/* ---- version, status --------------------------------------------------------- */

void ollama_version(http_req *req, void *ctx) {
  (void)ctx;
  json_t *v = json_pack("{s:s}", "version", OLLAMA_VERSION);
  ollama_json(req, 200, v);
  json_decref(v);
}

void ollama_status(http_req *req, void *ctx) {
  (void)ctx;
  json_t *v = json_pack("{s:{s:b, s:s}}", "cloud", "disabled", 1, "source", "parley (local only)");
  ollama_json(req, 200, v);
  json_decref(v);
}

/* ---- tags ------------------------------------------------------------------ */

static json_t *tag_entry(ollama_ctx *c, const registry_entry *e, const char *name, int64_t mtime) {
  char ts[48], dg[65];
  ollama_time(mtime * 1000000000LL, ts, sizeof ts);
  ollama_digest_hex(e, dg);
  json_t *caps = ollama_capabilities(e->caps, e->executable);
  json_t *details = ollama_details(c, e);
  return json_pack("{s:s, s:s, s:s, s:I, s:s, s:o, s:o}", "name", name, "model", name, "modified_at", ts, "size",
                   (json_int_t)e->size, "digest", dg, "details", details ? details : json_object(), "capabilities",
                   caps ? caps : json_array());
}

static int by_modified_desc(const void *a, const void *b) {
  const char *ma = json_string_value(json_object_get(*(json_t *const *)a, "modified_at"));
  const char *mb = json_string_value(json_object_get(*(json_t *const *)b, "modified_at"));
  return strcmp(mb ? mb : "", ma ? ma : "");
}

void ollama_tags(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  json_t *list = json_array();
  registry_snapshot *snap = registry_snapshot_acquire(c->reg);
  size_t n = registry_snapshot_count(snap);
  for (size_t i = 0; list && i < n; i++) {
    const registry_entry *e = registry_snapshot_at(snap, i);
    json_t *t = tag_entry(c, e, e->name, e->mtime);
    if (t) json_array_append_new(list, t);
  }
  registry_snapshot_release(snap);
  /* copies (aliases) of the overlay */
  pthread_mutex_lock(&c->lock);
  json_t *ov = json_deep_copy(json_object_get(c->overlay, "models"));
  pthread_mutex_unlock(&c->lock);
  size_t i;
  json_t *m;
  json_array_foreach(ov, i, m) {
    const char *name = json_string_value(json_object_get(m, "name"));
    if (!name || json_object_get(m, "path")) continue;
    registry_entry *e = NULL;
    if (registry_lookup(c->reg, name, &e)) continue;
    json_t *t = tag_entry(c, e, name, json_integer_value(json_object_get(m, "modified_at")));
    if (t) json_array_append_new(list, t);
    registry_entry_free(e);
  }
  json_decref(ov);
  /* newest first */
  size_t nl = json_array_size(list);
  json_t **v = nl ? calloc(nl, sizeof *v) : NULL;
  if (v) {
    for (size_t k = 0; k < nl; k++) v[k] = json_incref(json_array_get(list, k));
    qsort(v, nl, sizeof *v, by_modified_desc);
    json_array_clear(list);
    for (size_t k = 0; k < nl; k++) json_array_append_new(list, v[k]);
    free(v);
  }
  json_t *body = list ? json_pack("{s:o}", "models", list) : NULL;
  if (body) ollama_json(req, 200, body);
  else ollama_err(req, 500, ERR_NOMEM, "out of memory");
  json_decref(body);
}

/* ---- show ------------------------------------------------------------------ */

/* A GGUF value as JSON; arrays longer than 5 become [] unless verbose. */
static json_t *gguf_json(const gguf_value *v, bool verbose) {
  switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
      return json_integer((json_int_t)v->v.u64);
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
      return json_integer((json_int_t)v->v.i64);
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64: return json_real(v->v.f64);
    case GGUF_TYPE_BOOL: return json_boolean(v->v.u64 != 0);
    case GGUF_TYPE_STRING: {
      json_t *s = json_stringn(v->v.str.data, v->v.str.len);
      return s ? s : json_string("");
    }
    case GGUF_TYPE_ARRAY: {
      json_t *a = json_array();
      if (!a || (!verbose && v->v.arr.n > 5)) return a;
      for (uint64_t i = 0; i < v->v.arr.n; i++) {
        json_t *x;
        switch (v->v.arr.elem_type) {
          case GGUF_TYPE_STRING:
            x = json_stringn(v->v.arr.strs[i].data, v->v.arr.strs[i].len);
            if (!x) x = json_string("");
            break;
          case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64: x = json_real(gguf_arr_f64(v, i)); break;
          case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
            x = json_integer((json_int_t)gguf_arr_i64(v, i));
            break;
          case GGUF_TYPE_ARRAY: x = json_array(); break;
          default: x = json_integer((json_int_t)gguf_arr_u64(v, i)); break;
        }
        json_array_append_new(a, x);
      }
      return a;
    }
    default: return json_null();
  }
}

/* PARAMETER lines: the key padded to 30 columns, the value Go-quoted when a
 * string; list values repeat the key. */
static void parameters_text(const json_t *params, buf *out) {
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)params, k, v) {
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
      const json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
      char *val = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(7));
      if (out->len) buf_append_byte(out, '\n');
      buf_appendf(out, "%-30s %s", k, val ? val : "");
      free(val);
    }
  }
}

void ollama_show(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  json_t *body = ollama_body(req);
  if (!body) return;
  registry_entry *e = NULL;
  json_t *over = NULL, *resp = NULL;
  gguf_file *f = NULL;
  buf params = BUF_INIT, mf = BUF_INIT;
  const char *name = json_string_value(json_object_get(body, "model"));
  if (!name || !*name) name = json_string_value(json_object_get(body, "name"));
  bool verbose = json_is_true(json_object_get(body, "verbose"));
  if (!name || !*name) {
    ollama_err(req, 400, ERR_INVALID, "model is required");
    goto done;
  }
  if (!ollama_name_valid(name)) {
    ollama_err(req, 400, ERR_INVALID, "invalid model name");
    goto done;
  }
  char rname[1024];
  if (registry_lookup(c->reg, ollama_resolve(c, name, rname, sizeof rname), &e)) {
    ollama_err(req, 404, ERR_NOT_FOUND, "model '%s' not found", name);
    goto done;
  }
  over = ollama_overlay_get(c, name);
  json_t *info = json_object();
  const char *chat_template = "";
  if (e->path && gguf_open(e->path, &f) == 0) {
    for (size_t i = 0; i < gguf_n_kv(f); i++) {
      const gguf_kv *kv = gguf_kv_at(f, i);
      if (!strcmp(kv->key, "general.name") || !strncmp(kv->key, "tokenizer.chat_template", 23)) continue;
      json_object_set_new(info, kv->key, gguf_json(&kv->value, verbose));
    }
    if (!json_object_get(info, "general.parameter_count")) {
      uint64_t pc = 0;
      for (size_t i = 0; i < gguf_n_tensors(f); i++) pc += gguf_tensor_at(f, i)->n_elements;
      json_object_set_new(info, "general.parameter_count", json_integer((json_int_t)pc));
    }
    if (gguf_get_str(f, "tokenizer.chat_template", &chat_template)) chat_template = "";
  }
  /* parley's keys: the detected family, which general.architecture alone
   * cannot tell (a Voxtral Realtime file is "llama") */
  if (info) {
    json_object_set_new(info, "parley.family", json_string(family_name(e->family)));
    json_object_set_new(info, "parley.family_display", json_string(family_display(e->family)));
    /* what one token reads (model_file_params): below general.parameter_count
     * for a mixture of experts */
    if (e->n_params_active)
      json_object_set_new(info, "parley.active_parameter_count", json_integer((json_int_t)e->n_params_active));
  }
  /* GitHub Copilot Chat shows general.basename as the model's name */
  const char *ua = http_req_header(req, "user-agent");
  if (info && ua && str_starts_with(ua, "GitHubCopilotChat/")) json_object_set_new(info, "general.basename", json_string(name));
  const char *tmpl_text = over ? json_string_value(json_object_get(over, "template")) : NULL;
  const char *system = over ? json_string_value(json_object_get(over, "system")) : NULL;
  const json_t *op = over ? json_object_get(over, "parameters") : NULL;
  if (json_is_object(op)) parameters_text(op, &params);
  char ts[48];
  int64_t mtime = over && json_object_get(over, "modified_at") ? json_integer_value(json_object_get(over, "modified_at"))
                                                                 : e->mtime;
  ollama_time(mtime * 1000000000LL, ts, sizeof ts);
  buf_appendf(&mf, "# Modelfile generated by \"ollama show\"\n# To build a new Modelfile based on this, replace FROM "
                   "with:\n# FROM %s\n\nFROM %s\n",
              name, e->path ? e->path : name);
  if (tmpl_text || *chat_template) buf_appendf(&mf, "TEMPLATE \"\"\"%s\"\"\"\n", tmpl_text ? tmpl_text : chat_template);
  if (system) buf_appendf(&mf, "SYSTEM \"\"\"%s\"\"\"\n", system);
  if (params.len) {
    buf_append_str(&mf, "PARAMETER ");
    for (size_t i = 0; i < params.len; i++) {
      buf_append_byte(&mf, params.data[i]);
      if (params.data[i] == '\n') buf_append_str(&mf, "PARAMETER ");
    }
    buf_append_byte(&mf, '\n');
  }
  resp = json_pack("{s:s, s:s%, s:s, s:o, s:o, s:o, s:s}", "modelfile", mf.data ? mf.data : "", "parameters",
                   params.data ? params.data : "", params.len, "template", tmpl_text ? tmpl_text : chat_template, "details",
                   ollama_details(c, e), "model_info", info ? info : json_object(), "capabilities",
                   ollama_capabilities(e->caps, e->executable), "modified_at", ts);
  if (resp && system) json_object_set_new(resp, "system", json_string(system));
  if (resp && over && json_array_size(json_object_get(over, "messages")))
    json_object_set(resp, "messages", json_object_get(over, "messages"));
  if (resp && f && verbose) { /* tensors: every one, so only when asked */
    json_t *ts_arr = json_array();
    for (size_t i = 0; ts_arr && i < gguf_n_tensors(f); i++) {
      const gguf_tensor *t = gguf_tensor_at(f, i);
      json_t *shape = json_array();
      for (uint32_t d = 0; shape && d < t->n_dims; d++) json_array_append_new(shape, json_integer((json_int_t)t->dims[d]));
      json_array_append_new(ts_arr, json_pack("{s:s, s:s, s:o}", "name", t->name, "type", tensor_type_name(t->type),
                                              "shape", shape ? shape : json_array()));
    }
    if (ts_arr) json_object_set_new(resp, "tensors", ts_arr);
  }
  if (resp && f) {
    const char *lic = NULL;
    if (!gguf_get_str(f, "general.license", &lic) && lic && *lic) json_object_set_new(resp, "license", json_string(lic));
  }
  if (resp) ollama_json(req, 200, resp);
  else ollama_err(req, 500, ERR_NOMEM, "out of memory");
done:
  if (f) gguf_close(f);
  buf_free(&params);
  buf_free(&mf);
  registry_entry_free(e);
  json_decref(over);
  json_decref(resp);
  json_decref(body);
}

/* ---- copy, delete ------------------------------------------------------------ */

/* The overlay entry a new model based on `src` starts from: the source's
 * settings, and what it resolves to (a file, or a registry name). */
static json_t *based_on(ollama_ctx *c, const char *src, const char *canonical) {
  json_t *m = ollama_overlay_get(c, src);
  if (!m) return json_pack("{s:s}", "from", canonical);
  json_object_del(m, "name");
  json_object_del(m, "modified_at");
  if (!json_object_get(m, "path") && !json_object_get(m, "from")) json_object_set_new(m, "from", json_string(canonical));
  return m;
}

/* 400 unless name is free or an overlay model (which may be replaced). */
static int check_destination(http_req *req, ollama_ctx *c, const char *dest) {
  json_t *over = ollama_overlay_get(c, dest);
  registry_entry *e = NULL;
  int rc = 0;
  if (!over && registry_lookup(c->reg, dest, &e) == 0) {
    ollama_err(req, 400, ERR_EXISTS, "destination \"%s\" is an existing model that parley did not create", dest);
    rc = ERR_EXISTS;
  }
  json_decref(over);
  registry_entry_free(e);
  return rc;
}

void ollama_copy(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  json_t *body = ollama_body(req);
  if (!body) return;
  const char *src = json_string_value(json_object_get(body, "source"));
  const char *dst = json_string_value(json_object_get(body, "destination"));
  char canon[1024], dest[1024];
  if (!src || !*src || !dst || !*dst) {
    ollama_err(req, 400, ERR_INVALID, "source and destination are required");
  } else if (!ollama_name_valid(src) || !ollama_name_valid(dst)) {
    ollama_err(req, 400, ERR_INVALID, "invalid model name");
  } else if (registry_resolve(c->reg, ollama_resolve(c, src, dest, sizeof dest), canon, sizeof canon)) {
    ollama_err(req, 404, ERR_NOT_FOUND, "model \"%s\" not found", src);
  } else {
    with_tag(dst, dest, sizeof dest);
    if (!check_destination(req, c, dest)) {
      json_t *m = based_on(c, src, canon);
      if (m) {
        json_object_set_new(m, "name", json_string(dest));
        json_object_set_new(m, "modified_at", json_integer(time_wall_s()));
      }
      int rc = m ? overlay_put(c, m) : ERR_NOMEM;
      if (rc) ollama_err(req, 500, rc, "copy failed: %s", err_detail());
      else http_respond(req, 200, "application/json; charset=utf-8", "", 0);
    }
  }
  json_decref(body);
}

void ollama_delete(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  json_t *body = ollama_body(req);
  if (!body) return;
  const char *name = json_string_value(json_object_get(body, "model"));
  if (!name || !*name) name = json_string_value(json_object_get(body, "name"));
  registry_entry *e = NULL;
  if (!name || !*name) {
    ollama_err(req, 400, ERR_INVALID, "model is required");
  } else if (!ollama_name_valid(name)) {
    ollama_err(req, 400, ERR_INVALID, "name \"%s\" is invalid", name);
  } else {
    json_t *over = ollama_overlay_get(c, name);
    if (over) {
      int rc = overlay_remove(c, json_string_value(json_object_get(over, "name")));
      if (rc) ollama_err(req, 500, rc, "delete failed: %s", err_detail());
      else http_respond(req, 200, "application/json; charset=utf-8", "", 0);
    } else if (registry_lookup(c->reg, name, &e)) {
      ollama_err(req, 404, ERR_NOT_FOUND, "model '%s' not found", name);
    } else {
      /* a model parley pulled is removed by the puller; anything else
       * (another tool's files, --model paths) is refused */
      int rc = c->puller ? pull_remove(c->puller, e->name, NULL, 0) : ERR_FORBIDDEN;
      if (!rc) http_respond(req, 200, "application/json; charset=utf-8", "", 0);
      else if (rc == ERR_FORBIDDEN)
        ollama_err(req, 403, ERR_FORBIDDEN,
                   "parley does not delete model files it did not download or create ('%s' is %s, from %s)", name,
                   e->path ? e->path : "?", registry_source_name(e->source));
      else ollama_err(req, 0, rc, "%s", err_detail());
    }
    json_decref(over);
  }
  registry_entry_free(e);
  json_decref(body);
}

/* ---- blobs -------------------------------------------------------------------- */

/* "sha256:<64 hex>" -> the blob's path; false when malformed. */
static bool blob_path(ollama_ctx *c, const char *digest, char *out, size_t cap) {
  if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != 71) return false;
  for (int i = 7; i < 71; i++)
    if (!strchr("0123456789abcdef", digest[i])) return false;
  snprintf(out, cap, "%s/sha256-%s", c->blob_dir, digest + 7);
  return true;
}

void ollama_blob_head(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  const char *d = http_req_param(req, "digest");
  char path[4096];
  if (!blob_path(c, d, path, sizeof path)) ollama_err(req, 400, ERR_INVALID, "invalid digest format");
  else if (access(path, F_OK)) ollama_err(req, 404, ERR_NOT_FOUND, "blob \"%s\" not found", d);
  else http_respond(req, 200, "text/plain; charset=utf-8", "", 0);
}

void ollama_blob_post(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  const char *d = http_req_param(req, "digest");
  char path[4096], got[65];
  uint64_t size = 0;
  const char *spool = http_req_body_file(req, &size);
  if (!blob_path(c, d, path, sizeof path)) {
    ollama_err(req, 400, ERR_INVALID, "invalid digest format");
    return;
  }
  if (access(path, F_OK) == 0) {
    http_respond(req, 200, "text/plain; charset=utf-8", "", 0);
    return;
  }
  if (spool) {
    if (ollama_sha256_file(spool, got)) {
      ollama_err(req, 500, ERR_IO, "%s", err_detail());
      return;
    }
  } else {
    ollama_sha256 s;
    ollama_sha256_init(&s);
    ollama_sha256_hex(&s, got);
  }
  if (strcmp(got, d + 7) != 0) {
    ollama_err(req, 400, ERR_INVALID, "digest mismatch, expected \"%s\", got \"sha256:%s\"", d, got);
    return;
  }
  int rc = 0;
  if (spool) {
    /* a hard link keeps the spool file for the HTTP layer to remove */
    if (link(spool, path) != 0) {
      FILE *in = fopen(spool, "rb"), *out = fopen(path, "wb");
      char chunk[65536];
      size_t n;
      while (in && out && (n = fread(chunk, 1, sizeof chunk, in)) > 0)
        if (fwrite(chunk, 1, n, out) != n) rc = ERR_IO;
      if (!in || !out) rc = ERR_IO;
      if (in) fclose(in);
      if (out && fclose(out)) rc = ERR_IO;
      if (rc) unlink(path);
    }
  } else {
    FILE *out = fopen(path, "wb");
    if (!out || fclose(out)) rc = ERR_IO;
  }
  if (rc) ollama_err(req, 500, rc, "cannot store blob %s: %s", d, strerror(errno));
  else http_respond(req, 201, "text/plain; charset=utf-8", "", 0);
}

/* ---- create ---------------------------------------------------------------- */

/* The GGUF file of `files` ({filename: digest}): the blob of the first
 * *.gguf entry (or the only entry). */
static int files_gguf(http_req *req, ollama_ctx *c, const json_t *files, char *path, size_t cap, const char **digest) {
  if (!json_is_object(files) || !json_object_size(files)) {
    ollama_err(req, 400, ERR_INVALID, "files: expected an object of filename: \"sha256:<hex>\"");
    return ERR_INVALID;
  }
  const char *k, *pick = NULL;
  const json_t *v;
  json_object_foreach((json_t *)files, k, v) {
    if (!json_is_string(v)) {
      ollama_err(req, 400, ERR_TYPE, "files.%s: expected a digest string", k);
      return ERR_TYPE;
    }
    if (!pick || str_ends_with(k, ".gguf")) pick = pick && str_ends_with(pick, ".gguf") ? pick : k;
  }
  *digest = json_string_value(json_object_get(files, pick));
  if (!blob_path(c, *digest, path, cap)) {
    ollama_err(req, 400, ERR_INVALID, "files.%s: invalid digest \"%s\"", pick, *digest);
    return ERR_INVALID;
  }
  if (access(path, F_OK)) {
    ollama_err(req, 400, ERR_NOT_FOUND, "files.%s: blob \"%s\" not found (upload it with POST /api/blobs/%s)", pick,
               *digest, *digest);
    return ERR_NOT_FOUND;
  }
  return 0;
}

/* A GGUF path on the server ("~/" is the server's home) made absolute, so
 * the registered model does not depend on the working directory. */
static int local_path(const char *from, char *out, size_t cap) {
  char expanded[4096];
  const char *home = getenv("HOME");
  if (from[0] == '~' && from[1] == '/' && home) snprintf(expanded, sizeof expanded, "%s%s", home, from + 1);
  else snprintf(expanded, sizeof expanded, "%s", from);
  char *abs = realpath(expanded, NULL);
  if (!abs || access(abs, R_OK) != 0 || strlen(abs) >= cap) {
    free(abs);
    return ERR_NOT_FOUND;
  }
  snprintf(out, cap, "%s", abs);
  free(abs);
  return 0;
}

static int write_status(http_stream *s, const char *status) {
  json_t *r = json_pack("{s:s}", "status", status);
  char *t = r ? json_dumps(r, JSON_COMPACT) : NULL;
  int rc = t ? http_stream_ndjson(s, t, strlen(t)) : ERR_NOMEM;
  free(t);
  json_decref(r);
  return rc;
}

void ollama_create(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  json_t *body = ollama_body(req);
  if (!body) return;
  json_t *m = NULL;
  gguf_file *f = NULL;
  char dest[1024], canon[1024], path[4096];
  const char *digest = NULL;
  bool stream = true;
  const char *name = json_string_value(json_object_get(body, "model"));
  if (!name || !*name) name = json_string_value(json_object_get(body, "name"));
  const char *from = json_string_value(json_object_get(body, "from"));
  const json_t *files = json_object_get(body, "files");
  if (!name || !*name) {
    ollama_err(req, 400, ERR_INVALID, "model is required");
    goto done;
  }
  if (!ollama_name_valid(name)) {
    ollama_err(req, 400, ERR_INVALID, "invalid model name");
    goto done;
  }
  if ((!from || !*from) && (!files || json_is_null(files))) {
    ollama_err(req, 400, ERR_INVALID, "neither 'from' or 'files' was specified");
    goto done;
  }
  const json_t *q = json_object_get(body, "quantize");
  if (!q) q = json_object_get(body, "quantization");
  if (json_is_string(q) && *json_string_value(q)) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "quantize: parley does not re-quantize models (create from a GGUF file of the "
                                          "wanted quantization instead)");
    goto done;
  }
  if (json_object_get(body, "adapters") && json_object_size(json_object_get(body, "adapters"))) {
    ollama_err(req, 400, ERR_UNSUPPORTED, "adapters: LoRA adapters are not supported");
    goto done;
  }
  if (ollama_stream(body, &stream)) {
    ollama_answer(req, ERR_TYPE);
    goto done;
  }
  const json_t *params = json_object_get(body, "parameters");
  if (params && !json_is_null(params)) {
    gen_params scratch;
    ollama_params_init(&scratch);
    int rc = ollama_options(params, &scratch);
    gen_params_free(&scratch);
    if (rc) {
      ollama_answer(req, rc);
      goto done;
    }
  }
  const json_t *msgs = json_object_get(body, "messages");
  if (msgs && !json_is_null(msgs) && !json_is_array(msgs)) {
    ollama_err(req, 400, ERR_TYPE, "messages: expected array, got %s", api_json_type_name(msgs));
    goto done;
  }
  with_tag(name, dest, sizeof dest);
  if (check_destination(req, c, dest)) goto done;
  const char *parse_status = NULL;
  if (files && !json_is_null(files)) {
    if (files_gguf(req, c, files, path, sizeof path, &digest)) goto done;
    m = json_pack("{s:s}", "path", path);
    parse_status = "parsing GGUF";
  } else if (registry_resolve(c->reg, ollama_resolve(c, from, path, sizeof path), canon, sizeof canon) == 0) {
    m = based_on(c, from, canon);
  } else if ((from[0] == '/' || from[0] == '.' || from[0] == '~') && local_path(from, path, sizeof path) == 0) {
    m = json_pack("{s:s}", "path", path);
    parse_status = "parsing GGUF";
  } else {
    ollama_err(req, 404, ERR_NOT_FOUND, "model \"%s\" not found (from: a model name or a GGUF path on the server)", from);
    goto done;
  }
  if (!m) {
    ollama_err(req, 500, ERR_NOMEM, "out of memory");
    goto done;
  }
  const char *p = json_string_value(json_object_get(m, "path"));
  if (parse_status && gguf_open(p, &f)) {
    ollama_err(req, 400, ERR_CORRUPT, "%s is not a usable GGUF file: %s", p, err_detail());
    goto done;
  }
  static const char *const keys[] = {"template", "system", "license"};
  for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
    const json_t *v = json_object_get(body, keys[i]);
    if (json_is_string(v) || (json_is_array(v) && !strcmp(keys[i], "license"))) json_object_set(m, keys[i], (json_t *)v);
  }
  if (json_is_object(params)) {
    json_t *merged = json_deep_copy(json_is_object(json_object_get(m, "parameters")) ? json_object_get(m, "parameters")
                                                                                      : params);
    if (merged && merged != params) json_object_update(merged, (json_t *)params);
    json_object_set_new(m, "parameters", merged ? merged : json_object());
  }
  if (json_array_size(msgs)) json_object_set(m, "messages", (json_t *)msgs);
  json_object_set_new(m, "name", json_string(dest));
  json_object_set_new(m, "modified_at", json_integer(time_wall_s()));
  http_stream *s = stream ? http_stream_open(req, 200, "application/x-ndjson", HTTP_STREAM_NDJSON) : NULL;
  if (stream && !s) {
    ollama_err(req, 500, ERR_INTERNAL, "cannot open the response stream");
    goto done;
  }
  char using[128];
  if (s && parse_status) write_status(s, parse_status);
  if (s && digest) {
    snprintf(using, sizeof using, "using existing layer %s", digest);
    write_status(s, using);
  }
  if (s) write_status(s, "writing manifest");
  json_t *keep = m;
  m = NULL;
  int rc = overlay_put(c, keep);
  if (s) {
    if (rc) {
      json_t *e = json_pack("{s:s}", "error", err_detail());
      char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
      if (t) http_stream_ndjson(s, t, strlen(t));
      free(t);
      json_decref(e);
    } else {
      write_status(s, "success");
    }
    http_stream_close(s);
  } else if (rc) {
    ollama_err(req, 500, rc, "create failed: %s", err_detail());
  } else {
    static const char ok[] = "{\"status\":\"success\"}";
    http_respond(req, 200, "application/json", ok, sizeof ok - 1);
  }
done:
  if (f) gguf_close(f);
  json_decref(m);
  json_decref(body);
}

/* ---- push -------------------------------------------------------------------- */

void ollama_push(http_req *req, void *ctx) {
  (void)ctx;
  json_t *body = ollama_body(req);
  if (!body) return;
  ollama_err(req, 501, ERR_UNSUPPORTED,
             "pushing models is not supported locally: parley serves the models on this machine and has no registry "
             "to upload them to");
  json_decref(body);
}

/* ---- routes ------------------------------------------------------------------ */

static http_route ROUTES[] = {
    {"GET", "/api/version", ollama_version, NULL, 0, "ollama.version"},
    {"GET", "/api/status", ollama_status, NULL, 0, "ollama.status"},
    {"GET", "/api/tags", ollama_tags, NULL, 0, "ollama.tags"},
    {"GET", "/api/ps", ollama_ps, NULL, 0, "ollama.ps"},
    {"POST", "/api/show", ollama_show, NULL, HTTP_BODY_JSON, "ollama.show"},
    {"POST", "/api/generate", ollama_generate, NULL, HTTP_BODY_JSON, "ollama.generate"},
    {"POST", "/api/chat", ollama_chat, NULL, HTTP_BODY_JSON, "ollama.chat"},
    {"POST", "/api/embed", ollama_embed, NULL, HTTP_BODY_JSON, "ollama.embed"},
    {"POST", "/api/embeddings", ollama_embeddings, NULL, HTTP_BODY_JSON, "ollama.embeddings"},
    {"POST", "/api/copy", ollama_copy, NULL, HTTP_BODY_JSON, "ollama.copy"},
    {"DELETE", "/api/delete", ollama_delete, NULL, HTTP_BODY_JSON, "ollama.delete"},
    {"POST", "/api/create", ollama_create, NULL, HTTP_BODY_JSON, "ollama.create"},
    {"HEAD", "/api/blobs/{digest}", ollama_blob_head, NULL, 0, "ollama.blobs.head"},
    {"POST", "/api/blobs/{digest}", ollama_blob_post, NULL, HTTP_BODY_FILE, "ollama.blobs.create"},
    {"POST", "/api/pull", ollama_pull, NULL, HTTP_BODY_JSON, "ollama.pull"},
    {"POST", "/api/push", ollama_push, NULL, HTTP_BODY_JSON, "ollama.push"},
};

size_t ollama_routes(ollama_ctx *c, const http_route **out) {
  for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) ROUTES[i].ctx = c;
  *out = ROUTES;
  return ARRAY_LEN(ROUTES);
}
