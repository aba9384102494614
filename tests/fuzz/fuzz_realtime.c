/*
 * fuzz_realtime.c - libFuzzer harness for the Realtime API's client input
 * that is not a WebSocket frame: the session object of session.update /
 * transcription_session.update / response.create (rt_config_apply, beta
 * flat and GA nested forms) and the base64 audio of
 * input_audio_buffer.append (rt_b64_decode). The first byte picks the mode.
 * Properties: a failed apply leaves the config as it was and names a field;
 * an applied config renders back to JSON; decoded audio re-encodes to
 * base64 that decodes to the same bytes.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/openai/rt_int.h"
#include "base/err.h"

static void check_b64(const uint8_t *data, size_t size) {
  uint8_t *raw = NULL;
  size_t n = 0;
  if (rt_b64_decode((const char *)data, size, &raw, &n) != 0) return;
  char *again = rt_b64_encode(raw, n);
  if (!again) abort();
  uint8_t *raw2 = NULL;
  size_t n2 = 0;
  if (rt_b64_decode(again, strlen(again), &raw2, &n2) != 0 || n2 != n || (n && memcmp(raw, raw2, n) != 0)) abort();
  free(raw);
  free(raw2);
  free(again);
}

FUZZ_TARGET(realtime) {
  if (size < 1) return 0;
  unsigned mode = data[0];
  if (mode % 4 == 3) {
    check_b64(data + 1, size - 1);
    return 0;
  }
  json_t *v = NULL;
  if (api_json_decode_object((const char *)data + 1, size - 1, &v) != 0) return 0;
  rt_config c;
  rt_config_defaults(&c, mode & 4, NULL);
  json_t *before = rt_config_json(&c, mode & 1);
  const char *param = NULL;
  int rc = rt_config_apply(&c, v, mode & 1, mode & 2, "session", &param);
  json_t *after = rt_config_json(&c, mode & 1);
  if (!before || !after) abort();
  if (rc) {
    if (rc > 0 || !err_detail()[0]) abort();
    if (!json_equal(before, after)) abort(); /* unchanged on error */
  }
  json_decref(before);
  json_decref(after);
  rt_config_free(&c);
  json_decref(v);
  return 0;
}
