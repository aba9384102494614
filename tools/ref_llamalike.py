#!/usr/bin/python3
"""ref_llamalike.py - an independent numpy implementation of the phi3,
granite and smollm3 forward passes.

It reads the GGUF file itself (ref_llama.Gguf: gguf_ref's byte reader and
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
    without them) and m = phi3 rope.scaling.attn_factor (1 when absent)
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
from ref_llama import Gguf  # noqa: E402


class LlamaLike:
    def __init__(self, path, kv_f16=False, ctx=None):
        g = Gguf(path)
        arch = g.kv["general.architecture"]
        assert arch in ("phi3", "granite", "smollm3"), arch
        self.arch = arch

        def key(k, default=None):
            v = g.kv.get(arch + "." + k, default)
            assert v is not None, "missing %s.%s" % (arch, k)
            return v
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_ff = key("feed_forward_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = key("rope.dimension_count", self.head_dim)
        self.eps = key("attention.layer_norm_rms_epsilon", 1e-5)
        self.base = key("rope.freq_base", 10000.0)
        n_ctx_train = key("context_length")
        ctx = ctx or n_ctx_train
        self.neox = arch == "phi3"
        self.factors = np.ones(self.n_rot // 2)
        self.mscale = 1.0
        self.window = 0
        self.embd_scale = self.resid_scale = self.logit_scale = 1.0
        self.q_scale = 1.0 / np.sqrt(self.head_dim)
        self.nope = lambda l: False
        if arch == "phi3":
            w = key("attention.sliding_window", 0)
            self.window = w if 0 < w < n_ctx_train else 0
            if g.has("rope_factors_short.weight"):
                orig = key("rope.scaling.original_context_length", n_ctx_train)
                name = "rope_factors_long.weight" if ctx > orig else "rope_factors_short.weight"
                self.factors = g.tensor(name)
            self.mscale = key("rope.scaling.attn_factor", 1.0)
        elif arch == "granite":
            self.embd_scale = key("embedding_scale", 0.0) or 1.0
            self.resid_scale = key("residual_scale", 0.0) or 1.0
            self.q_scale = key("attention.scale", 0.0) or self.q_scale
            self.logit_scale = key("logit_scale")
            if not key("rope.scaling.finetuned", True):
                self.nope = lambda l: True
        else:
            self.nope = lambda l: (l + 1) % 4 == 0
        self.kv_f16 = kv_f16
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.out_norm = g.tensor("output_norm.weight")
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

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x):
        """x [n_tok][n_heads][head_dim]: the first n_rot dims as complex
        numbers (NeoX halves or adjacent pairs), turned and scaled."""
        n = x.shape[0]
        x = x.copy()
        half = self.n_rot // 2
        inv = self.base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot) / self.factors
        theta = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
        rot = (self.mscale * np.exp(1j * theta))[:, None, :]
        if self.neox:
            re, im = x[:, :, :half], x[:, :, half:self.n_rot]
        else:
            re, im = x[:, :, 0:self.n_rot:2], x[:, :, 1:self.n_rot:2]
        z = (re + 1j * im) * rot
        if self.neox:
            x[:, :, :half], x[:, :, half:self.n_rot] = z.real, z.imag
        else:
            x[:, :, 0:self.n_rot:2], x[:, :, 1:self.n_rot:2] = z.real, z.imag
        return x

    def forward(self, tokens):
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        rep = H // Hkv
        x = self.embd[np.array(tokens)] * self.embd_scale
        i = np.arange(n)[:, None]
        j = np.arange(n)[None, :]
        visible = j <= i
        if self.window:
            visible &= (i - j) < self.window
        for l, L in enumerate(self.layers):
            h = self.norm(x, L["attn_norm.weight"])
            q = (h @ L["q"].T).reshape(n, H, d)
            k = (h @ L["k"].T).reshape(n, Hkv, d)
            v = (h @ L["v"].T).reshape(n, Hkv, d)
            if not self.nope(l):
                q = self.rope(q)
                k = self.rope(k)
            if self.kv_f16:
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            q = q.transpose(1, 0, 2)
            k = np.repeat(k.transpose(1, 0, 2), rep, axis=0)
            v = np.repeat(v.transpose(1, 0, 2), rep, axis=0)
            s = (q @ k.transpose(0, 2, 1)) * self.q_scale
            s = np.where(visible[None], s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, H * d)
            x = x + self.resid_scale * (a @ L["attn_output.weight"].T)
            h = self.norm(x, L["ffn_norm.weight"])
            gt = h @ L["gate"].T
            f = (gt / (1.0 + np.exp(-gt)) * (h @ L["up"].T)) @ L["ffn_down.weight"].T
            x = x + self.resid_scale * f
        return (self.norm(x, self.out_norm) @ self.out.T) / self.logit_scale


def main(argv):
    opts = {}
    args = []
    it = iter(argv)
    for a in it:
        if a in ("--kv", "--ctx"):
            opts[a] = next(it)
        else:
            args.append(a)
    cmd, path, toks = args[1], args[2], [int(t) for t in args[3].split(",")]
    m = LlamaLike(path, opts.get("--kv") == "f16", int(opts["--ctx"]) if "--ctx" in opts else None)
    if cmd == "logits":
        m.forward(toks).astype("<f4").tofile(args[4])
    elif cmd == "greedy":
        n = int(args[4])
        seq = list(toks)
        for _ in range(n):
            seq.append(int(np.argmax(m.forward(seq)[-1])))
        with open(args[5], "w") as f:
            f.write(",".join(map(str, seq[len(toks):])) + "\n")
    else:
        sys.exit("usage: ref_llamalike.py logits|greedy ...")


if __name__ == "__main__":
    main(sys.argv)
