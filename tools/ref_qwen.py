#!/usr/bin/python3
"""ref_qwen.py - an independent numpy implementation of the qwen2, qwen3 and
qwen3moe forward passes.

It reads the GGUF file itself (ref_llama.Gguf: gguf_ref's byte reader and
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
from ref_llama import Gguf  # noqa: E402
import ref_moe  # noqa: E402


class Qwen:
    def __init__(self, path, kv_f16=False):
        g = Gguf(path)
        arch = g.kv["general.architecture"]
        assert arch in ("qwen2", "qwen3", "qwen3moe"), arch
        self.arch = arch

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
            f = g.kv.get(arch + ".rope.scaling.factor", 0.0) or g.kv.get(arch + ".rope.scale_linear", 0.0)
            if f:
                scale = 1.0 / f
        self.freq_scale = scale
        self.kv_f16 = kv_f16
        self.pooling = key("pooling_type", 3)
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.out_norm = g.tensor("output_norm.weight")
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

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, n_heads):
        """x [n_tok][n_heads][head_dim]: NeoX halves as complex numbers."""
        n = x.shape[0]
        x = x.copy()
        half = self.n_rot // 2
        inv = self.base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        theta = np.arange(n, dtype=np.float64)[:, None] * self.freq_scale * inv[None, :]
        rot = np.exp(1j * theta)[:, None, :]  # [n][1][half]
        z = (x[:, :, :half] + 1j * x[:, :, half:self.n_rot]) * rot
        x[:, :, :half] = z.real
        x[:, :, half:self.n_rot] = z.imag
        return x

    def forward(self, tokens):
        return self.hidden(tokens) @ self.out.T

    def hidden(self, tokens):
        """The output-normed hidden states [n_tokens][n_embd]."""
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        x = self.embd[np.array(tokens)]
        rep = H // Hkv
        mask = np.triu(np.full((n, n), -np.inf), 1)
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
            q = self.rope(q, H)
            k = self.rope(k, Hkv)
            if self.kv_f16:
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            q = q.transpose(1, 0, 2)
            k = np.repeat(k.transpose(1, 0, 2), rep, axis=0)
            v = np.repeat(v.transpose(1, 0, 2), rep, axis=0)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(d) + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, H * d)
            x = x + a @ L["attn_output.weight"].T
            h = self.norm(x, L["ffn_norm.weight"])
            if "moe" in L:
                x = x + ref_moe.ffn(h, L["moe"])
                continue
            gt = h @ L["ffn_gate.weight"].T
            x = x + ((gt / (1.0 + np.exp(-gt))) * (h @ L["ffn_up.weight"].T)) @ L["ffn_down.weight"].T
        return self.norm(x, self.out_norm)


def main(argv):
    kv_f16 = "--kv" in argv and argv[argv.index("--kv") + 1] == "f16"
    normalize = "--normalize" in argv
    pooling = None
    if "--pooling" in argv:
        pooling = {"none": 0, "mean": 1, "cls": 2, "last": 3}[argv[argv.index("--pooling") + 1]]
    args = [a for i, a in enumerate(argv)
            if a not in ("--kv", "--pooling", "--normalize") and (i == 0 or argv[i - 1] not in ("--kv", "--pooling"))]
    cmd, path, toks = args[1], args[2], [int(t) for t in args[3].split(",")]
    m = Qwen(path, kv_f16)
    if cmd == "logits":
        m.forward(toks).astype("<f4").tofile(args[4])
    elif cmd == "embed":
        x = m.hidden(toks)
        pooling = m.pooling if pooling is None else pooling
        if pooling == 1:
            x = x.mean(axis=0, keepdims=True)
        elif pooling == 2:
            x = x[:1]
        elif pooling == 3:
            x = x[-1:]
        if normalize:
            x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        x.astype("<f4").tofile(args[4])
    elif cmd == "greedy":
        n = int(args[4])
        seq = list(toks)
        for _ in range(n):
            seq.append(int(np.argmax(m.forward(seq)[-1])))
        with open(args[5], "w") as f:
            f.write(",".join(map(str, seq[len(toks):])) + "\n")
    else:
        sys.exit("usage: ref_qwen.py logits|greedy ...")


if __name__ == "__main__":
    main(sys.argv)
