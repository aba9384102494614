#!/usr/bin/python3
"""ref_moe.py - the mixture-of-experts feed-forward for the numpy references
(ref_qwen.py for qwen3moe, ref_llama.py for llama files with experts,
ref_gptoss.py), written from the model definitions, independent of
src/model/moe.c; and the whole forward pass of qwen2moe, olmoe and
granitemoe (class MoeDecoder, below), with ref_common's command line:

  ref_moe.py logits|greedy MODEL.gguf 1,2,3 ... [--kv f16]  (ref_common.cli)

It is deliberately the dense formulation: every expert runs on every token
and a [n_tokens][n_expert] mask of routing weights (zero for the experts a
token did not choose) combines them. The C runtime computes only the chosen
experts, grouped by expert; the two share only the definition:

  logits = h @ Wr.T                                    [n][n_expert]
  gating 1 (softmax): p = softmax(logits), chosen = top-k of p (+ bias)
  gating 2 (sigmoid): p = sigmoid(logits), chosen = top-k of p (+ bias)
  gating 3 (softmax of the chosen): chosen = top-k of logits,
                                    weights = softmax over the chosen logits
  weights = p[chosen]; norm_w: weights /= sum(weights); * w_scale
  out = sum_e mask[:, e] * down_e(silu(gate_e h) * up_e h)
        + sigmoid(h . g_shexp) * down_s(silu(gate_s h) * up_s h)   (shared expert)
Ties in the top-k go to the lower expert number (a stable sort).

The decoders (MoeDecoder), with n(v, w) = v / sqrt(mean(v^2) + eps) * w:
  x = token_embd[tokens] * e
  per block l:
    a = n(x, attn_norm); q, k, v = Wq a, Wk a, Wv a
      qwen2moe: + bq, bk, bv
      olmoe: q = n(q, attn_q_norm), k = n(k, attn_k_norm) over the whole row
    rope: NeoX halves (qwen2moe, olmoe) or adjacent pairs (granitemoe; none
      with rope.scaling.finetuned false)
    h = x + r * Wo softmax(q . k * s) v       (causal)
    x = h + r * ffn(n(h, ffn_norm))            (above; qwen2moe with its
                                                gated shared expert)
  logits = output n(x, output_norm) / L   (output = token_embd when absent)
  e, r, s, L: granitemoe's embedding_scale, residual_scale, attention.scale,
  logit_scale (absent or 0: 1, 1, 1/sqrt(head_dim)); 1, 1, 1/sqrt(head_dim),
  1 for the others. Routing defaults: softmax, renormalised for qwen3moe,
  llama and granitemoe, not for qwen2moe, olmoe (gpt-oss: softmax of the
  chosen, not renormalised).

gpt-oss (act "oai", every tensor with a bias): logits = h @ Wr.T + br, and
  expert_e(h) = down_e(oai(gate_e h + bg_e, up_e h + bu_e)) + bd_e
  oai(g, u) = x sigmoid(1.702 x) (y + 1), x = min(g, 7), y = clip(u, -7, 7)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import Decoder, arch_key, attention, causal, cli, rope, softmax, swiglu  # noqa: E402

NORM_W_DEFAULT = ("qwen3moe", "llama", "granitemoe", "qwen35moe", "qwen3next")


def load(g, arch, i):
    """Layer i's MoE tensors and the file's routing keys, as a dict."""
    key = arch_key(g, arch)
    gate_def = 3 if arch == "gpt-oss" else 1
    d = {
        "n_used": key("expert_used_count"),
        "norm_w": bool(key("expert_weights_norm", arch in NORM_W_DEFAULT)),
        # the architecture's default (gpt-oss: top-k of the logits, then the softmax of those k)
        "gating": key("expert_gating_func", gate_def) or gate_def,
        "w_scale": key("expert_weights_scale", 0.0) or 1.0,
        "router": g.tensor("blk.%d.ffn_gate_inp.weight" % i),  # [n_expert][n_embd]
        "down": g.tensor("blk.%d.ffn_down_exps.weight" % i),   # [n_expert][n_embd][n_ff]
    }
    p = "blk.%d." % i
    if g.has(p + "ffn_gate_up_exps.weight"):
        gu = g.tensor(p + "ffn_gate_up_exps.weight")       # [n_expert][2 n_ff][n_embd]
        f = gu.shape[1] // 2
        d["gate"], d["up"] = gu[:, :f, :], gu[:, f:, :]
    else:
        d["gate"] = g.tensor(p + "ffn_gate_exps.weight")   # [n_expert][n_ff][n_embd]
        d["up"] = g.tensor(p + "ffn_up_exps.weight")
    d["bias"] = g.tensor(p + "exp_probs_b.bias") if g.has(p + "exp_probs_b.bias") else None
    d["act"] = "oai" if arch == "gpt-oss" else "silu"
    if arch == "gpt-oss":  # biases [n_expert][n_ff] / [n_expert][n_embd]; the router's [n_expert]
        for k in ("gate_inp", "gate_exps", "up_exps", "down_exps"):
            d["b_" + k] = g.tensor(p + "ffn_%s.bias" % k)
    if g.has(p + "ffn_gate_shexp.weight"):
        d["sh"] = [g.tensor(p + "ffn_gate_shexp.weight"), g.tensor(p + "ffn_up_shexp.weight"),
                   g.tensor(p + "ffn_down_shexp.weight")]
        d["sh_gate"] = g.tensor(p + "ffn_gate_inp_shexp.weight") if g.has(p + "ffn_gate_inp_shexp.weight") else None
    assert arch != "qwen2moe" or d.get("sh_gate") is not None, "qwen2moe needs its gated shared expert"
    return d


def swiglu_oai(gate, up, alpha=1.702, limit=7.0):
    """gpt-oss's clamped activation of the (biased) gate and up products."""
    x = np.minimum(gate, limit)
    y = np.clip(up, -limit, limit)
    return x / (1.0 + np.exp(-alpha * x)) * (y + 1.0)


def ffn(h, d):
    """h [n][n_embd] -> [n][n_embd]."""
    n = h.shape[0]
    logits = h @ d["router"].T
    if "b_gate_inp" in d:
        logits = logits + d["b_gate_inp"]
    k = d["n_used"]
    if d["gating"] == 1:
        p = softmax(logits)
    elif d["gating"] == 2:
        p = 1.0 / (1.0 + np.exp(-logits))
    else:
        p = logits
    score = p + d["bias"] if d["bias"] is not None else p
    chosen = np.argsort(-score, axis=-1, kind="stable")[:, :k]
    w = np.take_along_axis(p, chosen, axis=-1)
    if d["gating"] == 3:
        w = softmax(w)
    if d["norm_w"]:
        w = w / w.sum(axis=-1, keepdims=True)
    w = w * d["w_scale"]
    mask = np.zeros((n, logits.shape[1]))
    np.put_along_axis(mask, chosen, w, axis=-1)
    out = np.zeros_like(h)
    for e in range(logits.shape[1]):
        if d["act"] == "oai":
            a = swiglu_oai(h @ d["gate"][e].T + d["b_gate_exps"][e], h @ d["up"][e].T + d["b_up_exps"][e])
            y = a @ d["down"][e].T + d["b_down_exps"][e]
        else:
            y = swiglu(h, d["gate"][e], d["up"][e], d["down"][e])
        out += mask[:, e:e + 1] * y
    if "sh" in d:
        gs, us, ds = d["sh"]
        y = swiglu(h, gs, us, ds)
        if d["sh_gate"] is not None:
            y = y / (1.0 + np.exp(-(h @ d["sh_gate"])))[:, None]
        out += y
    return out


class MoeDecoder(Decoder):
    """qwen2moe, olmoe and granitemoe (the definition in the module's text)."""

    def __init__(self, path, kv_f16=False):
        super().__init__(path, ("qwen2moe", "olmoe", "granitemoe"), kv_f16)
        g, arch, key = self.g, self.arch, self.key
        self.neox = arch != "granitemoe"
        self.rope_on = True
        self.embd_scale = self.resid_scale = self.logit_scale = 1.0
        self.q_scale = 1.0 / np.sqrt(self.head_dim)
        if arch == "granitemoe":
            self.embd_scale = key("embedding_scale", 0.0) or 1.0
            self.resid_scale = key("residual_scale", 0.0) or 1.0
            self.q_scale = key("attention.scale", 0.0) or self.q_scale
            self.logit_scale = key("logit_scale")
            self.rope_on = bool(key("rope.scaling.finetuned", True))
        names = ["attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                 "ffn_norm.weight"]
        if arch == "qwen2moe":
            names += ["attn_q.bias", "attn_k.bias", "attn_v.bias"]
        if arch == "olmoe":
            names += ["attn_q_norm.weight", "attn_k_norm.weight"]
        self.layers = [{k: g.tensor("blk.%d.%s" % (i, k)) for k in names} for i in range(self.n_layer)]
        for i, L in enumerate(self.layers):
            L["moe"] = load(g, arch, i)

    def forward(self, tokens):
        n = len(tokens)
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        x = self.embd[np.array(tokens)] * self.embd_scale
        visible = causal(n)
        for L in self.layers:
            a = self.norm(x, L["attn_norm.weight"])
            q, k, v = (a @ L["attn_%s.weight" % c].T for c in "qkv")
            if self.arch == "qwen2moe":
                q, k, v = q + L["attn_q.bias"], k + L["attn_k.bias"], v + L["attn_v.bias"]
            if self.arch == "olmoe":  # the whole row: all heads at once
                q = self.norm(q, L["attn_q_norm.weight"])
                k = self.norm(k, L["attn_k_norm.weight"])
            q, k, v = q.reshape(n, H, d), k.reshape(n, Hkv, d), v.reshape(n, Hkv, d)
            if self.rope_on:
                kw = dict(neox=self.neox, mscale=self.mscale, yarn=self.yarn)
                q = rope(q, self.n_rot, self.base, self.freq_scale, **kw)
                k = rope(k, self.n_rot, self.base, self.freq_scale, **kw)
            att = attention(q, k, v, self.q_scale, visible, kv_f16=self.kv_f16)
            x = x + self.resid_scale * (att @ L["attn_output.weight"].T)
            x = x + self.resid_scale * ffn(self.norm(x, L["ffn_norm.weight"]), L["moe"])
        return (self.norm(x, self.out_norm) @ self.out.T) / self.logit_scale


if __name__ == "__main__":
    cli(sys.argv, lambda path, o: MoeDecoder(path, o.get("--kv") == "f16"), "ref_moe.py logits|greedy ...")
