#!/usr/bin/env python3
"""Self-test of scripts/latte_gguf.py (needs no numpy for the round trips).

1. Reads each reference GGUF (written by llama.cpp's gguf-py) and writes it
   back from the parsed KV pairs and tensors: the bytes must be identical
   (same key order and value types, same tensor-info order, same alignment
   padding between header and data and after every tensor).
2. If numpy is available: writes a small file with every metadata value type
   (and arrays of strings, ints, floats and bools; the writer cannot write
   nested arrays, which llama.cpp's files do not hold) and F32/F16/Q8_0
   tensors, reads it back and checks the values, and checks Q8_0
   round-to-nearest. This reader shares the writer's format tables, so
   test_runtime's GgufPythonWriter test reads such a file with the C++
   reader too.
Usage: check_gguf_py.py [FILE.gguf ...]   (default: ../shared/testdata/*.gguf
and models/*.gguf; without arguments llama.cpp's two files and the shipped
model must be there).  Exit status 0 on success.
"""
import glob
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import latte_gguf as g  # noqa: E402


def roundtrip(path):
    r = g.GGUFReader(path)
    w = g.writer_from_reader(r, None)
    out = w.to_bytes()
    with open(path, "rb") as f:
        orig = f.read()
    if out != orig:
        n = min(len(out), len(orig))
        first = next((i for i in range(n) if out[i] != orig[i]), n)
        print("FAIL %s: rewrite differs (sizes %d vs %d, first difference at byte %d)"
              % (path, len(orig), len(out), first))
        return False
    print("ok   %s: %d KV, %d tensors, %d bytes rewritten byte-identically"
          % (path, len(r.kv), len(r.tensors), len(orig)))
    return True


def types_test():
    try:
        import numpy as np
    except ImportError:
        if os.environ.get("LATTE_REQUIRE_NUMPY") == "1":  # scripts/test.sh
            print("FAIL value-type/quantization test: numpy missing (scripts/setup.sh installs python3-numpy)")
            return False
        print("skip value-type/quantization test (no numpy)")
        return True
    VT = g.VT
    fd, path = tempfile.mkstemp(suffix=".gguf")
    os.close(fd)
    try:
        w = g.GGUFWriter(path, arch="test")
        vals = [("u8", VT.UINT8, 250), ("i8", VT.INT8, -100), ("u16", VT.UINT16, 65000),
                ("i16", VT.INT16, -30000), ("u32", VT.UINT32, 4000000000), ("i32", VT.INT32, -2000000000),
                ("f32", VT.FLOAT32, 0.5), ("b", VT.BOOL, True), ("s", VT.STRING, "h\u00e9llo \u4e16\u754c \U0001F600"),
                ("u64", VT.UINT64, 2 ** 63 + 5), ("i64", VT.INT64, -2 ** 62), ("f64", VT.FLOAT64, 1e-300)]
        for k, t, v in vals:
            w.add_key(k, t, v)
        w.add_array("as", ["a b", "", "\u00e9\u00e8"], VT.STRING)
        w.add_array("ai", [1, -2, 3], VT.INT32)
        w.add_array("af", [0.25, -1.5], VT.FLOAT32)
        w.add_array("ab", [True, False], VT.BOOL)
        rng = np.random.RandomState(0)
        a32 = rng.randn(3, 64).astype(np.float32)
        a16 = rng.randn(2, 4, 8).astype(np.float32)
        aq = rng.randn(5, 96).astype(np.float32)
        aq[1, :32] = 0.0
        w.add_tensor("t32", a32)
        w.add_tensor("t16", a16, g.GT.F16)
        w.add_tensor("tq", aq, g.GT.Q8_0)
        w.write()
        r = g.GGUFReader(path)
        for k, t, v in vals:
            kv = r.kv[k]
            assert kv.vtype == t, (k, kv.vtype, t)
            if t == VT.FLOAT32:
                assert abs(kv.value - v) < 1e-7
            else:
                assert kv.value == v, (k, kv.value, v)
        assert r.get("as") == ["a b", "", "\u00e9\u00e8"]
        assert r.get("ai") == [1, -2, 3] and r.get("af") == [0.25, -1.5] and r.get("ab") == [True, False]
        t = r.tensors["t32"]
        assert t.ne == (64, 3) and t.gtype == g.GT.F32 and np.array_equal(t.numpy(), a32)
        t = r.tensors["t16"]
        assert t.ne == (8, 4, 2) and np.array_equal(t.numpy(), a16.astype(np.float16))
        t = r.tensors["tq"]
        assert t.ne == (96, 5) and len(t.data) == 5 * 3 * 34
        deq = t.numpy()
        blocks = aq.reshape(-1, 32)
        d = np.abs(blocks).max(axis=1) / 127.0
        err = np.abs(deq.reshape(-1, 32) - blocks)
        # rounding error <= d/2, plus the fp16 rounding of d (relative 2^-11) times |q| <= 127
        assert np.all(err <= d[:, None] * (0.5 + 127 * 2.0 ** -11) + 1e-12), err.max()
        assert np.all(deq[1, :32] == 0.0)
        # each non-zero block's max-magnitude element quantizes to +-127
        q = np.frombuffer(t.data, dtype=np.uint8).reshape(-1, 34)[:, 2:].view(np.int8)
        nz = np.abs(blocks).max(axis=1) > 0
        assert np.all(np.abs(q.astype(np.int32)).max(axis=1)[nz] == 127)
        # offsets are aligned
        for tt in r.tensors.values():
            assert tt.offset % r.alignment == 0
        assert r.data_start % r.alignment == 0
        # round trip of the synthetic file as well
        assert roundtrip(path)
        print("ok   all value types, F32/F16/Q8_0 tensors")
        return True
    finally:
        os.unlink(path)


# The files a run without arguments must rewrite: llama.cpp's two and the
# shipped model. A missing one fails the check (a glob that matched nothing
# let it pass having rewritten no real file).
REQUIRED = [os.path.join("..", "shared", "testdata", "tiny-dense.gguf"),
            os.path.join("..", "shared", "testdata", "tiny-moe-v2-lite.gguf"),
            os.path.join("models", "latte-tiny-mla.gguf")]


def main():
    files = sys.argv[1:]
    ok = True
    if not files:
        root = os.path.dirname(HERE)
        for rel in REQUIRED:
            if not os.path.isfile(os.path.join(root, rel)):
                print("FAIL %s: missing (the check rewrites it)" % os.path.normpath(os.path.join(root, rel)))
                ok = False
        files = sorted(glob.glob(os.path.join(root, "..", "shared", "testdata", "*.gguf")))
        files += sorted(glob.glob(os.path.join(root, "models", "*.gguf")))
    for p in files:
        ok = roundtrip(p) and ok
    ok = types_test() and ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
