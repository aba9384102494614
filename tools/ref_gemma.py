#!/usr/bin/python3
"""ref_gemma.py - an independent numpy implementation of the gemma2 and
gemma3 forward passes.

It reads the GGUF file itself (ref_llama.Gguf: gguf_ref's byte reader and
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
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_llama import Gguf  # noqa: E402


class Gemma:
    def __init__(self, path, kv_f16=False):
        g = Gguf(path)
        arch = g.kv["general.architecture"]
        assert arch in ("gemma2", "gemma3"), arch
        self.arch = arch
        g3 = arch == "gemma3"

        def key(k, default=None):
            v = g.kv.get(arch + "." + k, default)
            assert v is not None, "missing %s.%s" % (arch, k)
            return v
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = key("rope.dimension_count", self.head_dim)
        self.eps = key("attention.layer_norm_rms_epsilon", 1e-5)
        self.base = key("rope.freq_base", 10000.0)
        scale = 1.0
        if g.kv.get(arch + ".rope.scaling.type", "linear") == "linear":
            f = g.kv.get(arch + ".rope.scaling.factor", 0.0)
            if f:
                scale = 1.0 / f
        self.freq_scale = scale
        ctx = key("context_length")
        self.window = key("attention.sliding_window", None if g3 else min(4096, ctx))
        self.pattern = key("attention.sliding_window_pattern", 6 if g3 else 2)
        if g3:
            self.base_swa, self.scale_swa = key("rope.freq_base_swa", 10000.0), 1.0
        else:
            self.base_swa, self.scale_swa = key("rope.freq_base_swa", self.base), self.freq_scale
        self.attn_cap = 0.0 if g3 else key("attn_logit_softcapping", 50.0)
        self.final_cap = key("final_logit_softcapping", 0.0 if g3 else 30.0)
        big = self.n_layer == (62 if g3 else 46)
        self.q_scale = 1.0 / np.sqrt(self.n_embd // self.n_head if big else self.head_dim)
        self.kv_f16 = kv_f16
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.out_norm = g.tensor("output_norm.weight")
        names = ["attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                 "post_attention_norm.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                 "ffn_down.weight", "post_ffw_norm.weight"]
        if g3:
            names += ["attn_q_norm.weight", "attn_k_norm.weight"]
        self.layers = [{k: g.tensor("blk.%d.%s" % (i, k)) for k in names} for i in range(self.n_layer)]

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, base, freq_scale):
        """x [n_tok][n_heads][head_dim]: NeoX halves as complex numbers."""
        n = x.shape[0]
        x = x.copy()
        half = self.n_rot // 2
        inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        theta = np.arange(n, dtype=np.float64)[:, None] * freq_scale * inv[None, :]
        rot = np.exp(1j * theta)[:, None, :]
        z = (x[:, :, :half] + 1j * x[:, :, half:self.n_rot]) * rot
        x[:, :, :half] = z.real
        x[:, :, half:self.n_rot] = z.imag
        return x

    @staticmethod
    def gelu(x):
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))

    def sliding(self, l):
        return self.window > 0 and l % self.pattern < self.pattern - 1

    def forward(self, tokens):
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        rep = H // Hkv
        x = self.embd[np.array(tokens)] * np.sqrt(np.float64(self.n_embd))
        i = np.arange(n)[:, None]
        j = np.arange(n)[None, :]
        causal = j <= i
        for l, L in enumerate(self.layers):
            slide = self.sliding(l)
            visible = causal & ((i - j) < self.window) if slide else causal
            h = self.norm(x, L["attn_norm.weight"])
            q = (h @ L["attn_q.weight"].T).reshape(n, H, d)
            k = (h @ L["attn_k.weight"].T).reshape(n, Hkv, d)
            v = (h @ L["attn_v.weight"].T).reshape(n, Hkv, d)
            if self.arch == "gemma3":
                q = self.norm(q, L["attn_q_norm.weight"])
                k = self.norm(k, L["attn_k_norm.weight"])
            base, fs = (self.base_swa, self.scale_swa) if slide else (self.base, self.freq_scale)
            q = self.rope(q, base, fs)
            k = self.rope(k, base, fs)
            if self.kv_f16:
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            q = q.transpose(1, 0, 2) * self.q_scale
            k = np.repeat(k.transpose(1, 0, 2), rep, axis=0)
            v = np.repeat(v.transpose(1, 0, 2), rep, axis=0)
            s = q @ k.transpose(0, 2, 1)
            if self.attn_cap:
                s = self.attn_cap * np.tanh(s / self.attn_cap)
            s = np.where(visible[None], s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, H * d)
            x = x + self.norm(a @ L["attn_output.weight"].T, L["post_attention_norm.weight"])
            h = self.norm(x, L["ffn_norm.weight"])
            f = (self.gelu(h @ L["ffn_gate.weight"].T) * (h @ L["ffn_up.weight"].T)) @ L["ffn_down.weight"].T
            x = x + self.norm(f, L["post_ffw_norm.weight"])
        logits = self.norm(x, self.out_norm) @ self.out.T
        if self.final_cap:
            logits = self.final_cap * np.tanh(logits / self.final_cap)
        return logits


def main(argv):
    kv_f16 = "--kv" in argv and argv[argv.index("--kv") + 1] == "f16"
    args = [a for i, a in enumerate(argv) if a != "--kv" and (i == 0 or argv[i - 1] != "--kv")]
    cmd, path, toks = args[1], args[2], [int(t) for t in args[3].split(",")]
    m = Gemma(path, kv_f16)
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
        sys.exit("usage: ref_gemma.py logits|greedy ...")


if __name__ == "__main__":
    main(sys.argv)
