/*
 * zz_pending_stubs.c - TEMPORARY weak stand-ins for ws.c and multipart.c,
 * which land from the http-ws and http-mp branches. Weak, and sorted last in
 * the archive, so the real definitions win once merged; this file is deleted
 * when both branches are merged into http-core.
 */
#include "base/err.h"
#include "http/multipart.h"
#include "http/ws.h"

#define WEAK __attribute__((weak))

WEAK int mp_boundary_from_content_type(const char *content_type, char *out, size_t cap) {
  (void)content_type, (void)out, (void)cap;
  return err_set(ERR_UNSUPPORTED, "multipart parser not built in");
}
WEAK int mp_parser_new(const char *boundary, const mp_callbacks *cb, void *ctx, mp_parser **out) {
  (void)boundary, (void)cb, (void)ctx;
  *out = NULL;
  return err_set(ERR_UNSUPPORTED, "multipart parser not built in");
}
WEAK int mp_parser_feed(mp_parser *p, const char *data, size_t len) {
  (void)p, (void)data, (void)len;
  return ERR_UNSUPPORTED;
}
WEAK int mp_parser_finish(mp_parser *p) {
  (void)p;
  return ERR_UNSUPPORTED;
}
WEAK void mp_parser_free(mp_parser *p) { (void)p; }

WEAK int ws_loop_new(const ws_config *cfg, ws_loop **out) {
  (void)cfg;
  *out = NULL;
  return err_set(ERR_UNSUPPORTED, "WebSocket loop not built in");
}
WEAK void ws_loop_free(ws_loop *loop) { (void)loop; }
WEAK int ws_loop_adopt(ws_loop *loop, int fd, const void *extra, size_t extra_len, const ws_handler *h, void *ctx,
                       void (*release)(void *arg), void *release_arg) {
  (void)loop, (void)fd, (void)extra, (void)extra_len, (void)h, (void)ctx, (void)release, (void)release_arg;
  return ERR_UNSUPPORTED;
}
WEAK size_t ws_loop_n_open(ws_loop *loop) {
  (void)loop;
  return 0;
}
WEAK int ws_send_text(ws_conn *c, const char *data, size_t len) {
  (void)c, (void)data, (void)len;
  return ERR_CANCELLED;
}
WEAK int ws_send_binary(ws_conn *c, const void *data, size_t len) {
  (void)c, (void)data, (void)len;
  return ERR_CANCELLED;
}
WEAK int ws_close(ws_conn *c, int code, const char *reason) {
  (void)c, (void)code, (void)reason;
  return ERR_CANCELLED;
}
WEAK void ws_conn_ref(ws_conn *c) { (void)c; }
WEAK void ws_conn_unref(ws_conn *c) { (void)c; }
WEAK void *ws_conn_ctx(ws_conn *c) {
  (void)c;
  return NULL;
}
