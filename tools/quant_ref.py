#!/usr/bin/python3
"""quant_ref.py - an independent numpy reference for GGUF tensor types.

Used by tests/unit/test_quant.c (run with /usr/bin/python3 and Debian's
python3-numpy). It decodes raw block bytes of every reference type into f32
and converts to/from f16 and bf16, so the C kernels can be compared bit for
bit against code that shares nothing with them: the block layouts here are
written as numpy record dtypes and decoded with the loop structure of ggml's
reference dequantizers (super-block halves, shifts, masks), while the C side
indexes element by element.

Arithmetic is float32 throughout, one operation at a time, in the order the
format defines (e.g. (d*sc)*q - dmin*m), so results are bit-identical.

Commands (all files are raw little-endian):
  dequant TYPE IN OUT [TYPE IN OUT ...]  blocks of TYPE -> f32
  f32_to_f16 IN OUT                      f32 -> f16 bits (numpy astype)
  f16_to_f32 IN OUT                      f16 bits -> f32
  f32_to_bf16 IN OUT                     f32 -> bf16 bits (exact nearest-even
                                         rounding done with Python fractions
                                         of the exact values, not bit tricks)
"""
import sys

import numpy as np

F32 = np.float32
QK_K = 256


def f16(a):
    return a.astype(F32)


def blocks(data, dtype):
    dt = np.dtype(dtype)
    assert len(data) % dt.itemsize == 0, (len(data), dt.itemsize)
    return np.frombuffer(data, dtype=dt)


def deq_f32(data):
    return np.frombuffer(data, dtype="<f4").astype(F32)


def deq_f16(data):
    return np.frombuffer(data, dtype="<f2").astype(F32)


def deq_bf16(data):
    u = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
    return u.view(F32)


def nibbles(qs):
    """Q4/Q5 32-element blocks: low nibbles are elements 0..15, high 16..31."""
    return np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32)


def deq_q4_0(data):
    b = blocks(data, [("d", "<f2"), ("qs", "u1", 16)])
    d = f16(b["d"])[:, None]
    q = (nibbles(b["qs"]) - 8).astype(F32)
    return (q * d).reshape(-1)


def deq_q4_1(data):
    b = blocks(data, [("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)])
    d, m = f16(b["d"])[:, None], f16(b["m"])[:, None]
    q = nibbles(b["qs"]).astype(F32)
    return (q * d + m).reshape(-1)


def fifth_bits(qh):
    """qh as a little-endian u32 per block; bit j is bit 4 of element j."""
    u = qh.astype(np.uint32)
    word = u[:, 0] | (u[:, 1] << 8) | (u[:, 2] << 16) | (u[:, 3] << 24)
    return ((word[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32)


def deq_q5_0(data):
    b = blocks(data, [("d", "<f2"), ("qh", "u1", 4), ("qs", "u1", 16)])
    d = f16(b["d"])[:, None]
    q = nibbles(b["qs"]) | (fifth_bits(b["qh"]) << 4)
    return ((q - 16).astype(F32) * d).reshape(-1)


def deq_q5_1(data):
    b = blocks(data, [("d", "<f2"), ("m", "<f2"), ("qh", "u1", 4), ("qs", "u1", 16)])
    d, m = f16(b["d"])[:, None], f16(b["m"])[:, None]
    q = nibbles(b["qs"]) | (fifth_bits(b["qh"]) << 4)
    return (q.astype(F32) * d + m).reshape(-1)


def deq_q8_0(data):
    b = blocks(data, [("d", "<f2"), ("qs", "i1", 32)])
    return (b["qs"].astype(F32) * f16(b["d"])[:, None]).reshape(-1)


def deq_q2_K(data):
    b = blocks(data, [("scales", "u1", 16), ("qs", "u1", 64), ("d", "<f2"), ("dmin", "<f2")])
    nb = len(b)
    d, dmin = f16(b["d"]), f16(b["dmin"])
    y = np.zeros((nb, QK_K), dtype=F32)
    out, sub = 0, 0
    for half in range(2):
        q = b["qs"][:, 32 * half: 32 * half + 32].astype(np.int32)
        for shift in (0, 2, 4, 6):
            for part in range(2):
                sc = b["scales"][:, sub].astype(np.int32)
                sub += 1
                dl = d * (sc & 15).astype(F32)
                ml = dmin * (sc >> 4).astype(F32)
                qq = ((q[:, 16 * part: 16 * part + 16] >> shift) & 3).astype(F32)
                y[:, out: out + 16] = dl[:, None] * qq - ml[:, None]
                out += 16
    return y.reshape(-1)


def q3_K_scales(raw):
    """The ggml unpacking of 12 bytes into 16 6-bit scales, with 32-bit masks."""
    a = raw.copy().view("<u4")  # (nb, 3)
    a0, a1, tmp = a[:, 0], a[:, 1], a[:, 2]
    k1, k2 = np.uint32(0x03030303), np.uint32(0x0F0F0F0F)
    s = np.stack([
        (a0 & k2) | (((tmp >> 0) & k1) << 4),
        (a1 & k2) | (((tmp >> 2) & k1) << 4),
        ((a0 >> 4) & k2) | (((tmp >> 4) & k1) << 4),
        ((a1 >> 4) & k2) | (((tmp >> 6) & k1) << 4),
    ], axis=1).astype("<u4")
    return s.view(np.int8).reshape(len(raw), 16).astype(np.int32) - 32


def deq_q3_K(data):
    b = blocks(data, [("hmask", "u1", 32), ("qs", "u1", 64), ("scales", "u1", 12), ("d", "<f2")])
    nb = len(b)
    d = f16(b["d"])
    sc = q3_K_scales(np.ascontiguousarray(b["scales"]))
    hm = b["hmask"].astype(np.int32)
    y = np.zeros((nb, QK_K), dtype=F32)
    out, sub, m = 0, 0, 1
    for half in range(2):
        q = b["qs"][:, 32 * half: 32 * half + 32].astype(np.int32)
        for shift in (0, 2, 4, 6):
            for part in range(2):
                dl = d * sc[:, sub].astype(F32)
                sub += 1
                sl = slice(16 * part, 16 * part + 16)
                low = (q[:, sl] >> shift) & 3
                qq = (low - np.where(hm[:, sl] & m, 0, 4)).astype(F32)
                y[:, out: out + 16] = dl[:, None] * qq
                out += 16
            m <<= 1
    return y.reshape(-1)


def k4_scale_min(sc, j):
    """6-bit scale and min j (0..7) of a Q4_K/Q5_K block, from its 12 bytes."""
    sc = sc.astype(np.int32)
    if j < 4:
        return sc[:, j] & 63, sc[:, j + 4] & 63
    s = (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4)
    m = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return s, m


def deq_q45_K(b, with_qh):
    nb = len(b)
    d, dmin = f16(b["d"]), f16(b["dmin"])
    y = np.zeros((nb, QK_K), dtype=F32)
    qh = b["qh"].astype(np.int32) if with_qh else None
    u1, u2 = 1, 2
    for p in range(4):
        q = b["qs"][:, 32 * p: 32 * p + 32].astype(np.int32)
        for h, (bits, u) in enumerate(((q & 15, u1), (q >> 4, u2))):
            s, m = k4_scale_min(b["scales"], 2 * p + h)
            d1 = d * s.astype(F32)
            m1 = dmin * m.astype(F32)
            if with_qh:
                bits = bits + np.where(qh & u, 16, 0)
            y[:, 64 * p + 32 * h: 64 * p + 32 * h + 32] = d1[:, None] * bits.astype(F32) - m1[:, None]
        u1 <<= 2
        u2 <<= 2
    return y.reshape(-1)


def deq_q4_K(data):
    return deq_q45_K(blocks(data, [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qs", "u1", 128)]), False)


def deq_q5_K(data):
    return deq_q45_K(blocks(data, [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qh", "u1", 32),
                                   ("qs", "u1", 128)]), True)


def deq_q6_K(data):
    b = blocks(data, [("ql", "u1", 128), ("qh", "u1", 64), ("scales", "i1", 16), ("d", "<f2")])
    nb = len(b)
    d = f16(b["d"])
    y = np.zeros((nb, QK_K), dtype=F32)
    for half in range(2):
        ql = b["ql"][:, 64 * half: 64 * half + 64].astype(np.int32)
        qh = b["qh"][:, 32 * half: 32 * half + 32].astype(np.int32)
        sc = b["scales"][:, 8 * half: 8 * half + 8].astype(F32)
        q1 = ((ql[:, :32] & 15) | (((qh >> 0) & 3) << 4)) - 32
        q2 = ((ql[:, 32:] & 15) | (((qh >> 2) & 3) << 4)) - 32
        q3 = ((ql[:, :32] >> 4) | (((qh >> 4) & 3) << 4)) - 32
        q4 = ((ql[:, 32:] >> 4) | (((qh >> 6) & 3) << 4)) - 32
        for r, qq in enumerate((q1, q2, q3, q4)):
            for l16 in range(2):  # sub-block of 16 within the 32
                s = sc[:, 2 * r + l16]
                cols = slice(128 * half + 32 * r + 16 * l16, 128 * half + 32 * r + 16 * l16 + 16)
                y[:, cols] = (d * s)[:, None] * qq[:, 16 * l16: 16 * l16 + 16].astype(F32)
    return y.reshape(-1)


def deq_q8_K(data):
    b = blocks(data, [("d", "<f4"), ("qs", "i1", 256), ("bsums", "<i2", 16)])
    return (b["d"].astype(F32)[:, None] * b["qs"].astype(F32)).reshape(-1)


# ---- i-quants, ternary and microscaling types -------------------------------
# The codebooks are format data; they are read from the C data file so both
# sides index the same grids (their transcription is checked separately by the
# C test against entries copied from the format). Everything else here (the
# sign tables, level tables, bit layouts) is written out independently.

KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=F32)
# doubled E2M1 values: sign bit 3, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (x2)
E2M1_X2 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=F32)
_GRIDS = {}


def grid(name):
    """Grid `name` as an (entries, bytes-per-entry) uint8 array."""
    if not _GRIDS:
        import os
        import re
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "kernels", "iq_grids.c")
        text = open(path).read()
        for m in re.finditer(r"const uint(64|32)_t (\w+)\[(\d+)\] = \{(.*?)\};", text, re.S):
            vals = [int(v, 16) for v in re.findall(r"0x([0-9a-f]+)", m.group(4))]
            assert len(vals) == int(m.group(3)), m.group(2)
            dt = "<u8" if m.group(1) == "64" else "<u4"
            _GRIDS[m.group(2)] = np.array(vals, dtype=dt).view(np.uint8).reshape(len(vals), -1)
    return _GRIDS[name]


def ksigns():
    """The 8 signs (+1/-1 floats) of each 7-bit sign field: bit 7 is set when
    an odd number of the 7 bits is (an even count of negatives overall)."""
    s7 = np.arange(128, dtype=np.uint8)
    bits = np.unpackbits(s7[:, None], axis=1, bitorder="little")  # (128, 8), bit 7 = 0
    bits[:, 7] = bits[:, :7].sum(axis=1) % 2
    return np.where(bits == 1, F32(-1), F32(1))


def sign_bits8(byte):
    """+1/-1 floats of the 8 bits of each byte (bit j set: negative)."""
    bits = np.unpackbits(np.asarray(byte, dtype=np.uint8)[..., None], axis=-1, bitorder="little")
    return np.where(bits == 1, F32(-1), F32(1))


def deq_iq4_nl(data):
    b = blocks(data, [("d", "<f2"), ("qs", "u1", 16)])
    return (f16(b["d"])[:, None] * KVALUES_IQ4NL[nibbles(b["qs"])]).reshape(-1)


def deq_iq4_xs(data):
    b = blocks(data, [("d", "<f2"), ("scales_h", "<u2"), ("scales_l", "u1", 4), ("qs", "u1", 128)])
    d = f16(b["d"])
    sh = b["scales_h"].astype(np.int32)
    y = np.zeros((len(b), QK_K), dtype=F32)
    for ib in range(8):
        ls = ((b["scales_l"][:, ib // 2].astype(np.int32) >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4)
        dl = d * (ls - 32).astype(F32)
        y[:, 32 * ib: 32 * ib + 32] = dl[:, None] * KVALUES_IQ4NL[nibbles(b["qs"][:, 16 * ib: 16 * ib + 16])]
    return y.reshape(-1)


def deq_mxfp4(data):
    b = blocks(data, [("e", "u1"), ("qs", "u1", 16)])
    d = np.ldexp(F32(1), b["e"].astype(np.int32) - 128).astype(F32)
    return (E2M1_X2[nibbles(b["qs"])] * d[:, None]).reshape(-1)


def deq_tq1_0(data):
    b = blocks(data, [("qs", "u1", 48), ("qh", "u1", 4), ("d", "<f2")])
    d = f16(b["d"])[:, None]
    pow3 = [1, 3, 9, 27, 81, 243]

    def trits(byte, n):
        q = (byte.astype(np.uint32) * pow3[n]) & 255
        return ((q * 3) >> 8).astype(np.int32) - 1

    out = []
    for n in range(5):
        out.append(trits(b["qs"][:, :32], n))
    for n in range(5):
        out.append(trits(b["qs"][:, 32:48], n))
    for n in range(4):
        out.append(trits(b["qh"], n))
    return (np.concatenate(out, axis=1).astype(F32) * d).reshape(-1)


def deq_tq2_0(data):
    b = blocks(data, [("qs", "u1", 64), ("d", "<f2")])
    d = f16(b["d"])[:, None]
    out = []
    for j in (0, 32):
        for s in range(4):
            out.append(((b["qs"][:, j: j + 32].astype(np.int32) >> (2 * s)) & 3) - 1)
    return (np.concatenate(out, axis=1).astype(F32) * d).reshape(-1)


def scale_q(d, s, add, mul):
    """ggml's (d * (add + s)) * mul in float32, one rounding per operation."""
    return (d * (F32(add) + s.astype(F32))) * F32(mul)


def deq_iq2_xxs(data):
    b = blocks(data, [("d", "<f2"), ("q", "<u4", 16)])
    d, q = f16(b["d"]), b["q"].astype(np.int64)
    g, ks = grid("iq2xxs_grid").astype(F32), ksigns()
    y = np.zeros((len(b), 32, 8), dtype=F32)
    for ib in range(8):
        a0, a1 = q[:, 2 * ib], q[:, 2 * ib + 1]
        db = scale_q(d, a1 >> 28, 0.5, 0.25)
        for l in range(4):
            y[:, 4 * ib + l] = (db[:, None] * g[(a0 >> (8 * l)) & 255]) * ks[(a1 >> (7 * l)) & 127]
    return y.reshape(-1)


def deq_iq2_xs(data):
    b = blocks(data, [("d", "<f2"), ("q", "<u2", 32), ("scales", "u1", 8)])
    d, q = f16(b["d"]), b["q"].astype(np.int64)
    g, ks = grid("iq2xs_grid").astype(F32), ksigns()
    y = np.zeros((len(b), 32, 8), dtype=F32)
    for k in range(32):
        sc = (b["scales"][:, k // 4].astype(np.int64) >> (4 * ((k % 4) // 2))) & 15
        db = scale_q(d, sc, 0.5, 0.25)
        y[:, k] = (db[:, None] * g[q[:, k] & 511]) * ks[q[:, k] >> 9]
    return y.reshape(-1)


def deq_iq2_s(data):
    b = blocks(data, [("d", "<f2"), ("qs", "u1", 32), ("signs", "u1", 32), ("qh", "u1", 8), ("scales", "u1", 8)])
    d = f16(b["d"])
    g = grid("iq2s_grid").astype(F32)
    y = np.zeros((len(b), 32, 8), dtype=F32)
    for k in range(32):
        ib, l = k // 4, k % 4
        sc = (b["scales"][:, ib].astype(np.int64) >> (4 * (l // 2))) & 15
        db = scale_q(d, sc, 0.5, 0.25)
        idx = b["qs"][:, k].astype(np.int64) | (((b["qh"][:, ib].astype(np.int64) >> (2 * l)) & 3) << 8)
        y[:, k] = (db[:, None] * g[idx]) * sign_bits8(b["signs"][:, k])
    return y.reshape(-1)


def deq_iq3_xxs(data):
    b = blocks(data, [("d", "<f2"), ("qs", "u1", 64), ("ss", "<u4", 8)])
    d = f16(b["d"])
    g, ks = grid("iq3xxs_grid").astype(F32), ksigns()
    y = np.zeros((len(b), 32, 8), dtype=F32)
    for ib in range(8):
        a = b["ss"][:, ib].astype(np.int64)
        db = scale_q(d, a >> 28, 0.5, 0.5)
        for l in range(4):
            vals = np.concatenate([g[b["qs"][:, 8 * ib + 2 * l]], g[b["qs"][:, 8 * ib + 2 * l + 1]]], axis=1)
            y[:, 4 * ib + l] = (db[:, None] * vals) * ks[(a >> (7 * l)) & 127]
    return y.reshape(-1)


def deq_iq3_s(data):
    b = blocks(data, [("d", "<f2"), ("qs", "u1", 64), ("qh", "u1", 8), ("signs", "u1", 32), ("scales", "u1", 4)])
    d = f16(b["d"])
    g = grid("iq3s_grid").astype(F32)
    y = np.zeros((len(b), 32, 8), dtype=F32)
    for ib in range(8):
        sc = (b["scales"][:, ib // 2].astype(np.int64) >> (4 * (ib % 2))) & 15
        db = d * (1 + 2 * sc).astype(F32)
        qh = b["qh"][:, ib].astype(np.int64)
        for l in range(4):
            i1 = b["qs"][:, 8 * ib + 2 * l].astype(np.int64) | (((qh >> (2 * l)) & 1) << 8)
            i2 = b["qs"][:, 8 * ib + 2 * l + 1].astype(np.int64) | (((qh >> (2 * l + 1)) & 1) << 8)
            vals = np.concatenate([g[i1], g[i2]], axis=1)
            y[:, 4 * ib + l] = (db[:, None] * vals) * sign_bits8(b["signs"][:, 4 * ib + l])
    return y.reshape(-1)


def deq_iq1_s(data):
    b = blocks(data, [("d", "<f2"), ("qs", "u1", 32), ("qh", "<u2", 8)])
    d = f16(b["d"])
    g = grid("iq1s_grid").view(np.int8).astype(F32)
    y = np.zeros((len(b), 32, 8), dtype=F32)
    for ib in range(8):
        h = b["qh"][:, ib].astype(np.int64)
        dl = d * (2 * ((h >> 12) & 7) + 1).astype(F32)
        delta = np.where(h & 0x8000, F32(-0.125), F32(0.125)).astype(F32)
        for l in range(4):
            idx = b["qs"][:, 4 * ib + l].astype(np.int64) | (((h >> (3 * l)) & 7) << 8)
            y[:, 4 * ib + l] = dl[:, None] * (g[idx] + delta[:, None])
    return y.reshape(-1)


def deq_iq1_m(data):
    b = blocks(data, [("qs", "u1", 32), ("qh", "u1", 16), ("sc", "<u2", 4)])
    sc = b["sc"].astype(np.int64)
    dbits = (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0xF0) | ((sc[:, 2] >> 4) & 0xF00) | (sc[:, 3] & 0xF000)
    d = dbits.astype("<u2").view("<f2").astype(F32)
    g = grid("iq1s_grid").view(np.int8).astype(F32)
    y = np.zeros((len(b), 32, 8), dtype=F32)
    for ib in range(8):
        w = sc[:, ib // 2]
        for l in range(4):
            s3 = (w >> (6 * (ib % 2) + 3 * (l // 2))) & 7
            dl = d * (2 * s3 + 1).astype(F32)
            nib = (b["qh"][:, 2 * ib + l // 2].astype(np.int64) >> (4 * (l % 2))) & 15
            idx = b["qs"][:, 4 * ib + l].astype(np.int64) | ((nib & 7) << 8)
            delta = np.where(nib & 8, F32(-0.125), F32(0.125)).astype(F32)
            y[:, 4 * ib + l] = dl[:, None] * (g[idx] + delta[:, None])
    return y.reshape(-1)


DEQUANT = {
    "F32": deq_f32, "F16": deq_f16, "BF16": deq_bf16, "Q4_0": deq_q4_0, "Q4_1": deq_q4_1,
    "Q5_0": deq_q5_0, "Q5_1": deq_q5_1, "Q8_0": deq_q8_0, "Q2_K": deq_q2_K, "Q3_K": deq_q3_K,
    "Q4_K": deq_q4_K, "Q5_K": deq_q5_K, "Q6_K": deq_q6_K, "Q8_K": deq_q8_K,
    "IQ4_NL": deq_iq4_nl, "IQ4_XS": deq_iq4_xs, "MXFP4": deq_mxfp4, "TQ1_0": deq_tq1_0, "TQ2_0": deq_tq2_0,
    "IQ2_XXS": deq_iq2_xxs, "IQ2_XS": deq_iq2_xs, "IQ2_S": deq_iq2_s, "IQ3_XXS": deq_iq3_xxs,
    "IQ3_S": deq_iq3_s, "IQ1_S": deq_iq1_s, "IQ1_M": deq_iq1_m,
}


def f32_to_bf16_exact(x):
    """Nearest bf16 of each f32 by exact comparison of distances (fractions),
    ties to the even mantissa; NaN -> quiet NaN with the sign and top bits."""
    from fractions import Fraction
    u = x.view(np.uint32)
    out = np.zeros(len(u), dtype=np.uint16)
    for i, bits in enumerate(u.tolist()):
        hi16 = bits >> 16
        if (bits & 0x7FFFFFFF) > 0x7F800000:
            out[i] = hi16 | 0x40
            continue
        if (bits & 0x7FFFFFFF) == 0x7F800000 or (bits & 0xFFFF) == 0:
            out[i] = hi16
            continue
        v = Fraction(float(np.uint32(bits).view(F32)))
        lo_b, up_b = hi16, hi16 + 1  # same sign: magnitudes increase with the bits

        def val(b16):
            if (b16 & 0x7FFF) >= 0x7F80:  # rounds up to infinity
                return None
            return Fraction(float(np.uint32(b16 << 16).view(F32)))
        lo, up = val(lo_b), val(up_b)
        if up is None:
            # distance to "infinity" is decided as IEEE does: round as if the
            # exponent were unbounded (the value 2^128 for the step above max)
            up = Fraction(2) ** 128 * (1 if v > 0 else -1)
        dl, du = abs(v - lo), abs(up - v)
        if dl < du or (dl == du and lo_b % 2 == 0):
            out[i] = lo_b
        else:
            out[i] = up_b
    return out


def main(argv):
    cmd = argv[1]
    if cmd == "dequant":
        args = argv[2:]
        for i in range(0, len(args), 3):
            typ, src, dst = args[i: i + 3]
            with open(src, "rb") as f:
                y = DEQUANT[typ](f.read())
            y.astype("<f4").tofile(dst)
    elif cmd == "f32_to_f16":
        x = np.fromfile(argv[2], dtype="<f4")
        with np.errstate(over="ignore"):
            x.astype("<f2").view("<u2").tofile(argv[3])
    elif cmd == "f16_to_f32":
        np.fromfile(argv[2], dtype="<f2").astype("<f4").tofile(argv[3])
    elif cmd == "f32_to_bf16":
        f32_to_bf16_exact(np.fromfile(argv[2], dtype="<f4")).astype("<u2").tofile(argv[3])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
