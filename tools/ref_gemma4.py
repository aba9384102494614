#!/usr/bin/python3
"""ref_gemma4.py - an independent numpy implementation of the gemma4 (Gemma 4
text) forward pass.

It reads the GGUF file itself (ref_common.Gguf) and computes logits in
float64 token by token: each new token's q, k and v are computed from its
own row, keys and values are appended to per-layer lists (the shared-KV
layers read their source layer's lists), and the token attends over the
visible positions with a plain softmax. The C runtime (src/model/gemma4.c)
processes whole steps, pads the narrower heads into one cache width and
streams the cache in tiles (src/model/attn.c), so the two share only the
model's definition.

  ref_gemma4.py logits MODEL.gguf 1,2,3 OUT.f32 [--kv f16]
  ref_gemma4.py greedy MODEL.gguf 1,2,3 N OUT.txt [--kv f16]

The definition (llama.cpp's reading of GGUF gemma4 files):
  kinds: attention.sliding_window_pattern, one bool per layer (true =
    sliding, window attention.sliding_window: key j visible to query i when
    i - j < window)
  head width d_l: attention.key_length_swa on sliding layers,
    attention.key_length on full ones; sliding RoPE: rope.freq_base_swa
    over rope.dimension_count_swa (default d_l), no divisors; full RoPE:
    rope.freq_base over rope.dimension_count with rope_freqs.weight divisors
  x0 = token_embd[t] * sqrt(n_embd)
  per-layer inputs (P = embedding_length_per_layer_input > 0):
    pl[l] = (n(per_layer_model_proj x0 / sqrt(n_embd))[l] with
             per_layer_proj_norm + per_layer_token_embd[t][l] * sqrt(P)) / sqrt(2)
  per block l:
    h = n(x, attn_norm)
    q = rope(n_head(Wq h, attn_q_norm)); when l < n_kv = n_layer -
      shared_kv_layers: k = rope(n_head(Wk h, attn_k_norm)), v =
      n_head(Wv h) without weight (Wv = Wk when attn_v is absent), stored;
      else the layer reads layer n_kv - 2's (sliding) or n_kv - 1's (full)
    a = softmax(q . k) v   (scale 1)
    x = x + n(Wo a, post_attention_norm)
    x = x + n(Wdown (gelu_tanh(Wgate n(x, ffn_norm)) * Wup n(x, ffn_norm)), post_ffw_norm)
    P > 0: x = x + n(proj (gelu_tanh(inp_gate x) * pl[l]), post_norm)
    x = x * layer_output_scale (when present)
  logits = output n(x, output_norm), then c tanh(logits / c) with c =
    final_logit_softcapping when set
  n(v, w) = v / sqrt(mean(v^2) + eps) * w
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Decoder, cli, gelu_tanh, rms_norm, slides  # noqa: E402


def rotate(x, pos, n_rot, base, factors=None):
    """x [heads][d] of one token at position pos, NeoX halves of the first
    n_rot dims turned by pos * base^(-2i/n_rot) / factors[i]."""
    half = n_rot // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_rot)
    if factors is not None:
        inv = inv / factors
    th = pos * inv
    c, s = np.cos(th), np.sin(th)
    y = x.copy()
    a, b = x[:, :half], x[:, half:n_rot]
    y[:, :half] = a * c - b * s
    y[:, half:n_rot] = a * s + b * c
    return y


class Gemma4(Decoder):
    def __init__(self, path, kv_f16=False):
        super().__init__(path, ("gemma4",), kv_f16, scale_linear=False)
        g, key = self.g, self.key
        self.window = key("attention.sliding_window")
        pattern = key("attention.sliding_window_pattern")
        self.swa = [slides(pattern, l) for l in range(self.n_layer)]
        self.d_full = self.head_dim
        self.d_swa = key("attention.key_length_swa")
        self.rot_swa = key("rope.dimension_count_swa", self.d_swa)
        self.base_swa = key("rope.freq_base_swa", 10000.0)
        self.factors = g.tensor("rope_freqs.weight") if g.has("rope_freqs.weight") else None
        self.final_cap = key("final_logit_softcapping", 0.0)
        shared = key("attention.shared_kv_layers", 0)
        self.n_kv = self.n_layer - shared
        self.P = key("embedding_length_per_layer_input", 0)
        if self.P:
            self.pl_embd = g.tensor("per_layer_token_embd.weight")
            self.pl_proj = g.tensor("per_layer_model_proj.weight")
            self.pl_norm = g.tensor("per_layer_proj_norm.weight")
        self.layers = []
        for i in range(self.n_layer):
            L = {}
            for k in ("attn_norm", "attn_q", "attn_q_norm", "attn_output", "post_attention_norm", "ffn_norm",
                      "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm", "attn_k", "attn_v", "attn_k_norm",
                      "inp_gate", "proj", "post_norm", "layer_output_scale"):
                name = "blk.%d.%s.weight" % (i, k)
                if g.has(name):
                    L[k] = g.tensor(name)
            self.layers.append(L)

    def source(self, l):
        """The layer whose keys and values layer l reads."""
        if l < self.n_kv:
            return l
        return self.n_kv - 2 if self.swa[l] else self.n_kv - 1

    def forward(self, tokens):
        H, Hkv = self.n_head, self.n_head_kv
        cache = [([], []) for _ in range(self.n_layer)]  # per layer: keys, values [pos][Hkv][d]
        out = []
        for pos, t in enumerate(tokens):
            x = self.embd[t] * np.sqrt(np.float64(self.n_embd))
            if self.P:
                pr = (self.pl_proj @ x) / np.sqrt(np.float64(self.n_embd))
                pr = rms_norm(pr.reshape(self.n_layer, self.P), self.pl_norm, self.eps)
                pl = (pr + self.pl_embd[t].reshape(self.n_layer, self.P) * np.sqrt(np.float64(self.P))) / np.sqrt(2.0)
            for l, L in enumerate(self.layers):
                swa = self.swa[l]
                d = self.d_swa if swa else self.d_full
                if swa:
                    rot = lambda v: rotate(v, pos, self.rot_swa, self.base_swa)  # noqa: E731
                else:
                    rot = lambda v: rotate(v, pos, self.n_rot, self.base, self.factors)  # noqa: E731
                h = self.norm(x, L["attn_norm"])
                q = rot(self.norm((L["attn_q"] @ h).reshape(H, d), L["attn_q_norm"]))
                if l < self.n_kv:
                    kp = (L["attn_k"] @ h).reshape(Hkv, d)
                    vp = (L["attn_v"] @ h).reshape(Hkv, d) if "attn_v" in L else kp
                    k = rot(self.norm(kp, L["attn_k_norm"]))
                    v = vp / np.sqrt((vp * vp).mean(-1, keepdims=True) + self.eps)  # no weight
                    if self.kv_f16:
                        k = k.astype(np.float16).astype(np.float64)
                        v = v.astype(np.float16).astype(np.float64)
                    cache[l][0].append(k)
                    cache[l][1].append(v)
                ks, vs = cache[self.source(l)]
                lo = max(0, pos - self.window + 1) if swa else 0
                K = np.stack(ks[lo:pos + 1])  # [n][Hkv][d]
                V = np.stack(vs[lo:pos + 1])
                a = np.empty((H, d))
                for hh in range(H):
                    g_ = hh // (H // Hkv)
                    s = K[:, g_, :] @ q[hh]
                    p = np.exp(s - s.max())
                    a[hh] = (p / p.sum()) @ V[:, g_, :]
                x = x + self.norm(L["attn_output"] @ a.reshape(-1), L["post_attention_norm"])
                h = self.norm(x, L["ffn_norm"])
                f = L["ffn_down"] @ (gelu_tanh(L["ffn_gate"] @ h) * (L["ffn_up"] @ h))
                x = x + self.norm(f, L["post_ffw_norm"])
                if self.P:
                    e = L["proj"] @ (gelu_tanh(L["inp_gate"] @ x) * pl[l])
                    x = x + self.norm(e, L["post_norm"])
                if "layer_output_scale" in L:
                    x = x * L["layer_output_scale"][0]
            lg = self.out @ self.norm(x, self.out_norm)
            if self.final_cap:
                lg = self.final_cap * np.tanh(lg / self.final_cap)
            out.append(lg)
        return np.array(out)


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: Gemma4(path, o.get("--kv") == "f16"), "ref_gemma4.py logits|greedy ...")
