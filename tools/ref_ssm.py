#!/usr/bin/python3
"""ref_ssm.py - the Mamba-2 selective scan (src/kernels/ssm.h) and the
grouped gated RMS norm after it, in float64 numpy, token by token as the
Mamba-2 paper's recurrence writes them: for the C kernels' test
(tests/unit/test_ssm.c). The model references (ref_mamba2.py) use the same
functions.

    ref_ssm.py IN.gguf OUT.f32

IN holds F32 tensors x [n][H][P], B and C [n][G][N], dt [n][H], dt_bias,
A, D [H], s0 [H][P][N], z [n][H*P] and norm [H*P], and the key eps. OUT
gets y [n][H*P] (the scan), the final state [H][P][N], then the gated norm
of y, raw little-endian f32.
"""
import sys

import numpy as np

from ref_common import Gguf, silu


def softplus(v):
    return np.where(v > 20.0, v, np.log1p(np.exp(np.minimum(v, 20.0))))


def ssm_scan(x, B, C, dt, dt_bias, A, D, s):
    """x [n][H][P], B, C [n][G][N], dt [n][H]; s [H][P][N] the state before
    token 0. Returns y [n][H][P] and the state after the last token."""
    n, H, P = x.shape
    G = B.shape[1]
    y = np.zeros((n, H, P))
    s = s.copy()
    for t in range(n):
        d = softplus(dt[t] + dt_bias)
        for h in range(H):
            g = h // (H // G)
            s[h] = np.exp(d[h] * A[h]) * s[h] + d[h] * np.outer(x[t, h], B[t, g])
            y[t, h] = s[h] @ C[t, g] + D[h] * x[t, h]
    return y, s


def gated_norm(y, z, w, n_group, eps):
    """y, z [n][d_inner]: rms over each group's slice of y * silu(z), times w."""
    v = y * silu(z)
    n, d = v.shape
    v = v.reshape(n, n_group, d // n_group)
    v = v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps)
    return v.reshape(n, d) * w


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: ref_ssm.py IN.gguf OUT.f32")
    g = Gguf(argv[1])
    x, B, C, dt, dt_bias, A, D, s0, z, w = (g.tensor(k) for k in
                                           ("x", "B", "C", "dt", "dt_bias", "A", "D", "s0", "z", "norm"))
    y, s = ssm_scan(x, B, C, dt, dt_bias, A, D, s0)
    n = x.shape[0]
    yn = gated_norm(y.reshape(n, -1), z, w, B.shape[1], g.kv["eps"])
    with open(argv[2], "wb") as f:
        f.write(np.concatenate([y.ravel(), s.ravel(), yn.ravel()]).astype("<f4").tobytes())


if __name__ == "__main__":
    main(sys.argv)
