#!/usr/bin/python3
"""ref_lfm2.py - an independent numpy implementation of the lfm2 forward
pass (LiquidAI LFM2), in the simple recurrent form: one token at a time,
each short-convolution layer carrying its last d_conv - 1 inputs as state,
each attention layer a growing list of keys and values.

It reads the GGUF file itself (ref_llama.Gguf) and computes in float64.
The C runtime (src/model/lfm2.c) runs whole prompt chunks at once, the
convolution over runs of tokens (kernels/conv1d.c), attention through its
tiled cache, so the two share only the model's definition.

  ref_lfm2.py logits MODEL.gguf 1,2,3 OUT.f32 [--kv f16]
      logits of every token, raw little-endian f32 [n_tokens][n_vocab]
  ref_lfm2.py greedy MODEL.gguf 1,2,3 N OUT.txt [--kv f16]
      the N greedily chosen tokens after the prompt, comma-separated

The definition (llama.cpp's reading of GGUF lfm2 files):
  layer l is a convolution layer when attention.head_count_kv[l] == 0
  x = token_embd[token]
  per layer: h = n(x, attn_norm)
    convolution: B, C, u = split3(in_proj h)
                 s = [state..., B*u]  (d_conv rows, oldest first)
                 v[c] = sum_k conv[c][k] * s[k][c]; state = s[1:]
                 x = x + out_proj (C * v)
    attention:   q, k per head rms-normed with attn_{q,k}_norm, NeoX RoPE,
                 softmax(q . K / sqrt(head_dim)) V over positions 0..t
                 x = x + Wo att
    x = x + Wdown (silu(Wgate n(x, ffn_norm)) * Wup n(x, ffn_norm))
  logits = output n(x, token_embd_norm), output = token_embd when absent
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_llama import Gguf  # noqa: E402


class Lfm2:
    def __init__(self, path, kv_f16=False):
        g = Gguf(path)
        assert g.kv["general.architecture"] == "lfm2"

        def key(k, default=None):
            v = g.kv.get("lfm2." + k, default)
            assert v is not None, "missing lfm2." + k
            return v
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        kv = key("attention.head_count_kv")
        self.kv_heads = list(kv) if isinstance(kv, (list, tuple)) else [kv] * self.n_layer
        self.head_dim = self.n_embd // self.n_head
        self.n_rot = key("rope.dimension_count", self.head_dim)
        self.eps = key("attention.layer_norm_rms_epsilon", 1e-5)
        self.base = key("rope.freq_base", 10000.0)
        self.d_conv = key("shortconv.l_cache")
        self.kv_f16 = kv_f16
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.out_norm = g.tensor("token_embd_norm.weight")
        self.layers = []
        for i in range(self.n_layer):
            if self.kv_heads[i] == 0:
                names = ["shortconv.in_proj.weight", "shortconv.conv.weight", "shortconv.out_proj.weight"]
            else:
                names = ["attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                         "attn_q_norm.weight", "attn_k_norm.weight"]
            names += ["attn_norm.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]
            self.layers.append({k: g.tensor("blk.%d.%s" % (i, k)) for k in names})

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        """x [n_heads][head_dim] at one position: NeoX halves as complex numbers."""
        half = self.n_rot // 2
        theta = pos * self.base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        z = (x[:, :half] + 1j * x[:, half:self.n_rot]) * np.exp(1j * theta)[None, :]
        x = x.copy()
        x[:, :half] = z.real
        x[:, half:self.n_rot] = z.imag
        return x

    def forward(self, tokens):
        E, H, d = self.n_embd, self.n_head, self.head_dim
        state = [np.zeros((self.d_conv - 1, E)) for _ in range(self.n_layer)]
        keys = [[] for _ in range(self.n_layer)]
        vals = [[] for _ in range(self.n_layer)]
        rows = []
        for pos, tok in enumerate(tokens):
            x = self.embd[tok].astype(np.float64)
            for i, L in enumerate(self.layers):
                h = self.norm(x, L["attn_norm.weight"])
                if self.kv_heads[i] == 0:
                    bcu = L["shortconv.in_proj.weight"] @ h
                    B, C, u = bcu[:E], bcu[E:2 * E], bcu[2 * E:]
                    s = np.vstack([state[i], (B * u)[None, :]])  # [d_conv][E]
                    v = np.sum(L["shortconv.conv.weight"].T * s, axis=0)  # taps [E][d_conv] -> per channel
                    state[i] = s[1:]
                    x = x + L["shortconv.out_proj.weight"] @ (C * v)
                else:
                    Hkv = self.kv_heads[i]
                    q = self.norm((L["attn_q.weight"] @ h).reshape(H, d), L["attn_q_norm.weight"])
                    k = self.norm((L["attn_k.weight"] @ h).reshape(Hkv, d), L["attn_k_norm.weight"])
                    vv = (L["attn_v.weight"] @ h).reshape(Hkv, d)
                    q, k = self.rope(q, pos), self.rope(k, pos)
                    if self.kv_f16:
                        k = k.astype(np.float16).astype(np.float64)
                        vv = vv.astype(np.float16).astype(np.float64)
                    keys[i].append(k)
                    vals[i].append(vv)
                    K, V = np.array(keys[i]), np.array(vals[i])  # [t][Hkv][d]
                    att = np.zeros((H, d))
                    for hh in range(H):
                        g = hh // (H // Hkv)
                        sc = K[:, g, :] @ q[hh] / np.sqrt(d)
                        p = np.exp(sc - sc.max())
                        att[hh] = (p / p.sum()) @ V[:, g, :]
                    x = x + L["attn_output.weight"] @ att.reshape(H * d)
                h = self.norm(x, L["ffn_norm.weight"])
                gt = L["ffn_gate.weight"] @ h
                x = x + L["ffn_down.weight"] @ ((gt / (1.0 + np.exp(-gt))) * (L["ffn_up.weight"] @ h))
            rows.append(self.out @ self.norm(x, self.out_norm))
        return np.array(rows)


def main(argv):
    kv_f16 = "--kv" in argv and argv[argv.index("--kv") + 1] == "f16"
    args = [a for i, a in enumerate(argv) if a != "--kv" and (i == 0 or argv[i - 1] != "--kv")]
    cmd, path, toks = args[1], args[2], [int(t) for t in args[3].split(",")]
    m = Lfm2(path, kv_f16)
    if cmd == "logits":
        m.forward(toks).astype("<f4").tofile(args[4])
    elif cmd == "greedy":
        seq = list(toks)
        for _ in range(int(args[4])):
            seq.append(int(np.argmax(m.forward(seq)[-1])))
        with open(args[5], "w") as f:
            f.write(",".join(map(str, seq[len(toks):])) + "\n")
    else:
        sys.exit("usage: ref_lfm2.py logits|greedy ...")


if __name__ == "__main__":
    main(sys.argv)
