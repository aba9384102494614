#!/usr/bin/env python3
"""ref_whisper.py - an independent numpy Whisper forward pass (float64), the
way OpenAI's whisper/model.py defines it, to hold src/speech/whisper_*.c to.

  ref_whisper.py MODEL.bin MEL.f32 N_FRAMES 1,2,3 N_GEN OUT

writes, from one encode of the mel:
  OUT.enc.f32     the encoder output [ceil(N_FRAMES / 2)][n_state]
  OUT.logits.f32  the decoder logits [n_tokens][n_vocab] of the prefix 1,2,3
  OUT.greedy.txt  N_GEN greedily chosen tokens after it, comma-separated

MODEL.bin is a whisper.cpp ggml file, parsed here on its own (header, mel
filters, vocabulary, then tensors to the end, no padding); tensors are
decoded by tools/quant_ref.py. MEL.f32 holds [n_mels][N_FRAMES] float32.
Nothing is cached: the decoder runs the whole prefix through a causal mask
on every step, so the C side's key/value cache is checked, not copied. The
convolutions are written as sums over shifted slices, not as im2col.
"""
import struct
import sys

import numpy as np

from ref_common import TENSOR_TYPES, attention, causal, gelu_erf, layer_norm
from quant_ref import DEQUANT

MAGIC = 0x67676D6C
HPARAMS = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
           "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype")
EPS = 1e-5


class WhisperFile:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        magic, = struct.unpack_from("<I", data, 0)
        assert magic == MAGIC, "not a whisper ggml file"
        self.hp = dict(zip(HPARAMS, struct.unpack_from("<11i", data, 4)))
        p = 48
        n_mel, n_fft = struct.unpack_from("<2i", data, p)
        p += 8 + 4 * n_mel * n_fft
        n_tok, = struct.unpack_from("<i", data, p)
        p += 4
        for _ in range(n_tok):
            n, = struct.unpack_from("<I", data, p)
            p += 4 + n
        self.data, self.tensors, self.cache = data, {}, {}
        while p < len(data):
            n_dims, name_len, t = struct.unpack_from("<3i", data, p)
            p += 12
            dims = struct.unpack_from("<%di" % n_dims, data, p)
            p += 4 * n_dims
            name = data[p:p + name_len].decode()
            p += name_len
            _, bs, bb = TENSOR_TYPES[t]
            n = int(np.prod(dims))
            self.tensors[name] = (dims, t, p)
            p += n // bs * bb
        assert p == len(data), "tensor data past the end"

    def t(self, name):
        """float64, shaped as torch holds it: dims reversed (decoded once)."""
        if name not in self.cache:
            self.cache[name] = self.decode(name)
        return self.cache[name]

    def decode(self, name):
        dims, t, start = self.tensors[name]
        tname, bs, bb = TENSOR_TYPES[t]
        n = int(np.prod(dims))
        x = DEQUANT[tname](self.data[start:start + n // bs * bb]).astype(np.float64)
        return x.reshape(list(reversed(dims)))


def conv1d(x, w, b, stride):
    """x [in][L], w [out][in][3], padding 1: [out][(L - 1) // stride + 1]."""
    L = x.shape[1]
    n_out = (L + 2 - 3) // stride + 1
    xp = np.pad(x, ((0, 0), (1, 1)))
    y = np.zeros((w.shape[0], n_out))
    for k in range(3):
        y += w[:, :, k] @ xp[:, k:k + stride * (n_out - 1) + 1:stride]
    return y + b.reshape(-1, 1)


class Whisper:
    def __init__(self, path):
        self.f = f = WhisperFile(path)
        self.hp = hp = f.hp
        self.H = hp["n_audio_head"]

    def mha(self, pfx, x, xa, visible):
        t = self.f.t
        q = x @ t(pfx + ".query.weight").T + t(pfx + ".query.bias")
        k = xa @ t(pfx + ".key.weight").T
        v = xa @ t(pfx + ".value.weight").T + t(pfx + ".value.bias")
        H = self.H
        d = q.shape[1] // H
        o = attention(q.reshape(len(q), H, d), k.reshape(len(k), H, d), v.reshape(len(v), H, d),
                      1.0 / np.sqrt(d), visible)
        return o @ t(pfx + ".out.weight").T + t(pfx + ".out.bias")

    def ln(self, pfx, x):
        return layer_norm(x, self.f.t(pfx + ".weight"), self.f.t(pfx + ".bias"), EPS)

    def mlp(self, pfx, x):
        t = self.f.t
        h = gelu_erf(self.ln(pfx + ".mlp_ln", x) @ t(pfx + ".mlp.0.weight").T + t(pfx + ".mlp.0.bias"))
        return h @ t(pfx + ".mlp.2.weight").T + t(pfx + ".mlp.2.bias")

    def encode(self, mel):
        t = self.f.t
        x = gelu_erf(conv1d(mel, t("encoder.conv1.weight"), t("encoder.conv1.bias"), 1))
        x = gelu_erf(conv1d(x, t("encoder.conv2.weight"), t("encoder.conv2.bias"), 2)).T
        x = x + t("encoder.positional_embedding")[:len(x)]
        for i in range(self.hp["n_audio_layer"]):
            p = "encoder.blocks.%d" % i
            h = self.ln(p + ".attn_ln", x)
            x = x + self.mha(p + ".attn", h, h, None)
            x = x + self.mlp(p, x)
        return self.ln("encoder.ln_post", x)

    def logits(self, enc, toks, last=False):
        t = self.f.t
        emb = t("decoder.token_embedding.weight")
        x = emb[toks] + t("decoder.positional_embedding")[:len(toks)]
        mask = causal(len(toks))
        for i in range(self.hp["n_text_layer"]):
            p = "decoder.blocks.%d" % i
            h = self.ln(p + ".attn_ln", x)
            x = x + self.mha(p + ".attn", h, h, mask)
            x = x + self.mha(p + ".cross_attn", self.ln(p + ".cross_attn_ln", x), enc, None)
            x = x + self.mlp(p, x)
        if last:
            x = x[-1:]
        return self.ln("decoder.ln", x) @ emb.T


def main(argv):
    if len(argv) != 7:
        sys.exit(__doc__)
    path, mel_path, n_frames, toks, n_gen, out = argv[1:]
    m = Whisper(path)
    n_frames, n_gen, toks = int(n_frames), int(n_gen), [int(x) for x in toks.split(",")]
    mel = np.fromfile(mel_path, dtype="<f4").astype(np.float64)
    assert mel.size == m.hp["n_mels"] * n_frames, "mel has %d values, not n_mels x %d" % (mel.size, n_frames)
    enc = m.encode(mel.reshape(m.hp["n_mels"], n_frames))
    enc.astype("<f4").tofile(out + ".enc.f32")
    m.logits(enc, toks).astype("<f4").tofile(out + ".logits.f32")
    seq = list(toks)
    for _ in range(n_gen):
        seq.append(int(np.argmax(m.logits(enc, seq, last=True)[-1])))
    with open(out + ".greedy.txt", "w") as f:
        f.write(",".join(map(str, seq[len(toks):])) + "\n")


if __name__ == "__main__":
    main(sys.argv)
