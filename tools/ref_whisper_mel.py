#!/usr/bin/env python3
"""ref_whisper_mel.py - an independent numpy log-mel spectrogram, the way
OpenAI's whisper/audio.py computes it, to hold src/speech/whisper_mel.c to.

  ref_whisper_mel.py MODEL.bin PCM.f32 OUT.f32

Reads the filter bank from the whisper.cpp ggml file MODEL.bin (its own
parse of the header), the 16 kHz mono float32 samples of PCM.f32, and
writes the [n_mels][n_frames] float32 features to OUT.f32. The transform is
numpy's FFT (rfft), not a DFT, on the signal reflect-padded by np.pad, in
float64 throughout.
"""
import struct
import sys

import numpy as np

N_FFT, HOP = 400, 160


def read_filters(path):
    with open(path, "rb") as f:
        head = f.read(4 * 14)
        magic, *hp = struct.unpack("<I11i2i", head)
        if magic != 0x67676D6C:
            raise SystemExit("not a whisper ggml file")
        n_mel, n_fft = hp[11], hp[12]
        fb = np.frombuffer(f.read(4 * n_mel * n_fft), dtype="<f4").astype(np.float64)
    return fb.reshape(n_mel, n_fft)


def log_mel(x, filters):
    x = np.pad(x.astype(np.float64), N_FFT // 2, mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    n_frames = 1 + (len(x) - N_FFT) // HOP
    frames = np.stack([x[t * HOP:t * HOP + N_FFT] * window for t in range(n_frames)])
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2   # [frames][201]
    power = power[:-1]                                  # whisper drops the last frame
    mel = filters @ power.T                             # [n_mels][frames]
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    filters = read_filters(sys.argv[1])
    pcm = np.fromfile(sys.argv[2], dtype="<f4")
    log_mel(pcm, filters).astype("<f4").tofile(sys.argv[3])


if __name__ == "__main__":
    main()
