/*
 * grammar_match.c - the incremental matcher (grammar_state), the vocabulary
 * trie (grammar_vocab) and the token mask.
 *
 * A state is a set of pushdown stacks over the compiled grammar (see
 * grammar_int.h). A stack is a list of element positions, top last; the top
 * always points at a CHAR element (REFs are expanded eagerly, END pops), and
 * an empty stack means "the start rule is complete". Accepting a code point
 * keeps the stacks whose top matches it, moves their top past the CHAR and
 * expands again. When the element after a REF is END, the REF's continuation
 * is not pushed (tail call), so right-recursive repetition runs in constant
 * stack depth. Identical stacks are merged (stack hash + compare), which keeps
 * ambiguous grammars polynomial.
 *
 * Bytes arrive as UTF-8 in arbitrary splits: a state also carries up to three
 * bytes of a pending code point. A pending prefix is kept only when it is
 * valid UTF-8 and some stack's top CHAR intersects the interval of code points
 * that start with it (exact, see prefix_range()).
 *
 * The mask walks a byte trie of the vocabulary (nodes in depth-first order,
 * each knowing where its subtree ends), carrying one stack set per depth.
 * The first rejected byte of a prefix prunes the whole subtree. A continuation
 * byte of a multi-byte code point reuses the parent's set (only the pending
 * bytes change).
 *
 * Start reading at grammar_accept_bytes(), then grammar_mask().
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "sample/grammar_int.h"

/* ---- stack sets ---------------------------------------------------------- */

typedef struct sset {
  uint32_t *data; /* all stacks, concatenated */
  size_t n_data, cap_data;
  uint32_t *off; /* stack i is data[off[i] .. off[i+1]) */
  uint32_t *hash;
  size_t n, cap; /* stacks */
  bool overflow; /* a stack or the set hit a limit */
  uint32_t *idx; /* hash index of stacks [0, idx_n): stack + 1, 0 empty */
  size_t idx_cap, idx_n;
} sset;

#define SSET_LINEAR 16 /* sets up to this size are searched linearly */

static void sset_free(sset *s) {
  free(s->data);
  free(s->off);
  free(s->hash);
  free(s->idx);
  memset(s, 0, sizeof *s);
}

static void sset_clear(sset *s) {
  s->n = 0;
  s->n_data = 0;
  s->overflow = false;
  if (s->off) s->off[0] = 0;
  if (s->idx_n) memset(s->idx, 0, s->idx_cap * sizeof *s->idx);
  s->idx_n = 0;
}

static int sset_reserve(sset *s, size_t stacks, size_t data) {
  if (stacks + 1 > s->cap) {
    size_t nc = s->cap ? s->cap : 8;
    while (nc < stacks + 1) nc *= 2;
    uint32_t *no = realloc(s->off, nc * sizeof *no);
    if (!no) return ERR_NOMEM;
    s->off = no;
    uint32_t *nh = realloc(s->hash, nc * sizeof *nh);
    if (!nh) return ERR_NOMEM;
    s->hash = nh;
    if (s->cap == 0) s->off[0] = 0;
    s->cap = nc;
  }
  if (data > s->cap_data) {
    size_t nc = s->cap_data ? s->cap_data : 64;
    while (nc < data) nc *= 2;
    uint32_t *nd = realloc(s->data, nc * sizeof *nd);
    if (!nd) return ERR_NOMEM;
    s->data = nd, s->cap_data = nc;
  }
  return 0;
}

static int sset_copy(sset *dst, const sset *src) {
  int rc = sset_reserve(dst, src->n, src->n_data);
  if (rc) return rc;
  if (src->n_data) memcpy(dst->data, src->data, src->n_data * sizeof *dst->data);
  if (src->n) {
    memcpy(dst->off, src->off, (src->n + 1) * sizeof *dst->off);
    memcpy(dst->hash, src->hash, src->n * sizeof *dst->hash);
  } else {
    dst->off[0] = 0;
  }
  dst->n = src->n, dst->n_data = src->n_data, dst->overflow = src->overflow;
  if (dst->idx_n) memset(dst->idx, 0, dst->idx_cap * sizeof *dst->idx);
  dst->idx_n = 0;
  return 0;
}

static uint32_t stack_hash(const uint32_t *stk, size_t d) {
  uint32_t h = 2166136261u ^ (uint32_t)d;
  for (size_t i = 0; i < d; i++) h = (h ^ stk[i]) * 16777619u;
  return h;
}

static bool stack_equal(const sset *s, size_t i, uint32_t h, const uint32_t *stk, size_t d) {
  if (s->hash[i] != h || s->off[i + 1] - s->off[i] != d) return false;
  return d == 0 || memcmp(s->data + s->off[i], stk, d * sizeof *stk) == 0;
}

/* Brings the hash index up to date with all n stacks (growing it). */
static int sset_index(sset *s) {
  if ((s->n + 1) * 2 > s->idx_cap) {
    size_t nc = s->idx_cap ? s->idx_cap : 64;
    while ((s->n + 1) * 2 > nc) nc *= 2;
    uint32_t *ni = calloc(nc, sizeof *ni);
    if (!ni) return ERR_NOMEM;
    free(s->idx);
    s->idx = ni, s->idx_cap = nc, s->idx_n = 0;
  }
  for (; s->idx_n < s->n; s->idx_n++) {
    size_t j = s->hash[s->idx_n] & (s->idx_cap - 1);
    while (s->idx[j]) j = (j + 1) & (s->idx_cap - 1);
    s->idx[j] = (uint32_t)s->idx_n + 1;
  }
  return 0;
}

static int sset_add(sset *s, const uint32_t *stk, size_t d) {
  uint32_t h = stack_hash(stk, d);
  if (s->n <= SSET_LINEAR) {
    for (size_t i = 0; i < s->n; i++)
      if (stack_equal(s, i, h, stk, d)) return 0;
  } else {
    int rc = sset_index(s);
    if (rc) return rc;
    for (size_t j = h & (s->idx_cap - 1); s->idx[j]; j = (j + 1) & (s->idx_cap - 1))
      if (stack_equal(s, s->idx[j] - 1, h, stk, d)) return 0;
  }
  if (s->n >= GRAMMAR_MAX_STACKS) {
    s->overflow = true;
    return 0;
  }
  int rc = sset_reserve(s, s->n + 1, s->n_data + d);
  if (rc) return rc;
  if (d) memcpy(s->data + s->n_data, stk, d * sizeof *stk);
  s->n_data += d;
  s->hash[s->n] = h;
  s->off[++s->n] = (uint32_t)s->n_data;
  return 0;
}

/* ---- expansion ----------------------------------------------------------- */

typedef struct gwork {
  uint32_t stk[GRAMMAR_MAX_DEPTH + 2]; /* scratch stack */
  uint32_t budget;                     /* expansions left in this step */
} gwork;

static int expand(const grammar *g, gwork *w, size_t d, sset *out);

/* Pushes each alternative of rule r on top of stk[0..d) and expands it. */
static int expand_rule(const grammar *g, gwork *w, uint32_t r, size_t d, sset *out) {
  for (uint32_t k = g->rule_alt[r]; k < g->rule_alt[r + 1]; k++) {
    uint32_t start = g->alt_off[k];
    int rc;
    if (g->elems[start].type == GELEM_END) {
      rc = expand(g, w, d, out);
    } else {
      if (d >= GRAMMAR_MAX_DEPTH) {
        out->overflow = true;
        continue;
      }
      w->stk[d] = start;
      rc = expand(g, w, d + 1, out);
    }
    if (rc) return rc;
  }
  return 0;
}

/* Expands stk[0..d) until every resulting top is a CHAR; adds to out. */
static int expand(const grammar *g, gwork *w, size_t d, sset *out) {
  if (w->budget == 0) {
    out->overflow = true;
    return 0;
  }
  w->budget--;
  if (d == 0) return sset_add(out, w->stk, 0);
  uint32_t pos = w->stk[d - 1];
  const gelem *e = &g->elems[pos];
  if (e->type == GELEM_CHAR) return sset_add(out, w->stk, d);
  /* REF: replace the top by its continuation (unless it is END), push alts */
  size_t nd;
  if (g->elems[pos + 1].type != GELEM_END) {
    w->stk[d - 1] = pos + 1;
    nd = d;
  } else {
    nd = d - 1;
  }
  int rc = expand_rule(g, w, e->a, nd, out);
  w->stk[d - 1] = pos; /* the caller's scratch stays as it was */
  return rc;
}

static bool char_match(const grammar *g, const gelem *e, uint32_t cp) {
  const uint32_t *r = g->ranges + 2 * (size_t)e->a;
  bool in = false;
  for (uint32_t i = 0; i < e->b; i++)
    if (cp >= r[2 * i] && cp <= r[2 * i + 1]) {
      in = true;
      break;
    }
  return in != (e->negate != 0);
}

/* Does the element match some code point in [lo, hi]? */
static bool char_intersects(const grammar *g, const gelem *e, uint32_t lo, uint32_t hi) {
  const uint32_t *r = g->ranges + 2 * (size_t)e->a;
  if (!e->negate) {
    for (uint32_t i = 0; i < e->b; i++)
      if (r[2 * i] <= hi && r[2 * i + 1] >= lo) return true;
    return false;
  }
  /* negated: true unless [lo, hi] is covered by the union of the ranges */
  uint32_t cur = lo;
  for (;;) {
    bool moved = false;
    for (uint32_t i = 0; i < e->b; i++) {
      if (r[2 * i] <= cur && r[2 * i + 1] >= cur) {
        if (r[2 * i + 1] >= hi) return false;
        cur = r[2 * i + 1] + 1;
        moved = true;
      }
    }
    if (!moved) return true;
  }
}

/* out = stacks of in advanced by code point cp. */
static int step(const grammar *g, gwork *w, const sset *in, uint32_t cp, sset *out) {
  sset_clear(out);
  w->budget = GRAMMAR_MAX_STEP_WORK;
  for (size_t i = 0; i < in->n; i++) {
    size_t d = in->off[i + 1] - in->off[i];
    if (d == 0) continue;
    const uint32_t *stk = in->data + in->off[i];
    uint32_t pos = stk[d - 1];
    if (!char_match(g, &g->elems[pos], cp)) continue;
    memcpy(w->stk, stk, d * sizeof *stk);
    int rc;
    if (g->elems[pos + 1].type != GELEM_END) {
      w->stk[d - 1] = pos + 1;
      rc = expand(g, w, d, out);
    } else {
      rc = expand(g, w, d - 1, out);
    }
    if (rc) return rc;
  }
  return 0;
}

/* ---- UTF-8 ---------------------------------------------------------------- */

typedef struct upart {
  uint8_t b[4];
  uint8_t n, need; /* n bytes held of a need-byte sequence; n == 0: none */
} upart;

static unsigned utf8_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

/* Is byte c valid as byte number i (1-based continuation index) after lead? */
static bool utf8_cont_ok(uint8_t lead, unsigned i, uint8_t c) {
  if ((c & 0xC0) != 0x80) return false;
  if (i != 1) return true;
  if (lead == 0xE0) return c >= 0xA0;
  if (lead == 0xED) return c <= 0x9F;
  if (lead == 0xF0) return c >= 0x90;
  if (lead == 0xF4) return c <= 0x8F;
  return true;
}

/* Interval of code points whose encoding starts with the pending bytes. */
static void prefix_range(const upart *u, uint32_t *lo, uint32_t *hi) {
  static const uint8_t lead_mask[5] = {0, 0, 0x1F, 0x0F, 0x07};
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  static const uint32_t max_cp[5] = {0, 0, 0x7FF, 0xFFFF, 0x10FFFF};
  uint32_t v = u->b[0] & lead_mask[u->need];
  for (unsigned i = 1; i < u->n; i++) v = (v << 6) | (u->b[i] & 0x3F);
  unsigned free_bits = 6 * (unsigned)(u->need - u->n);
  uint32_t l = v << free_bits, h = l | ((1u << free_bits) - 1);
  if (l < min_cp[u->need]) l = min_cp[u->need];
  if (h > max_cp[u->need]) h = max_cp[u->need];
  if (u->need == 3 && u->b[0] == 0xED && h > 0xD7FF) h = 0xD7FF;
  *lo = l, *hi = h;
}

static bool sset_prefix_possible(const grammar *g, const sset *s, const upart *u) {
  uint32_t lo, hi;
  prefix_range(u, &lo, &hi);
  for (size_t i = 0; i < s->n; i++) {
    size_t d = s->off[i + 1] - s->off[i];
    if (d == 0) continue;
    if (char_intersects(g, &g->elems[s->data[s->off[i] + d - 1]], lo, hi)) return true;
  }
  return false;
}

/* Feeds one byte. *cp_out is set (and true returned in *complete) when a code
 * point finished. Returns false for invalid UTF-8. */
static bool utf8_feed(upart *u, uint8_t c, uint32_t *cp_out, bool *complete) {
  *complete = false;
  if (u->n == 0) {
    unsigned n = utf8_len(c);
    if (n == 0 || (c >= 0x80 && c < 0xC0)) return false;
    if (n == 1) {
      *cp_out = c;
      *complete = true;
      return true;
    }
    u->b[0] = c, u->n = 1, u->need = (uint8_t)n;
    return true;
  }
  if (!utf8_cont_ok(u->b[0], u->n, c)) return false;
  u->b[u->n++] = c;
  if (u->n < u->need) return true;
  static const uint8_t lead_mask[5] = {0, 0, 0x1F, 0x0F, 0x07};
  uint32_t v = u->b[0] & lead_mask[u->need];
  for (unsigned i = 1; i < u->need; i++) v = (v << 6) | (u->b[i] & 0x3F);
  u->n = u->need = 0;
  *cp_out = v;
  *complete = true;
  return true;
}

/* ---- states --------------------------------------------------------------- */

struct grammar_state {
  const grammar *g;
  sset set;
  upart part;
};

int grammar_state_new(const grammar *g, grammar_state **out) {
  *out = NULL;
  if (!g) return err_set(ERR_INVALID, "grammar_state_new: NULL grammar");
  grammar_state *s = calloc(1, sizeof *s);
  gwork *w = malloc(sizeof *w);
  if (!s || !w) {
    free(s);
    free(w);
    return ERR_NOMEM;
  }
  s->g = g;
  int rc = sset_reserve(&s->set, 4, 16);
  if (!rc) {
    sset_clear(&s->set);
    w->budget = GRAMMAR_MAX_STEP_WORK;
    rc = expand_rule(g, w, g->root, 0, &s->set);
  }
  free(w);
  if (rc) {
    grammar_state_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int grammar_state_clone(const grammar_state *src, grammar_state **out) {
  *out = NULL;
  grammar_state *s = calloc(1, sizeof *s);
  if (!s) return ERR_NOMEM;
  s->g = src->g;
  s->part = src->part;
  int rc = sset_copy(&s->set, &src->set);
  if (rc) {
    grammar_state_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void grammar_state_free(grammar_state *s) {
  if (!s) return;
  sset_free(&s->set);
  free(s);
}

bool grammar_can_end(const grammar_state *s) {
  if (s->part.n) return false;
  for (size_t i = 0; i < s->set.n; i++)
    if (s->set.off[i + 1] == s->set.off[i]) return true;
  return false;
}

/* Runs bytes from (set, part) into *result (one of a, b); 0, ERR_INVALID,
 * ERR_TOO_LARGE or ERR_NOMEM. */
static int run_bytes(const grammar *g, gwork *w, const sset *set, upart *part, const uint8_t *p,
                     size_t len, sset *a, sset *b, const sset **result) {
  const sset *cur = set;
  sset *bufs[2] = {a, b};
  int which = 0;
  for (size_t i = 0; i < len; i++) {
    uint32_t cp;
    bool complete;
    if (!utf8_feed(part, p[i], &cp, &complete)) return ERR_INVALID;
    if (!complete) continue;
    sset *next = bufs[which];
    which ^= 1;
    int rc = step(g, w, cur, cp, next);
    if (rc) return rc;
    if (next->n == 0) return next->overflow ? ERR_TOO_LARGE : ERR_INVALID;
    cur = next;
  }
  if (part->n && !sset_prefix_possible(g, cur, part)) return ERR_INVALID;
  *result = cur;
  return 0;
}

int grammar_accept_bytes(grammar_state *s, const void *bytes, size_t len) {
  if (len == 0) return 0;
  gwork *w = malloc(sizeof *w);
  if (!w) return ERR_NOMEM;
  sset a = {0}, b = {0};
  upart part = s->part;
  const sset *res = NULL;
  int rc = run_bytes(s->g, w, &s->set, &part, bytes, len, &a, &b, &res);
  if (rc == 0) {
    if (res == &a || res == &b) {
      sset tmp = s->set;
      s->set = *(sset *)res;
      *(sset *)res = tmp;
    }
    s->part = part;
  } else if (rc == ERR_INVALID) {
    err_set(ERR_INVALID, "grammar: output rejected");
  } else if (rc == ERR_TOO_LARGE) {
    err_set(ERR_TOO_LARGE, "grammar: matcher limits (%d stacks, depth %d) exceeded",
            GRAMMAR_MAX_STACKS, GRAMMAR_MAX_DEPTH);
  }
  sset_free(&a);
  sset_free(&b);
  free(w);
  return rc;
}

bool grammar_token_allowed(const grammar_state *s, const void *bytes, size_t len) {
  if (len == 0 || !bytes) return false;
  gwork *w = malloc(sizeof *w);
  if (!w) return false;
  sset a = {0}, b = {0};
  upart part = s->part;
  const sset *res = NULL;
  int rc = run_bytes(s->g, w, &s->set, &part, bytes, len, &a, &b, &res);
  sset_free(&a);
  sset_free(&b);
  free(w);
  return rc == 0;
}

/* ---- vocabulary trie ------------------------------------------------------ */

#define GRAMMAR_MAX_PIECE 1024

struct grammar_vocab {
  size_t n_tokens;
  uint32_t n_nodes;
  uint8_t *byte;       /* node's byte (root: 0) */
  uint32_t *end;       /* one past the node's subtree */
  uint32_t *tok_start; /* tokens ending at the node: toks[tok_start .. +tok_n) */
  uint32_t *tok_n;
  uint32_t *toks;
  uint32_t max_depth;
};

typedef struct vsort {
  const char *const *pieces;
  const size_t *lens;
} vsort;

static int cmp_piece(const void *x, const void *y, void *ctx) {
  const vsort *g_vsort = ctx;
  uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
  size_t li = g_vsort->lens[i], lj = g_vsort->lens[j];
  int c = memcmp(g_vsort->pieces[i], g_vsort->pieces[j], li < lj ? li : lj);
  if (c) return c;
  if (li != lj) return li < lj ? -1 : 1;
  return i < j ? -1 : (i > j);
}

typedef struct vbuild {
  grammar_vocab *v;
  const char *const *pieces;
  const size_t *lens;
  const uint32_t *order;
  uint32_t n_toks;
} vbuild;

/* Builds the node for sorted tokens [lo, hi) sharing their first d bytes. */
static void vbuild_node(vbuild *b, uint32_t lo, uint32_t hi, size_t d, uint8_t byte) {
  grammar_vocab *v = b->v;
  uint32_t node = v->n_nodes++;
  v->byte[node] = byte;
  if (d > v->max_depth) v->max_depth = (uint32_t)d;
  v->tok_start[node] = b->n_toks;
  uint32_t i = lo;
  while (i < hi && b->lens[b->order[i]] == d) b->v->toks[b->n_toks++] = b->order[i++];
  v->tok_n[node] = b->n_toks - v->tok_start[node];
  while (i < hi) {
    uint8_t c = (uint8_t)b->pieces[b->order[i]][d];
    uint32_t j = i;
    while (j < hi && (uint8_t)b->pieces[b->order[j]][d] == c) j++;
    vbuild_node(b, i, j, d + 1, c);
    i = j;
  }
  v->end[node] = v->n_nodes;
}

void grammar_vocab_free(grammar_vocab *v) {
  if (!v) return;
  free(v->byte);
  free(v->end);
  free(v->tok_start);
  free(v->tok_n);
  free(v->toks);
  free(v);
}

size_t grammar_vocab_n_tokens(const grammar_vocab *v) { return v->n_tokens; }
size_t grammar_vocab_n_nodes(const grammar_vocab *v) { return v->n_nodes; }

int grammar_vocab_new(const char *const *pieces, const size_t *lens, size_t n, grammar_vocab **out) {
  *out = NULL;
  if (n > INT32_MAX) return err_set(ERR_TOO_LARGE, "grammar vocab: %zu tokens", n);
  size_t total = 1, n_used = 0;
  for (size_t i = 0; i < n; i++) {
    if (!pieces[i] || lens[i] == 0) continue;
    if (lens[i] > GRAMMAR_MAX_PIECE)
      return err_set(ERR_TOO_LARGE, "grammar vocab: token %zu has %zu bytes (max %d)", i, lens[i],
                     GRAMMAR_MAX_PIECE);
    total += lens[i];
    n_used++;
  }
  if (total > UINT32_MAX / 2) return err_set(ERR_TOO_LARGE, "grammar vocab: pieces too large");
  grammar_vocab *v = calloc(1, sizeof *v);
  uint32_t *order = malloc((n_used + 1) * sizeof *order);
  if (!v || !order) {
    free(v);
    free(order);
    return ERR_NOMEM;
  }
  v->n_tokens = n;
  v->byte = malloc(total);
  v->end = malloc(total * sizeof *v->end);
  v->tok_start = malloc(total * sizeof *v->tok_start);
  v->tok_n = malloc(total * sizeof *v->tok_n);
  v->toks = malloc((n_used + 1) * sizeof *v->toks);
  if (!v->byte || !v->end || !v->tok_start || !v->tok_n || !v->toks) {
    free(order);
    grammar_vocab_free(v);
    return ERR_NOMEM;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (pieces[i] && lens[i]) order[k++] = (uint32_t)i;
  vsort vs = {pieces, lens};
  qsort_r(order, n_used, sizeof *order, cmp_piece, &vs); /* glibc (_GNU_SOURCE) */
  vbuild b = {v, pieces, lens, order, 0};
  vbuild_node(&b, 0, (uint32_t)n_used, 0, 0);
  free(order);
  *out = v;
  return 0;
}

/* ---- mask ----------------------------------------------------------------- */

/* Within one mask computation the same stack set meets the same code point
 * at many trie nodes (inside a JSON string, every node). So sets are
 * interned (id per distinct content) and transitions (set id, code point) ->
 * set id are cached; a trie node then costs one hash lookup. */

typedef struct minter {
  sset *sets;
  size_t n_sets, cap_sets;
  uint32_t *set_hash;
  uint32_t *tab; /* content hash table: set id + 1, 0 empty */
  size_t tab_cap;
  uint64_t *tkey; /* transition table: (id << 32 | cp) + 1, 0 empty */
  int32_t *tval;  /* result id, -1 rejected */
  size_t tcap, tn;
  int32_t **ascii; /* per set: results for code points < 128, -2 unknown */
  size_t cap_ascii;
  sset scratch;
} minter;

static void minter_free(minter *m) {
  for (size_t i = 0; i < m->n_sets; i++) sset_free(&m->sets[i]);
  free(m->sets);
  free(m->set_hash);
  free(m->tab);
  free(m->tkey);
  free(m->tval);
  for (size_t i = 0; i < m->cap_ascii; i++) free(m->ascii[i]);
  free(m->ascii);
  sset_free(&m->scratch);
}

static uint32_t sset_hash(const sset *s) {
  uint32_t h = 2166136261u ^ (uint32_t)s->n;
  for (size_t i = 0; i < s->n; i++) h = (h ^ s->hash[i]) * 16777619u;
  return h;
}

static bool sset_equal(const sset *a, const sset *b) {
  if (a->n != b->n || a->n_data != b->n_data) return false;
  if (a->n && memcmp(a->off, b->off, (a->n + 1) * sizeof *a->off)) return false;
  return a->n_data == 0 || memcmp(a->data, b->data, a->n_data * sizeof *a->data) == 0;
}

static int tab_grow(minter *m) {
  size_t nc = m->tab_cap ? m->tab_cap * 2 : 256;
  uint32_t *nt = calloc(nc, sizeof *nt);
  if (!nt) return ERR_NOMEM;
  for (size_t i = 0; i < m->n_sets; i++) {
    size_t j = m->set_hash[i] & (nc - 1);
    while (nt[j]) j = (j + 1) & (nc - 1);
    nt[j] = (uint32_t)i + 1;
  }
  free(m->tab);
  m->tab = nt, m->tab_cap = nc;
  return 0;
}

/* Id of the set in m->scratch (moved into the table when new). */
static int intern_scratch(minter *m, int32_t *id) {
  if ((m->n_sets + 1) * 2 > m->tab_cap && tab_grow(m)) return ERR_NOMEM;
  uint32_t h = sset_hash(&m->scratch);
  size_t j = h & (m->tab_cap - 1);
  while (m->tab[j]) {
    uint32_t k = m->tab[j] - 1;
    if (m->set_hash[k] == h && sset_equal(&m->sets[k], &m->scratch)) {
      *id = (int32_t)k;
      return 0;
    }
    j = (j + 1) & (m->tab_cap - 1);
  }
  if (m->n_sets == m->cap_sets) {
    size_t nc = m->cap_sets ? m->cap_sets * 2 : 64;
    sset *ns = realloc(m->sets, nc * sizeof *ns);
    if (!ns) return ERR_NOMEM;
    m->sets = ns;
    uint32_t *nh = realloc(m->set_hash, nc * sizeof *nh);
    if (!nh) return ERR_NOMEM;
    m->set_hash = nh;
    m->cap_sets = nc;
  }
  m->sets[m->n_sets] = m->scratch;
  memset(&m->scratch, 0, sizeof m->scratch);
  m->set_hash[m->n_sets] = h;
  m->tab[j] = (uint32_t)m->n_sets + 1;
  *id = (int32_t)m->n_sets++;
  return 0;
}

static int trans_grow(minter *m) {
  size_t nc = m->tcap ? m->tcap * 2 : 1024;
  uint64_t *nk = calloc(nc, sizeof *nk);
  int32_t *nv = malloc(nc * sizeof *nv);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    return ERR_NOMEM;
  }
  for (size_t i = 0; i < m->tcap; i++) {
    if (!m->tkey[i]) continue;
    uint64_t k = m->tkey[i];
    size_t j = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (nc - 1);
    while (nk[j]) j = (j + 1) & (nc - 1);
    nk[j] = k, nv[j] = m->tval[i];
  }
  free(m->tkey);
  free(m->tval);
  m->tkey = nk, m->tval = nv, m->tcap = nc;
  return 0;
}

/* Set id reached from set sid by code point cp, or -1; < -1 on error. */
static int32_t transition_slow(minter *m, const grammar *g, gwork *w, int32_t sid, uint32_t cp) {
  uint64_t key = (((uint64_t)(uint32_t)sid << 32) | cp) + 1;
  size_t j = 0;
  if (m->tcap) {
    j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (m->tcap - 1);
    while (m->tkey[j]) {
      if (m->tkey[j] == key) return m->tval[j];
      j = (j + 1) & (m->tcap - 1);
    }
  }
  int32_t res = -1;
  if (step(g, w, &m->sets[sid], cp, &m->scratch)) return ERR_NOMEM;
  if (m->scratch.n && intern_scratch(m, &res)) return ERR_NOMEM;
  if ((m->tn + 1) * 2 > m->tcap) {
    if (trans_grow(m)) return ERR_NOMEM;
  }
  j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (m->tcap - 1);
  while (m->tkey[j]) j = (j + 1) & (m->tcap - 1);
  m->tkey[j] = key, m->tval[j] = res;
  m->tn++;
  return res;
}

/* transition_slow() with a direct table for ASCII, the common case. */
static int32_t transition(minter *m, const grammar *g, gwork *w, int32_t sid, uint32_t cp) {
  if (cp >= 128) return transition_slow(m, g, w, sid, cp);
  if ((size_t)sid >= m->cap_ascii) {
    size_t nc = m->cap_ascii ? m->cap_ascii : 64;
    while (nc <= (size_t)sid) nc *= 2;
    int32_t **na = realloc(m->ascii, nc * sizeof *na);
    if (!na) return ERR_NOMEM;
    memset(na + m->cap_ascii, 0, (nc - m->cap_ascii) * sizeof *na);
    m->ascii = na, m->cap_ascii = nc;
  }
  int32_t *row = m->ascii[sid];
  if (!row) {
    row = malloc(128 * sizeof *row);
    if (!row) return ERR_NOMEM;
    for (int i = 0; i < 128; i++) row[i] = -2;
    m->ascii[sid] = row;
  }
  if (row[cp] != -2) return row[cp];
  int32_t r = transition_slow(m, g, w, sid, cp);
  if (r >= -1) m->ascii[sid][cp] = r;
  return r;
}

typedef struct mwalk {
  const grammar *g;
  const grammar_vocab *v;
  uint8_t *allowed;
  gwork *w;
  minter in;
} mwalk;

static int walk(mwalk *m, uint32_t node, int32_t sid, upart part) {
  const grammar_vocab *v = m->v;
  for (uint32_t c = node + 1; c < v->end[node]; c = v->end[c]) {
    upart np = part;
    uint32_t cp;
    bool complete;
    int32_t next = sid;
    if (!utf8_feed(&np, v->byte[c], &cp, &complete)) continue;
    if (complete) {
      next = transition(&m->in, m->g, m->w, sid, cp);
      if (next < -1) return ERR_NOMEM;
      if (next < 0) continue;
    } else if (!sset_prefix_possible(m->g, &m->in.sets[sid], &np)) {
      continue;
    }
    for (uint32_t t = 0; t < v->tok_n[c]; t++) m->allowed[v->toks[v->tok_start[c] + t]] = 1;
    if (c + 1 < v->end[c]) {
      int rc = walk(m, c, next, np);
      if (rc) return rc;
    }
  }
  return 0;
}

int grammar_mask(const grammar_state *s, const grammar_vocab *v, uint8_t *allowed, bool *eos_allowed) {
  memset(allowed, 0, v->n_tokens);
  if (eos_allowed) *eos_allowed = grammar_can_end(s);
  if (v->n_nodes <= 1) return 0;
  mwalk m = {s->g, v, allowed, NULL, {0}};
  m.w = malloc(sizeof *m.w);
  int rc = ERR_NOMEM;
  int32_t root;
  if (m.w && sset_copy(&m.in.scratch, &s->set) == 0 && intern_scratch(&m.in, &root) == 0)
    rc = walk(&m, 0, root, s->part);
  minter_free(&m.in);
  free(m.w);
  return rc;
}
