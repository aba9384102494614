/*
 * pull.c - POST /api/pull on the model puller (model/pull.h): a download
 * job per name, rendered as Ollama's progress records:
 *   {"status":"pulling manifest"}
 *   {"status":"pulling <12 hex>","digest":"sha256:...","total":N,"completed":M}
 *       per file, whenever its byte count moves (completed left out at 0)
 *   {"status":"verifying sha256 digest"} {"status":"writing manifest"}
 *   {"status":"success"}
 * or a last {"error": ...} line when the job fails. Not streamed: the
 * handler waits for the job and answers {"status":"success"} or the error
 * (500, or the job's error status).
 *
 * Names go to the puller as given: Ollama registry names ("llama3.2:1b",
 * "ns/model:tag") and Hugging Face ones ("hf.co/owner/repo:Q4_K_M"). The
 * job belongs to the puller, not the request: a client that goes away
 * leaves it running (the LM Studio routes and a later pull share it).
 * Streams run on a thread of their own, which polls the job with
 * pull_wait.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/ollama/ollama.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "model/pull.h"

struct pull_run {
  ollama_ctx *c;
  http_stream *s;
  char id[PULL_ID_CAP];
  int64_t *last;   /* [n] bytes last reported per file */
  size_t n_last;
  bool verifying;
};

static int send(http_stream *s, json_t *r) {
  char *t = r ? json_dumps(r, JSON_COMPACT) : NULL;
  int rc = t ? http_stream_ndjson(s, t, strlen(t)) : ERR_NOMEM;
  free(t);
  json_decref(r);
  return rc;
}

static int send_status(http_stream *s, const char *status) { return send(s, json_pack("{s:s}", "status", status)); }

/* One progress record per file whose byte count moved since the last. */
static int report_files(struct pull_run *p, const pull_status *st) {
  if (st->n_files > p->n_last) {
    int64_t *grown = realloc(p->last, st->n_files * sizeof *grown);
    if (!grown) return ERR_NOMEM;
    for (size_t i = p->n_last; i < st->n_files; i++) grown[i] = -1;
    p->last = grown;
    p->n_last = st->n_files;
  }
  for (size_t i = 0; i < st->n_files; i++) {
    const pull_file_status *f = &st->files[i];
    if (f->done == p->last[i]) continue;
    p->last[i] = f->done;
    const char *dg = f->digest ? f->digest : "";
    const char *hex = strncmp(dg, "sha256:", 7) == 0 ? dg + 7 : dg;
    char status[64];
    snprintf(status, sizeof status, "pulling %.12s", *hex ? hex : f->file);
    json_t *r = json_pack("{s:s}", "status", status);
    if (!r) return ERR_NOMEM;
    if (*dg) json_object_set_new(r, "digest", json_string(dg));
    if (f->total > 0) json_object_set_new(r, "total", json_integer(f->total));
    if (f->done > 0) json_object_set_new(r, "completed", json_integer(f->done));
    int rc = send(p->s, r);
    if (rc) return rc;
  }
  return 0;
}

static void *pull_stream_main(void *arg) {
  struct pull_run *p = arg;
  int rc = 0;
  for (;;) {
    pull_status st;
    if ((rc = pull_get(p->c->puller, p->id, &st))) {
      send(p->s, json_pack("{s:s}", "error", err_detail()));
      break;
    }
    bool final = pull_state_is_final(st.state);
    rc = report_files(p, &st);
    if (!rc && (st.state == PULL_VERIFYING || st.state == PULL_COMPLETED) && !p->verifying) {
      p->verifying = true;
      rc = send_status(p->s, "verifying sha256 digest");
    }
    if (!rc && st.state == PULL_COMPLETED) {
      rc = send_status(p->s, "writing manifest");
      if (!rc) rc = send_status(p->s, "success");
    } else if (!rc && final) {
      rc = send(p->s, json_pack("{s:s}", "error", st.error ? st.error : pull_state_name(st.state)));
    }
    pull_status_free(&st);
    if (final || rc || http_stream_cancelled(p->s)) break;
    pull_wait(p->c->puller, p->id, 250);
  }
  http_stream_close(p->s);
  p->c->n_pull_streams--;
  free(p->last);
  free(p);
  return NULL;
}

void ollama_pull(http_req *req, void *ctx) {
  ollama_ctx *c = ctx;
  json_t *body = ollama_body(req);
  if (!body) return;
  bool stream = true;
  const json_t *jname = json_object_get(body, "model");
  if (!json_string_value(jname) || !*json_string_value(jname)) jname = json_object_get(body, "name");
  const char *name = json_string_value(jname);
  char id[PULL_ID_CAP];
  if (!name || !*name) {
    ollama_err(req, 400, ERR_INVALID, "model is required");
  } else if (strlen(name) != json_string_length(jname)) { /* "a\u0000b" would pull "a" */
    ollama_err(req, 400, ERR_INVALID, "invalid model name: it contains a NUL character");
  } else if (!ollama_name_valid(name) && strncmp(name, "hf.co/", 6) != 0) {
    ollama_err(req, 400, ERR_INVALID, "invalid model name");
  } else if (!c->puller) {
    ollama_err(req, 501, ERR_UNSUPPORTED, "pull %s: this server has no model downloader", name);
  } else if (ollama_stream(body, &stream)) {
    ollama_answer(req, ERR_TYPE);
  } else {
    int rc = pull_start(c->puller, name, NULL, id, sizeof id, NULL);
    if (rc) {
      ollama_err(req, rc == ERR_INVALID ? 400 : 500, rc, "%s", err_detail());
    } else if (!stream) {
      pull_status st;
      while (!(rc = pull_get(c->puller, id, &st)) && !pull_state_is_final(st.state)) {
        pull_status_free(&st);
        pull_wait(c->puller, id, 500);
      }
      if (rc) ollama_err(req, 500, rc, "%s", err_detail());
      else if (st.state == PULL_COMPLETED) http_respond(req, 200, "application/json", "{\"status\":\"success\"}", 20);
      else ollama_err(req, st.err_code ? api_status_for(st.err_code) : 500, st.err_code ? st.err_code : ERR_INTERNAL,
                      "%s", st.error ? st.error : pull_state_name(st.state));
      if (!rc) pull_status_free(&st);
    } else {
      struct pull_run *p = calloc(1, sizeof *p);
      http_stream *s = p ? http_stream_open(req, 200, "application/x-ndjson", HTTP_STREAM_NDJSON) : NULL;
      if (!s) {
        free(p);
        if (!p) ollama_err(req, 500, ERR_NOMEM, "out of memory");
      } else {
        p->c = c;
        p->s = s;
        snprintf(p->id, sizeof p->id, "%s", id);
        send_status(s, "pulling manifest");
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        c->n_pull_streams++;
        if (pthread_create(&t, &attr, pull_stream_main, p)) {
          c->n_pull_streams--;
          send(s, json_pack("{s:s}", "error", "cannot start a progress thread"));
          http_stream_close(s);
          free(p);
        }
        pthread_attr_destroy(&attr);
      }
    }
  }
  json_decref(body);
}
