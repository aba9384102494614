#!/usr/bin/python3
"""ref_llama.py - an independent numpy implementation of the llama forward pass.

It reads the GGUF file itself (ref_common.Gguf: gguf_ref's byte reader and
quant_ref's decoders, both independent of the C code) and computes
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
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Decoder, Gguf, attention, causal, cli, rope, swiglu  # noqa: E402,F401 (Gguf: still importable from here)
import ref_moe  # noqa: E402


class Llama(Decoder):
    def __init__(self, path, kv_f16=False):
        super().__init__(path, ("llama",), kv_f16)
        g, key = self.g, self.key
        self.n_ctx = key("context_length")
        self.freq_factors = g.tensor("rope_freqs.weight") if g.has("rope_freqs.weight") else None
        self.layers = []
        for i in range(self.n_layer):
            p = "blk.%d." % i
            moe = key("expert_count", 0) > 0  # Mixtral layout: the FFN is ref_moe's
            self.layers.append({k: g.tensor(p + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm") + (
                () if moe else ("ffn_gate", "ffn_up", "ffn_down"))})
            if moe:
                self.layers[-1]["moe"] = ref_moe.load(g, "llama", i)

    def rope(self, x):
        """x [n_tok][n_heads][head_dim]: adjacent pairs turned ("normal")."""
        return rope(x, self.n_rot, self.base, self.freq_scale, neox=False, factors=self.freq_factors, mscale=self.mscale,
                    yarn=self.yarn)

    def forward(self, tokens):
        """Logits [n_tokens][n_vocab] for tokens at positions 0..n-1."""
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        x = self.embd[np.array(tokens)]
        visible = causal(n)
        for L in self.layers:
            h = self.norm(x, L["attn_norm"])
            q = self.rope((h @ L["attn_q"].T).reshape(n, H, d))
            k = self.rope((h @ L["attn_k"].T).reshape(n, Hkv, d))
            v = (h @ L["attn_v"].T).reshape(n, Hkv, d)
            x = x + attention(q, k, v, 1.0 / np.sqrt(d), visible, kv_f16=self.kv_f16) @ L["attn_output"].T
            h = self.norm(x, L["ffn_norm"])
            if "moe" in L:
                x = x + ref_moe.ffn(h, L["moe"])
                continue
            x = x + swiglu(h, L["ffn_gate"], L["ffn_up"], L["ffn_down"])
        return self.norm(x, self.out_norm) @ self.out.T


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: Llama(path, o.get("--kv") == "f16"), "ref_llama.py logits|greedy ...")
