/*
 * parse_json.c - a byte-at-a-time JSON syntax checker for the output parsers.
 *
 * Why not jansson: the tool-call arguments must be streamed to the client as
 * they are generated, so the parser has to know after every byte whether the
 * JSON is still valid and where a member's value ends, without waiting for
 * the whole document. jscan is a pushdown automaton over RFC 8259's grammar:
 * a container stack (bounded, JSCAN_MAX_DEPTH) plus one state for the token
 * being read. It keeps no text; callers slice the bytes themselves using the
 * flags jscan_byte returns (see parse_int.h).
 *
 * Invariants: state J_DONE is reached exactly once, when the top-level value
 * closes (for a top-level number: at the first byte after it, which the
 * scanner then leaves to the caller); after an error it stays in J_ERROR.
 * Start reading at jscan_byte.
 */
#include "tmpl/parse_int.h"

#include <string.h>

enum {
  J_VALUE,     /* a value must start (after ':' or ',' in an array, or at the top) */
  J_ARR_FIRST, /* after '[': a value or ']' */
  J_OBJ_FIRST, /* after '{': a key or '}' */
  J_OBJ_KEY,   /* after ',' in an object: a key */
  J_COLON,     /* after a key */
  J_AFTER,     /* after a member value: ',' or the closer */
  J_STR,
  J_ESC,
  J_U,
  J_NUM,
  J_LIT,
  J_DONE,
  J_ERROR
};

enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

void jscan_init(jscan *s) {
  memset(s, 0, sizeof *s);
  s->state = J_VALUE;
}

static bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_hex(unsigned char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool jscan_complete(const jscan *s) {
  if (s->state == J_DONE) return true;
  return s->state == J_NUM && s->depth == 0 &&
         (s->num == N_ZERO || s->num == N_INT || s->num == N_FRAC || s->num == N_EXP);
}

const char *jscan_expected(const jscan *s) { return s->why ? s->why : "invalid JSON"; }

static unsigned fail(jscan *s, const char *why) {
  s->state = J_ERROR;
  s->why = why;
  return JF_ERR;
}

/* A value just ended at the current depth. */
static unsigned value_done(jscan *s) {
  if (s->depth == 0) {
    s->state = J_DONE;
    return JF_DONE;
  }
  s->state = J_AFTER;
  return 0;
}

static unsigned start_value(jscan *s, unsigned char c, int *vdepth) {
  *vdepth = s->depth;
  switch (c) {
  case '{':
  case '[':
    if (s->depth >= JSCAN_MAX_DEPTH) {
      s->state = J_ERROR;
      s->why = "nesting deeper than 64";
      return JF_ERR | JF_TOODEEP;
    }
    s->stack[s->depth++] = (char)c;
    s->state = c == '{' ? J_OBJ_FIRST : J_ARR_FIRST;
    return JF_VSTART;
  case '"':
    s->key = false;
    s->state = J_STR;
    return JF_VSTART;
  case 't': s->lit = "true"; break;
  case 'f': s->lit = "false"; break;
  case 'n': s->lit = "null"; break;
  case '-':
    s->state = J_NUM;
    s->num = N_MINUS;
    return JF_VSTART;
  default:
    if (is_digit(c)) {
      s->state = J_NUM;
      s->num = c == '0' ? N_ZERO : N_INT;
      return JF_VSTART;
    }
    return fail(s, "expected a JSON value");
  }
  s->lit_i = 1;
  s->state = J_LIT;
  return JF_VSTART;
}

static unsigned close_container(jscan *s, unsigned char c, int *vdepth) {
  char want = c == '}' ? '{' : '[';
  if (s->depth == 0 || s->stack[s->depth - 1] != want) return fail(s, "mismatched closing bracket");
  s->depth--;
  *vdepth = s->depth;
  return JF_VEND | value_done(s);
}

/* Returns 1 when c continues the number, 0 when the number ended before c,
 * -1 when c makes it invalid. */
static int num_step(jscan *s, unsigned char c) {
  switch (s->num) {
  case N_MINUS:
    if (c == '0') { s->num = N_ZERO; return 1; }
    if (is_digit(c)) { s->num = N_INT; return 1; }
    return -1;
  case N_ZERO:
  case N_INT:
    if (s->num == N_INT && is_digit(c)) return 1;
    if (s->num == N_ZERO && is_digit(c)) return -1; /* leading zero */
    if (c == '.') { s->num = N_DOT; return 1; }
    if (c == 'e' || c == 'E') { s->num = N_E; return 1; }
    return 0;
  case N_DOT:
    if (is_digit(c)) { s->num = N_FRAC; return 1; }
    return -1;
  case N_FRAC:
    if (is_digit(c)) return 1;
    if (c == 'e' || c == 'E') { s->num = N_E; return 1; }
    return 0;
  case N_E:
    if (c == '+' || c == '-') { s->num = N_ESIGN; return 1; }
    if (is_digit(c)) { s->num = N_EXP; return 1; }
    return -1;
  case N_ESIGN:
    if (is_digit(c)) { s->num = N_EXP; return 1; }
    return -1;
  default: /* N_EXP */
    return is_digit(c) ? 1 : 0;
  }
}

unsigned jscan_byte(jscan *s, unsigned char c, int *vdepth, int *ndepth) {
  unsigned f = 0;
  int dummy;
  if (!vdepth) vdepth = &dummy;
  if (!ndepth) ndepth = &dummy;
  s->off++;
  if (s->state == J_NUM) {
    int r = num_step(s, c);
    if (r > 0) return 0;
    if (r < 0) return fail(s, "malformed number");
    f |= JF_NUMEND;
    *ndepth = s->depth;
    if (s->depth == 0) { /* a top-level number: done, and c is not part of it */
      s->state = J_DONE;
      s->off--;
      return f | JF_DONE;
    }
    s->state = J_AFTER;
  }
  switch (s->state) {
  case J_STR:
    if (c == '"') {
      *vdepth = s->depth;
      if (s->key) {
        s->state = J_COLON;
        return f | JF_KEND;
      }
      return f | JF_VEND | value_done(s);
    }
    if (c == '\\') s->state = J_ESC;
    else if (c < 0x20) return fail(s, "control character in a string");
    return f | JF_STRBODY;
  case J_ESC:
    if (c == 'u') {
      s->state = J_U;
      s->u_left = 4;
    } else if (c && strchr("\"\\/bfnrt", c)) {
      s->state = J_STR;
    } else {
      return fail(s, "bad escape in a string");
    }
    return JF_STRBODY;
  case J_U:
    if (!is_hex(c)) return fail(s, "bad \\u escape in a string");
    if (--s->u_left == 0) s->state = J_STR;
    return JF_STRBODY;
  case J_LIT:
    if (c != (unsigned char)s->lit[s->lit_i]) return fail(s, "misspelt true/false/null");
    if (s->lit[++s->lit_i] == '\0') {
      *vdepth = s->depth;
      return JF_VEND | value_done(s);
    }
    return 0;
  case J_VALUE:
    if (is_ws(c)) return f;
    return f | start_value(s, c, vdepth);
  case J_ARR_FIRST:
    if (is_ws(c)) return f;
    if (c == ']') return f | close_container(s, c, vdepth);
    return f | start_value(s, c, vdepth);
  case J_OBJ_FIRST:
  case J_OBJ_KEY:
    if (is_ws(c)) return f;
    if (c == '"') {
      s->key = true;
      s->state = J_STR;
      *vdepth = s->depth;
      return f | JF_KSTART;
    }
    if (c == '}' && s->state == J_OBJ_FIRST) return f | close_container(s, c, vdepth);
    return fail(s, "expected an object key");
  case J_COLON:
    if (is_ws(c)) return f;
    if (c != ':') return fail(s, "expected ':' after an object key");
    s->state = J_VALUE;
    return f;
  case J_AFTER:
    if (is_ws(c)) return f;
    if (c == ',') {
      s->state = s->stack[s->depth - 1] == '{' ? J_OBJ_KEY : J_VALUE;
      return f;
    }
    if (c == '}' || c == ']') return f | close_container(s, c, vdepth);
    return fail(s, "expected ',' or a closing bracket");
  case J_DONE:
    if (is_ws(c)) return 0;
    return fail(s, "text after the end of the JSON value");
  default:
    return JF_ERR;
  }
}

static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool read_u4(const char *s, size_t n, size_t i, unsigned *out) {
  if (i + 4 > n) return false;
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    int h = hex_val(s[i + (size_t)k]);
    if (h < 0) return false;
    v = v * 16 + (unsigned)h;
  }
  *out = v;
  return true;
}

bool json_unescape(const char *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char tmp[4];
    size_t tn = 1;
    if (s[i] != '\\') {
      tmp[0] = s[i];
    } else {
      if (++i >= n) return false;
      switch (s[i]) {
      case 'b': tmp[0] = '\b'; break;
      case 'f': tmp[0] = '\f'; break;
      case 'n': tmp[0] = '\n'; break;
      case 'r': tmp[0] = '\r'; break;
      case 't': tmp[0] = '\t'; break;
      case '"': case '\\': case '/': tmp[0] = s[i]; break;
      case 'u': {
        unsigned cp;
        if (!read_u4(s, n, i + 1, &cp)) return false;
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {
          unsigned lo;
          if (i + 2 >= n || s[i + 1] != '\\' || s[i + 2] != 'u' || !read_u4(s, n, i + 3, &lo) ||
              lo < 0xDC00 || lo > 0xDFFF)
            return false;
          i += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return false;
        }
        if (cp == 0) return false; /* names are C strings */
        if (cp < 0x80) {
          tmp[0] = (char)cp;
        } else if (cp < 0x800) {
          tmp[0] = (char)(0xC0 | (cp >> 6));
          tmp[1] = (char)(0x80 | (cp & 63));
          tn = 2;
        } else if (cp < 0x10000) {
          tmp[0] = (char)(0xE0 | (cp >> 12));
          tmp[1] = (char)(0x80 | ((cp >> 6) & 63));
          tmp[2] = (char)(0x80 | (cp & 63));
          tn = 3;
        } else {
          tmp[0] = (char)(0xF0 | (cp >> 18));
          tmp[1] = (char)(0x80 | ((cp >> 12) & 63));
          tmp[2] = (char)(0x80 | ((cp >> 6) & 63));
          tmp[3] = (char)(0x80 | (cp & 63));
          tn = 4;
        }
        break;
      }
      default: return false;
      }
    }
    if (o + tn >= cap) return false;
    memcpy(out + o, tmp, tn);
    o += tn;
  }
  if (o >= cap) return false;
  out[o] = '\0';
  return true;
}
