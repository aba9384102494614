/*
 * test_openai_surface.c - the OpenAI operation table of
 * api/openai/unimplemented.c: complete and self-consistent (every operation
 * routes to its own 501 entry, under /v1, without it and under /v1/v1), and
 * its alias prefixes never touch another dialect's paths.
 */
#include <stdio.h>
#include <stdlib.h>

#include "api/openai/unimplemented.h"
#include "base/err.h"
#include "base/util.h"
#include "http/http_int.h"
#include "test.h"

/* "/a/{b}/c" -> "/a/x1/c" (each parameter a distinct value). */
static void instantiate(const char *tmpl, char *out, size_t cap) {
  size_t o = 0;
  int n = 0;
  for (const char *p = tmpl; *p && o + 4 < cap; p++) {
    if (*p == '{') {
      const char *e = strchr(p, '}');
      o += (size_t)snprintf(out + o, cap - o, "x%d", ++n);
      p = e;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
}

TEST(openai_surface_table_is_the_spec_list) {
  const openai_op *ops;
  size_t n = openai_ops(&ops);
  EXPECT_INT_EQ(n, 281); /* 288 rows of the spec minus 7 "?beta=true" duplicates */
  for (size_t i = 0; i < n; i++) {
    EXPECT_TRUE(ops[i].path[0] == '/' && !strchr(ops[i].path, '?'));
    EXPECT_TRUE(strcmp(ops[i].method, "GET") == 0 || strcmp(ops[i].method, "POST") == 0 ||
                strcmp(ops[i].method, "DELETE") == 0);
    EXPECT_TRUE(ops[i].operation && *ops[i].operation);
    for (size_t j = 0; j < i; j++)
      if (strcmp(ops[i].method, ops[j].method) == 0 && strcmp(ops[i].path, ops[j].path) == 0)
        TEST_CHECK_(0, 0, "duplicate operation %s %s", ops[i].method, ops[i].path);
  }
}

TEST(openai_surface_every_operation_routes_to_itself_under_each_prefix) {
  const http_route *routes;
  size_t n = openai_unimplemented_routes(&routes);
  ASSERT_INT_EQ(n, 281);
  router *r = NULL;
  ASSERT_INT_EQ(router_new(&r), 0);
  ASSERT_INT_EQ(router_add(r, routes, n), 0);
  const char *const *prefixes;
  size_t np = openai_path_prefixes(&prefixes);
  ASSERT_TRUE(np > 10);
  for (size_t i = 0; i < np; i++) {
    char v1[64], v1v1[64];
    snprintf(v1, sizeof v1, "/v1%s", prefixes[i]);
    snprintf(v1v1, sizeof v1v1, "/v1/v1%s", prefixes[i]);
    ASSERT_INT_EQ(router_add_alias(r, prefixes[i], v1), 0);
    ASSERT_INT_EQ(router_add_alias(r, v1v1, v1), 0);
  }
  static const char *const forms[] = {"/v1", "", "/v1/v1"};
  for (size_t i = 0; i < n; i++) {
    const openai_op *op = routes[i].ctx;
    EXPECT_TRUE(routes[i].flags & HTTP_ROUTE_FALLBACK);
    char inst[256], path[300];
    instantiate(op->path, inst, sizeof inst);
    for (size_t f = 0; f < ARRAY_LEN(forms); f++) {
      snprintf(path, sizeof path, "%s%s", forms[f], inst);
      router_match m;
      int rc = router_match_path(r, op->method, path, &m);
      if (rc != 0 || m.route->ctx != op)
        TEST_CHECK_(0, 0, "%s %s routed to %s (rc %d)", op->method, path, rc ? "nothing" : m.route->name, rc);
      router_match_free(&m);
    }
  }
  router_free(r);
}

TEST(openai_surface_prefixes_leave_other_dialects_alone) {
  const char *const *prefixes;
  size_t np = openai_path_prefixes(&prefixes);
  static const char *const others[] = {"/api", "/admin", "/health", "/metrics", "/deepgram", "/lmstudio", "/v1",
                                       "/messages", "/listen", "/speak", "/read"};
  for (size_t i = 0; i < np; i++)
    for (size_t j = 0; j < ARRAY_LEN(others); j++)
      if (strcmp(prefixes[i], others[j]) == 0) TEST_CHECK_(0, 0, "alias prefix %s belongs to another dialect", others[j]);
  static const char *const needed[] = {"/chat", "/completions", "/embeddings", "/models", "/responses",
                                       "/files", "/uploads", "/audio", "/conversations", "/realtime"};
  for (size_t j = 0; j < ARRAY_LEN(needed); j++) {
    bool found = false;
    for (size_t i = 0; i < np && !found; i++) found = strcmp(prefixes[i], needed[j]) == 0;
    if (!found) TEST_CHECK_(0, 0, "no alias prefix %s", needed[j]);
  }
}
