#!/usr/bin/env python3
"""Latte's own GGUF v3 reader and writer (Python, numpy optional).

Format (little-endian throughout):
  magic "GGUF", u32 version (3), u64 tensor_count, u64 kv_count,
  kv_count x (string key, u32 value type, value),
  tensor_count x (string name, u32 n_dims, n_dims x u64 ne (ne[0] = contiguous
  dim first), i32 ggml type, u64 offset relative to the data section),
  zero padding up to `general.alignment` (default 32), tensor data; every
  tensor's offset is a multiple of the alignment and each tensor's data is
  followed by zero padding up to the alignment (as llama.cpp's gguf-py does,
  including after the last tensor).
  string = u64 byte length + UTF-8 bytes (no NUL);
  array  = u32 element type, u64 count, elements.

Value types: u8 0, i8 1, u16 2, i16 3, u32 4, i32 5, f32 6, bool 7, string 8,
array 9, u64 10, i64 11, f64 12.

Tensor data is held as raw bytes, so reading and writing a file back needs no
numpy; numpy is needed only to build tensors from arrays (F32, F16, Q8_0) or to
view tensors as arrays.

Shapes: `ne` is GGUF order (ne[0] contiguous).  A numpy/PyTorch array of shape
(out, in) is stored with ne = (in, out) and the same bytes: ne = reversed
numpy shape.
"""

import struct
import sys
from collections import OrderedDict

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
GGUF_DEFAULT_ALIGNMENT = 32


class VT:
    """GGUF metadata value types."""
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


VT_NAMES = {v: k for k, v in VT.__dict__.items() if not k.startswith("_")}

# struct format for the fixed-size scalar types
_SCALAR_FMT = {
    VT.UINT8: "<B", VT.INT8: "<b", VT.UINT16: "<H", VT.INT16: "<h",
    VT.UINT32: "<I", VT.INT32: "<i", VT.FLOAT32: "<f", VT.BOOL: "<?",
    VT.UINT64: "<Q", VT.INT64: "<q", VT.FLOAT64: "<d",
}


class GT:
    """ggml tensor types (those Latte writes or may meet)."""
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    BF16 = 30


GT_NAMES = {v: k for k, v in GT.__dict__.items() if not k.startswith("_")}

# type -> (elements per block, bytes per block)
GT_BLOCK = {
    GT.F32: (1, 4), GT.F16: (1, 2), GT.BF16: (1, 2),
    GT.Q4_0: (32, 18), GT.Q4_1: (32, 20), GT.Q5_0: (32, 22), GT.Q5_1: (32, 24),
    GT.Q8_0: (32, 34), GT.Q8_1: (32, 36),
    GT.Q2_K: (256, 84), GT.Q3_K: (256, 110), GT.Q4_K: (256, 144),
    GT.Q5_K: (256, 176), GT.Q6_K: (256, 210), GT.Q8_K: (256, 292),
}


def tensor_nbytes(ne, gtype):
    blk, bs = GT_BLOCK[gtype]
    n = 1
    for d in ne:
        n *= int(d)
    if ne[0] % blk != 0:
        raise ValueError("ne[0]=%d is not a multiple of the block size %d of %s"
                         % (ne[0], blk, GT_NAMES.get(gtype, gtype)))
    return n // blk * bs


def _pad(n, align):
    return (n + align - 1) // align * align


# ----------------------------------------------------------------------------
# Quantization helpers (numpy)
# ----------------------------------------------------------------------------

def quantize_q8_0(x):
    """Round-to-nearest Q8_0 along the last axis (blocks of 32).

    d = max|x| / 127 (stored as fp16), q = round(x / d) as int8 (0 where d = 0).
    As in ggml's quantize_row_q8_0_ref, the quotient uses the f32 d before
    fp16 rounding (id = 1/d), and rounding is to nearest (ties away from zero,
    like C's roundf).  Returns raw bytes of the blocks.
    """
    import numpy as np
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % 32 != 0:
        raise ValueError("Q8_0 needs the last dimension to be a multiple of 32")
    blocks = x.reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idn = np.where(d > 0, np.float32(1.0) / np.where(d > 0, d, 1), 0).astype(np.float32)
    v = blocks * idn[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)  # roundf
    out = np.zeros((blocks.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def dequantize_q8_0(raw, n):
    import numpy as np
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
    d = b[:, 0:2].copy().view("<f2").astype(np.float32)
    q = b[:, 2:].copy().view(np.int8).astype(np.float32)
    return (q * d).reshape(-1)[:n]


# ----------------------------------------------------------------------------
# Data model
# ----------------------------------------------------------------------------

class KV(object):
    __slots__ = ("key", "vtype", "value", "subtype")

    def __init__(self, key, vtype, value, subtype=None):
        self.key, self.vtype, self.value, self.subtype = key, vtype, value, subtype

    def __repr__(self):
        if self.vtype == VT.ARRAY:
            return "KV(%s, ARRAY[%s] x%d)" % (self.key, VT_NAMES[self.subtype], len(self.value))
        return "KV(%s, %s, %r)" % (self.key, VT_NAMES[self.vtype], self.value)


class Tensor(object):
    __slots__ = ("name", "ne", "gtype", "data", "offset")

    def __init__(self, name, ne, gtype, data, offset=None):
        self.name = name
        self.ne = tuple(int(d) for d in ne)
        self.gtype = gtype
        self.data = data        # raw bytes
        self.offset = offset    # relative offset in the data section (reader)

    @property
    def nbytes(self):
        return tensor_nbytes(self.ne, self.gtype)

    def numpy(self):
        """The tensor as a float32 (or its own dtype) numpy array, numpy shape = reversed ne."""
        import numpy as np
        shape = tuple(reversed(self.ne))
        n = 1
        for d in self.ne:
            n *= d
        if self.gtype == GT.F32:
            return np.frombuffer(self.data, dtype="<f4").reshape(shape)
        if self.gtype == GT.F16:
            return np.frombuffer(self.data, dtype="<f2").reshape(shape)
        if self.gtype == GT.BF16:
            u = np.frombuffer(self.data, dtype="<u2").astype(np.uint32) << 16
            return u.view(np.float32).reshape(shape)
        if self.gtype == GT.Q8_0:
            return dequantize_q8_0(self.data, n).reshape(shape)
        raise NotImplementedError("numpy() for type %s" % GT_NAMES.get(self.gtype))

    def __repr__(self):
        return "Tensor(%s, ne=%s, %s)" % (self.name, self.ne, GT_NAMES.get(self.gtype, self.gtype))


# ----------------------------------------------------------------------------
# Reader
# ----------------------------------------------------------------------------

class GGUFReader(object):
    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        magic = self._take(4)
        if magic != GGUF_MAGIC:
            raise ValueError("%s: not a GGUF file (magic %r)" % (path, magic))
        self.version = self._scalar(VT.UINT32)
        if self.version != 3:
            raise ValueError("%s: GGUF version %d, only 3 is supported" % (path, self.version))
        n_tensors = self._scalar(VT.UINT64)
        n_kv = self._scalar(VT.UINT64)
        self.kv = OrderedDict()
        for _ in range(n_kv):
            key = self._string()
            vtype = self._scalar(VT.UINT32)
            if vtype == VT.ARRAY:
                sub = self._scalar(VT.UINT32)
                cnt = self._scalar(VT.UINT64)
                vals = [self._value(sub) for _ in range(cnt)]
                if key in self.kv:
                    raise ValueError("duplicate key %s" % key)
                self.kv[key] = KV(key, vtype, vals, sub)
            else:
                if key in self.kv:
                    raise ValueError("duplicate key %s" % key)
                self.kv[key] = KV(key, vtype, self._value(vtype))
        self.alignment = GGUF_DEFAULT_ALIGNMENT
        if "general.alignment" in self.kv:
            self.alignment = int(self.kv["general.alignment"].value)
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            nd = self._scalar(VT.UINT32)
            ne = [self._scalar(VT.UINT64) for _ in range(nd)]
            gtype = self._scalar(VT.INT32)
            off = self._scalar(VT.UINT64)
            infos.append((name, ne, gtype, off))
        self.info_end = self.pos
        self.data_start = _pad(self.pos, self.alignment)
        self.tensors = OrderedDict()
        for name, ne, gtype, off in infos:
            nb = tensor_nbytes(ne, gtype)
            start = self.data_start + off
            if start + nb > len(self.buf):
                raise ValueError("tensor %s runs past the end of the file" % name)
            self.tensors[name] = Tensor(name, ne, gtype, self.buf[start:start + nb], off)

    # -- primitives
    def _take(self, n):
        b = self.buf[self.pos:self.pos + n]
        if len(b) != n:
            raise ValueError("truncated GGUF file")
        self.pos += n
        return b

    def _scalar(self, vt):
        fmt = _SCALAR_FMT[vt]
        v, = struct.unpack(fmt, self._take(struct.calcsize(fmt)))
        return v

    def _string(self):
        n = self._scalar(VT.UINT64)
        return self._take(n).decode("utf-8")

    def _value(self, vt):
        if vt == VT.STRING:
            return self._string()
        if vt == VT.ARRAY:
            sub = self._scalar(VT.UINT32)
            cnt = self._scalar(VT.UINT64)
            return [self._value(sub) for _ in range(cnt)]
        return self._scalar(vt)

    # -- conveniences
    def get(self, key, default=None):
        kv = self.kv.get(key)
        return default if kv is None else kv.value


# ----------------------------------------------------------------------------
# Writer
# ----------------------------------------------------------------------------

def _enc_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _enc_value(vt, v, subtype=None):
    if vt == VT.STRING:
        return _enc_string(v)
    if vt == VT.ARRAY:
        if subtype is None:
            raise ValueError("array needs an element type")
        parts = [struct.pack("<IQ", subtype, len(v))]
        if subtype in _SCALAR_FMT:
            fmt = "<%d%s" % (len(v), _SCALAR_FMT[subtype][1])
            parts.append(struct.pack(fmt, *v))
        else:
            for e in v:
                parts.append(_enc_value(subtype, e))
        return b"".join(parts)
    if vt == VT.BOOL:
        return struct.pack("<?", bool(v))
    return struct.pack(_SCALAR_FMT[vt], v)


class GGUFWriter(object):
    """Collect KV pairs and tensors in order, then write() once."""

    def __init__(self, path, arch=None, alignment=GGUF_DEFAULT_ALIGNMENT):
        self.path = path
        self.alignment = alignment
        self.kv = OrderedDict()
        self.tensors = OrderedDict()
        if arch is not None:
            self.add_string("general.architecture", arch)
        if alignment != GGUF_DEFAULT_ALIGNMENT:
            self.add_uint32("general.alignment", alignment)

    # -- metadata
    def add_key(self, key, vtype, value, subtype=None):
        if key in self.kv:
            raise ValueError("duplicate key %s" % key)
        if vtype == VT.ARRAY and subtype is None:
            raise ValueError("array %s needs an element type" % key)
        self.kv[key] = KV(key, vtype, value, subtype)

    def add_uint8(self, k, v): self.add_key(k, VT.UINT8, int(v))
    def add_int8(self, k, v): self.add_key(k, VT.INT8, int(v))
    def add_uint16(self, k, v): self.add_key(k, VT.UINT16, int(v))
    def add_int16(self, k, v): self.add_key(k, VT.INT16, int(v))
    def add_uint32(self, k, v): self.add_key(k, VT.UINT32, int(v))
    def add_int32(self, k, v): self.add_key(k, VT.INT32, int(v))
    def add_uint64(self, k, v): self.add_key(k, VT.UINT64, int(v))
    def add_int64(self, k, v): self.add_key(k, VT.INT64, int(v))
    def add_float32(self, k, v): self.add_key(k, VT.FLOAT32, float(v))
    def add_float64(self, k, v): self.add_key(k, VT.FLOAT64, float(v))
    def add_bool(self, k, v): self.add_key(k, VT.BOOL, bool(v))
    def add_string(self, k, v): self.add_key(k, VT.STRING, str(v))

    def add_array(self, k, values, subtype):
        self.add_key(k, VT.ARRAY, list(values), subtype)

    # -- tensors
    def add_tensor_raw(self, name, ne, gtype, data):
        if name in self.tensors:
            raise ValueError("duplicate tensor %s" % name)
        if len(name.encode("utf-8")) >= 64:
            raise ValueError("tensor name too long: %s" % name)
        if not 1 <= len(ne) <= 4:
            raise ValueError("tensor %s: 1..4 dims" % name)
        t = Tensor(name, ne, gtype, bytes(data))
        if len(t.data) != t.nbytes:
            raise ValueError("tensor %s: %d bytes, expected %d" % (name, len(t.data), t.nbytes))
        self.tensors[name] = t

    def add_tensor(self, name, array, gtype=GT.F32):
        """Add a numpy array (numpy shape = reversed ne), converting to gtype."""
        import numpy as np
        a = np.asarray(array)
        ne = tuple(reversed(a.shape)) if a.ndim > 0 else (1,)
        if gtype == GT.F32:
            data = np.ascontiguousarray(a, dtype="<f4").tobytes()
        elif gtype == GT.F16:
            data = np.ascontiguousarray(a, dtype="<f2").tobytes()
        elif gtype == GT.Q8_0:
            data = quantize_q8_0(a)
        else:
            raise NotImplementedError("writing %s from arrays" % GT_NAMES.get(gtype))
        self.add_tensor_raw(name, ne, gtype, data)

    # -- output
    def to_bytes(self):
        out = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))]
        for kv in self.kv.values():
            out.append(_enc_string(kv.key))
            out.append(struct.pack("<I", kv.vtype))
            out.append(_enc_value(kv.vtype, kv.value, kv.subtype))
        off = 0
        offsets = []
        for t in self.tensors.values():
            offsets.append(off)
            out.append(_enc_string(t.name))
            out.append(struct.pack("<I", len(t.ne)))
            out.append(struct.pack("<%dQ" % len(t.ne), *t.ne))
            out.append(struct.pack("<iQ", t.gtype, off))
            off += _pad(len(t.data), self.alignment)
        head = b"".join(out)
        parts = [head, b"\0" * (_pad(len(head), self.alignment) - len(head))]
        for t in self.tensors.values():
            parts.append(t.data)
            parts.append(b"\0" * (_pad(len(t.data), self.alignment) - len(t.data)))
        return b"".join(parts)

    def write(self):
        data = self.to_bytes()
        with open(self.path, "wb") as f:
            f.write(data)
        return len(data)


def writer_from_reader(reader, path):
    """A writer holding exactly the reader's KV pairs and tensors, in order."""
    w = GGUFWriter(path, alignment=reader.alignment)
    w.kv = OrderedDict()  # keep the file's own order, incl. general.alignment if present
    for kv in reader.kv.values():
        w.add_key(kv.key, kv.vtype, kv.value, kv.subtype)
    for t in reader.tensors.values():
        w.add_tensor_raw(t.name, t.ne, t.gtype, t.data)
    return w


def dump(path, max_array=8, out=sys.stdout):
    r = GGUFReader(path)
    out.write("%s: GGUF v%d, %d KV, %d tensors, alignment %d, data at %d\n"
              % (path, r.version, len(r.kv), len(r.tensors), r.alignment, r.data_start))
    for kv in r.kv.values():
        if kv.vtype == VT.ARRAY:
            v = kv.value[:max_array]
            out.write("  %-50s ARRAY[%s] x%d %r%s\n" % (kv.key, VT_NAMES[kv.subtype], len(kv.value),
                                                      v, " ..." if len(kv.value) > max_array else ""))
        else:
            val = kv.value
            if isinstance(val, str) and len(val) > 120:
                val = val[:120] + "..."
            out.write("  %-50s %-7s %r\n" % (kv.key, VT_NAMES[kv.vtype], val))
    for t in r.tensors.values():
        out.write("  %-32s %-5s ne=%-22s off=%d\n" % (t.name, GT_NAMES.get(t.gtype, t.gtype),
                                                      list(t.ne), t.offset))
    return r


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.stderr.write("usage: latte_gguf.py FILE.gguf  (dumps metadata and tensor table)\n")
        sys.exit(2)
    for p in sys.argv[1:]:
        dump(p)
