#!/usr/bin/python3
"""ref_qwen.py - an independent numpy implementation of the qwen2, qwen3 and
qwen3moe forward passes.

It reads the GGUF file itself (ref_common.Gguf: gguf_ref's byte reader and
quant_ref's decoders, independent of the C code) and computes logits in
float64 with the textbook formulation: the full causal attention matrix,
RoPE as a multiplication by complex numbers, no KV cache. The C runtime
(src/model/qwen.c) streams keys through a cache with an online softmax and
rotates with cached cos/sin, so the two share only the model's definition.

  ref_qwen.py logits MODEL.gguf 1,2,3 OUT.f32 [--kv f16]
      logits of every token, raw little-endian f32 [n_tokens][n_vocab]
  ref_qwen.py greedy MODEL.gguf 1,2,3 N OUT.txt [--kv f16]
      the N greedily chosen tokens after the prompt, comma-separated
  ref_qwen.py embed MODEL.gguf 1,2,3 OUT.f32 [--pooling none|mean|cls|last] [--normalize] [--kv f16]
      the pooled output-normed hidden state n(x) (the embedding of
      Qwen3-Embedding files), raw f32 [n_embd] ([n][n_embd] for none);
      pooling defaults to ARCH.pooling_type, last when absent

--kv f16 rounds keys and values to float16 as they enter the cache (the C
runtime's default F16 cache).

The definition (ggml/llama.cpp conventions for GGUF qwen2/qwen3 files):
  x = token_embd[tokens]
  per block: q = Wq n1(x) + bq, k = Wk n1(x) + bk, v = Wv n1(x) + bv  (qwen2)
             q = Wq n1(x), k = Wk n1(x), v = Wv n1(x)                 (qwen3)
             qwen3: every head of q and k: rms(head) * attn_{q,k}_norm
             h = x + Wo attn(rope(q), rope(k), v)
             x = h + Wdown (silu(Wgate n2(h)) * Wup n2(h))
             qwen3moe: qwen3's attention, x = h + ref_moe.ffn(n2(h))
  logits = output n(x), output = token_embd when the file has no output.weight
  n(v) = v / sqrt(mean(v^2) + eps) * weight
  rope "neox": in each head, dims i and i + n_rot/2 form the complex number
  x[i] + j x[i + n_rot/2], turned by pos * freq_scale * base^(-2i/n_rot)
  attention: head h reads kv head h // (n_head / n_head_kv), scores / sqrt(head_dim)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Decoder, attention, causal, cli, rope, swiglu  # noqa: E402
import ref_moe  # noqa: E402


class Qwen(Decoder):
    def __init__(self, path, kv_f16=False):
        super().__init__(path, ("qwen2", "qwen3", "qwen3moe"), kv_f16)
        g, arch = self.g, self.arch
        self.pooling = self.key("pooling_type", 3)
        names = ["attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                 "ffn_norm.weight"]
        if arch != "qwen3moe":
            names += ["ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]
        if arch == "qwen2":
            names += ["attn_q.bias", "attn_k.bias", "attn_v.bias"]
        else:
            names += ["attn_q_norm.weight", "attn_k_norm.weight"]
        self.layers = [{k: g.tensor("blk.%d.%s" % (i, k)) for k in names} for i in range(self.n_layer)]
        if arch == "qwen3moe":
            for i, L in enumerate(self.layers):
                L["moe"] = ref_moe.load(g, arch, i)

    def forward(self, tokens):
        return self.hidden(tokens) @ self.out.T

    def hidden(self, tokens):
        """The output-normed hidden states [n_tokens][n_embd]."""
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        x = self.embd[np.array(tokens)]
        visible = causal(n)
        for L in self.layers:
            h = self.norm(x, L["attn_norm.weight"])
            q = h @ L["attn_q.weight"].T
            k = h @ L["attn_k.weight"].T
            v = h @ L["attn_v.weight"].T
            if self.arch == "qwen2":
                q = q + L["attn_q.bias"]
                k = k + L["attn_k.bias"]
                v = v + L["attn_v.bias"]
            q = q.reshape(n, H, d)
            k = k.reshape(n, Hkv, d)
            v = v.reshape(n, Hkv, d)
            if self.arch != "qwen2":
                q = self.norm(q, L["attn_q_norm.weight"])
                k = self.norm(k, L["attn_k_norm.weight"])
            q = rope(q, self.n_rot, self.base, self.freq_scale, mscale=self.mscale, yarn=self.yarn)
            k = rope(k, self.n_rot, self.base, self.freq_scale, mscale=self.mscale, yarn=self.yarn)
            x = x + attention(q, k, v, 1.0 / np.sqrt(d), visible, kv_f16=self.kv_f16) @ L["attn_output.weight"].T
            h = self.norm(x, L["ffn_norm.weight"])
            if "moe" in L:
                x = x + ref_moe.ffn(h, L["moe"])
                continue
            x = x + swiglu(h, L["ffn_gate.weight"], L["ffn_up.weight"], L["ffn_down.weight"])
        return self.norm(x, self.out_norm)


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: Qwen(path, o.get("--kv") == "f16"), "ref_qwen.py logits|greedy|embed ...")
