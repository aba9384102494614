/*
 * fuzz_server.h - an in-process parley server for the harnesses whose
 * parser has no entry point but the HTTP request itself (the front door's
 * length and encoding handling, and the OpenAI, LM Studio, Ollama, Anthropic
 * and Deepgram request parsers, which answer through the request they
 * parse): the real http layer and the real route tables over a store, a
 * registry and a manager, with one tiny random-weight llama (the small
 * testgen shape, its own byte vocabulary, a small chat template) as the
 * default model; the vocabulary is the real Llama-2 SentencePiece one from
 * ../shared/vocab ($PARLEY_SHARED), and without it the model does not load
 * (the parsers still run, up to the model lookup). Bytes go in over a
 * loopback TCP connection, exactly as a client's would. Its files live in a
 * temporary directory removed at exit.
 *
 * Header-only (static functions) because each harness is its own
 * translation unit, linked alone by tests/fuzz/run.sh; a harness calls
 * fuzz_server_start once from FUZZ_INIT and fuzz_server_exchange per input.
 * The server lives until the process exits.
 */
#ifndef PARLEY_FUZZ_SERVER_H
#define PARLEY_FUZZ_SERVER_H

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "api/deepgram/deepgram.h"
#include "api/lmstudio/lmstudio.h"
#include "api/ollama/ollama.h"
#include "api/openai/openai.h"
#include "api/speech_svc.h"
#include "base/buf.h"
#include "base/log.h"
#include "engine/manager.h"
#include "http/http.h"
#include "model/registry.h"
#include "model/testgen.h"
#include "store/store.h"

static const char FUZZ_CHAT_TEMPLATE[] =
    "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<call>{{ c.function.name }}</call>{% endfor %}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

/* Everything the server points at; static so it outlives every input. */
static struct fuzz_srv {
  char dir[64];
  store *st;
  registry *reg;
  manager *mgr;
  api_speech *speech;
  openai_ctx oc;
  anthropic_ctx ac;
  lmstudio_ctx lc;
  ollama_ctx olc;
  http_server *srv;
  int port;
} g_fs;

static int fuzz_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void fuzz_server_cleanup(void) {
  if (g_fs.dir[0]) nftw(g_fs.dir, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void fuzz_server_routes(const http_route *r, size_t n) {
  if (http_server_add_routes(g_fs.srv, r, n) != 0) abort();
}

/* Starts the server (api_key NULL: open; else that key is required, and the
 * loopback Host guard is on). Returns its port; aborts when it cannot. */
static int fuzz_server_start(const char *api_key) {
  signal(SIGPIPE, SIG_IGN);
  log_set_level(LOG_LEVEL_ERROR);
  snprintf(g_fs.dir, sizeof g_fs.dir, "/tmp/parley-fuzz-XXXXXX");
  if (!mkdtemp(g_fs.dir)) abort();
  atexit(fuzz_server_cleanup);
  char model_path[128], vocab[1024];
  snprintf(model_path, sizeof model_path, "%s/tiny.gguf", g_fs.dir);
  const char *shared = getenv("PARLEY_SHARED");
  snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-llama-spm.gguf", shared && *shared ? shared : "../shared");
  model_testgen g = model_testgen_small();
  g.chat_template = FUZZ_CHAT_TEMPLATE;
  if (access(vocab, R_OK) == 0) g.vocab_path = vocab;
  if (model_testgen_write(&g, model_path) != 0) abort();
  if (store_open(g_fs.dir, &g_fs.st) != 0) abort();
  if (registry_new(&g_fs.reg) != 0) abort();
  for (int s = 0; s < REGISTRY_SOURCE_COUNT; s++) registry_set_source_dir(g_fs.reg, (registry_source)s, "");
  if (registry_add_model(g_fs.reg, model_path, "tiny") != 0 || registry_set_default(g_fs.reg, "tiny") != 0 ||
      registry_refresh(g_fs.reg) != 0)
    abort();
  manager_params mp = {.n_slots = 2, .n_ctx = 128, .n_threads = 1, .keep_alive_set = true, .keep_alive_ms = -1};
  if (manager_new(g_fs.reg, &mp, &g_fs.mgr) != 0) abort();
  static const char *keys[1];
  keys[0] = api_key;
  http_config hc = {
      .host = "127.0.0.1",
      .port = 0,
      .api_keys = api_key ? keys : NULL,
      .n_api_keys = api_key ? 1 : 0,
      .max_json_body = 1 << 20,
      .max_upload = 4 << 20,
      .spool_dir = store_spool_dir(g_fs.st),
      .n_threads = 2,
      .conn_timeout_s = 5,
      .host_check = api_key != NULL,
      .on_error = api_http_on_error,
      .decorate = api_http_decorate,
  };
  if (http_server_new(&hc, &g_fs.srv) != 0) abort();
  const http_route *r;
  g_fs.oc = (openai_ctx){.reg = g_fs.reg, .mgr = g_fs.mgr, .st = g_fs.st};
  size_t n = openai_routes(&g_fs.oc, &r);
  fuzz_server_routes(r, n);
  n = openai_responses_routes(&g_fs.oc, &r);
  fuzz_server_routes(r, n);
  g_fs.ac = (anthropic_ctx){.reg = g_fs.reg, .mgr = g_fs.mgr};
  n = anthropic_routes(&g_fs.ac, &r);
  fuzz_server_routes(r, n);
  g_fs.lc = (lmstudio_ctx){.reg = g_fs.reg, .mgr = g_fs.mgr, .st = g_fs.st};
  n = lmstudio_routes(&g_fs.lc, &r);
  fuzz_server_routes(r, n);
  if (ollama_init(&g_fs.olc, g_fs.reg, g_fs.mgr, g_fs.dir) != 0) abort();
  n = ollama_routes(&g_fs.olc, &r);
  fuzz_server_routes(r, n);
  if (api_speech_new(&g_fs.speech, NULL) != 0) abort(); /* workers: this binary (the unit runner and FUZZ_INIT handle __worker) */
  api_speech_set_manager(g_fs.speech, g_fs.mgr);
  n = deepgram_routes(g_fs.speech, &r);
  fuzz_server_routes(r, n);
  if (http_server_start(g_fs.srv) != 0) abort();
  g_fs.port = http_server_port(g_fs.srv);
  return g_fs.port;
}

/* Sends req[0..n) on a new connection, closes the sending side, and reads
 * the answer until the server closes or falls silent (at most ~20 s). Returns the status of
 * the first response line, 0 when the server closed without one, -1 when
 * it could not be reached (a dead server). The whole answer lands in out. */
static int fuzz_server_exchange(const void *req, size_t n, buf *out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) abort();
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_fs.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  const char *p = req;
  size_t left = n;
  while (left) {
    ssize_t w = send(fd, p, left, MSG_NOSIGNAL);
    if (w <= 0) break; /* the server answered early and closed: fine */
    p += w;
    left -= (size_t)w;
  }
  shutdown(fd, SHUT_WR);
  char chunk[16384];
  /* Until the first byte: up to 20 s (a generation). After it, 300 ms of
   * silence ends the exchange: a kept-alive connection stays open. */
  for (int waited = 0; waited < 200;) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int pr = poll(&pf, 1, 100);
    if (pr == 0) {
      if (out->len && ++waited >= 3) break;
      if (!out->len) waited++;
      continue;
    }
    waited = 0;
    ssize_t r = recv(fd, chunk, sizeof chunk, 0);
    if (r <= 0) break;
    if (out->len < (1u << 20)) buf_append(out, chunk, (size_t)r);
  }
  close(fd);
  int status = 0;
  if (out->len >= 12 && memcmp(out->data, "HTTP/1.", 7) == 0) status = atoi(out->data + 9);
  return status;
}

#endif
