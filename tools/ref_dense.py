#!/usr/bin/python3
"""ref_dense.py - an independent numpy implementation of the olmo2 and glm4
forward passes.

It reads the GGUF file itself (ref_llama.Gguf: gguf_ref's byte reader and
quant_ref's decoders, independent of the C code) and computes logits in
float64 with the textbook formulation: the full causal attention matrix,
RoPE as a multiplication by complex numbers, no KV cache. The C runtime
(src/model/olmo2.c, glm4.c) streams keys through a cache with an online
softmax, rotates with cached cos/sin and binds glm4's fused tensors as
separate parts, so the two share only the models' definitions.

  ref_dense.py logits MODEL.gguf 1,2,3 OUT.f32 [--kv f16]
      logits of every token, raw little-endian f32 [n_tokens][n_vocab]
  ref_dense.py greedy MODEL.gguf 1,2,3 N OUT.txt [--kv f16]
      the N greedily chosen tokens after the prompt, comma-separated

--kv f16 rounds keys and values to float16 as they enter the cache (the C
runtime's default F16 cache).

The definitions (llama.cpp's conventions for these GGUF files), with
n(v, w) = v / sqrt(mean(v^2) + eps) * w over the last axis:
  olmo2, per block (no input norms; q/k norms over the whole projection):
      q = n(Wq x, q_norm), k = n(Wk x, k_norm), v = Wv x
      h = x + n(Wo attn(rope_neox(q), rope_neox(k), v), post_attention_norm)
      x = h + n(Wdown (silu(Wgate h) * Wup h), post_ffw_norm)
  glm4, per block:
      a = n(x, attn_norm); q, k, v = Wq a + bq, Wk a + bk, Wv a + bv
        (or one attn_qkv [Q + 2 KV] split in that order)
      h = x + n(Wo attn(rope_normal(q), rope_normal(k), v), post_attention_norm)
      f = n(h, ffn_norm); [g | u] = Wup f (2 n_ff rows: gate, then up)
      x = h + n(Wdown (silu(g) * u), post_ffw_norm)
  logits = output n(x, output_norm), output = token_embd without output.weight
  rope_neox: dims i and i + n_rot/2 of a head form x[i] + j x[i + n_rot/2];
  rope_normal: dims 2i and 2i+1 form x[2i] + j x[2i+1]; either turned by
  pos * base^(-2i/n_rot), for i < n_rot/2 (the rest of the head unrotated)
  attention: head h reads kv head h // (n_head / n_head_kv), scores / sqrt(head_dim)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_llama import Gguf  # noqa: E402


class Dense:
    def __init__(self, path, kv_f16=False):
        g = Gguf(path)
        arch = g.kv["general.architecture"]
        assert arch in ("olmo2", "glm4"), arch
        self.arch = arch

        def key(k, default=None):
            v = g.kv.get(arch + "." + k, default)
            assert v is not None, "missing %s.%s" % (arch, k)
            return v
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = key("rope.dimension_count", self.head_dim)
        self.eps = key("attention.layer_norm_rms_epsilon", 1e-5)
        self.base = key("rope.freq_base", 10000.0)
        self.n_ff = key("feed_forward_length")
        self.kv_f16 = kv_f16
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.out_norm = g.tensor("output_norm.weight")
        self.layers = []
        Q, KV = self.n_head * self.head_dim, self.n_head_kv * self.head_dim
        for i in range(self.n_layer):
            def t(name, i=i):
                return g.tensor("blk.%d.%s" % (i, name))

            def has(name, i=i):
                return g.has("blk.%d.%s" % (i, name))
            L = {k: t(k) for k in ("attn_output.weight", "post_attention_norm.weight", "ffn_up.weight",
                                   "ffn_down.weight", "post_ffw_norm.weight")}
            if arch == "olmo2":
                for k in ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_q_norm.weight",
                          "attn_k_norm.weight", "ffn_gate.weight"):
                    L[k] = t(k)
            else:
                L["attn_norm.weight"] = t("attn_norm.weight")
                L["ffn_norm.weight"] = t("ffn_norm.weight")
                if has("attn_qkv.weight"):
                    w = t("attn_qkv.weight")
                    b = t("attn_qkv.bias") if has("attn_qkv.bias") else np.zeros(Q + 2 * KV)
                    L["attn_q.weight"], L["attn_k.weight"], L["attn_v.weight"] = w[:Q], w[Q:Q + KV], w[Q + KV:]
                    L["attn_q.bias"], L["attn_k.bias"], L["attn_v.bias"] = b[:Q], b[Q:Q + KV], b[Q + KV:]
                else:
                    for k in ("attn_q", "attn_k", "attn_v"):
                        L[k + ".weight"] = t(k + ".weight")
                        L[k + ".bias"] = t(k + ".bias") if has(k + ".bias") else 0.0
            self.layers.append(L)

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x):
        """x [n_tok][n_heads][head_dim], rotated in place of a copy."""
        n = x.shape[0]
        x = x.copy()
        half = self.n_rot // 2
        inv = self.base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        rot = np.exp(1j * np.arange(n, dtype=np.float64)[:, None] * inv[None, :])[:, None, :]
        if self.arch == "olmo2":  # neox halves
            z = (x[:, :, :half] + 1j * x[:, :, half:self.n_rot]) * rot
            x[:, :, :half], x[:, :, half:self.n_rot] = z.real, z.imag
        else:  # adjacent pairs
            z = (x[:, :, 0:self.n_rot:2] + 1j * x[:, :, 1:self.n_rot:2]) * rot
            x[:, :, 0:self.n_rot:2], x[:, :, 1:self.n_rot:2] = z.real, z.imag
        return x

    def attention(self, q, k, v):
        """q [n][H*d], k, v [n][Hkv*d] -> [n][H*d], causal."""
        n = q.shape[0]
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        q = self.rope(q.reshape(n, H, d))
        k = self.rope(k.reshape(n, Hkv, d))
        v = v.reshape(n, Hkv, d)
        if self.kv_f16:
            k = k.astype(np.float16).astype(np.float64)
            v = v.astype(np.float16).astype(np.float64)
        rep = H // Hkv
        q = q.transpose(1, 0, 2)
        k = np.repeat(k.transpose(1, 0, 2), rep, axis=0)
        v = np.repeat(v.transpose(1, 0, 2), rep, axis=0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d) + np.triu(np.full((n, n), -np.inf), 1)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        return (s @ v).transpose(1, 0, 2).reshape(n, H * d)

    def forward(self, tokens):
        x = self.embd[np.array(tokens)]
        F = self.n_ff
        for L in self.layers:
            if self.arch == "olmo2":
                q = self.norm(x @ L["attn_q.weight"].T, L["attn_q_norm.weight"])
                k = self.norm(x @ L["attn_k.weight"].T, L["attn_k_norm.weight"])
                v = x @ L["attn_v.weight"].T
            else:
                a = self.norm(x, L["attn_norm.weight"])
                q = a @ L["attn_q.weight"].T + L["attn_q.bias"]
                k = a @ L["attn_k.weight"].T + L["attn_k.bias"]
                v = a @ L["attn_v.weight"].T + L["attn_v.bias"]
            att = self.attention(q, k, v) @ L["attn_output.weight"].T
            h = x + self.norm(att, L["post_attention_norm.weight"])
            if self.arch == "olmo2":
                gt, up = h @ L["ffn_gate.weight"].T, h @ L["ffn_up.weight"].T
            else:
                gu = self.norm(h, L["ffn_norm.weight"]) @ L["ffn_up.weight"].T
                gt, up = gu[:, :F], gu[:, F:]
            f = ((gt / (1.0 + np.exp(-gt))) * up) @ L["ffn_down.weight"].T
            x = h + self.norm(f, L["post_ffw_norm.weight"])
        return self.norm(x, self.out_norm) @ self.out.T


def main(argv):
    kv_f16 = "--kv" in argv and argv[argv.index("--kv") + 1] == "f16"
    args = [a for i, a in enumerate(argv) if a != "--kv" and (i == 0 or argv[i - 1] != "--kv")]
    cmd, path, toks = args[1], args[2], [int(t) for t in args[3].split(",")]
    m = Dense(path, kv_f16)
    if cmd == "logits":
        m.forward(toks).astype("<f4").tofile(args[4])
    elif cmd == "greedy":
        seq = list(toks)
        for _ in range(int(args[4])):
            seq.append(int(np.argmax(m.forward(seq)[-1])))
        with open(args[5], "w") as f:
            f.write(",".join(map(str, seq[len(toks):])) + "\n")
    else:
        sys.exit("usage: ref_dense.py logits|greedy ...")


if __name__ == "__main__":
    main(sys.argv)
