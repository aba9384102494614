#!/usr/bin/python3
"""ref_llama.py - an independent numpy implementation of the llama forward pass.

It reads the GGUF file itself (byte reading from gguf_ref.Reader, tensor
decoding from quant_ref.DEQUANT, both independent of the C code) and computes
logits in float64 with the textbook formulation: the full causal attention
matrix, RoPE as a multiplication by complex numbers, no KV cache. The C
runtime (src/model/llama.c) streams keys through a cache with an online
softmax and rotates pairs with cos/sin, so the two share neither code nor
structure, only the definition of the model.

  ref_llama.py logits MODEL.gguf 1,2,3 OUT.f32 [--kv f16]
      logits of every token, raw little-endian f32 [n_tokens][n_vocab]
      (OUT "-" prints the last row's top 10 as text)
  ref_llama.py greedy MODEL.gguf 1,2,3 N OUT.txt [--kv f16]
      the N greedily chosen tokens after the prompt, comma-separated

--kv f16 rounds keys and values to float16 as they enter the cache, the way
the C runtime's default F16 cache stores them; otherwise they stay exact.

The definition implemented (ggml/llama.cpp conventions for GGUF llama files):
  x = token_embd[tokens]
  per block: h = x + Wo attn(rope(Wq n1(x)), rope(Wk n1(x)), Wv n1(x))
             x = h + Wdown (silu(Wgate n2(h)) * Wup n2(h))
             with llama.expert_count > 0 (Mixtral): x = h + ref_moe.ffn(n2(h))
  logits = output n(x), output = token_embd when the file has no output.weight
  n(v) = v / sqrt(mean(v^2) + eps) * weight
  rope "normal": pair (2i, 2i+1) of each head's first n_rot dims is turned by
  pos * freq_scale * base^(-2i/n_rot) / rope_freqs[i]
  attention: head h reads kv head h // (n_head / n_head_kv), scores / sqrt(head_dim)
"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_ref import Reader  # noqa: E402
from quant_ref import DEQUANT  # noqa: E402
import ref_moe  # noqa: E402

# GGUF tensor type number -> (name, block elements, block bytes)
TENSOR_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    30: ("BF16", 1, 2), 16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136), 29: ("IQ1_M", 256, 56), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}


def read_value(r, t):
    if t in SCALAR:
        return r.unpack(SCALAR[t])
    if t == 8:
        return r.string().decode("utf-8", "replace")
    if t == 9:
        et = r.unpack("<I")
        n = r.unpack("<Q")
        return [read_value(r, et) for _ in range(n)]
    raise ValueError("unknown value type %d" % t)


class Gguf:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        r = Reader(self.data)
        assert r.take(4) == b"GGUF", "not a GGUF file"
        version = r.unpack("<I")
        assert version in (2, 3), version
        n_tensors = r.unpack("<Q")
        n_kv = r.unpack("<Q")
        self.kv = {}
        for _ in range(n_kv):
            key = r.string().decode()
            self.kv[key] = read_value(r, r.unpack("<I"))
        infos = []
        for _ in range(n_tensors):
            name = r.string().decode()
            nd = r.unpack("<I")
            dims = [r.unpack("<Q") for _ in range(nd)]
            t = r.unpack("<I")
            off = r.unpack("<Q")
            infos.append((name, dims, t, off))
        align = self.kv.get("general.alignment", 32)
        base = (r.p + align - 1) // align * align
        self.tensors = {}
        for name, dims, t, off in infos:
            self.tensors[name] = (dims, t, base + off)

    def has(self, name):
        return name in self.tensors

    def tensor(self, name):
        """float64 array shaped like numpy sees the matrix: [dims[1]][dims[0]]."""
        dims, t, start = self.tensors[name]
        tname, bs, bb = TENSOR_TYPES[t]
        n = 1
        for d in dims:
            n *= d
        nbytes = n // bs * bb
        x = DEQUANT[tname](self.data[start:start + nbytes]).astype(np.float64)
        return x.reshape(list(reversed(dims))) if len(dims) > 1 else x


class Llama:
    def __init__(self, path, kv_f16=False):
        g = Gguf(path)
        arch = g.kv["general.architecture"]
        assert arch == "llama", arch

        def key(k, default=None):
            v = g.kv.get("llama." + k, default)
            assert v is not None, "missing llama." + k
            return v
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = key("rope.dimension_count", self.head_dim)
        self.eps = key("attention.layer_norm_rms_epsilon", 1e-5)
        self.base = key("rope.freq_base", 10000.0)
        self.n_ctx = key("context_length")
        scale = 1.0
        if g.kv.get("llama.rope.scaling.type", "linear") == "linear":
            f = g.kv.get("llama.rope.scaling.factor", 0.0) or g.kv.get("llama.rope.scale_linear", 0.0)
            if f:
                scale = 1.0 / f
        self.freq_scale = scale
        self.freq_factors = g.tensor("rope_freqs.weight") if g.has("rope_freqs.weight") else None
        self.kv_f16 = kv_f16
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.out_norm = g.tensor("output_norm.weight")
        self.layers = []
        for i in range(self.n_layer):
            p = "blk.%d." % i
            moe = key("expert_count", 0) > 0  # Mixtral layout: the FFN is ref_moe's
            self.layers.append({k: g.tensor(p + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm") + (
                () if moe else ("ffn_gate", "ffn_up", "ffn_down"))})
            if moe:
                self.layers[-1]["moe"] = ref_moe.load(g, "llama", i)

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, n_heads):
        """x [n_tok][n_heads*head_dim]: rotate adjacent pairs as complex numbers."""
        n = x.shape[0]
        x = x.reshape(n, n_heads, self.head_dim).copy()
        half = self.n_rot // 2
        inv = self.base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        if self.freq_factors is not None:
            inv = inv / self.freq_factors
        theta = np.arange(n, dtype=np.float64)[:, None] * self.freq_scale * inv[None, :]
        rot = np.exp(1j * theta)[:, None, :]  # [n][1][half]
        pairs = x[:, :, :self.n_rot].reshape(n, n_heads, half, 2)
        z = (pairs[..., 0] + 1j * pairs[..., 1]) * rot
        x[:, :, :self.n_rot] = np.stack([z.real, z.imag], axis=-1).reshape(n, n_heads, self.n_rot)
        return x.reshape(n, n_heads * self.head_dim)

    def forward(self, tokens):
        """Logits [n_tokens][n_vocab] for tokens at positions 0..n-1."""
        n = len(tokens)
        x = self.embd[np.array(tokens)]
        rep = self.n_head // self.n_head_kv
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for L in self.layers:
            h = self.norm(x, L["attn_norm"])
            q = self.rope(h @ L["attn_q"].T, self.n_head)
            k = self.rope(h @ L["attn_k"].T, self.n_head_kv)
            v = h @ L["attn_v"].T
            if self.kv_f16:
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            q = q.reshape(n, self.n_head, self.head_dim).transpose(1, 0, 2)          # [H][n][d]
            k = k.reshape(n, self.n_head_kv, self.head_dim).transpose(1, 0, 2)       # [Hkv][n][d]
            v = v.reshape(n, self.n_head_kv, self.head_dim).transpose(1, 0, 2)
            k = np.repeat(k, rep, axis=0)
            v = np.repeat(v, rep, axis=0)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(self.head_dim) + mask             # [H][n][n]
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, self.n_head * self.head_dim)
            x = x + a @ L["attn_output"].T
            h = self.norm(x, L["ffn_norm"])
            if "moe" in L:
                x = x + ref_moe.ffn(h, L["moe"])
                continue
            gt = h @ L["ffn_gate"].T
            x = x + ((gt / (1.0 + np.exp(-gt))) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        return self.norm(x, self.out_norm) @ self.out.T


def main(argv):
    kv_f16 = "--kv" in argv and argv[argv.index("--kv") + 1] == "f16"
    args = [a for i, a in enumerate(argv) if a != "--kv" and (i == 0 or argv[i - 1] != "--kv")]
    cmd, path, toks = args[1], args[2], [int(t) for t in args[3].split(",")]
    m = Llama(path, kv_f16)
    if cmd == "logits":
        lg = m.forward(toks)
        if args[4] == "-":
            top = np.argsort(-lg[-1])[:10]
            print(" ".join("%d:%.6f" % (t, lg[-1][t]) for t in top))
        else:
            lg.astype("<f4").tofile(args[4])
    elif cmd == "greedy":
        n = int(args[4])
        seq = list(toks)
        for _ in range(n):
            seq.append(int(np.argmax(m.forward(seq)[-1])))
        with open(args[5], "w") as f:
            f.write(",".join(map(str, seq[len(toks):])) + "\n")
    else:
        sys.exit("usage: ref_llama.py logits|greedy ...")


if __name__ == "__main__":
    main(sys.argv)
