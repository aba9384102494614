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
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Gguf, arch_key, attention, cli, gelu_tanh, layer_norm  # noqa: E402


class Bert:
    def __init__(self, path):
        g = Gguf(path)
        assert g.kv["general.architecture"] == "bert", g.kv["general.architecture"]
        key = arch_key(g, "bert")
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
        self.eps = key("attention.layer_norm_epsilon", 1e-5)
        self.pooling = key("pooling_type", 1)
        self.t = {name: g.tensor(name) for name in g.tensors}

    def ln(self, x, name):
        return layer_norm(x, self.t[name + ".weight"], self.t[name + ".bias"], self.eps)

    def lin(self, x, name):
        return x @ self.t[name + ".weight"].T + self.t[name + ".bias"]

    def hidden(self, tokens):
        """Every token's final hidden state [n_tokens][n_embd]."""
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        t = self.t
        x = t["token_embd.weight"][np.array(tokens)] + t["token_types.weight"][0] + t["position_embd.weight"][:n]
        x = self.ln(x, "token_embd_norm")
        for i in range(self.n_layer):
            p = "blk.%d." % i
            q = self.lin(x, p + "attn_q").reshape(n, H, d)
            k = self.lin(x, p + "attn_k").reshape(n, Hkv, d)
            v = self.lin(x, p + "attn_v").reshape(n, Hkv, d)
            a = attention(q, k, v, 1.0 / np.sqrt(d))
            x = self.ln(x + self.lin(a, p + "attn_output"), p + "attn_output_norm")
            u = gelu_tanh(self.lin(x, p + "ffn_up"))
            x = self.ln(x + self.lin(u, p + "ffn_down"), p + "layer_output_norm")
        return x


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: Bert(path), "ref_bert.py embed MODEL TOKENS OUT [--pooling P] [--normalize]", ())
