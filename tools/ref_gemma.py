#!/usr/bin/python3
"""ref_gemma.py - an independent numpy implementation of the gemma2 and
gemma3 forward passes, and of the gemma-embedding (EmbeddingGemma) encoder.

It reads the GGUF file itself (ref_common.Gguf: gguf_ref's byte reader and
quant_ref's decoders, independent of the C code) and computes logits in
float64 with the textbook formulation: the full attention matrix with a
causal and sliding-window mask, RoPE as a multiplication by complex
numbers, no KV cache. The C runtime (src/model/gemma.c, attention in
src/model/attn.c) streams keys through a cache in tiles with an online
softmax, skips tiles before a window and masks inside one, so the two share
only the model's definition.

  ref_gemma.py logits MODEL.gguf 1,2,3 OUT.f32 [--kv f16]
      logits of every token, raw little-endian f32 [n_tokens][n_vocab]
  ref_gemma.py greedy MODEL.gguf 1,2,3 N OUT.txt [--kv f16]
      the N greedily chosen tokens after the prompt, comma-separated

--kv f16 rounds keys and values to float16 as they enter the cache (the C
runtime's default F16 cache).

The definition (llama.cpp's reading of GGUF gemma2/gemma3 files):
  x = token_embd[tokens] * sqrt(n_embd)
  per block l:
    q, k, v = Wq n(x), Wk n(x), Wv n(x)
    gemma3: every head of q and k: rms(head) * attn_{q,k}_norm
    rope "neox" with base_l: sliding layers rope.freq_base_swa (gemma3:
      10000 when absent, no scaling; gemma2: the file's base), global
      layers rope.freq_base with the file's linear scaling
    scores = (q * scale) . k; gemma2: c tanh(scores / c), c =
      attn_logit_softcapping (50 when absent)
    mask: key position j visible to query i when j <= i, and on a sliding
      layer also i - j < sliding_window; sliding layers: l % P < P - 1,
      P = 2 (gemma2) or 6 (gemma3)
    scale = 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) with 46 gemma2 or 62
      gemma3 layers)
    h = x + n_post_attn(Wo softmax(scores) v)
    x = h + n_post_ffw(Wdown (gelu_tanh(Wgate n2(h)) * Wup n2(h)))
  logits = output n(x) (output = token_embd when output.weight is absent),
  then c tanh(logits / c) with c = final_logit_softcapping (gemma2: 30 when
  absent; gemma3: none when absent)
  n(v) = v / sqrt(mean(v^2) + eps) * weight (the file's weights already
  hold Gemma's 1 + w)

  ref_gemma.py embed MODEL.gguf 1,2,3 OUT.f32 [--pooling P] [--normalize]
      gemma-embedding: gemma3's block (pattern sliding_window_pattern, 6
      when absent) without the causal mask: key j visible to query i on a
      global layer always, on a sliding layer when |i - j| <= window // 2;
      scale 1/sqrt(head_dim); the output-normed rows pooled (pooling_type,
      mean when absent), then v @ dense_2.T @ dense_3.T when the file has
      the dense projections, then normalized
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Decoder, attention, causal, cli, gelu_tanh, rope, slides  # noqa: E402


class Gemma(Decoder):
    def __init__(self, path, kv_f16=False):
        super().__init__(path, ("gemma2", "gemma3", "gemma-embedding"), kv_f16, scale_linear=False)
        g, key = self.g, self.key
        self.encoder = self.arch == "gemma-embedding"
        g3 = self.arch != "gemma2"
        ctx = key("context_length")
        self.window = key("attention.sliding_window", None if g3 else min(4096, ctx))
        self.pattern = key("attention.sliding_window_pattern", 6 if g3 else 2)
        if g3:
            self.base_swa, self.scale_swa = key("rope.freq_base_swa", 10000.0), 1.0
        else:
            self.base_swa, self.scale_swa = key("rope.freq_base_swa", self.base), self.freq_scale
        self.attn_cap = 0.0 if g3 else key("attn_logit_softcapping", 50.0)
        self.final_cap = key("final_logit_softcapping", 0.0 if g3 else 30.0)
        big = not self.encoder and self.n_layer == (62 if g3 else 46)
        self.q_scale = 1.0 / np.sqrt(self.n_embd // self.n_head if big else self.head_dim)
        names = ["attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                 "post_attention_norm.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                 "ffn_down.weight", "post_ffw_norm.weight"]
        if g3:
            names += ["attn_q_norm.weight", "attn_k_norm.weight"]
        self.layers = [{k: g.tensor("blk.%d.%s" % (i, k)) for k in names} for i in range(self.n_layer)]
        if self.encoder:
            self.pooling = key("pooling_type", 1)
            self.dense = [g.tensor(t) for t in ("dense_2.weight", "dense_3.weight") if g.has(t)]

    def sliding(self, l):
        return self.window > 0 and slides(self.pattern, l)

    def blocks(self, tokens):
        """The residual stream after the last block."""
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        x = self.embd[np.array(tokens)] * np.sqrt(np.float64(self.n_embd))
        if self.encoder:
            i, j = np.arange(n)[:, None], np.arange(n)[None, :]
            full, windowed = None, np.abs(i - j) <= self.window // 2
        else:
            full, windowed = causal(n), causal(n, self.window)
        for l, L in enumerate(self.layers):
            slide = self.sliding(l)
            h = self.norm(x, L["attn_norm.weight"])
            q = (h @ L["attn_q.weight"].T).reshape(n, H, d)
            k = (h @ L["attn_k.weight"].T).reshape(n, Hkv, d)
            v = (h @ L["attn_v.weight"].T).reshape(n, Hkv, d)
            if self.arch != "gemma2":
                q = self.norm(q, L["attn_q_norm.weight"])
                k = self.norm(k, L["attn_k_norm.weight"])
            base, fs = (self.base_swa, self.scale_swa) if slide else (self.base, self.freq_scale)
            q = rope(q, self.n_rot, base, fs)
            k = rope(k, self.n_rot, base, fs)
            a = attention(q, k, v, self.q_scale, windowed if slide else full, self.attn_cap, self.kv_f16)
            x = x + self.norm(a @ L["attn_output.weight"].T, L["post_attention_norm.weight"])
            h = self.norm(x, L["ffn_norm.weight"])
            f = (gelu_tanh(h @ L["ffn_gate.weight"].T) * (h @ L["ffn_up.weight"].T)) @ L["ffn_down.weight"].T
            x = x + self.norm(f, L["post_ffw_norm.weight"])
        return x

    def forward(self, tokens):
        assert not self.encoder, "gemma-embedding has no logits"
        logits = self.norm(self.blocks(tokens), self.out_norm) @ self.out.T
        if self.final_cap:
            logits = self.final_cap * np.tanh(logits / self.final_cap)
        return logits

    def hidden(self, tokens):
        """gemma-embedding: the output-normed rows [n][n_embd]."""
        return self.norm(self.blocks(tokens), self.out_norm)

    def project(self, v):
        """gemma-embedding: the pooled vectors through dense_2 then dense_3."""
        for w in self.dense:
            v = v @ w.T
        return v


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: Gemma(path, o.get("--kv") == "f16"), "ref_gemma.py logits|greedy|embed ...")
