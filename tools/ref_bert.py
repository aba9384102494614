#!/usr/bin/python3
"""ref_bert.py - an independent numpy implementation of the bert encoder
(sentence embeddings).

It reads the GGUF file itself (ref_llama.Gguf: gguf_ref's byte reader and
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
from ref_llama import Gguf  # noqa: E402


class Bert:
    def __init__(self, path):
        g = Gguf(path)
        assert g.kv["general.architecture"] == "bert", g.kv["general.architecture"]

        def key(k, default=None):
            v = g.kv.get("bert." + k, default)
            assert v is not None, "missing bert." + k
            return v
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
        self.eps = key("attention.layer_norm_epsilon", 1e-5)
        self.pooling = key("pooling_type", 1)
        self.t = {name: g.tensor(name) for name in g.tensors}

    def ln(self, x, name):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.t[name + ".weight"] + self.t[name + ".bias"]

    def lin(self, x, name):
        return x @ self.t[name + ".weight"].T + self.t[name + ".bias"]

    def encode(self, tokens):
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        t = self.t
        x = t["token_embd.weight"][np.array(tokens)] + t["token_types.weight"][0] + t["position_embd.weight"][:n]
        x = self.ln(x, "token_embd_norm")
        for i in range(self.n_layer):
            p = "blk.%d." % i
            q = self.lin(x, p + "attn_q").reshape(n, H, d).transpose(1, 0, 2)
            k = self.lin(x, p + "attn_k").reshape(n, Hkv, d).transpose(1, 0, 2)
            v = self.lin(x, p + "attn_v").reshape(n, Hkv, d).transpose(1, 0, 2)
            k = np.repeat(k, H // Hkv, axis=0)
            v = np.repeat(v, H // Hkv, axis=0)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, H * d)
            x = self.ln(x + self.lin(a, p + "attn_output"), p + "attn_output_norm")
            u = self.lin(x, p + "ffn_up")
            u = 0.5 * u * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (u + 0.044715 * u ** 3)))
            x = self.ln(x + self.lin(u, p + "ffn_down"), p + "layer_output_norm")
        return x


def main(argv):
    normalize = "--normalize" in argv
    pooling = None
    if "--pooling" in argv:
        pooling = {"none": 0, "mean": 1, "cls": 2, "last": 3}[argv[argv.index("--pooling") + 1]]
    if argv[1] != "embed":
        sys.exit("usage: ref_bert.py embed MODEL TOKENS OUT [--pooling P] [--normalize]")
    m = Bert(argv[2])
    x = m.encode([int(s) for s in argv[3].split(",")])
    pooling = m.pooling if pooling is None else pooling
    if pooling == 1:
        x = x.mean(axis=0, keepdims=True)
    elif pooling == 2:
        x = x[:1]
    elif pooling == 3:
        x = x[-1:]
    if normalize:
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    x.astype("<f4").tofile(argv[4])


if __name__ == "__main__":
    main(sys.argv)
