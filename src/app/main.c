/*
 * main.c - the parley command: `serve`, `version`, `help`.
 *
 * This is the only place that wires modules together: it loads the
 * configuration, opens the store (database, blobs, upload spool), builds the
 * model registry (--model, --alias, --default-model, the models directory and
 * other tools' stores) and the model manager (models load on first use),
 * builds the HTTP server with every
 * adapter's route table, and runs until SIGINT/SIGTERM. The first signal
 * shuts down gracefully (stop accepting, end open streams, close WebSockets,
 * close the store); a second signal exits at once.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/admin/admin.h"
#include "api/anthropic/anthropic.h"
#include "api/deepgram/deepgram.h"
#include "api/openai/audio.h"
#include "api/openai/files.h"
#include "api/speech_svc.h"
#include "api/api.h"
#include "api/gen.h"
#include "api/lmstudio/lmstudio.h"
#include "api/openai/openai.h"
#include "api/ollama/ollama.h"
#include "api/openai/realtime.h"
#include "speech/speech_worker.h"
#include "api/openai/unimplemented.h"
#include "app/commands.h"
#include "app/config.h"
#include "base/err.h"
#include "base/log.h"
#include "base/util.h"
#include "base/version.h"
#include "engine/manager.h"
#include "http/http.h"
#include "model/pull.h"
#include "model/registry.h"
#include "store/store.h"

static int cmd_serve(int argc, char **argv);

/* The subcommands: name, entry point, one line of help. */
static const struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} COMMANDS[] = {
    {"serve", cmd_serve, "start the server"},
    {"tokenize", cmd_tokenize, "print the token ids and pieces of a text: tokenize MODEL.gguf TEXT [--json]"},
    {"list", cmd_list, "list models from every source: list [--json] [--model [NAME=]PATH] [--alias N=MODEL]"},
    {"pull", cmd_pull, "download a model: pull NAME (llama3.2:1b, hf.co/OWNER/REPO:QUANT) [--file PATTERN]"},
    {"rm", cmd_rm, "delete a model parley pulled: rm NAME"},
    {"run", cmd_run, "raw completion: run MODEL.gguf (-p TEXT | --tokens 1,2,3) [-n N] [--temp T] [--seed S] [-t N]"},
    {"bench", cmd_bench, "tokens/s: bench MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3] [--json]"},
    {"gen-model", cmd_gen_model, "random-weight llama for benchmarks: gen-model OUT.gguf [--shape small|tinyllama|qwen2.5-0.5b] [--type T]"},
    {"gen-vocab", cmd_gen_vocab, "a tokenizer-only GGUF of the project's own, for tests: gen-vocab OUT.gguf spm|wpm|fim"},
    {"chat-template", cmd_chat_template,
     "print the prompt a chat request renders to: (--model M | --template F) --request R.json"},
};

static void usage(FILE *out) {
  fprintf(out,
          "parley %s - local language and speech models behind the OpenAI, Anthropic,\n"
          "Ollama, LM Studio and Deepgram APIs\n\n"
          "usage: parley COMMAND [options]\n\ncommands:\n",
          PARLEY_VERSION);
  for (size_t i = 0; i < ARRAY_LEN(COMMANDS); i++) fprintf(out, "  %-13s %s\n", COMMANDS[i].name, COMMANDS[i].help);
  fprintf(out, "  %-13s %s\n  %-13s %s\n\nserve ", "version", "print the version", "help", "print this help");
  config_print_help(out);
}

/* Runs the graceful shutdown on its own thread so the main thread can still
 * catch a second signal and exit at once. */
struct shutdown_job {
  http_server *srv;
  _Atomic int done;
};

static void *shutdown_thread(void *arg) {
  struct shutdown_job *job = arg;
  http_server_free(job->srv);
  job->done = 1;
  kill(getpid(), SIGUSR1); /* wake the main thread's sigwait */
  return NULL;
}

/* Builds the registry from the configuration: explicit models
 * ("[NAME=]PATH,..."), aliases ("ALIAS=MODEL,..."), the default, then a
 * first scan. Errors name the option. */
/* Reads a whole (small, text) file such as a PEM certificate; errors name
 * the option and the path. */
static int read_text_file(const char *path, const char *option, char **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(ERR_IO, "%s %s: %s", option, path, strerror(errno));
  buf b = BUF_INIT;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < (1u << 20)) buf_append(&b, chunk, n);
  int bad = ferror(f);
  fclose(f);
  if (bad || !b.len || b.len >= (1u << 20)) {
    buf_free(&b);
    return err_set(ERR_INVALID, "%s %s: %s", option, path, bad ? "read error" : "empty or larger than 1 MiB");
  }
  *out = b.data;
  return 0;
}

static int serve_registry(const config *cfg, registry **out) {
  registry *r = NULL;
  int rc = registry_new(&r);
  if (!rc) rc = registry_set_models_dir(r, cfg->models_dir);
  char *list = cfg->models ? str_dup(cfg->models) : NULL;
  char *save = NULL;
  for (char *item = list ? strtok_r(list, ",", &save) : NULL; !rc && item; item = strtok_r(NULL, ",", &save)) {
    /* NAME=PATH when there is an '=' and what follows it is a readable file
     * (a path that itself holds '=' still works on its own) */
    char *eq = strchr(item, '=');
    const char *name = NULL, *path = item;
    if (eq && eq != item && access(eq + 1, R_OK) == 0) {
      *eq = '\0';
      name = item;
      path = eq + 1;
    }
    if (access(path, R_OK) != 0) rc = err_set(ERR_NOT_FOUND, "--model: cannot read '%s': %s", path, strerror(errno));
    else if ((rc = registry_add_model(r, path, name))) rc = err_set(rc, "--model %s: %s", item, err_detail());
  }
  free(list);
  list = cfg->aliases ? str_dup(cfg->aliases) : NULL;
  for (char *item = list ? strtok_r(list, ",", &save) : NULL; !rc && item; item = strtok_r(NULL, ",", &save))
    if ((rc = registry_add_alias_spec(r, item))) rc = err_set(rc, "--alias %s: %s", item, err_detail());
  free(list);
  if (!rc && cfg->default_model && *cfg->default_model) rc = registry_set_default(r, cfg->default_model);
  if (!rc) rc = registry_refresh(r);
  if (rc) {
    registry_free(r);
    r = NULL;
  }
  *out = r;
  return rc;
}

static int cmd_serve(int argc, char **argv) {
  /* Two malloc arenas, before any thread starts: with glibc's default (16
   * on 2 cores) resident memory grew ~30 MiB/h under the soak, the growth
   * all in arena heaps as streams' producer threads came and went; with two
   * it is flat (docs/perf.md "Soak"). MALLOC_ARENA_MAX overrides. */
  malloc_bound_arenas(2);
  config cfg;
  if (config_load(&cfg, argc, argv)) {
    fprintf(stderr, "parley: %s\n", err_detail());
    config_free(&cfg);
    return 2;
  }
  enum log_level lvl = LOG_LEVEL_INFO;
  log_level_parse(cfg.log_level, &lvl);
  log_set_level(lvl);
  if (!config_host_is_loopback(cfg.host) && cfg.n_api_keys == 0 && !cfg.no_auth) {
    fprintf(stderr,
            "parley: refusing to listen on %s without an API key: set --api-key (PARLEY_API_KEY), "
            "or pass --no-auth to serve it open deliberately\n",
            cfg.host);
    config_free(&cfg);
    return 2;
  }

  /* TLS: the certificate and key files are read once, here. */
  char *tls_cert = NULL, *tls_key = NULL;
  bool want_tls = *cfg.tls_cert || *cfg.tls_key;
  if (want_tls && (!*cfg.tls_cert || !*cfg.tls_key)) {
    fprintf(stderr, "parley: --tls-cert and --tls-key go together (one of them is missing)\n");
    config_free(&cfg);
    return 2;
  }
  if (want_tls && (read_text_file(cfg.tls_cert, "--tls-cert", &tls_cert) || read_text_file(cfg.tls_key, "--tls-key", &tls_key))) {
    fprintf(stderr, "parley: %s\n", err_detail());
    free(tls_cert);
    config_free(&cfg);
    return 2;
  }
  /* The store creates the data directory and its spool (emptied at open);
   * the HTTP layer spools uploads there so that adopting one is a rename. */
  store *st = NULL;
  if (store_open(cfg.data_dir, &st)) {
    fprintf(stderr, "parley: cannot open the data directory %s: %s\n", cfg.data_dir, err_detail());
    config_free(&cfg);
    return 1;
  }

  registry *reg = NULL;
  if (serve_registry(&cfg, &reg)) {
    fprintf(stderr, "parley: %s\n", err_detail());
    store_close(st);
    config_free(&cfg);
    return 2;
  }

  /* Block the shutdown signals before any thread starts, so every thread
   * inherits the mask and only sigwait below sees them. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  admin_ctx actx = {.server = NULL, .started_ns = time_mono_ns()};
  http_config hc = {
      .tls_cert_pem = tls_cert,
      .tls_key_pem = tls_key,
      .tls_port = (int)cfg.tls_port,
      .host = cfg.host,
      .port = (int)cfg.port,
      .api_keys = (const char *const *)cfg.api_keys,
      .n_api_keys = cfg.n_api_keys,
      .max_json_body = (size_t)cfg.max_body,
      .max_upload = (uint64_t)cfg.max_upload,
      .spool_dir = store_spool_dir(st),
      .n_threads = (unsigned)cfg.http_threads,
      .sse_keepalive_ms = (unsigned)(cfg.sse_keepalive_s * 1000),
      .conn_timeout_s = (unsigned)cfg.conn_timeout_s,
      .ws_max_message = (size_t)cfg.ws_max_message,
      .access_log = cfg.access_log,
      .allowed_origins = cfg.allowed_origins,
      .admin_routes = cfg.admin,
      .host_check = cfg.host_check && config_host_is_loopback(cfg.host),
      .on_error = api_http_on_error,
      .decorate = api_http_decorate,
      .hook_ctx = NULL,
  };
  manager_params mp = {.n_slots = (int32_t)cfg.parallel,
                       .queue_max = (int32_t)cfg.queue_max,
                       .n_checkpoints = cfg.rs_checkpoints ? (int32_t)cfg.rs_checkpoints : -1,
                       .n_ctx = cfg.ctx_size,
                       .n_threads = 0,
                       .keep_alive_set = true,
                       .keep_alive_ms = cfg.keep_alive_ms,
                       .memory_budget = cfg.memory_budget,
                       .kv_type = (enum model_kv_type)cfg.cache_type};
  manager *mgr = NULL;
  int rc = manager_new(reg, &mp, &mgr);
  /* Pulled models go to the models dir; downloads a restart interrupted resume. */
  puller *pull = NULL;
  pull_config pcfg = {.models_dir = cfg.models_dir, .st = st, .reg = reg};
  if (!rc) rc = puller_new(&pcfg, &pull);
  size_t n_resumed = 0;
  if (!rc && puller_resume_interrupted(pull, &n_resumed)) LOG_WARN("app", "resuming downloads: %s", err_detail());
  if (n_resumed) LOG_INFO("app", "resumed %zu interrupted download(s)", n_resumed);
  openai_ctx octx = {.reg = reg, .mgr = mgr, .st = st, .pull = pull};
  anthropic_ctx anctx = {.reg = reg, .mgr = mgr};
  http_server *srv = NULL;
  const http_route *routes;
  size_t n_routes = admin_routes(&actx, &routes);
  if (!rc) rc = http_server_new(&hc, &srv);
  if (!rc) rc = http_server_add_routes(srv, routes, n_routes);
  openai_files_ctx fctx = {.st = st};
  const http_route *file_routes;
  size_t n_file_routes = openai_files_routes(&fctx, &file_routes);
  if (!rc) rc = http_server_add_routes(srv, file_routes, n_file_routes);
  if (!rc) {
    n_routes = openai_routes(&octx, &routes);
    rc = http_server_add_routes(srv, routes, n_routes);
  }
  if (!rc) {
    n_routes = openai_responses_routes(&octx, &routes);
    rc = http_server_add_routes(srv, routes, n_routes);
  }
  api_speech *speech = NULL; /* speech engines start in worker processes on first use */
  api_speech_config spc = {.n_workers = (int)cfg.speech_workers, .call_ms = (int)(cfg.speech_timeout_s * 1000),
                           .models_dir = cfg.models_dir, .stt_model = cfg.stt_model, .stt_beam_size = (int)cfg.stt_beam_size};
  if (!rc) rc = api_speech_new(&speech, &spc);
  octx.speech = speech; /* /v1/models lists the STT models too */
  openai_realtime_ctx rctx = {.reg = reg, .mgr = mgr, .st = st, .api_keys = (const char *const *)cfg.api_keys,
                              .n_api_keys = cfg.n_api_keys, .speech = speech};
  if (!rc) {
    n_routes = openai_realtime_routes(&rctx, &routes);
    rc = http_server_add_routes(srv, routes, n_routes);
  }
  lmstudio_ctx lctx = {.reg = reg, .mgr = mgr, .st = st, .pull = pull};
  n_routes = lmstudio_routes(&lctx, &routes);
  if (!rc) rc = http_server_add_routes(srv, routes, n_routes);
  if (!rc) {
    n_routes = anthropic_routes(&anctx, &routes);
    rc = http_server_add_routes(srv, routes, n_routes);
  }
  ollama_ctx olctx;
  int olrc = ollama_init(&olctx, reg, mgr, cfg.data_dir);
  olctx.puller = pull;
  if (!rc && olrc) LOG_WARN("app", "ollama: %s", err_detail());
  if (!rc && !olrc) {
    n_routes = ollama_routes(&olctx, &routes);
    rc = http_server_add_routes(srv, routes, n_routes);
  }
  /* Last, though order does not matter: the OpenAI 501 fallbacks (real
   * routes always win) and the /v1-less and /v1/v1 path aliases. */
  if (!rc) rc = openai_surface_install(srv);
  if (!rc) rc = api_speech_set_fetch(speech, cfg.fetch_hosts, (uint64_t)cfg.max_upload);
  if (!rc) api_speech_set_manager(speech, mgr);
  if (!rc) {
    n_routes = openai_audio_routes(speech, &routes);
    rc = http_server_add_routes(srv, routes, n_routes);
  }
  if (!rc) {
    n_routes = deepgram_routes(speech, &routes);
    rc = http_server_add_routes(srv, routes, n_routes);
  }
  actx.server = srv;
  if (!rc) rc = http_server_start(srv);
  if (rc) {
    fprintf(stderr, "parley: cannot start the server on %s:%lld: %s\n", cfg.host, (long long)cfg.port, err_detail());
    if (srv) http_server_free(srv);
    ollama_free(&olctx);
    api_speech_free(speech);
    puller_free(pull);
    manager_free(mgr);
    registry_free(reg);
    store_close(st);
    config_free(&cfg);
    free(tls_cert);
    free(tls_key);
    return 1;
  }
  /* Free pages back to the system every 10 s: glibc keeps the pages of
   * blocks freed below a heap's top resident, and under a long mixed load
   * that alone grew RSS by ~19 MiB/h (docs/perf.md "Soak"). */
  if (malloc_trimmer_start(10000)) LOG_WARN("app", "%s", err_detail());
  LOG_INFO("app", "parley %s listening on http://%s:%d (data in %s, %s)", PARLEY_VERSION, cfg.host,
           http_server_port(srv), cfg.data_dir, cfg.n_api_keys ? "API key required" : "no API key");
  /* A line on stdout that tests and scripts wait for (and one for a
   * separate TLS listener). */
  bool main_tls = http_server_tls_port(srv) == http_server_port(srv);
  printf("listening on %s://%s:%d\n", main_tls ? "https" : "http", cfg.host, http_server_port(srv));
  if (http_server_tls_port(srv) && !main_tls) printf("tls listening on https://%s:%d\n", cfg.host, http_server_tls_port(srv));
  fflush(stdout);

  int sig = 0;
  do {
    sigwait(&sigs, &sig);
  } while (sig == SIGUSR1);
  uint64_t first_signal_ns = time_mono_ns();
  LOG_INFO("app", "signal %d: shutting down (a second signal exits at once)", sig);
  struct shutdown_job job = {srv, 0};
  pthread_t t;
  if (pthread_create(&t, NULL, shutdown_thread, &job) != 0) {
    http_server_free(srv);
  } else {
    while (!job.done) {
      sigwait(&sigs, &sig);
      /* A signal sent to the whole process group (Ctrl-C under `make run`
       * reaches make and parley alike) can arrive twice at once: only one
       * that comes later than half a second is a deliberate second one. */
      if ((sig == SIGINT || sig == SIGTERM) && time_mono_ns() - first_signal_ns > 500000000ull) {
        LOG_WARN("app", "second signal: exiting now");
        _exit(130);
      }
    }
    pthread_join(t, NULL);
  }
  malloc_trimmer_stop();
  gen_wait_streams(5000);
  ollama_free(&olctx); /* waits for its pull progress streams */
  openai_realtime_shutdown(&rctx); /* sessions' threads, speech engines */
  api_speech_free(speech);
  puller_free(pull); /* cancels downloads; their jobs resume at the next start */
  manager_free(mgr); /* after the server: no handler uses a model any more */
  registry_free(reg);
  store_close(st);
  config_free(&cfg);
  free(tls_cert);
  free(tls_key);
  LOG_INFO("app", "stopped");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("parley %s\n", PARLEY_VERSION);
    return 0;
  }
  /* The hidden mode the server starts its speech engines in (never typed
   * by a user: it serves the socket the server hands it as fd 3). */
  if (strcmp(argv[1], SPEECH_WORKER_ARG0) == 0 && argc >= 3 && strcmp(argv[2], SPEECH_WORKER_ARG1) == 0)
    return speech_worker_main(argc - 3, argv + 3);
  for (size_t i = 0; i < ARRAY_LEN(COMMANDS); i++)
    if (strcmp(argv[1], COMMANDS[i].name) == 0) return COMMANDS[i].fn(argc - 2, argv + 2);
  fprintf(stderr, "parley: unknown command '%s' (see parley help)\n", argv[1]);
  return 2;
}
