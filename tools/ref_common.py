#!/usr/bin/python3
"""ref_common.py - what the numpy model references (tools/ref_*.py) share.

The references are float64 numpy implementations of each architecture,
written from the model definitions and independent of the C code (src/model);
the tests in tests/unit/test_model_*.c run them and compare. Everything here
is a textbook building block they all use, kept once:

  Gguf            a GGUF file: its key/values and its tensors, decoded to
                  float64 (byte reading from gguf_ref.Reader, tensor decoding
                  from quant_ref.DEQUANT)
  arch_key        the ARCH.* hyper-parameter lookup with defaults
  Decoder         the dimensions, RoPE keys and embedding/output tensors every
                  decoder-only reference reads, and its RMS norm
  rms_norm, layer_norm, softmax, silu, gelu_tanh, gelu_erf, swiglu
  rope            RoPE as a multiplication by complex numbers, NeoX halves
                  (i, i + n_rot/2) or adjacent pairs (2i, 2i+1)
  attention       the full attention matrix: grouped heads, scale, optional
                  soft-cap and mask, keys/values optionally rounded to f16
  pool, cli       the command line the tests call (logits, greedy, embed)
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_ref import Reader  # noqa: E402
from quant_ref import DEQUANT  # noqa: E402

# GGUF tensor type number -> (name, block elements, block bytes)
TENSOR_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    30: ("BF16", 1, 2), 16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136), 29: ("IQ1_M", 256, 56), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
POOLING = {"none": 0, "mean": 1, "cls": 2, "last": 3}


def read_value(r, t):
    if t in SCALAR:
        return r.unpack(SCALAR[t])
    if t == 8:
        return r.string().decode("utf-8", "replace")
    if t == 9:
        et = r.unpack("<I")
        n = r.unpack("<Q")
        return [read_value(r, et) for _ in range(n)]
    raise ValueError("unknown value type %d" % t)


class Gguf:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        r = Reader(self.data)
        assert r.take(4) == b"GGUF", "not a GGUF file"
        version = r.unpack("<I")
        assert version in (2, 3), version
        n_tensors = r.unpack("<Q")
        n_kv = r.unpack("<Q")
        self.kv = {}
        for _ in range(n_kv):
            key = r.string().decode()
            self.kv[key] = read_value(r, r.unpack("<I"))
        infos = [r.tensor_info() for _ in range(n_tensors)]
        align = self.kv.get("general.alignment", 32)
        base = (r.p + align - 1) // align * align
        self.tensors = {}
        for name, dims, t, off in infos:
            self.tensors[name] = (dims, t, base + off)

    def has(self, name):
        return name in self.tensors

    def tensor(self, name):
        """float64 array shaped like numpy sees the matrix: [dims[1]][dims[0]]."""
        dims, t, start = self.tensors[name]
        tname, bs, bb = TENSOR_TYPES[t]
        n = 1
        for d in dims:
            n *= d
        nbytes = n // bs * bb
        x = DEQUANT[tname](self.data[start:start + nbytes]).astype(np.float64)
        return x.reshape(list(reversed(dims))) if len(dims) > 1 else x


def arch_key(g, arch):
    """key(k, default): the value of ARCH.k; a missing key without a default
    is an error naming it."""
    def key(k, default=None):
        v = g.kv.get(arch + "." + k, default)
        assert v is not None, "missing %s.%s" % (arch, k)
        return v
    return key


class Decoder:
    """The part every decoder-only reference reads the same way: the
    architecture check, the attention dimensions, the RoPE base and linear
    scaling, the RMS epsilon, token_embd [n_vocab][n_embd], output (tied to
    token_embd when absent) and output_norm [n_embd]. scale_linear: whether
    the older rope.scale_linear key stands in for rope.scaling.factor."""

    def __init__(self, path, archs, kv_f16=False, scale_linear=True):
        g = Gguf(path)
        arch = g.kv["general.architecture"]
        assert arch in archs, arch
        self.g, self.arch, self.kv_f16 = g, arch, kv_f16
        self.key = key = arch_key(g, arch)
        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.head_dim = key("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = key("rope.dimension_count", self.head_dim)
        self.eps = key("attention.layer_norm_rms_epsilon", 1e-5)
        self.base = key("rope.freq_base", 10000.0)
        self.freq_scale, self.yarn, self.mscale = rope_scaling(g, arch, self.n_rot, self.base, scale_linear)
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.out_norm = g.tensor("output_norm.weight")

    def norm(self, x, w):
        return rms_norm(x, w, self.eps)


def rope_scaling(g, arch, n_rot, base, scale_linear=True):
    """(freq_scale, yarn, mscale) from the file's ARCH.rope.scaling.* keys:
    "linear" (or absent) divides positions by factor (rope.scale_linear in
    older files, when scale_linear); "yarn" divides them too, with yarn =
    (ext_factor, lo, hi) for rope(); mscale multiplies cos and sin:
    rope.scaling.attn_factor, times 1 + 0.1 ln(factor) for YaRN with a
    factor > 1 (yarn_attn_factor instead when yarn_ext_factor is 0)."""
    key = arch_key(g, arch)
    kind = key("rope.scaling.type", "linear")
    f = 0.0
    if kind != "none":
        f = key("rope.scaling.factor", 0.0)
        if scale_linear or kind == "yarn":
            f = f or key("rope.scale_linear", 0.0)
    mscale = key("rope.scaling.attn_factor", 1.0)
    yarn = None
    if kind == "yarn":
        n_orig = key("rope.scaling.original_context_length", key("context_length"))
        fast, slow = key("rope.scaling.yarn_beta_fast", 32.0), key("rope.scaling.yarn_beta_slow", 1.0)
        ext = key("rope.scaling.yarn_ext_factor", 1.0)

        def turns(beta):
            # the pair index i at which n_orig positions turn pair i by beta full turns
            return n_rot * np.log(n_orig / (beta * 2.0 * np.pi)) / (2.0 * np.log(base))
        yarn = (ext, max(0.0, np.floor(turns(fast))), min(n_rot - 1.0, np.ceil(turns(slow))))
        if ext == 0.0:
            mscale *= key("rope.scaling.yarn_attn_factor", 1.0)
        elif f > 1.0:
            mscale *= 1.0 + 0.1 * np.log(f)
    return (1.0 / f if f else 1.0), yarn, mscale


def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    """(x - mean(x)) / sqrt(var(x) + eps) * w + b over the last axis."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def softmax(v):
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def silu(v):
    return v / (1.0 + np.exp(-v))


def swiglu(h, gate, up, down):
    """The gated feed-forward down (silu(gate h) * up h), h [n][n_embd]."""
    return (silu(h @ gate.T) * (h @ up.T)) @ down.T


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_erf(x):
    """The exact GELU, x/2 (1 + erf(x / sqrt 2)) (PyTorch's nn.GELU)."""
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def rope(x, n_rot, base, freq_scale=1.0, neox=True, factors=None, mscale=1.0, yarn=None):
    """x [n_tok][n_heads][head_dim], positions 0..n-1: the first n_rot dims of
    every head as n_rot/2 complex numbers, NeoX halves x[i] + j x[i + n_rot/2]
    (neox) or adjacent pairs x[2i] + j x[2i+1], each turned by theta_i =
    pos * freq_scale * base^(-2i/n_rot) / factors[i] and scaled by mscale.
    yarn = (ext, lo, hi): the frequency of pair i is instead the blend
    (1 - w_i) freq_scale + w_i of the scaled and the unscaled one, w_i =
    ext * (1 - clip((i - lo) / max(hi - lo, 0.001), 0, 1))."""
    n = x.shape[0]
    x = x.copy()
    half = n_rot // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_rot)
    if factors is not None:
        inv = inv / factors
    scale = np.full(half, freq_scale, dtype=np.float64)
    if yarn is not None:
        ext, lo, hi = yarn
        w = ext * (1.0 - np.clip((np.arange(half) - lo) / max(hi - lo, 0.001), 0.0, 1.0))
        scale = (1.0 - w) * freq_scale + w
    theta = np.arange(n, dtype=np.float64)[:, None] * (scale * inv)[None, :]
    rot = (mscale * np.exp(1j * theta))[:, None, :]  # [n][1][half]
    lo, hi = (slice(0, half), slice(half, n_rot)) if neox else (slice(0, n_rot, 2), slice(1, n_rot, 2))
    z = (x[:, :, lo] + 1j * x[:, :, hi]) * rot
    x[:, :, lo], x[:, :, hi] = z.real, z.imag
    return x


def attention(q, k, v, scale, visible=None, softcap=0.0, kv_f16=False, sinks=None):
    """q [n][H][d], k and v [n][Hkv][d] -> [n][H*d]: head h reads kv head
    h // (H / Hkv); scores (q . k) * scale, then softcap tanh(s / softcap)
    when softcap is set; visible [n][n] (query, key) masks, None sees all.
    kv_f16 rounds keys and values to float16 first, as the C runtime's
    default F16 cache stores them. sinks [H] (gpt-oss): one more logit per
    head in every row's softmax, a column without a value (dropped after
    the softmax, so a row's weights sum to less than 1)."""
    n, H, d = q.shape
    rep = H // k.shape[1]
    if kv_f16:
        k = k.astype(np.float16).astype(np.float64)
        v = v.astype(np.float16).astype(np.float64)
    q = q.transpose(1, 0, 2)                               # [H][n][d]
    k = np.repeat(k.transpose(1, 0, 2), rep, axis=0)
    v = np.repeat(v.transpose(1, 0, 2), rep, axis=0)
    s = (q @ k.transpose(0, 2, 1)) * scale                 # [H][n][n]
    if softcap:
        s = softcap * np.tanh(s / softcap)
    if visible is not None:
        s = np.where(visible[None], s, -np.inf)
    if sinks is not None:
        s = np.concatenate([s, np.broadcast_to(sinks[:, None, None], (H, n, 1))], axis=-1)
        return (softmax(s)[:, :, :n] @ v).transpose(1, 0, 2).reshape(n, H * d)
    return (softmax(s) @ v).transpose(1, 0, 2).reshape(n, H * d)


def slides(pattern, l):
    """Whether layer l is a sliding-window layer under the file's
    sliding_window_pattern: a period P (P - 1 sliding layers, then one
    global) or, as the converter writes from a layer_types list, one bool
    per layer (true = sliding)."""
    if isinstance(pattern, list):
        return bool(pattern[l])
    return l % pattern < pattern - 1


def causal(n, window=0):
    """[n][n] (query i, key j): j <= i, and i - j < window when window > 0."""
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    return (j <= i) & ((i - j) < window) if window > 0 else j <= i


def pool(x, pooling, normalize):
    """x [n][n_embd] pooled (POOLING: none, mean, cls = the first, last),
    then divided by its L2 norm when normalize."""
    if pooling == 1:
        x = x.mean(axis=0, keepdims=True)
    elif pooling == 2:
        x = x[:1]
    elif pooling == 3:
        x = x[-1:]
    if normalize:
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return x


def cli(argv, load, usage, options=("--kv",)):
    """The references' command line:
      NAME logits MODEL.gguf 1,2,3 OUT.f32   logits [n_tokens][n_vocab], raw
                                             little-endian f32 (OUT "-":
                                             the last row's top 10 as text)
      NAME greedy MODEL.gguf 1,2,3 N OUT.txt the N greedily chosen tokens
                                             after the prompt, comma-separated
      NAME embed MODEL.gguf 1,2,3 OUT.f32 [--pooling P] [--normalize]
                                             pool(model.hidden(tokens)), then
                                             model.project when it has one,
                                             then normalized; raw f32
    load(path, opts) builds the model from the options (options: those that
    take a value; "--pooling" and "--normalize" are always understood).
    The model has forward(tokens) -> logits and, for embed, hidden(tokens)
    and pooling (its file's default)."""
    opts, args = {}, []
    it = iter(argv)
    for a in it:
        if a in options or a == "--pooling":
            opts[a] = next(it)
        elif a == "--normalize":
            opts[a] = True
        else:
            args.append(a)
    if len(args) < 5 or args[1] not in ("logits", "greedy", "embed"):
        sys.exit("usage: " + usage)
    cmd, path, toks = args[1], args[2], [int(t) for t in args[3].split(",")]
    m = load(path, opts)
    if not hasattr(m, "hidden" if cmd == "embed" else "forward"):
        sys.exit("usage: " + usage)
    if cmd == "logits":
        lg = m.forward(toks)
        if args[4] == "-":
            top = np.argsort(-lg[-1])[:10]
            print(" ".join("%d:%.6f" % (t, lg[-1][t]) for t in top))
        else:
            lg.astype("<f4").tofile(args[4])
    elif cmd == "greedy":
        n = int(args[4])
        seq = list(toks)
        for _ in range(n):
            seq.append(int(np.argmax(m.forward(seq)[-1])))
        with open(args[5], "w") as f:
            f.write(",".join(map(str, seq[len(toks):])) + "\n")
    else:
        pooling = POOLING[opts["--pooling"]] if "--pooling" in opts else m.pooling
        v = pool(m.hidden(toks), pooling, False)
        if hasattr(m, "project"):  # projections after pooling (gemma-embedding's dense_2, dense_3)
            v = m.project(v)
        if "--normalize" in opts:
            v = v / np.linalg.norm(v, axis=-1, keepdims=True)
        v.astype("<f4").tofile(args[4])
