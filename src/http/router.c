/*
 * router.c - matches (method, raw path) against declarative route tables.
 *
 * A pattern is compiled once into segments: literal, {param} (one segment)
 * or {name...} (the rest, at least one segment, joined with '/'). A request
 * path is split on '/' first and each segment is percent-decoded after the
 * split, so "/v1/models/org%2Fname" gives the one segment "org/name". Empty
 * segments are skipped: trailing and repeated slashes are tolerated.
 *
 * Choice among routes whose pattern matches the path: the most specific one
 * (segment by segment literal > param > rest), earlier tables first on a tie.
 * Precedence is explicit in two tiers: a route flagged HTTP_ROUTE_FALLBACK
 * is chosen only when no ordinary route matches both path and method, so a
 * real route registered at any time, in any table, with any pattern
 * (even a less specific one) shadows a fallback (the OpenAI 501 table).
 * The method is checked after the path: a path that matches only with other
 * methods gives ERR_METHOD and the Allow list. GET routes answer HEAD.
 *
 * Path aliases (router_add_alias): when no route at all matches a path, a
 * registered prefix (in whole decoded segments, e.g. "/chat") is replaced by
 * its target ("/v1/chat") and the path matched once more, so one route
 * table serves "/v1/chat/completions", "/chat/completions" and
 * "/v1/v1/chat/completions". A path that matches a route directly never
 * goes through an alias.
 *
 * Pure (no I/O); start reading at router_match_path.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "http/http_int.h"

enum seg_kind { SEG_LIT = 2, SEG_PARAM = 1, SEG_REST = 0 };

typedef struct seg {
  enum seg_kind kind;
  char *text; /* literal text or parameter name */
} seg;

#define PRE_SEGS 3 /* leading literal segments kept as hashes for a quick reject */

typedef struct croute {
  const http_route *route;
  seg *segs;
  size_t n_segs;
  bool has_rest;               /* last segment is {name...} */
  size_t n_pre;                /* leading literal segments hashed, <= PRE_SEGS */
  uint32_t pre_hash[PRE_SEGS];
} croute;

/* A path alias: a literal segment prefix and its replacement. */
typedef struct alias {
  char **from, **to;
  size_t n_from, n_to;
} alias;

/* Route indexes in registration order. */
typedef struct idx_list {
  uint32_t *v;
  size_t n, cap;
} idx_list;

#define N_BUCKETS 64 /* routes whose first two segments are literal, by the second's hash */

struct router {
  croute *routes;
  size_t n_routes, cap;
  idx_list bucket[N_BUCKETS];
  idx_list wild; /* every other route: tried for every path */
  alias *aliases;
  size_t n_aliases;
};

size_t router_n_routes(const router *r) { return r->n_routes; }

const http_route *router_route(const router *r, size_t i) { return i < r->n_routes ? r->routes[i].route : NULL; }

int router_new(router **out) {
  *out = calloc(1, sizeof **out);
  return *out ? 0 : err_set(ERR_NOMEM, "router");
}

void router_free(router *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_routes; i++) {
    for (size_t j = 0; j < r->routes[i].n_segs; j++) free(r->routes[i].segs[j].text);
    free(r->routes[i].segs);
  }
  free(r->routes);
  for (size_t i = 0; i < N_BUCKETS; i++) free(r->bucket[i].v);
  free(r->wild.v);
  for (size_t i = 0; i < r->n_aliases; i++) {
    for (size_t j = 0; j < r->aliases[i].n_from; j++) free(r->aliases[i].from[j]);
    for (size_t j = 0; j < r->aliases[i].n_to; j++) free(r->aliases[i].to[j]);
    free(r->aliases[i].from);
    free(r->aliases[i].to);
  }
  free(r->aliases);
  free(r);
}

/* FNV-1a: a quick first comparison of literal segments. */
static uint32_t seg_hash(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static int compile(const http_route *rt, croute *cr) {
  const char *p = rt->pattern;
  cr->route = rt;
  cr->segs = NULL;
  cr->n_segs = 0;
  if (!p || p[0] != '/') return err_set(ERR_INVALID, "route pattern \"%s\" must start with '/'", p ? p : "(null)");
  seg tmp[ROUTER_MAX_SEGMENTS];
  size_t n = 0;
  size_t n_params = 0;
  while (*p) {
    while (*p == '/') p++;
    if (!*p) break;
    const char *e = p;
    while (*e && *e != '/') e++;
    size_t len = (size_t)(e - p);
    if (n == ROUTER_MAX_SEGMENTS) goto too_many;
    seg s;
    if (p[0] == '{' && p[len - 1] == '}') {
      size_t nl = len - 2;
      s.kind = SEG_PARAM;
      if (nl > 3 && memcmp(p + 1 + nl - 3, "...", 3) == 0) {
        s.kind = SEG_REST;
        nl -= 3;
        if (*e && e[strspn(e, "/")]) {
          for (size_t i = 0; i < n; i++) free(tmp[i].text);
          return err_set(ERR_INVALID, "route pattern \"%s\": rest parameter must be last", rt->pattern);
        }
      }
      if (nl == 0 || ++n_params > ROUTER_MAX_PARAMS) {
        for (size_t i = 0; i < n; i++) free(tmp[i].text);
        return err_set(ERR_INVALID, "route pattern \"%s\": empty parameter name or too many parameters",
                       rt->pattern);
      }
      s.text = str_ndup(p + 1, nl);
    } else {
      s.kind = SEG_LIT;
      s.text = str_ndup(p, len);
    }
    if (!s.text) goto nomem;
    tmp[n++] = s;
    p = e;
  }
  cr->segs = malloc((n ? n : 1) * sizeof *cr->segs);
  if (!cr->segs) goto nomem;
  memcpy(cr->segs, tmp, n * sizeof *tmp);
  cr->n_segs = n;
  cr->has_rest = n && tmp[n - 1].kind == SEG_REST;
  cr->n_pre = 0;
  while (cr->n_pre < n && cr->n_pre < PRE_SEGS && tmp[cr->n_pre].kind == SEG_LIT) {
    cr->pre_hash[cr->n_pre] = seg_hash(tmp[cr->n_pre].text);
    cr->n_pre++;
  }
  return 0;
too_many:
  for (size_t i = 0; i < n; i++) free(tmp[i].text);
  return err_set(ERR_INVALID, "route pattern \"%s\": more than %d segments", rt->pattern, ROUTER_MAX_SEGMENTS);
nomem:
  for (size_t i = 0; i < n; i++) free(tmp[i].text);
  return err_set(ERR_NOMEM, "route pattern \"%s\"", rt->pattern);
}

int router_add(router *r, const http_route *routes, size_t n_routes) {
  if (r->n_routes + n_routes > r->cap) {
    size_t ncap = r->cap ? r->cap : 16;
    while (ncap < r->n_routes + n_routes) ncap *= 2;
    croute *nr = realloc(r->routes, ncap * sizeof *nr);
    if (!nr) return err_set(ERR_NOMEM, "router: %zu routes", ncap);
    r->routes = nr;
    r->cap = ncap;
  }
  for (size_t i = 0; i < n_routes; i++) {
    if (!routes[i].method || !routes[i].fn)
      return err_set(ERR_INVALID, "route \"%s\": method and handler are required",
                     routes[i].pattern ? routes[i].pattern : "(null)");
    croute *cr = &r->routes[r->n_routes];
    int rc = compile(&routes[i], cr);
    if (rc) return rc;
    idx_list *l = cr->n_pre >= 2 ? &r->bucket[cr->pre_hash[1] % N_BUCKETS] : &r->wild;
    if (l->n == l->cap) {
      size_t ncap = l->cap ? l->cap * 2 : 8;
      uint32_t *nv = realloc(l->v, ncap * sizeof *nv);
      if (!nv) {
        for (size_t j = 0; j < cr->n_segs; j++) free(cr->segs[j].text);
        free(cr->segs);
        return err_set(ERR_NOMEM, "router index");
      }
      l->v = nv;
      l->cap = ncap;
    }
    l->v[l->n++] = (uint32_t)r->n_routes;
    r->n_routes++;
  }
  return 0;
}

/* Decoded path segments of one request; hash[] of the first PRE_SEGS
 * (filled by segs_hash before matching). */
typedef struct path_segs {
  char *s[ROUTER_MAX_SEGMENTS];
  size_t n;
  uint32_t hash[PRE_SEGS];
} path_segs;

static void segs_hash(path_segs *ps) {
  for (size_t i = 0; i < PRE_SEGS && i < ps->n; i++) ps->hash[i] = seg_hash(ps->s[i]);
}

static void path_segs_free(path_segs *ps) {
  for (size_t i = 0; i < ps->n; i++) free(ps->s[i]);
  ps->n = 0;
}

static int path_split(const char *path, path_segs *ps) {
  ps->n = 0;
  const char *p = path;
  while (*p) {
    while (*p == '/') p++;
    if (!*p) break;
    const char *e = p;
    while (*e && *e != '/') e++;
    if (ps->n == ROUTER_MAX_SEGMENTS) {
      path_segs_free(ps);
      return err_set(ERR_NOT_FOUND, "path has more than %d segments", ROUTER_MAX_SEGMENTS);
    }
    int rc = url_decode(p, (size_t)(e - p), false, &ps->s[ps->n], NULL);
    if (rc) {
      path_segs_free(ps);
      return err_set(rc, "path segment %zu: %s", ps->n + 1, err_detail());
    }
    ps->n++;
    p = e;
  }
  return 0;
}

static bool path_matches(const croute *cr, const path_segs *ps) {
  /* Quick rejects first: the segment count, then hashes of the leading
   * literals (the table holds a few hundred routes). */
  if (cr->has_rest ? ps->n < cr->n_segs : ps->n != cr->n_segs) return false;
  for (size_t k = 0; k < cr->n_pre; k++)
    if (cr->pre_hash[k] != ps->hash[k]) return false;
  size_t i = 0;
  for (; i < cr->n_segs; i++) {
    const seg *s = &cr->segs[i];
    if (s->kind == SEG_REST) return i < ps->n; /* at least one segment */
    if (i >= ps->n) return false;
    if (s->kind == SEG_LIT && strcmp(s->text, ps->s[i]) != 0) return false;
  }
  return i == ps->n;
}

/* >0 when a is more specific than b. */
static int specificity_cmp(const croute *a, const croute *b) {
  size_t n = a->n_segs < b->n_segs ? a->n_segs : b->n_segs;
  for (size_t i = 0; i < n; i++)
    if (a->segs[i].kind != b->segs[i].kind) return (int)a->segs[i].kind - (int)b->segs[i].kind;
  return 0;
}

static bool method_ok(const char *route_method, const char *method) {
  if (strcmp(route_method, method) == 0) return true;
  return strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0;
}

static void allow_add(char *allow, size_t cap, const char *m) {
  /* Skip duplicates: search for m as a whole item. */
  size_t ml = strlen(m);
  for (const char *p = allow; (p = strstr(p, m)) != NULL; p += ml) {
    bool start = p == allow || p[-1] == ' ';
    bool end = p[ml] == '\0' || p[ml] == ',';
    if (start && end) return;
  }
  size_t used = strlen(allow);
  size_t need = (used ? 2 : 0) + ml + 1;
  if (used + need > cap) return;
  if (used) memcpy(allow + used, ", ", 2), used += 2;
  memcpy(allow + used, m, ml + 1);
}

/* Compiles a literal prefix ("/v1/chat") into decoded segments. */
static int literal_segs(const char *prefix, char ***out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  if (!prefix || prefix[0] != '/' || strchr(prefix, '{'))
    return err_set(ERR_INVALID, "path alias \"%s\" must be a literal path starting with '/'", prefix ? prefix : "(null)");
  path_segs ps;
  int rc = path_split(prefix, &ps);
  if (rc) return err_set(ERR_INVALID, "path alias \"%s\": %s", prefix, err_detail());
  char **v = malloc((ps.n ? ps.n : 1) * sizeof *v);
  if (!v) {
    path_segs_free(&ps);
    return err_set(ERR_NOMEM, "path alias \"%s\"", prefix);
  }
  memcpy(v, ps.s, ps.n * sizeof *v);
  *out = v;
  *n_out = ps.n;
  return 0;
}

int router_add_alias(router *r, const char *from, const char *to) {
  alias a = {0};
  int rc = literal_segs(from, &a.from, &a.n_from);
  if (!rc) rc = literal_segs(to, &a.to, &a.n_to);
  if (!rc && a.n_from == 0) rc = err_set(ERR_INVALID, "path alias \"%s\": the prefix must not be \"/\"", from);
  alias *na = rc ? NULL : realloc(r->aliases, (r->n_aliases + 1) * sizeof *na);
  if (!rc && !na) rc = err_set(ERR_NOMEM, "path alias \"%s\"", from);
  if (rc) {
    for (size_t j = 0; j < a.n_from; j++) free(a.from[j]);
    for (size_t j = 0; j < a.n_to; j++) free(a.to[j]);
    free(a.from);
    free(a.to);
    return rc;
  }
  r->aliases = na;
  r->aliases[r->n_aliases++] = a;
  return 0;
}

/* Rewrites ps when a's prefix covers its first segments; false otherwise
 * (or when the result would be too long or memory runs out: ps unchanged). */
static bool alias_apply(const alias *a, path_segs *ps) {
  if (ps->n < a->n_from) return false;
  for (size_t j = 0; j < a->n_from; j++)
    if (strcmp(ps->s[j], a->from[j]) != 0) return false;
  if (ps->n - a->n_from + a->n_to > ROUTER_MAX_SEGMENTS) return false;
  path_segs out = {.n = 0};
  for (size_t j = 0; j < a->n_to; j++) {
    if (!(out.s[out.n] = str_dup(a->to[j]))) {
      path_segs_free(&out);
      return false;
    }
    out.n++;
  }
  for (size_t j = a->n_from; j < ps->n; j++) out.s[out.n++] = ps->s[j];
  for (size_t j = 0; j < a->n_from; j++) free(ps->s[j]);
  *ps = out;
  return true;
}

/* The route for ps and method: the most specific ordinary route, else the
 * most specific fallback. *any_path is set when some route of either tier
 * matches the path with any method. */
static const croute *best_route(const router *r, const path_segs *ps, const char *method, bool *any_path) {
  const croute *best = NULL, *best_fb = NULL;
  /* Candidates: the bucket of the path's second segment merged with the
   * wild list, in registration order (ties go to the earlier route). */
  static const idx_list empty = {0};
  const idx_list *b = ps->n >= 2 ? &r->bucket[ps->hash[1] % N_BUCKETS] : &empty;
  const idx_list *w = &r->wild;
  for (size_t bi = 0, wi = 0; bi < b->n || wi < w->n;) {
    uint32_t i = (wi >= w->n || (bi < b->n && b->v[bi] < w->v[wi])) ? b->v[bi++] : w->v[wi++];
    const croute *cr = &r->routes[i];
    if (!path_matches(cr, ps)) continue;
    *any_path = true;
    if (!method_ok(cr->route->method, method)) continue;
    const croute **slot = (cr->route->flags & HTTP_ROUTE_FALLBACK) ? &best_fb : &best;
    if (!*slot || specificity_cmp(cr, *slot) > 0) *slot = cr;
  }
  return best ? best : best_fb;
}

int router_match_path(const router *r, const char *method, const char *path, router_match *m) {
  memset(m, 0, sizeof *m);
  path_segs ps;
  int rc = path_split(path, &ps);
  if (rc) return rc;
  segs_hash(&ps);
  bool any_path = false;
  const croute *best = best_route(r, &ps, method, &any_path);
  if (!any_path) {
    /* No route knows this path: try the alias with the longest prefix. */
    const alias *use = NULL;
    for (size_t i = 0; i < r->n_aliases; i++) {
      const alias *a = &r->aliases[i];
      if (a->n_from > ps.n || (use && use->n_from >= a->n_from)) continue;
      bool prefix = true;
      for (size_t j = 0; prefix && j < a->n_from; j++) prefix = strcmp(ps.s[j], a->from[j]) == 0;
      if (prefix) use = a;
    }
    if (use && alias_apply(use, &ps)) {
      segs_hash(&ps);
      best = best_route(r, &ps, method, &any_path);
    }
  }
  if (!best) {
    if (!any_path) {
      path_segs_free(&ps);
      return err_set(ERR_NOT_FOUND, "no route for %s %s", method, path);
    }
    for (size_t i = 0; i < r->n_routes; i++) {
      const croute *cr = &r->routes[i];
      if (!path_matches(cr, &ps)) continue;
      allow_add(m->allow, sizeof m->allow, cr->route->method);
      if (strcmp(cr->route->method, "GET") == 0) allow_add(m->allow, sizeof m->allow, "HEAD");
    }
    allow_add(m->allow, sizeof m->allow, "OPTIONS");
    path_segs_free(&ps);
    return err_set(ERR_METHOD, "method %s not allowed for %s", method, path);
  }
  m->route = best->route;
  for (size_t i = 0; i < best->n_segs; i++) {
    const seg *s = &best->segs[i];
    if (s->kind == SEG_LIT) continue;
    char *val;
    if (s->kind == SEG_PARAM) {
      val = ps.s[i];
      ps.s[i] = NULL;
    } else {
      size_t total = 0;
      for (size_t j = i; j < ps.n; j++) total += strlen(ps.s[j]) + 1;
      val = malloc(total);
      if (!val) {
        router_match_free(m);
        path_segs_free(&ps);
        return err_set(ERR_NOMEM, "path parameter %s", s->text);
      }
      size_t o = 0;
      for (size_t j = i; j < ps.n; j++) {
        size_t l = strlen(ps.s[j]);
        if (o) val[o++] = '/';
        memcpy(val + o, ps.s[j], l);
        o += l;
      }
      val[o] = '\0';
    }
    m->param_names[m->n_params] = s->text;
    m->param_values[m->n_params] = val;
    m->n_params++;
  }
  for (size_t i = 0; i < ps.n; i++) free(ps.s[i]); /* NULL for moved ones */
  return 0;
}

void router_match_free(router_match *m) {
  for (size_t i = 0; i < m->n_params; i++) free(m->param_values[i]);
  m->n_params = 0;
  m->route = NULL;
}
