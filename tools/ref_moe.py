#!/usr/bin/python3
"""ref_moe.py - the mixture-of-experts feed-forward for the numpy references
(ref_qwen.py for qwen3moe, ref_llama.py for llama files with experts),
written from the model definitions, independent of src/model/moe.c.

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

gpt-oss (act "oai", every tensor with a bias): logits = h @ Wr.T + br, and
  expert_e(h) = down_e(oai(gate_e h + bg_e, up_e h + bu_e)) + bd_e
  oai(g, u) = x sigmoid(1.702 x) (y + 1), x = min(g, 7), y = clip(u, -7, 7)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import arch_key, softmax, swiglu  # noqa: E402


def load(g, arch, i):
    """Layer i's MoE tensors and the file's routing keys, as a dict."""
    key = arch_key(g, arch)
    gate_def = 3 if arch == "gpt-oss" else 1
    d = {
        "n_used": key("expert_used_count"),
        "norm_w": bool(key("expert_weights_norm", True if arch in ("qwen3moe", "llama") else False)),
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
