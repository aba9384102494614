#!/usr/bin/python3
"""ref_qwen35.py - an independent numpy implementation of the Qwen3.5 and
Qwen3-Next hybrids (qwen35, qwen35moe, qwen3next), in the simple recurrent
form: one token at a time, each gated delta-net layer carrying its
convolution tail and one state matrix per value head, each attention layer
a growing list of keys and values. float64, from the GGUF file itself.

  ref_qwen35.py logits|greedy MODEL.gguf 1,2,3 ... [--kv f16]  (ref_common.cli)

The C runtime (src/model/qwen35.c) runs prompt chunks at once (the chunked
delta rule, kernels/delta.c; the tiled attention cache), so the two share
only the definition (llama.cpp's reading of the converter's files), with
n(v, w) = v / sqrt(mean(v^2) + eps) * w:
  layer l attends when (l + 1) % full_attention_interval == 0 (default 4)
  h = n(x, attn_norm)
  attention: Wq h holds per head [q (hd) | gate (hd)]; q, k per head
    n(., attn_{q,k}_norm); NeoX RoPE on the first rope.dimension_count dims,
    qwen35 / qwen35moe with M-RoPE sections: pair i, sector = i % sum(s),
    takes axis sector % 3 when sector < 3 s[axis] (t, h, w: the token's
    position), else the fourth axis (position 0 for text)
    x += Wo (softmax(q . K / sqrt(hd)) V * sigmoid(gate))
  delta net: m = attn_qkv h; conv state [d_conv - 1][conv_dim]:
    c = silu(sum_k taps[:, k] * [state; m][k]); state = last d_conv - 1 rows
    q, k, v = split(c); q, k per key head / sqrt(sum^2 + eps); q / sqrt(d_k)
    beta = sigmoid(ssm_beta h), a = softplus(ssm_alpha h + ssm_dt.bias) * ssm_a
      (qwen3next: ssm_ba rows per key head group: beta r, then alpha r)
    value head j uses key head j % n_k (qwen35*) or j // r (qwen3next):
      S = exp(a) S; u = beta (v - S^T k); S += k u^T; o = S^T q
    o = n(o per value head, ssm_norm) * silu(attn_gate h); x += ssm_out o
  x += ffn(n(x, post_attention_norm)): SwiGLU (qwen35) or experts with the
    gated shared expert (ref_moe.ffn)
  logits = output n(x, output_norm), output = token_embd when absent
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Decoder, cli, rms_norm, silu, swiglu  # noqa: E402
from ref_moe import ffn as moe_ffn, load as moe_load  # noqa: E402


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def softplus(v):
    return np.where(v > 20.0, v, np.log1p(np.exp(np.minimum(v, 20.0))))


def l2n(v, eps):
    return v / np.sqrt(np.sum(v * v, axis=-1, keepdims=True) + eps)


class Qwen35(Decoder):
    def __init__(self, path, kv_f16=False):
        super().__init__(path, ("qwen35", "qwen35moe", "qwen3next"), kv_f16)
        g, key = self.g, self.key
        self.moe = self.arch != "qwen35"
        self.grouped = self.fused = self.arch == "qwen3next"
        self.d_conv = key("ssm.conv_kernel")
        self.dk = key("ssm.state_size")
        self.nk = key("ssm.group_count")
        self.nv = key("ssm.time_step_rank")
        self.dv = key("ssm.inner_size") // self.nv
        self.interval = key("full_attention_interval", 4)
        half = self.n_rot // 2
        self.turns = np.ones(half)  # 1: the pair turns with the position, 0: the fourth axis (position 0)
        if self.arch != "qwen3next":
            s = list(key("rope.dimension_sections")) + [0, 0, 0]
            tot = sum(s[:4])
            for i in range(half):
                sec = i % tot
                self.turns[i] = 1.0 if sec < 3 * s[sec % 3] else 0.0
        self.layers = []
        for i in range(self.n_layer):
            p = "blk.%d." % i
            L = {"delta": (i + 1) % self.interval != 0}
            names = ["attn_norm.weight", "post_attention_norm.weight"]
            if L["delta"]:
                names += ["attn_qkv.weight", "attn_gate.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a",
                          "ssm_norm.weight", "ssm_out.weight"]
                names += ["ssm_ba.weight"] if self.fused else ["ssm_beta.weight", "ssm_alpha.weight"]
            else:
                names += ["attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                          "attn_q_norm.weight", "attn_k_norm.weight"]
            if not self.moe:
                names += ["ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]
            for n in names:
                L[n] = g.tensor(p + n)
            if self.moe:
                L["moe"] = moe_load(g, self.arch, i)
            self.layers.append(L)

    def rope(self, x, pos):
        """x [heads][hd] at one position: NeoX halves turned by pos * base^(-2i/n_rot)."""
        half = self.n_rot // 2
        theta = pos * self.turns * self.base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        z = (x[:, :half] + 1j * x[:, half:self.n_rot]) * np.exp(1j * theta)[None, :]
        x = x.copy()
        x[:, :half], x[:, half:self.n_rot] = z.real, z.imag
        return x

    def delta(self, L, h, st):
        nk, nv, dk, dv = self.nk, self.nv, self.dk, self.dv
        r = nv // nk
        m = L["attn_qkv.weight"] @ h
        s = np.vstack([st["conv"], m[None, :]])  # [d_conv][conv_dim], oldest first
        c = silu(np.sum(L["ssm_conv1d.weight"].T * s, axis=0))
        st["conv"] = s[1:]
        q = l2n(c[:nk * dk].reshape(nk, dk), self.eps) / np.sqrt(dk)
        k = l2n(c[nk * dk:2 * nk * dk].reshape(nk, dk), self.eps)
        v = c[2 * nk * dk:].reshape(nv, dv)
        if self.fused:
            ba = (L["ssm_ba.weight"] @ h).reshape(nk, 2, r)
            b, a = ba[:, 0, :].reshape(nv), ba[:, 1, :].reshape(nv)
        else:
            b, a = L["ssm_beta.weight"] @ h, L["ssm_alpha.weight"] @ h
        beta = sigmoid(b)
        decay = np.exp(softplus(a + L["ssm_dt.bias"]) * L["ssm_a"])
        o = np.zeros((nv, dv))
        for j in range(nv):
            kh = j // r if self.grouped else j % nk
            S = decay[j] * st["S"][j]
            u = beta[j] * (v[j] - S.T @ k[kh])
            S = S + np.outer(k[kh], u)
            st["S"][j] = S
            o[j] = S.T @ q[kh]
        z = (L["attn_gate.weight"] @ h).reshape(nv, dv)
        o = rms_norm(o, L["ssm_norm.weight"], self.eps) * silu(z)
        return L["ssm_out.weight"] @ o.reshape(nv * dv)

    def attend(self, L, h, pos, cache):
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        qg = (L["attn_q.weight"] @ h).reshape(H, 2, d)
        q, gate = qg[:, 0, :], qg[:, 1, :].reshape(H * d)
        q = self.rope(rms_norm(q, L["attn_q_norm.weight"], self.eps), pos)
        k = self.rope(rms_norm((L["attn_k.weight"] @ h).reshape(Hkv, d), L["attn_k_norm.weight"], self.eps), pos)
        v = (L["attn_v.weight"] @ h).reshape(Hkv, d)
        if self.kv_f16:
            k = k.astype(np.float16).astype(np.float64)
            v = v.astype(np.float16).astype(np.float64)
        cache[0].append(k)
        cache[1].append(v)
        K, V = np.array(cache[0]), np.array(cache[1])  # [t][Hkv][d]
        att = np.zeros((H, d))
        for hh in range(H):
            gi = hh // (H // Hkv)
            sc = K[:, gi, :] @ q[hh] / np.sqrt(d)
            p = np.exp(sc - sc.max())
            att[hh] = (p / p.sum()) @ V[:, gi, :]
        return L["attn_output.weight"] @ (att.reshape(H * d) * sigmoid(gate))

    def forward(self, tokens):
        """Logits of every token. A call whose tokens extend the previous
        call's goes on from the states that call left (the greedy loop's
        calls), which is the same recurrence, not recomputed."""
        conv_dim = 2 * self.nk * self.dk + self.nv * self.dv
        memo = getattr(self, "_memo", None)
        if memo and len(tokens) >= len(memo[0]) and list(tokens[:len(memo[0])]) == memo[0]:
            _, states, caches, rows = memo
        else:
            states = [{"conv": np.zeros((self.d_conv - 1, conv_dim)), "S": np.zeros((self.nv, self.dk, self.dv))}
                      for _ in self.layers]
            caches = [([], []) for _ in self.layers]
            rows = []
        for pos in range(len(rows), len(tokens)):
            tok = tokens[pos]
            x = self.embd[tok].astype(np.float64)
            for i, L in enumerate(self.layers):
                h = self.norm(x, L["attn_norm.weight"])
                x = x + (self.delta(L, h, states[i]) if L["delta"] else self.attend(L, h, pos, caches[i]))
                h = self.norm(x, L["post_attention_norm.weight"])
                if self.moe:
                    x = x + moe_ffn(h[None, :], L["moe"])[0]
                else:
                    x = x + swiglu(h[None, :], L["ffn_gate.weight"], L["ffn_up.weight"], L["ffn_down.weight"])[0]
            rows.append(self.out @ self.norm(x, self.out_norm))
        self._memo = (list(tokens), states, caches, rows)
        return np.array(rows)


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: Qwen35(path, o.get("--kv") == "f16"), "ref_qwen35.py logits|greedy ...")
