#!/usr/bin/python3
"""ref_llamalike.py - an independent numpy implementation of the phi3,
granite, smollm3 and mistral3 forward passes.

It reads the GGUF file itself (ref_common.Gguf: gguf_ref's byte reader and
quant_ref's decoders, independent of the C code) and computes logits in
float64 with the textbook formulation: the fused tensors split by numpy
slicing, the full attention matrix with a causal (and, for phi3, sliding)
mask, RoPE as a multiplication by complex numbers, no KV cache. The C
runtime (src/model/llamalike.c) binds row ranges of the fused tensors,
streams keys through a cache in tiles with an online softmax and rotates
with a cos/sin cache, so the two share only the model's definition.

  ref_llamalike.py logits MODEL.gguf 1,2,3 OUT.f32 [--kv f16] [--ctx N]
      logits of every token, raw little-endian f32 [n_tokens][n_vocab]
  ref_llamalike.py greedy MODEL.gguf 1,2,3 N OUT.txt [--kv f16] [--ctx N]
      the N greedily chosen tokens after the prompt, comma-separated

--kv f16 rounds keys and values to float16 as they enter the cache (the C
runtime's default F16 cache). --ctx N is the context the C side was given
(default: the trained context_length): phi3's LongRoPE takes the long
factors when N > rope.scaling.original_context_length.

The definition (llama.cpp's reading of the GGUF files):
  x = token_embd[tokens] * e               e = granite.embedding_scale or 1
  per block l:
    q, k, v = Wq n(x), Wk n(x), Wv n(x)    phi3: rows [0, Q), [Q, Q+KV),
                                           [Q+KV, Q+2KV) of attn_qkv
    unless layer l is NoPE (smollm3: (l + 1) % 4 == 0; granite with
    rope.scaling.finetuned false: every layer), rotate the first n_rot dims
    of every head: pairs (2i, 2i+1) (granite, smollm3) or (i, i + n_rot/2)
    (phi3) by theta_i = pos * base^(-2i/n_rot) / f_i, times m, with f the
    phi3 factors (long when ctx > original_context_length, else short; 1
    without them) and m = rope.scaling.attn_factor (1 when absent); the
    file's RoPE scaling (linear, YaRN: ref_common.rope_scaling) on top;
    mistral3 with yarn_log_multiplier M != 0 (and a YaRN ramp): m =
    attn_factor * g(s, 1) / g(s, M), g(s, k) = 1 + 0.1 k ln s (s > 1)
    mistral3 with attention.temperature_scale b: q of position p times
    1 + b ln(floor(p / L) + 1) after the rotation, L = original context
    scores = q . k * s, s = granite.attention.scale or 1/sqrt(head_dim)
    mask: j <= i, and phi3 with 0 < sliding_window W < context_length
      also i - j < W, on every layer
    h = x + r * Wo softmax(scores) v       r = granite.residual_scale or 1
    x = h + r * Wdown (silu(g) * u)        g, u = Wgate n2(h), Wup n2(h);
                                           phi3: rows [0, F), [F, 2F) of
                                           ffn_up n2(h)
  logits = output n(x) / L                 L = granite.logit_scale or 1;
                                           output = token_embd when absent
  n(v) = v / sqrt(mean(v^2) + eps) * weight
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Decoder, attention, causal, cli, rope, swiglu  # noqa: E402


class LlamaLike(Decoder):
    def __init__(self, path, kv_f16=False, ctx=None):
        super().__init__(path, ("phi3", "granite", "smollm3", "mistral3"), kv_f16)
        g, arch, key = self.g, self.arch, self.key
        self.n_ff = key("feed_forward_length")
        n_ctx_train = key("context_length")
        ctx = ctx or n_ctx_train
        self.neox = arch == "phi3"
        self.factors = np.ones(self.n_rot // 2)
        self.window = 0
        self.embd_scale = self.resid_scale = self.logit_scale = 1.0
        self.q_scale = 1.0 / np.sqrt(self.head_dim)
        self.nope = lambda l: False
        self.temp = 0.0
        if arch == "phi3":
            w = key("attention.sliding_window", 0)
            self.window = w if 0 < w < n_ctx_train else 0
            if g.has("rope_factors_short.weight"):
                orig = key("rope.scaling.original_context_length", n_ctx_train)
                name = "rope_factors_long.weight" if ctx > orig else "rope_factors_short.weight"
                self.factors = g.tensor(name)
        elif arch == "granite":
            self.embd_scale = key("embedding_scale", 0.0) or 1.0
            self.resid_scale = key("residual_scale", 0.0) or 1.0
            self.q_scale = key("attention.scale", 0.0) or self.q_scale
            self.logit_scale = key("logit_scale")
            if not key("rope.scaling.finetuned", True):
                self.nope = lambda l: True
        elif arch == "smollm3":
            self.nope = lambda l: (l + 1) % 4 == 0
        else:  # mistral3
            mul = key("rope.scaling.yarn_log_multiplier", 0.0)
            if mul and self.yarn is not None and self.yarn[0] != 0.0:
                s = 1.0 / self.freq_scale

                def g_(k):
                    return 1.0 + 0.1 * k * np.log(s) if s > 1.0 else 1.0
                self.mscale = key("rope.scaling.attn_factor", 1.0) * g_(1.0) / g_(mul)
            self.temp = key("attention.temperature_scale", 0.0)
            self.temp_len = key("rope.scaling.original_context_length", n_ctx_train)
        Q, KV, F = self.n_head * self.head_dim, self.n_head_kv * self.head_dim, self.n_ff
        self.layers = []
        for i in range(self.n_layer):
            t = lambda n: g.tensor("blk.%d.%s" % (i, n))  # noqa: E731
            L = {k: t(k) for k in ("attn_norm.weight", "attn_output.weight", "ffn_norm.weight", "ffn_down.weight")}
            if g.has("blk.%d.attn_qkv.weight" % i):
                qkv = t("attn_qkv.weight")
                L["q"], L["k"], L["v"] = qkv[:Q], qkv[Q:Q + KV], qkv[Q + KV:Q + 2 * KV]
            else:
                L["q"], L["k"], L["v"] = t("attn_q.weight"), t("attn_k.weight"), t("attn_v.weight")
            if arch == "phi3":
                up = t("ffn_up.weight")
                L["gate"], L["up"] = up[:F], up[F:2 * F]
            else:
                L["gate"], L["up"] = t("ffn_gate.weight"), t("ffn_up.weight")
            self.layers.append(L)

    def forward(self, tokens):
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        x = self.embd[np.array(tokens)] * self.embd_scale
        visible = causal(n, self.window)
        for l, L in enumerate(self.layers):
            h = self.norm(x, L["attn_norm.weight"])
            q = (h @ L["q"].T).reshape(n, H, d)
            k = (h @ L["k"].T).reshape(n, Hkv, d)
            v = (h @ L["v"].T).reshape(n, Hkv, d)
            if not self.nope(l):
                q = self.rope(q)
                k = self.rope(k)
            if self.temp:
                pos = np.arange(n, dtype=np.float64)
                q = q * (1.0 + self.temp * np.log(np.floor(pos / self.temp_len) + 1.0))[:, None, None]
            a = attention(q, k, v, self.q_scale, visible, kv_f16=self.kv_f16)
            x = x + self.resid_scale * (a @ L["attn_output.weight"].T)
            h = self.norm(x, L["ffn_norm.weight"])
            f = swiglu(h, L["gate"], L["up"], L["ffn_down.weight"])
            x = x + self.resid_scale * f
        return (self.norm(x, self.out_norm) @ self.out.T) / self.logit_scale

    def rope(self, x):
        """x [n_tok][n_heads][head_dim]: NeoX halves (phi3) or adjacent pairs,
        with the phi3 factors, the file's scaling and the magnitude."""
        return rope(x, self.n_rot, self.base, self.freq_scale, neox=self.neox, factors=self.factors,
                    mscale=self.mscale, yarn=self.yarn)


def load(path, opts):
    return LlamaLike(path, opts.get("--kv") == "f16", int(opts["--ctx"]) if "--ctx" in opts else None)


if __name__ == "__main__":
    cli(sys.argv, load, "ref_llamalike.py logits|greedy ...", ("--kv", "--ctx"))
