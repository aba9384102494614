#!/usr/bin/python3
"""ref_dense.py - an independent numpy implementation of the olmo2, exaone4
and glm4 forward passes.

It reads the GGUF file itself (ref_common.Gguf: gguf_ref's byte reader and
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
  exaone4: olmo2's block with q/k norms per head ([head_dim]); with 64
      layers (the 32B) layer l is sliding (key j visible to query i when
      i - j < sliding_window, 4096 when absent) unless l % P == P - 1 (P =
      sliding_window_pattern, 4 when absent), and only sliding layers apply
      RoPE; other depths: every layer global with RoPE; rope_freqs.weight
      divides the frequencies when present
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
from ref_common import Decoder, attention, causal, cli, rope, silu, slides  # noqa: E402


class Dense(Decoder):
    def __init__(self, path, kv_f16=False):
        super().__init__(path, ("olmo2", "glm4", "exaone4"), kv_f16)
        g, arch = self.g, self.arch
        self.n_ff = self.key("feed_forward_length")
        self.window, self.pattern = 0, 0
        if arch == "exaone4" and self.n_layer == 64:
            self.window = self.key("attention.sliding_window", 4096)
            self.pattern = self.key("attention.sliding_window_pattern", 4)
        self.factors = g.tensor("rope_freqs.weight") if g.has("rope_freqs.weight") else None
        self.layers = []
        Q, KV = self.n_head * self.head_dim, self.n_head_kv * self.head_dim
        for i in range(self.n_layer):
            def t(name, i=i):
                return g.tensor("blk.%d.%s" % (i, name))

            def has(name, i=i):
                return g.has("blk.%d.%s" % (i, name))
            L = {k: t(k) for k in ("attn_output.weight", "post_attention_norm.weight", "ffn_up.weight",
                                   "ffn_down.weight", "post_ffw_norm.weight")}
            if arch != "glm4":
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

    def attention(self, q, k, v, l):
        """q [n][H*d], k, v [n][Hkv*d] -> [n][H*d], causal; olmo2 and
        exaone4 rotate NeoX halves, glm4 adjacent pairs; exaone4's layer l
        may slide (and only then rotate)."""
        n = q.shape[0]
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        q, k = q.reshape(n, H, d), k.reshape(n, Hkv, d)
        sliding = self.window > 0 and slides(self.pattern, l)
        if self.window == 0 or sliding:
            kw = dict(neox=self.arch != "glm4", mscale=self.mscale, yarn=self.yarn, factors=self.factors)
            q = rope(q, self.n_rot, self.base, self.freq_scale, **kw)
            k = rope(k, self.n_rot, self.base, self.freq_scale, **kw)
        mask = causal(n, self.window) if sliding else causal(n)
        return attention(q, k, v.reshape(n, Hkv, d), 1.0 / np.sqrt(d), mask, kv_f16=self.kv_f16)

    def forward(self, tokens):
        x = self.embd[np.array(tokens)]
        n, F = len(tokens), self.n_ff
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        for l, L in enumerate(self.layers):
            if self.arch == "olmo2":
                q = self.norm(x @ L["attn_q.weight"].T, L["attn_q_norm.weight"])
                k = self.norm(x @ L["attn_k.weight"].T, L["attn_k_norm.weight"])
                v = x @ L["attn_v.weight"].T
            elif self.arch == "exaone4":  # per head
                q = self.norm((x @ L["attn_q.weight"].T).reshape(n, H, d), L["attn_q_norm.weight"]).reshape(n, -1)
                k = self.norm((x @ L["attn_k.weight"].T).reshape(n, Hkv, d), L["attn_k_norm.weight"]).reshape(n, -1)
                v = x @ L["attn_v.weight"].T
            else:
                a = self.norm(x, L["attn_norm.weight"])
                q = a @ L["attn_q.weight"].T + L["attn_q.bias"]
                k = a @ L["attn_k.weight"].T + L["attn_k.bias"]
                v = a @ L["attn_v.weight"].T + L["attn_v.bias"]
            att = self.attention(q, k, v, l) @ L["attn_output.weight"].T
            h = x + self.norm(att, L["post_attention_norm.weight"])
            if self.arch != "glm4":
                gt, up = h @ L["ffn_gate.weight"].T, h @ L["ffn_up.weight"].T
            else:
                gu = self.norm(h, L["ffn_norm.weight"]) @ L["ffn_up.weight"].T
                gt, up = gu[:, :F], gu[:, F:]
            x = h + self.norm((silu(gt) * up) @ L["ffn_down.weight"].T, L["post_ffw_norm.weight"])
        return self.norm(x, self.out_norm) @ self.out.T


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: Dense(path, o.get("--kv") == "f16"), "ref_dense.py logits|greedy ...")
