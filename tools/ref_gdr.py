#!/usr/bin/python3
"""ref_gdr.py - the gated delta rule (Gated DeltaNet, src/kernels/delta.h) in
float64 numpy, token by token, as the model definitions write it: for the C
kernels' test (tests/unit/test_delta.c).

    ref_gdr.py IN.gguf OUT.f32

IN holds F32 tensors q [n][d_k], k [n][d_k], v [n][d_v], a [n] (log-decay),
beta [n] and s0 [d_k][d_v] (the state before the first token). OUT gets o
[n][d_v] then the final state [d_k][d_v], raw little-endian f32. Per token:
S = exp(a) S;  u = beta (v - S^T k);  S = S + k u^T;  o = S^T q.
"""
import sys

import numpy as np

from ref_common import Gguf


def gated_delta(q, k, v, a, beta, s):
    o = np.zeros((q.shape[0], v.shape[1]))
    for t in range(q.shape[0]):
        s = np.exp(a[t]) * s
        u = beta[t] * (v[t] - s.T @ k[t])
        s = s + np.outer(k[t], u)
        o[t] = s.T @ q[t]
    return o, s


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: ref_gdr.py IN.gguf OUT.f32")
    g = Gguf(argv[1])
    q, k, v, a, beta, s0 = (g.tensor(n) for n in ("q", "k", "v", "a", "beta", "s0"))
    o, s = gated_delta(q, k, v, a, beta, s0)
    with open(argv[2], "wb") as f:
        f.write(np.concatenate([o.ravel(), s.ravel()]).astype("<f4").tobytes())


if __name__ == "__main__":
    main(sys.argv)
