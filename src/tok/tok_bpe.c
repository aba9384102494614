/*
 * tok_bpe.c - byte-level BPE ("gpt2" in GGUF): GPT-2, Llama 3, Qwen2,
 * DeepSeek, StarCoder, Falcon, MPT, ...
 *
 * A piece of raw text goes through three stages:
 *   1. pre-tokenization: the regular expressions named by tokenizer.ggml.pre
 *      (one table, pre_table[] below, learned from llama.cpp's
 *      llm_tokenizer_bpe and the models' tokenizer.json files) run in
 *      sequence; each one cuts every segment the previous ones produced into
 *      its matches and the gaps between them (both kept, as Hugging Face's
 *      Split(behavior=Isolated) does). A regex sees only its segment, so a
 *      look-ahead or `$` stops at the segment's end.
 *   2. byte mapping: every byte of a segment becomes one printable code point
 *      (GPT-2's bytes_to_unicode table: printable Latin-1 bytes map to
 *      themselves, the other 68 to U+0100.. in byte order).
 *   3. merges: within a segment, the adjacent pair of symbols with the lowest
 *      merge rank is merged until no pair has a rank (ties: leftmost).
 * The regexes run on PCRE2 with PCRE2_UTF|PCRE2_UCP (\p{L}, \s as Unicode
 * defines them), PCRE2_MATCH_INVALID_UTF (invalid bytes never match and end
 * up in gap segments, so hostile input still tokenizes) and JIT when the
 * platform has it. A regex that fails at run time (resource limit) leaves
 * the rest of its segment unsplit rather than failing the call.
 *
 * Where we differ from llama.cpp: nothing intended; its custom hand-written
 * matchers for the GPT-2 and Llama 3 patterns are replaced by the patterns
 * themselves on PCRE2.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"
#include "tok/tok_int.h"

/* ---- the pre-tokenizer table -------------------------------------------- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                            \
  RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                         \
  RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[一-龥ࠀ-一가-퟿]+"
#define RE_UPPER_THEN_LOWER "((?=[\\p{L}])([^a-z]))"
#define RE_LOWER "((?=[\\p{L}])([^A-Z]))"

/* Llama 3 and the vocabularies that copied it: whole-word tokens win over
 * merges, and BOS is added by default. */
#define PRE_LLAMA3_NAMES "llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2"

typedef struct pre_def {
  const char *names;            /* tokenizer.ggml.pre values, '|' separated */
  bool ignore_merges;           /* a pre-token that is a whole token is kept */
  const char *re[TOK_MAX_REGEX];
} pre_def;

static const pre_def pre_table[] = {
    {"default", false,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"gpt-2|phi-2|gpt-neox|mpt|olmo|jais|trillion|granite-docling|jina-es|jina-de|gigachat|"
     "jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|roberta-bpe|exaone4",
     false, {RE_GPT2}},
    {PRE_LLAMA3_NAMES, true, {RE_LLAMA3}},
    {"dbrx|smaug-bpe|chatglm-bpe", false, {RE_LLAMA3}},
    {"qwen2|deepseek-r1-qwen|megrez|stablelm2|hunyuan|grok-2", false, {RE_QWEN2}},
    {"deepseek-llm", false,
     {"[\\r\\n]",
      "\\s?[A-Za-z\\x{00B5}\\x{00C0}-\\x{00D6}\\x{00D8}-\\x{00F6}\\x{00F8}-\\x{01BA}"
      "\\x{01BC}-\\x{01BF}\\x{01C4}-\\x{0293}\\x{0295}-\\x{02AF}\\x{0370}-\\x{0373}\\x{0376}"
      "\\x{0377}\\x{037B}-\\x{037D}\\x{037F}\\x{0386}\\x{0388}-\\x{038A}\\x{038C}"
      "\\x{038E}-\\x{03A1}\\x{03A3}-\\x{03F5}\\x{03F7}-\\x{0481}\\x{048A}-\\x{052F}"
      "\\x{0531}-\\x{0556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"
      "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"
      "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
      "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
      "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
      "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"
      "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}"
      "\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"
      "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}"
      "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
      "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"
      "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}"
      "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
      "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RE_CJK, "\\p{N}+"}},
    {"deepseek-coder", false, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}},
    {"deepseek-v3", false,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
      "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"falcon", false, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", false, {"\\p{N}", RE_GPT2}},
    {"poro-chat|bloom|gpt3-finnish", false, {" ?[^(\\s|.,!?…。，、।۔،)]+"}},
    {"viking", false, {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}},
    {"tekken", true,
     {"[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER_THEN_LOWER "*" RE_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER_THEN_LOWER
      "+" RE_LOWER "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"gpt-4o|llama4|minimax-m2", false,
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
      "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}"
      "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"seed-coder", false,
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
                      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe|llada-moe", false,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
      "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"chameleon", false,
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2}},
};

static bool name_in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list;;) {
    const char *bar = strchr(p, '|');
    size_t l = bar ? (size_t)(bar - p) : strlen(p);
    if (l == n && memcmp(p, name, n) == 0) return true;
    if (!bar) return false;
    p = bar + 1;
  }
}

bool tok_bpe_pre_adds_bos(const char *pre) {
  /* Llama 3 style vocabularies add BOS unless the file says otherwise */
  return name_in_list(PRE_LLAMA3_NAMES, pre);
}

int tok_bpe_init(tok *t) {
  const pre_def *def = NULL;
  for (size_t i = 0; i < ARRAY_LEN(pre_table) && !def; i++)
    if (name_in_list(pre_table[i].names, t->pre_name)) def = &pre_table[i];
  if (!def)
    return err_set(ERR_UNSUPPORTED, "tokenizer.ggml.pre \"%s\" is not a known pre-tokenizer", t->pre_name);
  t->ignore_merges = def->ignore_merges;
  for (size_t i = 0; i < TOK_MAX_REGEX && def->re[i]; i++) {
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                                   &errcode, &erroff, NULL);
    if (!re) {
      PCRE2_UCHAR msg[160];
      pcre2_get_error_message(errcode, msg, sizeof(msg));
      return err_set(ERR_INTERNAL, "pre-tokenizer \"%s\" regex %zu at offset %zu: %s", t->pre_name, i,
                     (size_t)erroff, (const char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* interpreter when JIT is unavailable */
    t->re[t->n_re++] = re;
  }
  return 0;
}

void tok_bpe_free(tok *t) {
  for (size_t i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
  t->n_re = 0;
}

/* ---- byte <-> unicode mapping (GPT-2 bytes_to_unicode) ------------------ */

static bool byte_is_printable(unsigned b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

static unsigned byte_to_cp(unsigned b) {
  if (byte_is_printable(b)) return b;
  unsigned n = 0; /* rank of b among the non-printable bytes */
  for (unsigned c = 0; c < b; c++) n += !byte_is_printable(c);
  return 256 + n;
}

/* Appends the 1-2 byte UTF-8 form of the code point byte b maps to. */
static size_t map_byte(uint8_t b, char *out) {
  static uint16_t table[256];
  static bool ready; /* benign race: every thread computes the same values */
  if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
    uint16_t tmp[256];
    for (unsigned c = 0; c < 256; c++) tmp[c] = (uint16_t)byte_to_cp(c);
    for (unsigned c = 0; c < 256; c++) __atomic_store_n(&table[c], tmp[c], __ATOMIC_RELAXED);
    __atomic_store_n(&ready, true, __ATOMIC_RELEASE);
  }
  unsigned cp = __atomic_load_n(&table[b], __ATOMIC_RELAXED);
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  out[0] = (char)(0xC0 | (cp >> 6));
  out[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

int tok_bpe_unmap(const char *text, size_t len, buf *out) {
  size_t i = 0;
  while (i < len) {
    uint8_t c = (uint8_t)text[i];
    unsigned cp = 0;
    size_t n = 1;
    if (c < 0x80) {
      cp = c;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < len && ((uint8_t)text[i + 1] & 0xC0) == 0x80) {
      cp = ((unsigned)(c & 0x1F) << 6) | ((uint8_t)text[i + 1] & 0x3F);
      n = 2;
    } else {
      /* not one of the mapped code points: copy the character through */
      n = tok_utf8_len(c);
      if (n > len - i) n = len - i;
      if (buf_append(out, text + i, n)) return ERR_NOMEM;
      i += n;
      continue;
    }
    int byte = -1;
    if (cp < 256 && byte_is_printable(cp)) {
      byte = (int)cp;
    } else if (cp >= 256 && cp < 256 + 68) {
      unsigned k = cp - 256;
      for (unsigned b = 0; b < 256; b++)
        if (!byte_is_printable(b) && k-- == 0) {
          byte = (int)b;
          break;
        }
    }
    if (byte >= 0) {
      if (buf_append_byte(out, (char)byte)) return ERR_NOMEM;
    } else if (buf_append(out, text + i, n)) {
      return ERR_NOMEM;
    }
    i += n;
  }
  return 0;
}

/* ---- pre-tokenization --------------------------------------------------- */

typedef struct span {
  size_t off, len;
} span;

typedef struct span_list {
  span *v;
  size_t n, cap;
} span_list;

static int span_push(span_list *l, size_t off, size_t len) {
  if (len == 0) return 0;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    span *p = realloc(l->v, cap * sizeof(span));
    if (!p) return err_set(ERR_NOMEM, "pre-tokenizer segments");
    l->v = p;
    l->cap = cap;
  }
  l->v[l->n++] = (span){off, len};
  return 0;
}

/* Splits text into segments with every regex in turn. */
static int pre_split(const tok *t, const char *text, size_t len, span_list *out) {
  span_list cur = {0}, next = {0};
  int rc = span_push(&cur, 0, len);
  pcre2_match_data *md = NULL;
  pcre2_match_context *mctx = NULL;
  pcre2_jit_stack *jstack = NULL;
  if (rc) goto done;
  md = pcre2_match_data_create(4, NULL);
  mctx = pcre2_match_context_create(NULL);
  if (!md || !mctx) {
    rc = err_set(ERR_NOMEM, "pre-tokenizer match data");
    goto done;
  }
  jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
  if (jstack) pcre2_jit_stack_assign(mctx, NULL, jstack);

  for (size_t r = 0; r < t->n_re; r++) {
    next.n = 0;
    for (size_t k = 0; k < cur.n; k++) {
      const char *s = text + cur.v[k].off;
      size_t sl = cur.v[k].len, last = 0, pos = 0;
      while (pos <= sl) {
        int m = pcre2_match(t->re[r], (PCRE2_SPTR)s, sl, pos, 0, md, mctx);
        if (m < 0) break; /* no match, or a resource limit: keep the rest whole */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms > last && (rc = span_push(&next, cur.v[k].off + last, ms - last))) goto done;
        if (me > ms) {
          if ((rc = span_push(&next, cur.v[k].off + ms, me - ms))) goto done;
          last = pos = me;
        } else {
          /* an empty match only marks a split point */
          last = ms;
          if (ms >= sl) break;
          size_t cl = tok_utf8_len((uint8_t)s[ms]);
          pos = ms + (cl < sl - ms ? cl : sl - ms);
        }
      }
      if (last < sl && (rc = span_push(&next, cur.v[k].off + last, sl - last))) goto done;
    }
    span_list tmp = cur;
    cur = next;
    next = tmp;
  }
done:
  if (jstack) pcre2_jit_stack_free(jstack);
  pcre2_match_context_free(mctx);
  pcre2_match_data_free(md);
  free(next.v);
  if (rc) {
    free(cur.v);
    return rc;
  }
  *out = cur;
  return 0;
}

int tok_bpe_split(const tok *t, const char *text, size_t len, size_t **offs, size_t **lens, size_t *n) {
  span_list segs = {0};
  *offs = *lens = NULL;
  *n = 0;
  int rc = pre_split(t, text, len, &segs);
  if (rc) return rc;
  if (segs.n) {
    *offs = malloc(segs.n * sizeof(size_t));
    *lens = malloc(segs.n * sizeof(size_t));
    if (!*offs || !*lens) {
      free(*offs);
      free(*lens);
      free(segs.v);
      *offs = *lens = NULL;
      return err_set(ERR_NOMEM, "pre-tokenizer segments");
    }
    for (size_t i = 0; i < segs.n; i++) {
      (*offs)[i] = segs.v[i].off;
      (*lens)[i] = segs.v[i].len;
    }
  }
  *n = segs.n;
  free(segs.v);
  return 0;
}

const char *const *tok_bpe_pre_patterns(const char *name, size_t *n) {
  for (size_t i = 0; i < ARRAY_LEN(pre_table); i++) {
    if (!name_in_list(pre_table[i].names, name)) continue;
    size_t k = 0;
    while (k < TOK_MAX_REGEX && pre_table[i].re[k]) k++;
    *n = k;
    return pre_table[i].re;
  }
  *n = 0;
  return NULL;
}

/* ---- merges ------------------------------------------------------------- */

typedef struct sym {
  size_t start, n;
  int32_t id; /* token of the current text, -1 when none */
  int prev, next;
} sym;

typedef struct bigram {
  int32_t rank;
  int left, right;
  size_t size;
} bigram;

/* a before b: lower rank, then smaller left index */
static bool bg_before(const bigram *a, const bigram *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

#include "tok/tok_heap.h"

static int add_bigram(const tok *t, const sym *syms, int left, int right, heap *h) {
  if (left < 0 || right < 0 || syms[left].id < 0 || syms[right].id < 0) return 0;
  int32_t rank = tok_merge_rank(t, syms[left].id, syms[right].id);
  if (rank < 0) return 0;
  return heap_push(h, (bigram){rank, left, right, syms[left].n + syms[right].n});
}

/* Merges one byte-mapped word w[0..n) and appends its ids. */
static int bpe_word(const tok *t, const char *w, size_t n, sym *syms, heap *h, tok_ids *out) {
  if (t->ignore_merges) {
    int32_t id = tok_lookup(t, w, n);
    if (id >= 0) return tok_ids_push(out, id);
  }
  int n_syms = 0;
  for (size_t off = 0; off < n; n_syms++) {
    size_t cl = tok_utf8_len((uint8_t)w[off]);
    if (cl > n - off) cl = n - off;
    syms[n_syms] = (sym){off, cl, tok_lookup(t, w + off, cl), n_syms - 1, off + cl == n ? -1 : n_syms + 1};
    off += cl;
  }
  int rc;
  h->n = 0;
  for (int i = 1; i < n_syms; i++)
    if ((rc = add_bigram(t, syms, i - 1, i, h))) return rc;
  while (h->n) {
    bigram b = heap_pop(h);
    sym *l = &syms[b.left], *r = &syms[b.right];
    if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
    l->n += r->n;
    r->n = 0;
    l->id = tok_lookup(t, w + l->start, l->n);
    l->next = r->next;
    if (r->next >= 0) syms[r->next].prev = b.left;
    if ((rc = add_bigram(t, syms, l->prev, b.left, h))) return rc;
    if ((rc = add_bigram(t, syms, b.left, l->next, h))) return rc;
  }
  for (int i = 0; i != -1 && n_syms > 0; i = syms[i].next) {
    const sym *s = &syms[i];
    if (s->id >= 0) {
      if ((rc = tok_ids_push(out, s->id))) return rc;
      continue;
    }
    /* not a token: each byte that is a one-byte token, as llama.cpp does */
    for (size_t j = 0; j < s->n; j++) {
      int32_t id = tok_lookup(t, w + s->start + j, 1);
      if (id >= 0 && (rc = tok_ids_push(out, id))) return rc;
    }
  }
  return 0;
}

int tok_bpe_encode_piece(const tok *t, const char *text, size_t len, tok_ids *out) {
  if (len == 0) return 0;
  span_list segs = {0};
  int rc = pre_split(t, text, len, &segs);
  if (rc) return rc;
  size_t max_seg = 0;
  for (size_t i = 0; i < segs.n; i++)
    if (segs.v[i].len > max_seg) max_seg = segs.v[i].len;
  char *w = NULL;
  sym *syms = NULL;
  heap h = {0};
  size_t wcap;
  if (max_seg > INT32_MAX / 2 || !size_mul(max_seg, 2, &wcap)) {
    rc = err_set(ERR_TOO_LARGE, "pre-token of %zu bytes", max_seg);
    goto done;
  }
  w = malloc(wcap + 1);
  syms = malloc((max_seg + 1) * sizeof(sym));
  if (!w || !syms) {
    rc = err_set(ERR_NOMEM, "text to tokenize (%zu bytes)", len);
    goto done;
  }
  for (size_t i = 0; i < segs.n; i++) {
    size_t wn = 0;
    for (size_t j = 0; j < segs.v[i].len; j++) wn += map_byte((uint8_t)text[segs.v[i].off + j], w + wn);
    if ((rc = bpe_word(t, w, wn, syms, &h, out))) goto done;
  }
done:
  free(h.v);
  free(syms);
  free(w);
  free(segs.v);
  return rc;
}
