#!/usr/bin/python3
"""ref_bert.py - an independent numpy implementation of the bert encoder
(sentence embeddings).

It reads the GGUF file itself (ref_common.Gguf: gguf_ref's byte reader and
quant_ref's decoders) and computes in float64 with the full attention
matrix; src/model/bert.c shares only the model's definition.

  ref_bert.py embed MODEL.gguf 1,2,3 OUT.f32 [--pooling none|mean|cls|last] [--normalize]
      the pooled vector [n_embd] (every token's, [n][n_embd], for none) as
      raw little-endian f32; the pooling defaults to bert.pooling_type
      (mean when absent)

The definition (ggml/llama.cpp conventions for GGUF bert files):
  x = token_embd[tokens] + token_types[0] + position_embd[0..n-1]
  x = LN(x; token_embd_norm)
  per block: x = LN(x + Wo attn(Wq x + bq, Wk x + bk, Wv x + bv) + bo; attn_output_norm)
             x = LN(x + Wdown gelu(Wup x + bup) + bdown; layer_output_norm)
  LN(v; w, b) = (v - mean(v)) / sqrt(var(v) + eps) * w + b
  gelu(u) = u/2 (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))
  attention: no mask, scores / sqrt(head_dim), head h reads kv head h // (H / Hkv)
  pooling: mean over tokens, the first token (cls) or the last; normalize: v / |v|_2
nomic-bert (nomic-embed-text) differs in four places:
  x = token_embd[tokens] (+ token_types[0] when present), no position_embd
  q, k, v = rows Q | K | V of attn_qkv applied to x (+ its bias when present),
  then q and k rotated: dims i and i + n_rot/2 of each head form
  x[i] + j x[i + n_rot/2], turned by pos * base^(-2i/n_rot), pos = 0..n-1
  the feed-forward is Wdown (silu(Wgate x) * Wup x)
  biases are used where the file has them
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Gguf, arch_key, attention, cli, gelu_tanh, layer_norm, rope, silu  # noqa: E402


class Bert:
    def __init__(self, path):
        g = Gguf(path)
        arch = g.kv["general.architecture"]
        assert arch in ("bert", "nomic-bert"), arch
        self.nomic = arch == "nomic-bert"
        key = arch_key(g, arch)
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
        self.eps = key("attention.layer_norm_epsilon", 1e-5)
        self.pooling = key("pooling_type", 1)
        self.n_rot = key("rope.dimension_count", self.head_dim)
        self.base = key("rope.freq_base", 10000.0)
        self.t = {name: g.tensor(name) for name in g.tensors}

    def ln(self, x, name):
        return layer_norm(x, self.t[name + ".weight"], self.t[name + ".bias"], self.eps)

    def lin(self, x, name):
        y = x @ self.t[name + ".weight"].T
        return y + self.t[name + ".bias"] if name + ".bias" in self.t else y

    def rope(self, x):
        """x [n][heads][head_dim], NeoX halves turned by position."""
        return rope(x, self.n_rot, self.base)

    def hidden(self, tokens):
        """Every token's final hidden state [n_tokens][n_embd]."""
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        t = self.t
        x = t["token_embd.weight"][np.array(tokens)]
        if "token_types.weight" in t:
            x = x + t["token_types.weight"][0]
        if not self.nomic:
            x = x + t["position_embd.weight"][:n]
        x = self.ln(x, "token_embd_norm")
        for i in range(self.n_layer):
            p = "blk.%d." % i
            if self.nomic:
                qkv = self.lin(x, p + "attn_qkv")
                q = self.rope(qkv[:, :H * d].reshape(n, H, d))
                k = self.rope(qkv[:, H * d:(H + Hkv) * d].reshape(n, Hkv, d))
                v = qkv[:, (H + Hkv) * d:].reshape(n, Hkv, d)
            else:
                q = self.lin(x, p + "attn_q").reshape(n, H, d)
                k = self.lin(x, p + "attn_k").reshape(n, Hkv, d)
                v = self.lin(x, p + "attn_v").reshape(n, Hkv, d)
            a = attention(q, k, v, 1.0 / np.sqrt(d))
            x = self.ln(x + self.lin(a, p + "attn_output"), p + "attn_output_norm")
            u = self.lin(x, p + "ffn_up")
            u = silu(self.lin(x, p + "ffn_gate")) * u if self.nomic else gelu_tanh(u)
            x = self.ln(x + self.lin(u, p + "ffn_down"), p + "layer_output_norm")
        return x


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: Bert(path), "ref_bert.py embed MODEL TOKENS OUT [--pooling P] [--normalize]", ())
