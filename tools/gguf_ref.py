#!/usr/bin/python3
"""gguf_ref.py - an independent GGUF reader, for tests.

Parses a GGUF v2/v3 file with Python's struct module and prints a canonical
text dump that tests/unit/test_gguf.c compares with the same dump produced
through the C reader (src/gguf). It shares no code with the C side, so a
writer bug that the C reader would mirror (both wrong the same way) shows up.

  gguf_ref.py dump FILE.gguf OUT.txt

Dump format, one item per line:
  version V / alignment A / data_offset D
  kv KEY TYPE VALUE      ints in decimal, floats as raw bits in hex
                         (f32:xxxxxxxx, f64:xxxxxxxxxxxxxxxx), bools 0/1,
                         strings as hex bytes, arrays [ELEMTYPE N: v,v,...]
  tensor NAME TYPE d0,d1,.. OFFSET
"""
import struct
import sys

TYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
         "uint64", "int64", "float64"]
FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 7: "<B", 10: "<Q", 11: "<q"}


class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def take(self, n):
        if self.p + n > len(self.d):
            raise ValueError("truncated")
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return self.take(self.unpack("<Q"))

    def tensor_info(self):
        """One tensor-info record: (name, dims, type number, data offset)."""
        name = self.string().decode()
        nd = self.unpack("<I")
        dims = [self.unpack("<Q") for _ in range(nd)]
        t = self.unpack("<I")
        return name, dims, t, self.unpack("<Q")

    def value(self, t):
        if t in FMT:
            v = self.unpack(FMT[t])
            return str(1 if (t == 7 and v) else v)
        if t == 6:
            return "f32:%08x" % self.unpack("<I")
        if t == 12:
            return "f64:%016x" % self.unpack("<Q")
        if t == 8:
            return self.string().hex()
        if t == 9:
            et = self.unpack("<I")
            n = self.unpack("<Q")
            return "[%s %d: %s]" % (TYPES[et], n, ",".join(self.value(et) for _ in range(n)))
        raise ValueError("unknown type %d" % t)


def dump(path):
    with open(path, "rb") as f:
        r = Reader(f.read())
    assert r.take(4) == b"GGUF"
    version = r.unpack("<I")
    n_tensors = r.unpack("<Q")
    n_kv = r.unpack("<Q")
    out = ["version %d" % version]
    kvs = []
    alignment = 32
    for _ in range(n_kv):
        key = r.string().decode()
        t = r.unpack("<I")
        start = r.p
        v = r.value(t)
        if key == "general.alignment":
            alignment = struct.unpack("<I", r.d[start:start + 4])[0]
        kvs.append("kv %s %s %s" % (key, TYPES[t], v))
    tensors = []
    for _ in range(n_tensors):
        name, dims, t, off = r.tensor_info()
        tensors.append("tensor %s %d %s %d" % (name, t, ",".join(map(str, dims)), off))
    data_offset = (r.p + alignment - 1) // alignment * alignment
    out += ["alignment %d" % alignment, "data_offset %d" % data_offset] + kvs + tensors
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1] != "dump":
        sys.exit("usage: gguf_ref.py dump FILE OUT")
    with open(sys.argv[3], "w") as f:
        f.write(dump(sys.argv[2]))
