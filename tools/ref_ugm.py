#!/usr/bin/python3
"""ref_ugm.py - an independent Python reference of the unigram ("t5")
tokenizer (src/tok/tok_ugm.c), and the writer of the test vocabulary it is
checked on (../shared/vocab has no unigram vocabulary).

  ref_ugm.py make OUT.gguf SEED
      a GGUF vocabulary in the format llama.cpp's converter writes for
      XLM-RoBERTa files (tokenizer.ggml.model "t5", tokens, scores,
      token_type, the special ids, add_bos/add_eos/add_space_prefix/
      remove_extra_whitespaces, precompiled_charsmap): <s> <pad> </s> <unk>,
      every single character of an alphabet (ASCII, accents, Greek, CJK, "▁")
      but a few left out, random words and word pieces with and without "▁",
      two user-defined and one unused token, random log-probability scores;
      the charsmap (an XOR-compressed double array built here) maps
      full-width letters, ligatures, circled digits, a no-break space, "e" +
      combining acute, ".." and "..." to their replacements
  ref_ugm.py encode VOCAB.gguf SEED OUT.txt
      fixed edge cases and random texts from SEED; one line per text: the
      text's bytes in hex, a tab, its ids with BOS/EOS (comma-separated)

The tokenizer, as sentencepiece's unigram model and llama.cpp read it:
user-defined tokens are cut out of the text first (longest first); every
other fragment is normalized (a user-defined token's text kept, else the
charsmap's longest matching prefix replaced, else one UTF-8 character
copied, an invalid byte as U+FFFD; spaces as U+2581, runs of them collapsed
before the next word, none at the end, one before the first word) and
segmented by the highest total score, found here as the best path through
the lattice of all (start, end) pieces in the vocabulary: a normal or unused
token scores its score, a user-defined one 0, and a character that no token
of exactly its length covers may be <unk> at min(normal scores) - 10;
consecutive <unk> merge. Ties keep the piece that ends the shortest path
found first: lattice edges are relaxed by increasing start, then length.
"""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Gguf  # noqa: E402

SP = "\u2581"
NORMAL, UNKNOWN, CONTROL, USER, UNUSED = 1, 2, 3, 4, 5

# ---- writing ---------------------------------------------------------------


def gguf_bytes(kvs):
    """A tensor-less GGUF v3 of (key, type, value): type "str", "u32", "bool",
    "strs", "f32s", "i32s", "u8s"."""
    def s(x):
        b = x.encode("utf-8") if isinstance(x, str) else x
        return struct.pack("<Q", len(b)) + b
    out = [b"GGUF", struct.pack("<IQQ", 3, 0, len(kvs))]
    for k, t, v in kvs:
        out.append(s(k))
        if t == "str":
            out += [struct.pack("<I", 8), s(v)]
        elif t == "u32":
            out += [struct.pack("<II", 4, v)]
        elif t == "bool":
            out += [struct.pack("<IB", 7, 1 if v else 0)]
        else:
            et, fmt = {"strs": (8, None), "f32s": (6, "<f"), "i32s": (5, "<i"), "u8s": (0, "<B")}[t]
            out.append(struct.pack("<IIQ", 9, et, len(v)))
            out += [s(x) for x in v] if fmt is None else [struct.pack(fmt, x) for x in v]
    return b"".join(out)


def build_charsmap(table):
    """The precompiled charsmap of {source bytes: replacement str}: u32 size
    of the double array, its units, then the NUL-terminated replacements.
    Unit layout: BASE << 10 | LEAF << 8 | label; a value unit 1 << 31 |
    offset. From s = BASE(root), byte c reaches unit s ^ c (whose label is
    c), and s becomes that index ^ its BASE; a LEAF node's value sits at
    the new s."""
    repl, offs = b"", {}
    for src, dst in table.items():
        offs[src] = len(repl)
        repl += dst.encode("utf-8") + b"\0"
    trie = {}
    for src in table:
        node = trie
        for c in src:
            node = node.setdefault(c, {})
        node[None] = offs[src]
    units = {0: 0}

    def place(node, index, label):
        kids = sorted(k for k in node if k is not None)
        need = [0] if None in node else []
        s = 1
        while any((s ^ c) in units for c in kids) or any((s ^ c) in units for c in need) or s in (0,):
            s += 1
        base = index ^ s
        assert base < (1 << 21)
        units[index] = base << 10 | (1 << 8 if None in node else 0) | label
        if None in node:
            units[s] = 1 << 31 | node[None]
        for c in kids:
            units[s ^ c] = 0  # reserve before descending
        for c in kids:
            place(node[c], s ^ c, c)
    place(trie, 0, 0)
    n = max(units) + 1
    xcda = b"".join(struct.pack("<I", units.get(i, 0)) for i in range(n))
    return struct.pack("<I", len(xcda)) + xcda + repl


CHARSMAP = {
    "Ａ".encode(): "A", "Ｂ".encode(): "B", "ａ".encode(): "a", "ｚ".encode(): "z",
    "ﬁ".encode(): "fi", "ﬂ".encode(): "fl", "①".encode(): "1", "②".encode(): "2",
    "\u00a0".encode(): " ", "e\u0301".encode(): "é", b"..": "\u2025", b"...": "\u2026",
    "\u3000".encode(): " ",
}


def make(path, seed):
    rnd = random.Random(seed)
    alphabet = [chr(c) for c in range(0x21, 0x7f)] + list("éèàüöñçßΩαβγδ日本語中文한국어…‥") + [SP]
    missing = set("~^`ß語") # characters no token covers: <unk>
    chars = [c for c in alphabet if c not in missing]
    words = ["the", "cat", "sat", "on", "mat", "hello", "world", "token", "izer", "uni", "gram", "fi", "fl",
             "café", "naïve", "日本", "本語", "中文", "한국", "ab", "ba", "abc", "123", "12", "23", "1", "..", "ing",
             "er", "re", "th", "he", "wor", "ld", "to", "ken",
             "~a", "a^", "語x", "`b"]  # pieces holding characters that have no token alone
    pieces = list(chars)
    for w in words:
        pieces += [w, SP + w]
    for _ in range(120):  # random pieces over the covered characters
        n = rnd.randint(2, 4)
        p = "".join(rnd.choice(chars[:62]) for _ in range(n))
        pieces.append(SP + p if rnd.random() < 0.5 else p)
    seen, uniq = set(), []
    for p in pieces:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    tokens = ["<s>", "<pad>", "</s>", "<unk>"] + uniq + ["[URL]", "<sep2>", "▁unused"]
    types = [CONTROL, CONTROL, CONTROL, UNKNOWN] + [NORMAL] * len(uniq) + [USER, USER, UNUSED]
    # fixed scores where the unknown token's penalty decides: "~ab" is
    # <unk> "ab" (min - 10 - 2.1) against "~a" "b" (-11.99 - 4); a penalty
    # of 1 would flip it
    fixed = {"~a": -11.99, "ab": -2.1, "b": -4.0}
    scores = [0.0, 0.0, 0.0, 0.0] + [fixed.get(p, -rnd.uniform(2.0, 12.0)) for p in uniq] + [0.0, 0.0, -5.0]
    kvs = [("general.architecture", "str", "bert"),
           ("tokenizer.ggml.model", "str", "t5"),
           ("tokenizer.ggml.pre", "str", "default"),
           ("tokenizer.ggml.tokens", "strs", tokens),
           ("tokenizer.ggml.scores", "f32s", scores),
           ("tokenizer.ggml.token_type", "i32s", types),
           ("tokenizer.ggml.bos_token_id", "u32", 0),
           ("tokenizer.ggml.padding_token_id", "u32", 1),
           ("tokenizer.ggml.eos_token_id", "u32", 2),
           ("tokenizer.ggml.unknown_token_id", "u32", 3),
           ("tokenizer.ggml.add_bos_token", "bool", True),
           ("tokenizer.ggml.add_eos_token", "bool", True),
           ("tokenizer.ggml.add_space_prefix", "bool", True),
           ("tokenizer.ggml.remove_extra_whitespaces", "bool", True),
           ("tokenizer.ggml.precompiled_charsmap", "u8s", list(build_charsmap(CHARSMAP)))]
    with open(path, "wb") as f:
        f.write(gguf_bytes(kvs))

# ---- tokenizing ------------------------------------------------------------


class Unigram:
    def __init__(self, path):
        kv = Gguf(path).kv
        assert kv["tokenizer.ggml.model"] == "t5"
        self.tokens = [t.encode("utf-8") for t in kv["tokenizer.ggml.tokens"]]
        self.scores = kv["tokenizer.ggml.scores"]
        self.types = kv["tokenizer.ggml.token_type"]
        self.unk = kv["tokenizer.ggml.unknown_token_id"]
        self.bos = kv["tokenizer.ggml.bos_token_id"] if kv.get("tokenizer.ggml.add_bos_token") else None
        self.eos = kv["tokenizer.ggml.eos_token_id"] if kv.get("tokenizer.ggml.add_eos_token") else None
        self.prefix = kv.get("tokenizer.ggml.add_space_prefix", True)
        self.merge = kv.get("tokenizer.ggml.remove_extra_whitespaces", False)
        self.piece = {}
        for i, (t, ty) in enumerate(zip(self.tokens, self.types)):
            if ty in (NORMAL, USER, UNUSED) and t not in self.piece:
                self.piece[t] = i
        self.user = sorted((i for i, ty in enumerate(self.types) if ty == USER and self.tokens[i]),
                           key=lambda i: (-len(self.tokens[i]), i))
        self.unk_score = min(s for s, ty in zip(self.scores, self.types) if ty == NORMAL) - 10.0
        cm = bytes(b & 0xFF for b in kv.get("tokenizer.ggml.precompiled_charsmap", []))
        self.units, self.repl = [], b""
        if cm:
            n = struct.unpack_from("<I", cm)[0]
            self.units = list(struct.unpack_from("<%dI" % (n // 4), cm, 4))
            self.repl = cm[4 + n:]

    def charsmap_match(self, b, i):
        """(length, replacement) of the longest charsmap key at b[i:], or None."""
        if not self.units:
            return None
        unit = lambda k: self.units[k] if k < len(self.units) else 0  # noqa: E731
        base = lambda u: (u >> 10) << ((u & 512) >> 6)  # noqa: E731
        s, found = base(unit(0)), None
        for j in range(i, len(b)):
            if b[j] == 0:
                break
            u = s ^ b[j]
            if unit(u) & 0x800000FF != b[j]:
                break
            s = u ^ base(unit(u))
            if unit(u) & 256:
                off = unit(s) & 0x7FFFFFFF
                end = self.repl.index(b"\0", off)
                found = (j + 1 - i, self.repl[off:end])
        return found

    def normalize(self, b):
        out, i, prepended, word = b"", 0, False, False
        space = SP.encode()
        while i < len(b):
            m = next((len(self.tokens[u]) for u in self.user if b.startswith(self.tokens[u], i)), 0)
            if m:
                piece, used = b[i:i + m], m
            elif self.charsmap_match(b, i):
                used, piece = self.charsmap_match(b, i)
            else:
                used = 0
                for n in (1, 2, 3, 4):
                    try:
                        b[i:i + n].decode("utf-8")
                        used = n
                        break
                    except UnicodeDecodeError:
                        pass
                piece = b[i:i + used] if used else "\ufffd".encode()
                used = used or 1
            for c in piece:
                if c != 0x20:
                    if not word:
                        word = True
                        if (self.prefix and not prepended) or self.merge:
                            out += space
                            prepended = True
                    out += bytes([c])
                else:
                    word = False
                    if not self.merge:
                        out += space
            i += used
        return out

    def segment(self, s):
        """The best path through the lattice of s's pieces (see the header)."""
        n = len(s)
        if n == 0:
            return []
        starts = []  # character boundaries
        i = 0
        while i < n:
            starts.append(i)
            c = s[i]
            i += 1 if c < 0xC0 else 2 if c < 0xE0 else 3 if c < 0xF0 else 4  # a stray continuation byte: 1
        ends = starts[1:] + [n]
        best = {0: (0.0, None, None)}  # end -> (score, start, id)
        for a, b in zip(starts, ends):
            if a not in best:
                continue
            here = best[a][0]
            covered = False
            for e in range(a + 1, n + 1):
                tid = self.piece.get(s[a:e])
                if tid is None:
                    continue
                covered |= e == min(b, n)
                sc = here + (0.0 if self.types[tid] == USER else self.scores[tid])
                if e not in best or sc > best[e][0]:
                    best[e] = (sc, a, tid)
            if not covered:
                e = min(b, n)
                sc = here + self.unk_score
                if e not in best or sc > best[e][0]:
                    best[e] = (sc, a, self.unk)
        path, e = [], n
        while e > 0:
            _, a, tid = best[e]
            if not (path and path[-1] == self.unk and tid == self.unk):
                path.append(tid)
            e = a
        return path[::-1]

    def encode(self, b):
        frags = [(None, b)]
        for u in self.user:
            t, nxt = self.tokens[u], []
            for tid, f in frags:
                if tid is not None:
                    nxt.append((tid, None))
                    continue
                parts = f.split(t)
                for k, p in enumerate(parts):
                    if p:
                        nxt.append((None, p))
                    if k + 1 < len(parts):
                        nxt.append((u, None))
            frags = nxt
        ids = [self.bos] if self.bos is not None else []
        for tid, f in frags:
            ids += [tid] if tid is not None else self.segment(self.normalize(f))
        return ids + ([self.eos] if self.eos is not None else [])


EDGES = ["", " ", "   ", "~a ~b a^ ^a 語x 語 `b`", "~ab", "x~ab", "hello world", " hello  world ", "the cat sat on the mat", "café naïve",
         "日本語と中文", "한국어", "~^`", "a~~b", "tokenizer unigram", "Ａｂｚ ﬁﬂ", "①② 12 123", "x\u00a0y",
         "e\u0301t\u00e9", "a..b...c....", "see [URL] and<sep2>x", "[URL]", "\tline\nbreak", "ab\xffcd",
         "βγ Ωα δ", "…‥", "abc" * 20, "▁unused", "theworld"]


def texts(seed):
    rnd = random.Random(seed)
    pool = list("abcdefghijklmnopqrstuvwxyz  ,.!?0123456789éüñ日本中한~") + ["Ａ", "ﬁ", "①", "e\u0301", "..", "[URL]"]
    out = [t.encode("utf-8") for t in EDGES] + [b"ab\xff\xfecd", b"\xe6\x97"]
    for _ in range(60):
        out.append("".join(rnd.choice(pool) for _ in range(rnd.randint(1, 40))).encode("utf-8"))
    return out


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "encode":
        u = Unigram(sys.argv[2])
        with open(sys.argv[4], "w") as f:
            for t in texts(int(sys.argv[3])):
                f.write("%s\t%s\n" % (t.hex(), ",".join(map(str, u.encode(t)))))
    else:
        sys.exit("usage: ref_ugm.py make OUT.gguf SEED | encode VOCAB.gguf SEED OUT.txt")
