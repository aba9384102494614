#!/usr/bin/python3
"""ref_mamba2.py - an independent numpy implementation of the mamba2,
granitehybrid and nemotron_h forward passes (src/model/mamba2.c), in the
simple recurrent form: each Mamba-2 layer runs its convolution and its scan
one token at a time carrying their states (ref_ssm.ssm_scan), attention is
the full causal matrix without a cache. float64; it reads the GGUF file
itself (ref_common.Gguf).

  ref_mamba2.py logits|greedy MODEL.gguf 1,2,3 ... [--kv f16]  (ref_common.cli)

The definition (llama.cpp's reading of the converter's files), with
n(v, w) = v / sqrt(mean(v^2) + eps) * w:
  kinds: mamba2 every layer Mamba-2; granitehybrid attention where
    attention.head_count_kv[l] > 0, else Mamba-2; nemotron_h Mamba-2 where
    head_count_kv[l] == 0 and feed_forward_length[l] == 0, attention where
    only the latter is 0, an MLP otherwise
  x = token_embd[tokens] * e
  per layer: h = n(x, attn_norm)
    Mamba-2: z | xBC | dt = ssm_in h    (d_inner | d_inner + 2 G N | H)
             xBC_t = silu(sum_k conv[c][k] xBC_{t - (K-1) + k} + conv_b)
             x, B, C = split(xBC); y = scan(x, B, C, dt + dt_b, ssm_a, ssm_d)
             y = n_groups(y * silu(z), ssm_norm); out = ssm_out y
    attention: softmax(q k^T * s) v, RoPE (adjacent pairs) only for a
             granitehybrid file with rope.scaling.finetuned true; out = Wo att
    MLP: out = ffn_down relu(ffn_up h + b)^2 + b
    x = x + r * out
    granitehybrid: x = x + r * ffn(n(x, ffn_norm))  (SwiGLU or experts:
             softmax router, top-k renormalised, shared expert)
  logits = output n(x, output_norm) / L
  e, r, s, L: granite's embedding_scale, residual_scale, attention.scale,
  logit_scale (1, 1, 1/sqrt(head_dim), 1 when absent and elsewhere).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Gguf, arch_key, attention, causal, cli, rms_norm, rope, silu, swiglu  # noqa: E402
import ref_moe  # noqa: E402
from ref_ssm import gated_norm, ssm_scan  # noqa: E402


def per_layer(v, n):
    return list(v) if isinstance(v, (list, tuple)) else [v] * n


class Mamba2:
    def __init__(self, path, kv_f16=False):
        g = Gguf(path)
        arch = g.kv["general.architecture"]
        assert arch in ("mamba2", "granitehybrid", "nemotron_h"), arch
        self.g, self.arch, self.kv_f16 = g, arch, kv_f16
        key = arch_key(g, arch)
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.eps = key("attention.layer_norm_rms_epsilon", 1e-5)
        self.d_conv = key("ssm.conv_kernel")
        self.d_inner = key("ssm.inner_size")
        self.d_state = key("ssm.state_size")
        self.n_ssm_head = key("ssm.time_step_rank")
        self.n_group = key("ssm.group_count", 1)
        granite = arch == "granitehybrid"
        self.e = (key("embedding_scale", 0.0) or 1.0) if granite else 1.0
        self.r = (key("residual_scale", 0.0) or 1.0) if granite else 1.0
        self.L = key("logit_scale") if granite else 1.0
        self.rope_on = granite and bool(key("rope.scaling.finetuned", True))
        if arch == "mamba2":
            kinds = ["M"] * self.n_layer
        else:
            self.n_head = key("attention.head_count")
            kv = per_layer(key("attention.head_count_kv"), self.n_layer)
            ff = per_layer(key("feed_forward_length"), self.n_layer)
            self.n_head_kv = max(kv)
            self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
            self.n_rot = key("rope.dimension_count", self.head_dim)
            self.base = key("rope.freq_base", 10000.0)
            s = key("attention.scale", 0.0) if granite else 0.0
            self.scale = s or 1.0 / np.sqrt(self.head_dim)
            if arch == "nemotron_h":
                kinds = ["*" if kv[i] else "-" if ff[i] else "M" for i in range(self.n_layer)]
            else:
                kinds = ["*" if kv[i] else "M" for i in range(self.n_layer)]
        self.kinds = kinds
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.out_norm = g.tensor("output_norm.weight")
        self.moe = granite and key("expert_count", 0) > 0
        self.layers = []
        for i, k in enumerate(kinds):
            p = "blk.%d." % i

            def t(name, p=p):
                return g.tensor(p + name)
            L = {"attn_norm": t("attn_norm.weight")}
            if k == "M":
                for n in ("ssm_in.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a", "ssm_d", "ssm_norm.weight",
                          "ssm_out.weight"):
                    L[n] = t(n)
                L["conv_b"] = t("ssm_conv1d.bias") if g.has(p + "ssm_conv1d.bias") else 0.0
            elif k == "*":
                for n in ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"):
                    L[n] = t(n)
            else:
                L["up"], L["down"] = t("ffn_up.weight"), t("ffn_down.weight")
                L["up_b"] = t("ffn_up.bias") if g.has(p + "ffn_up.bias") else 0.0
                L["down_b"] = t("ffn_down.bias") if g.has(p + "ffn_down.bias") else 0.0
            if granite:
                L["ffn_norm"] = t("ffn_norm.weight")
                if self.moe:
                    L["moe"] = ref_moe.load(g, arch, i)
                    L["moe"]["norm_w"] = bool(key("expert_weights_norm", True))
                else:
                    L["ffn"] = (t("ffn_gate.weight"), t("ffn_up.weight"), t("ffn_down.weight"))
            self.layers.append(L)

    def norm(self, x, w):
        return rms_norm(x, w, self.eps)

    def mamba(self, h, L):
        """h [n][n_embd] -> [n][n_embd], the conv and the scan token by token."""
        n, DI, GN, H = h.shape[0], self.d_inner, self.n_group * self.d_state, self.n_ssm_head
        zx = h @ L["ssm_in.weight"].T
        z, xbc, dt = zx[:, :DI], zx[:, DI:2 * DI + 2 * GN], zx[:, 2 * DI + 2 * GN:]
        K, w = self.d_conv, L["ssm_conv1d.weight"]  # [channels][K]
        state = np.zeros((K - 1, xbc.shape[1]))
        conv = np.zeros_like(xbc)
        for t in range(n):
            s = np.vstack([state, xbc[t][None, :]])
            conv[t] = silu(np.sum(w.T * s, axis=0) + L["conv_b"])
            state = s[1:]
        P = DI // H
        x = conv[:, :DI].reshape(n, H, P)
        B = conv[:, DI:DI + GN].reshape(n, self.n_group, self.d_state)
        C = conv[:, DI + GN:].reshape(n, self.n_group, self.d_state)
        y, _ = ssm_scan(x, B, C, dt, L["ssm_dt.bias"], L["ssm_a"].reshape(H), L["ssm_d"].reshape(H),
                        np.zeros((H, P, self.d_state)))
        y = gated_norm(y.reshape(n, DI), z, L["ssm_norm.weight"].reshape(DI), self.n_group, self.eps)
        return y @ L["ssm_out.weight"].T

    def attend(self, h, L):
        n, H, Hkv, d = h.shape[0], self.n_head, self.n_head_kv, self.head_dim
        q = (h @ L["attn_q.weight"].T).reshape(n, H, d)
        k = (h @ L["attn_k.weight"].T).reshape(n, Hkv, d)
        v = (h @ L["attn_v.weight"].T).reshape(n, Hkv, d)
        if self.rope_on:
            q = rope(q, self.n_rot, self.base, neox=False)
            k = rope(k, self.n_rot, self.base, neox=False)
        return attention(q, k, v, self.scale, causal(n), kv_f16=self.kv_f16) @ L["attn_output.weight"].T

    def forward(self, tokens):
        x = self.embd[np.array(tokens)] * self.e
        for k, L in zip(self.kinds, self.layers):
            h = self.norm(x, L["attn_norm"])
            if k == "M":
                o = self.mamba(h, L)
            elif k == "*":
                o = self.attend(h, L)
            else:
                u = np.maximum(h @ L["up"].T + L["up_b"], 0.0)
                o = (u * u) @ L["down"].T + L["down_b"]
            x = x + self.r * o
            if "ffn_norm" in L:
                h = self.norm(x, L["ffn_norm"])
                o = ref_moe.ffn(h, L["moe"]) if self.moe else swiglu(h, *L["ffn"])
                x = x + self.r * o
        return (self.norm(x, self.out_norm) @ self.out.T) / self.L


def main(argv):
    cli(argv, lambda path, o: Mamba2(path, o.get("--kv") == "f16"),
        "ref_mamba2.py logits|greedy MODEL.gguf 1,2,3 OUT.f32|N OUT.txt [--kv f16]")


if __name__ == "__main__":
    main(sys.argv)
