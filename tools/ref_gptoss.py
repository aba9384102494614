#!/usr/bin/python3
"""ref_gptoss.py - an independent numpy implementation of the gpt-oss forward
pass (OpenAI gpt-oss-20b / 120b as llama.cpp's converter writes them).

It reads the GGUF file itself (ref_common's reader and quant_ref's
decoders, MXFP4 included) and computes logits in float64 with the textbook
formulation: the full causal attention matrix with the window as a mask
and the sink as one more softmax column (ref_common.attention), RoPE as a
multiplication by complex numbers, every expert on every token under a
routing mask (ref_moe.ffn), no KV cache. The C runtime (src/model/gptoss.c
over moe_dec.c, attn.c, moe.c) streams keys through a cache with an online
softmax and adds the sink in its final division, and computes only the
chosen experts; the two share only the definition.

  ref_gptoss.py logits|greedy MODEL.gguf 1,2,3 ... [--kv f16]  (ref_common.cli)

The definition:
  x = token_embd[tokens]
  per block l:
    q = Wq n1(x) + bq, k = Wk n1(x) + bk, v = Wv n1(x) + bv, NeoX RoPE on q, k
    scores[h][i][j] = q_i . k_j / sqrt(head_dim) for visible j: j <= i, and on
      a sliding layer (l % pattern < pattern - 1, pattern 2: the even layers)
      i - j < gpt-oss.attention.sliding_window
    weights = softmax over [scores[h][i][:], attn_sinks[h]], the sink column
      then dropped (it has no value)
    h = x + Wo (weights v) + bo
    x = h + ref_moe.ffn(n2(h))  (n2 = post_attention_norm; router bias, top-k
      of the logits then softmax of those k, expert biases, clamped SwiGLU)
  logits = output n(x), output = token_embd when the file has no output.weight
RoPE: NeoX halves with the file's scaling (YaRN in the released files:
factor 32 over an original 4096 positions, ref_common.rope_scaling), the
same on sliding and global layers.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Decoder, attention, causal, cli, rope  # noqa: E402
import ref_moe  # noqa: E402


class GptOss(Decoder):
    def __init__(self, path, kv_f16=False):
        super().__init__(path, ("gpt-oss",), kv_f16)
        g = self.g
        self.window = self.key("attention.sliding_window")
        self.pattern = self.key("attention.sliding_window_pattern", 2)
        names = ["attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_q.bias",
                 "attn_k.bias", "attn_v.bias", "attn_output.weight", "attn_output.bias", "attn_sinks.weight",
                 "post_attention_norm.weight"]
        self.layers = [{k: g.tensor("blk.%d.%s" % (i, k)) for k in names} for i in range(self.n_layer)]
        for i, L in enumerate(self.layers):
            L["moe"] = ref_moe.load(g, self.arch, i)

    def forward(self, tokens):
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        x = self.embd[np.array(tokens)]
        for l, L in enumerate(self.layers):
            visible = causal(n, self.window if l % self.pattern < self.pattern - 1 else 0)
            h = self.norm(x, L["attn_norm.weight"])
            q = (h @ L["attn_q.weight"].T + L["attn_q.bias"]).reshape(n, H, d)
            k = (h @ L["attn_k.weight"].T + L["attn_k.bias"]).reshape(n, Hkv, d)
            v = (h @ L["attn_v.weight"].T + L["attn_v.bias"]).reshape(n, Hkv, d)
            kw = dict(mscale=self.mscale, yarn=self.yarn)
            q = rope(q, self.n_rot, self.base, self.freq_scale, **kw)
            k = rope(k, self.n_rot, self.base, self.freq_scale, **kw)
            a = attention(q, k, v, 1.0 / np.sqrt(d), visible, kv_f16=self.kv_f16, sinks=L["attn_sinks.weight"])
            x = x + a @ L["attn_output.weight"].T + L["attn_output.bias"]
            x = x + ref_moe.ffn(self.norm(x, L["post_attention_norm.weight"]), L["moe"])
        return self.norm(x, self.out_norm) @ self.out.T


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: GptOss(path, o.get("--kv") == "f16"), "ref_gptoss.py logits|greedy ...")
