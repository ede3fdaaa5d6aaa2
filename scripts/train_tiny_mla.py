#!/usr/bin/env python3
"""Train Latte's shipped tiny MLA model (deepseek2 architecture) on the King James Bible.

Why this corpus: the model is a small demo (6.4M parameters) trained on two
CPU cores, and what a newcomer needs from it is text that reads as English
sentences.  The KJV (Debian's bible-kjv-text, public domain) is ~4.3 MB of
one register only: one translator's style, a small vocabulary (~13K word
forms), very regular syntax and punctuation, every verse a sentence or two.
A model of this size learns such text fast.  Fortune cookies (the previous
corpus) mix verse, dialogue, code and jokes; WordNet glosses are fragments
rather than sentences; GCIDE mixes definitions with markup and etymologies.
Mixing any of them with the KJV would spend the small budget on two styles.

What it does (deterministic, seeded):
  1. Installs its Debian deps if missing (python3-torch, python3-numpy,
     libopenblas0-pthread, bible-kjv, bible-kjv-text) and re-runs itself
     under /usr/bin/python3 when the current interpreter lacks torch.
  2. Reads the 31,102 verses with `bible -f` (one document per verse, the
     text without its reference) and splits them by chapter: the 1,189
     chapters are numbered in canonical order and every chapter with index
     % 20 == 19 is held out whole (1,573 verses), so no held-out verse has its
     neighbours in training.  The held-out verses are written to
     models/heldout.txt, one per line.
  3. Learns a byte-level BPE vocab (GPT-2 byte<->unicode map) on the training
     split, pre-split exactly like llama.cpp's `deepseek-llm` pre-tokenizer
     (see PRE-TOKENIZER below), plus BOS/EOS control tokens.
  4. Trains, in PyTorch, the NAIVE (decompressed, MHA) form of a deepseek2
     model: MLA with q_lora, decoupled RoPE on consecutive pairs with YaRN
     (factor 4 over an original context of 64 -> context 256), one dense
     SwiGLU layer then MoE layers (softmax gating, top-k, shared expert).
  5. Exports to GGUF (deepseek2, new MLA layout, tokenizer included) with
     scripts/latte_gguf.py, mirroring ../shared/testdata/tiny-*.gguf
     (written by llama.cpp's gguf-py) in key names, types, order and tensor
     order/shapes; re-reads the file, rebuilds the model from it and checks the
     logits agree with the trained model.
  6. Writes models/<name>.eval.json: held-out perplexity computed by this code
     (token windows included, so any runtime can replay them exactly), greedy
     continuations of 20 held-out prompts, tokenizer test vectors, training log.

Checkpoints and resuming: the training loop saves model, optimizer, step and
elapsed training time every --ckpt-minutes (3) to
/work/train-ckpt/<name>/ckpt.pt (--ckpt-dir; outside the repository, next to
the learned BPE merges, which are cached there too).  Running the same
command again resumes from it, seeing the batches an uninterrupted run would
(a step's crops depend on (seed, step) only); the elapsed time carries over,
and the LR schedule is a function of the step alone (warmup, then cosine over
--steps), so where a run stops and resumes changes nothing but the time taken.
--fresh starts over.  A checkpoint written with another recipe (config, seed,
steps, corpus) is refused.  --max-minutes M stops this process's training
after M minutes at a checkpoint (exit status 3; run again to resume), for a
machine shared with other work; --export-now exports the checkpoint's model
as it is (the JSON says at which step).  A full run is 1,200 steps;
docs/training-log.md says how long they took here, and models/train.log is
the log of the run that made the shipped model.

Usage:
  scripts/train_tiny_mla.py            full run (resumes a checkpoint if there is one)
  scripts/train_tiny_mla.py --quick    a few minutes, for development (writes *-quick.*)
  scripts/train_tiny_mla.py --check-reference   compare this PyTorch forward with
        llama.cpp's logits for ../shared/testdata/tiny-*.gguf and exit
"""

import os
import sys
import subprocess


# ----------------------------------------------------------------------------
# Dependencies
# ----------------------------------------------------------------------------

def _have(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def ensure_deps():
    if os.environ.get("LATTE_TRAIN_NO_DEPS") != "1":
        missing = []
        if not (_have("torch") and _have("numpy")) and not os.path.exists("/usr/lib/python3/dist-packages/torch"):
            missing += ["python3-torch", "python3-numpy"]
        if not os.path.exists("/usr/lib/bible.data") or not any(
                os.access(os.path.join(d, "bible"), os.X_OK) for d in os.environ.get("PATH", "").split(":")):
            missing += ["bible-kjv", "bible-kjv-text"]
        # Debian's torch calls the system BLAS; the reference libblas3 is ~10x
        # slower than OpenBLAS for the matmuls of training.
        if os.path.exists("/usr/bin/dpkg") and subprocess.call(["dpkg", "-s", "libopenblas0-pthread"],
                                                               stdout=subprocess.DEVNULL,
                                                               stderr=subprocess.DEVNULL) != 0:
            missing += ["libopenblas0-pthread"]
        if missing:
            # Through env: sudo's env_reset would drop DEBIAN_FRONTEND from the environment.
            pre = ([] if os.geteuid() == 0 else ["sudo"]) + ["env", "DEBIAN_FRONTEND=noninteractive"]
            sys.stderr.write("installing %s\n" % " ".join(missing))
            subprocess.call(pre + ["apt-get", "update"])
            subprocess.check_call(pre + ["apt-get", "install", "-y"] + missing)
    if not (_have("torch") and _have("numpy")):
        # Debian's torch lives in /usr/bin/python3's dist-packages
        sysp = "/usr/bin/python3"
        if os.path.exists(sysp) and os.path.realpath(sys.executable) != os.path.realpath(sysp) \
                and os.environ.get("LATTE_TRAIN_REEXEC") != "1":
            os.environ["LATTE_TRAIN_REEXEC"] = "1"
            os.execv(sysp, [sysp] + sys.argv)
        sys.exit("train_tiny_mla.py: torch/numpy not importable (install python3-torch python3-numpy)")


ensure_deps()
# OpenBLAS's own thread pool: match torch.set_num_threads (2 unless --threads N)
_thr = "2"
for _i, _a in enumerate(sys.argv):
    if _a == "--threads" and _i + 1 < len(sys.argv):
        _thr = sys.argv[_i + 1]
    elif _a.startswith("--threads="):
        _thr = _a.split("=", 1)[1]
os.environ.setdefault("OPENBLAS_NUM_THREADS", _thr)
os.environ.setdefault("OMP_NUM_THREADS", _thr)

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import unicodedata  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import latte_gguf as gg  # noqa: E402

DEFAULT_CKPT_DIR = "/work/train-ckpt"
BOS_TEXT = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"   # <｜begin▁of▁sentence｜>
EOS_TEXT = "<\uff5cend\u2581of\u2581sentence\uff5c>"     # <｜end▁of▁sentence｜>
CHAT_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}"
    "{% elif message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}")


# ----------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------

def load_kjv():
    """All 31,102 verses of the King James Bible, in canonical order, as
    (book, chapter, verse, text) tuples.

    The text comes from Debian's bible-kjv-text (a compressed data file) read
    through the `bible` program of bible-kjv: `bible -f` prints one verse per
    line as `<Book><chapter>:<verse> <text>`."""
    out = subprocess.run(["bible", "-f", "-m", "8000", "Gen1:1-Rev22:21"], check=True,
                         stdout=subprocess.PIPE).stdout.decode("utf-8")
    verses = []
    rx = re.compile(r"^([1-3]?[A-Za-z]+)([0-9]+):([0-9]+) (.*)$")
    for line in out.split("\n"):
        if not line.strip():
            continue
        m = rx.match(line)
        assert m, "unexpected line from bible: %r" % line
        verses.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4).strip()))
    assert len(verses) == 31102, len(verses)
    return verses


def split_kjv(verses):
    """Chapters in canonical order; every 20th chapter (index % 20 == 19) is
    held out whole, so no held-out verse has its neighbours in training.
    Returns (train verses, held-out verses), each a list of verse texts in
    canonical order."""
    train, held, chap, last = [], [], -1, None
    for b, c, _, t in verses:
        if (b, c) != last:
            chap += 1
            last = (b, c)
        (held if chap % 20 == 19 else train).append(t)
    return train, held


# ----------------------------------------------------------------------------
# Pre-tokenizer: llama.cpp's deepseek-llm regexes (src/llama-vocab.cpp,
# LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM), applied in sequence by
# unicode_regex_split: each regex splits every current chunk into matches AND
# the gaps between them.  Written with explicit codepoint classes so Python's
# `re` reproduces C++'s std::wregex exactly:
#   \s  = llama.cpp's whitespace set (ASCII \t\n\v\f\r and space, plus the
#         non-ASCII whitespace that llama.cpp maps to \v before matching)
#   $   = end of the chunk (\Z here)
#   \p{N} = Unicode general category N* (hand-written scan)
# ----------------------------------------------------------------------------

WS_CLASS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

LETTER_RANGES = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377),
    (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C),
    (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE),
    (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC),
    (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128),
    (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787),
    (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A),
    (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
]
PUNCT_RANGES = [(0x21, 0x2F), (0x3A, 0x7E), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E), (0x2018, 0x201F),
                (0x3000, 0x3002)]
CJK_RANGES = [(0x4E00, 0x9FA5), (0x800, 0x4E00), (0xAC00, 0xD7FF)]


def _cls(ranges):
    parts = []
    for a, b in ranges:
        parts.append(re.escape(chr(a)) if a == b else "%s-%s" % (re.escape(chr(a)), re.escape(chr(b))))
    return "[" + "".join(parts) + "]"


PRE_REGEXES = [
    re.compile(r"[\r\n]"),
    re.compile("[%s]?%s+" % (WS_CLASS, _cls(LETTER_RANGES))),
    re.compile("[%s]?%s+" % (WS_CLASS, _cls(PUNCT_RANGES))),
    re.compile("[%s]+\\Z" % WS_CLASS),
    re.compile(_cls(CJK_RANGES) + "+"),
    None,  # \p{N}+ : hand-written below
]
# The llama.cpp source strings, for the record (report / C++ tokenizer check):
PRE_REGEX_SOURCE = [
    "[\\r\\n]",
    "\\s?[" + "".join(chr(a) if a == b else chr(a) + "-" + chr(b) for a, b in LETTER_RANGES) + "]+",
    "\\s?[" + "".join(chr(a) if a == b else chr(a) + "-" + chr(b) for a, b in PUNCT_RANGES) + "]+",
    "\\s+$",
    "[" + "".join(chr(a) if a == b else chr(a) + "-" + chr(b) for a, b in CJK_RANGES) + "]+",
    "\\p{N}+",
]


def _is_number(ch):
    return unicodedata.category(ch)[0] == "N"


def _finditer_number(s):
    i, n = 0, len(s)
    while i < n:
        if _is_number(s[i]):
            j = i + 1
            while j < n and _is_number(s[j]):
                j += 1
            yield i, j
            i = j
        else:
            i += 1


def pre_split(text):
    chunks = [text] if text else []
    for rx in PRE_REGEXES:
        nxt = []
        for c in chunks:
            spans = ((m.start(), m.end()) for m in rx.finditer(c)) if rx is not None else _finditer_number(c)
            last = 0
            for a, b in spans:
                if a > last:
                    nxt.append(c[last:a])
                nxt.append(c[a:b])
                last = b
            if last < len(c):
                nxt.append(c[last:])
        chunks = nxt
    return chunks


# ----------------------------------------------------------------------------
# Byte-level BPE
# ----------------------------------------------------------------------------

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def byte_encode(s):
    return "".join(B2U[b] for b in s.encode("utf-8"))


def train_bpe(texts, n_merges, log=print):
    """Classic BPE training on pre-split words (word-frequency counts); the most
    frequent pair wins, ties broken by the smallest (left, right) strings."""
    wc = Counter()
    for t in texts:
        for w in pre_split(t):
            wc[byte_encode(w)] += 1
    words = [list(w) for w in wc]
    freqs = [wc[w] for w in wc]
    pair_cnt = defaultdict(int)
    where = defaultdict(set)
    for i, w in enumerate(words):
        f = freqs[i]
        for a, b in zip(w, w[1:]):
            pair_cnt[(a, b)] += f
            where[(a, b)].add(i)
    merges = []
    for step in range(n_merges):
        if not pair_cnt:
            break
        best = max(pair_cnt.items(), key=lambda kv: (kv[1], _neg_key(kv[0])))
        (a, b), cnt = best
        if cnt < 2:
            break
        merges.append((a, b))
        ab = a + b
        for i in list(where[(a, b)]):
            w = words[i]
            f = freqs[i]
            # remove old pair counts of this word
            for p in zip(w, w[1:]):
                pair_cnt[p] -= f
                if pair_cnt[p] <= 0:
                    del pair_cnt[p]
                where[p].discard(i)
            nw = []
            j = 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    nw.append(ab)
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            words[i] = nw
            for p in zip(nw, nw[1:]):
                pair_cnt[p] += f
                where[p].add(i)
        where.pop((a, b), None)
        if log and (step + 1) % 500 == 0:
            log("  bpe merge %d: %r + %r (count %d)" % (step + 1, a, b, cnt))
    return merges


class _NegStr(object):
    """Inverts string ordering so max() picks the lexicographically smallest pair on ties."""
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __lt__(self, o):
        return self.k > o.k

    def __gt__(self, o):
        return self.k < o.k

    def __eq__(self, o):
        return self.k == o.k


def _neg_key(pair):
    return _NegStr(pair)


class Tokenizer(object):
    """Encoder with llama.cpp's BPE semantics: per pre-split word, repeatedly
    merge the adjacent pair with the lowest merge rank (leftmost on ties)."""

    def __init__(self, tokens, merges, bos_id, eos_id):
        self.tokens = tokens
        self.tok2id = {t: i for i, t in enumerate(tokens)}
        self.ranks = {(a, b): i for i, (a, b) in enumerate(merges)}
        self.bos_id, self.eos_id = bos_id, eos_id
        self.cache = {}

    def _bpe(self, w):
        syms = list(w)
        while len(syms) > 1:
            best, bi = None, -1
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            syms = syms[:bi] + [syms[bi] + syms[bi + 1]] + syms[bi + 2:]
        ids = []
        for s in syms:
            t = self.tok2id.get(s)
            if t is None:
                ids.extend(self.tok2id[c] for c in s)
            else:
                ids.append(t)
        return ids

    def encode(self, text, add_bos=False):
        ids = [self.bos_id] if add_bos else []
        for w in pre_split(text):
            e = byte_encode(w)
            r = self.cache.get(e)
            if r is None:
                r = self._bpe(e)
                self.cache[e] = r
            ids.extend(r)
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            if i in (self.bos_id, self.eos_id):
                continue
            out.extend(U2B[c] for c in self.tokens[i])
        return out.decode("utf-8", errors="replace")


def build_tokenizer(train_texts, vocab_size, log=print):
    n_merges = vocab_size - 256 - 2
    return tokenizer_from_merges(train_bpe(train_texts, n_merges, log=log))


def tokenizer_from_merges(merges):
    tokens = [B2U[b] for b in range(256)] + [a + b for a, b in merges]
    # duplicates cannot occur: every merge creates a new symbol
    assert len(set(tokens)) == len(tokens)
    bos_id, eos_id = len(tokens), len(tokens) + 1
    tokens += [BOS_TEXT, EOS_TEXT]
    types = [1] * (len(tokens) - 2) + [3, 3]
    return Tokenizer(tokens, merges, bos_id, eos_id), types, merges


# ----------------------------------------------------------------------------
# Model (naive / MHA form of deepseek2)
# ----------------------------------------------------------------------------

class Cfg(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def to_dict(self):
        return dict(self.__dict__)


def yarn_corr_dims(n_dims, n_ctx_orig, base, beta_fast=32.0, beta_slow=1.0):
    def cd(n_rot):
        return n_dims * math.log(n_ctx_orig / (n_rot * 2 * math.pi)) / (2 * math.log(base))
    return max(0.0, math.floor(cd(beta_fast))), min(n_dims - 1.0, math.ceil(cd(beta_slow)))


def rope_tables(cfg, n_pos):
    """cos/sin [n_pos, d_R/2] for consecutive-pair (NORM) RoPE, with YaRN as in
    ggml's rope_yarn (ext_factor 1, magnitude 1 for deepseek2)."""
    d = cfg.d_rope
    i = torch.arange(d // 2, dtype=torch.float64)
    inv = cfg.rope_base ** (-2.0 * i / d)
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    th_ext = pos * inv[None, :]
    if cfg.yarn_factor and cfg.yarn_factor != 1.0:
        th_int = th_ext / cfg.yarn_factor
        low, high = yarn_corr_dims(d, cfg.yarn_orig_ctx, cfg.rope_base)
        y = (i - low) / max(0.001, high - low)
        ramp = 1.0 - y.clamp(0.0, 1.0)
        th = th_int * (1 - ramp) + th_ext * ramp
    else:
        th = th_ext
    return torch.cos(th).float(), torch.sin(th).float()


def kq_scale(cfg):
    m = 1.0
    if cfg.yarn_factor and cfg.yarn_factor != 1.0:
        m = 1.0 + cfg.yarn_log_mul * math.log(cfg.yarn_factor)
    return m * m / math.sqrt(cfg.d_nope + cfg.d_rope)


def apply_rope(x, cos, sin):
    # x [..., T, H, d_R] with pairs (x[2i], x[2i+1]); cos/sin [T, d_R/2]
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    c = cos[:, None, :]
    s = sin[:, None, :]
    y0 = x0 * c - x1 * s
    y1 = x0 * s + x1 * c
    return torch.stack((y0, y1), dim=-1).flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MLA(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        H, dn, dr, dv, dc = cfg.n_head, cfg.d_nope, cfg.d_rope, cfg.d_v, cfg.d_c
        if cfg.q_lora:
            self.q_a = nn.Linear(cfg.d, cfg.q_lora, bias=False)
            self.q_a_norm = RMSNorm(cfg.q_lora, cfg.eps)
            self.q_b = nn.Linear(cfg.q_lora, H * (dn + dr), bias=False)
        else:
            self.q = nn.Linear(cfg.d, H * (dn + dr), bias=False)
        self.kv_a = nn.Linear(cfg.d, dc + dr, bias=False)
        self.kv_a_norm = RMSNorm(dc, cfg.eps)
        self.k_b = nn.Parameter(torch.empty(H, dn, dc))   # W_UK per head: k_nope_h = W_UK_h c
        self.v_b = nn.Parameter(torch.empty(H, dv, dc))   # W_UV per head: v_h = W_UV_h c
        self.o = nn.Linear(H * dv, cfg.d, bias=False)

    def forward(self, x, cos, sin, mask):
        cfg = self.cfg
        B, T, _ = x.shape
        H, dn, dr, dc = cfg.n_head, cfg.d_nope, cfg.d_rope, cfg.d_c
        if cfg.q_lora:
            q = self.q_b(self.q_a_norm(self.q_a(x)))
        else:
            q = self.q(x)
        q = q.view(B, T, H, dn + dr)
        q_nope, q_pe = q[..., :dn], q[..., dn:]
        kv = self.kv_a(x)
        c = self.kv_a_norm(kv[..., :dc])
        k_pe = kv[..., dc:].view(B, T, 1, dr)
        q_pe = apply_rope(q_pe, cos, sin)
        k_pe = apply_rope(k_pe, cos, sin)
        k_nope = torch.einsum("btc,hnc->bhtn", c, self.k_b)
        v = torch.einsum("btc,hvc->bhtv", c, self.v_b)
        dk = dn + dr
        qh = (torch.cat((q_nope, q_pe), -1) * kq_scale(cfg)).transpose(1, 2).reshape(B * H, T, dk)
        kh = torch.cat((k_nope, k_pe.transpose(1, 2).expand(B, H, T, dr)), -1).reshape(B * H, T, dk)
        s = torch.baddbmm(mask, qh, kh.transpose(1, 2))        # scale*q.k + causal mask
        p = torch.softmax(s, dim=-1)
        o = torch.bmm(p, v.reshape(B * H, T, cfg.d_v)).view(B, H, T, cfg.d_v)
        return self.o(o.transpose(1, 2).reshape(B, T, H * cfg.d_v))


class DenseFFN(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """llama.cpp deepseek2 routing: p = softmax(W_gate x); top-k of p; weights =
    p at those experts (no renormalization: expert_weights_norm false;
    expert_weights_scale 1); out = sum_k w_k expert_k(x) + shared(x)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        E, ff, d = cfg.n_expert, cfg.ff_exp, cfg.d
        self.gate_inp = nn.Linear(d, E, bias=False)
        self.gate_exps = nn.Parameter(torch.empty(E, ff, d))
        self.up_exps = nn.Parameter(torch.empty(E, ff, d))
        self.down_exps = nn.Parameter(torch.empty(E, d, ff))
        self.shared = DenseFFN(d, ff * cfg.n_shared) if cfg.n_shared > 0 else None
        self.aux = None

    def forward(self, x):
        cfg = self.cfg
        shp = x.shape
        xf = x.reshape(-1, shp[-1])
        p = torch.softmax(self.gate_inp(xf), dim=-1)
        w, idx = torch.topk(p, cfg.n_used, dim=-1)
        out = self.shared(xf) if self.shared is not None else torch.zeros_like(xf)
        rows_l, ye_l = [], []
        for e in range(cfg.n_expert):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            xe = xf[rows]
            h = F.silu(xe @ self.gate_exps[e].t()) * (xe @ self.up_exps[e].t())
            ye_l.append((h @ self.down_exps[e].t()) * w[rows, slot][:, None])
            rows_l.append(rows)
        if rows_l:
            out = out.index_add(0, torch.cat(rows_l), torch.cat(ye_l))
        if self.training:
            # switch-style load-balancing loss: E * sum_e f_e * P_e
            E = cfg.n_expert
            f = torch.zeros(E, device=x.device).index_add_(
                0, idx.reshape(-1), torch.ones(idx.numel(), device=x.device)) / idx.numel()
            self.aux = E * (f * p.mean(0)).sum()
        return out.reshape(shp)


class Block(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d, cfg.eps)
        self.attn = MLA(cfg)
        self.ffn_norm = RMSNorm(cfg.d, cfg.eps)
        self.is_moe = layer >= cfg.n_dense
        self.ffn = MoE(cfg) if self.is_moe else DenseFFN(cfg.d, cfg.ff)

    def forward(self, h, cos, sin, mask):
        h = h + self.attn(self.attn_norm(h), cos, sin, mask)
        return h + self.ffn(self.ffn_norm(h))


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d)
        self.blocks = nn.ModuleList([Block(cfg, i) for i in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.d, cfg.eps)
        self.out = nn.Linear(cfg.d, cfg.vocab, bias=False)
        cos, sin = rope_tables(cfg, cfg.n_ctx)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def init_weights(self, seed):
        g = torch.Generator().manual_seed(seed)
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 1:
                continue  # norms stay 1
            s = std
            if name.endswith("attn.o.weight") or name.endswith("down.weight") or name.endswith("down_exps"):
                s = std / math.sqrt(2 * self.cfg.n_layer)
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * s)

    def forward(self, ids):
        B, T = ids.shape
        if T > self.cos.shape[0]:
            cos, sin = rope_tables(self.cfg, T)
        else:
            cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.full((T, T), float("-inf")).triu(1)
        h = self.tok(ids)
        for b in self.blocks:
            h = b(h, cos, sin, mask)
        return self.out(self.norm(h))

    def aux_loss(self):
        a = [b.ffn.aux for b in self.blocks if b.is_moe and b.ffn.aux is not None]
        return sum(a) / len(a) if a else 0.0


# ----------------------------------------------------------------------------
# GGUF export / import (new MLA layout, llama.cpp conventions)
# ----------------------------------------------------------------------------

def export_gguf(model, tok, types, merges, path, name, ftype=gg.GT.F32):
    cfg = model.cfg
    w = gg.GGUFWriter(path, arch="deepseek2")
    A = "deepseek2."
    w.add_string("general.name", name)
    w.add_uint32(A + "context_length", cfg.n_ctx)
    w.add_uint32(A + "embedding_length", cfg.d)
    w.add_uint32(A + "block_count", cfg.n_layer)
    w.add_uint32(A + "feed_forward_length", cfg.ff)
    w.add_uint32(A + "attention.head_count", cfg.n_head)
    w.add_uint32(A + "attention.head_count_kv", 1)
    w.add_float32(A + "rope.freq_base", cfg.rope_base)
    w.add_float32(A + "attention.layer_norm_rms_epsilon", cfg.eps)
    w.add_uint32(A + "leading_dense_block_count", cfg.n_dense)
    w.add_uint32(A + "vocab_size", cfg.vocab)
    w.add_uint32(A + "attention.q_lora_rank", cfg.q_lora)
    w.add_uint32(A + "attention.kv_lora_rank", cfg.d_c)
    w.add_uint32(A + "attention.key_length", cfg.d_c + cfg.d_rope)
    w.add_uint32(A + "attention.value_length", cfg.d_c)
    w.add_uint32(A + "attention.key_length_mla", cfg.d_nope + cfg.d_rope)
    w.add_uint32(A + "attention.value_length_mla", cfg.d_v)
    w.add_uint32(A + "expert_count", cfg.n_expert)
    w.add_uint32(A + "expert_used_count", cfg.n_used)
    w.add_uint32(A + "expert_shared_count", cfg.n_shared)
    w.add_uint32(A + "expert_feed_forward_length", cfg.ff_exp)
    w.add_float32(A + "expert_weights_scale", 1.0)
    w.add_bool(A + "expert_weights_norm", False)
    w.add_uint32(A + "expert_gating_func", 1)  # softmax
    if cfg.yarn_factor and cfg.yarn_factor != 1.0:
        w.add_string(A + "rope.scaling.type", "yarn")
        w.add_float32(A + "rope.scaling.factor", cfg.yarn_factor)
        w.add_uint32(A + "rope.scaling.original_context_length", cfg.yarn_orig_ctx)
        w.add_float32(A + "rope.scaling.yarn_log_multiplier", cfg.yarn_log_mul)
    w.add_uint32(A + "rope.dimension_count", cfg.d_rope)
    w.add_uint32("general.file_type", 0 if ftype == gg.GT.F32 else 1)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "deepseek-llm")
    w.add_array("tokenizer.ggml.tokens", tok.tokens, gg.VT.STRING)
    w.add_array("tokenizer.ggml.token_type", types, gg.VT.INT32)
    w.add_array("tokenizer.ggml.merges", ["%s %s" % (a, b) for a, b in merges], gg.VT.STRING)
    w.add_uint32("tokenizer.ggml.bos_token_id", tok.bos_id)
    w.add_uint32("tokenizer.ggml.eos_token_id", tok.eos_id)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_string("tokenizer.chat_template", CHAT_TEMPLATE)

    def T(name, t, norm=False):
        a = t.detach().float().cpu().numpy()
        w.add_tensor(name, a, gg.GT.F32 if (norm or ftype == gg.GT.F32) else ftype)

    T("token_embd.weight", model.tok.weight)
    T("output_norm.weight", model.norm.weight, norm=True)
    T("output.weight", model.out.weight)
    for i, b in enumerate(model.blocks):
        p = "blk.%d." % i
        at = b.attn
        T(p + "attn_norm.weight", b.attn_norm.weight, norm=True)
        if cfg.q_lora:
            T(p + "attn_q_a_norm.weight", at.q_a_norm.weight, norm=True)
            T(p + "attn_q_a.weight", at.q_a.weight)
            T(p + "attn_q_b.weight", at.q_b.weight)
        else:
            T(p + "attn_q.weight", at.q.weight)
        T(p + "attn_kv_a_norm.weight", at.kv_a_norm.weight, norm=True)
        T(p + "attn_kv_a_mqa.weight", at.kv_a.weight)
        T(p + "attn_k_b.weight", at.k_b.transpose(1, 2))   # numpy (H, d_c, d_nope) = ne {d_nope, d_c, H}
        T(p + "attn_v_b.weight", at.v_b)                   # numpy (H, d_v, d_c)    = ne {d_c, d_v, H}
        T(p + "attn_output.weight", at.o.weight)
        T(p + "ffn_norm.weight", b.ffn_norm.weight, norm=True)
        f = b.ffn
        if b.is_moe:
            T(p + "ffn_gate_inp.weight", f.gate_inp.weight)
            T(p + "ffn_gate_exps.weight", f.gate_exps)     # (E, ff, d) = ne {d, ff, E}
            T(p + "ffn_up_exps.weight", f.up_exps)
            T(p + "ffn_down_exps.weight", f.down_exps)     # (E, d, ff) = ne {ff, d, E}
            if f.shared is not None:
                T(p + "ffn_gate_shexp.weight", f.shared.gate.weight)
                T(p + "ffn_up_shexp.weight", f.shared.up.weight)
                T(p + "ffn_down_shexp.weight", f.shared.down.weight)
        else:
            T(p + "ffn_gate.weight", f.gate.weight)
            T(p + "ffn_up.weight", f.up.weight)
            T(p + "ffn_down.weight", f.down.weight)
    return w.write()


def model_from_gguf(path, n_ctx=None):
    """Builds the PyTorch model from a deepseek2 GGUF (new layout, F32/F16/Q8_0)."""
    r = gg.GGUFReader(path)
    A = "deepseek2."
    g = lambda k, d=None: r.get(A + k, d)  # noqa: E731
    kl_mla, vl_mla = g("attention.key_length_mla", 0), g("attention.value_length_mla", 0)
    assert kl_mla and vl_mla, "only the new MLA layout is supported here"
    d_rope = g("rope.dimension_count")
    yarn = g("rope.scaling.type") == "yarn"
    tensors = r.tensors
    q_lora = g("attention.q_lora_rank", 0) if "blk.0.attn_q_a.weight" in tensors else 0
    cfg = Cfg(vocab=len(r.get("tokenizer.ggml.tokens")), d=g("embedding_length"), n_layer=g("block_count"),
              n_head=g("attention.head_count"), q_lora=q_lora, d_c=g("attention.kv_lora_rank"),
              d_nope=kl_mla - d_rope, d_rope=d_rope, d_v=vl_mla, ff=g("feed_forward_length"),
              n_dense=g("leading_dense_block_count", 0), n_expert=g("expert_count", 0),
              n_used=g("expert_used_count", 0), n_shared=g("expert_shared_count", 0),
              ff_exp=g("expert_feed_forward_length", 0), eps=g("attention.layer_norm_rms_epsilon"),
              rope_base=g("rope.freq_base"), yarn_factor=g("rope.scaling.factor") if yarn else 0.0,
              yarn_orig_ctx=g("rope.scaling.original_context_length", 0),
              yarn_log_mul=g("rope.scaling.yarn_log_multiplier", 0.0),
              n_ctx=n_ctx or g("context_length"))
    assert g("expert_gating_func", 1) == 1 and not g("expert_weights_norm", False)
    assert g("expert_weights_scale", 1.0) in (0.0, 1.0)
    m = Model(cfg)

    def L(name):
        return torch.from_numpy(np.array(tensors[name].numpy(), dtype=np.float32))

    sd = {"tok.weight": L("token_embd.weight"), "norm.weight": L("output_norm.weight"),
          "out.weight": L("output.weight") if "output.weight" in tensors else L("token_embd.weight")}
    for i, b in enumerate(m.blocks):
        p, q = "blk.%d." % i, "blocks.%d." % i
        sd[q + "attn_norm.weight"] = L(p + "attn_norm.weight")
        if q_lora:
            sd[q + "attn.q_a.weight"] = L(p + "attn_q_a.weight")
            sd[q + "attn.q_a_norm.weight"] = L(p + "attn_q_a_norm.weight")
            sd[q + "attn.q_b.weight"] = L(p + "attn_q_b.weight")
        else:
            sd[q + "attn.q.weight"] = L(p + "attn_q.weight")
        sd[q + "attn.kv_a.weight"] = L(p + "attn_kv_a_mqa.weight")
        sd[q + "attn.kv_a_norm.weight"] = L(p + "attn_kv_a_norm.weight")
        sd[q + "attn.k_b"] = L(p + "attn_k_b.weight").transpose(1, 2).contiguous()
        sd[q + "attn.v_b"] = L(p + "attn_v_b.weight")
        sd[q + "attn.o.weight"] = L(p + "attn_output.weight")
        sd[q + "ffn_norm.weight"] = L(p + "ffn_norm.weight")
        if b.is_moe:
            sd[q + "ffn.gate_inp.weight"] = L(p + "ffn_gate_inp.weight")
            sd[q + "ffn.gate_exps"] = L(p + "ffn_gate_exps.weight")
            sd[q + "ffn.up_exps"] = L(p + "ffn_up_exps.weight")
            sd[q + "ffn.down_exps"] = L(p + "ffn_down_exps.weight")
            if cfg.n_shared:
                sd[q + "ffn.shared.gate.weight"] = L(p + "ffn_gate_shexp.weight")
                sd[q + "ffn.shared.up.weight"] = L(p + "ffn_up_shexp.weight")
                sd[q + "ffn.shared.down.weight"] = L(p + "ffn_down_shexp.weight")
        else:
            sd[q + "ffn.gate.weight"] = L(p + "ffn_gate.weight")
            sd[q + "ffn.up.weight"] = L(p + "ffn_up.weight")
            sd[q + "ffn.down.weight"] = L(p + "ffn_down.weight")
    m.load_state_dict(sd, strict=True)
    m.eval()
    return m, r


def check_reference():
    """This PyTorch forward vs llama.cpp's logits on the shared test files."""
    td = os.path.join(ROOT, "..", "shared", "testdata")
    ids = [int(x) for x in open(os.path.join(td, "tokens.txt")).read().strip().split(",")]
    ok = True
    for name in ("tiny-dense", "tiny-moe-v2-lite"):
        m, _ = model_from_gguf(os.path.join(td, name + ".gguf"), n_ctx=len(ids))
        m = m.double()
        m.cos, m.sin = rope_tables(m.cfg, len(ids))
        m.cos, m.sin = m.cos.double(), m.sin.double()
        with torch.no_grad():
            lg = m(torch.tensor([ids])).squeeze(0).numpy()
        ref = np.fromfile(os.path.join(td, name + ".logits.f32"), dtype="<f4").reshape(len(ids), -1)
        err = np.abs(lg - ref).max()
        print("%-18s max |torch - llama.cpp| = %.3g  (argmax agree %.1f%%)"
              % (name, err, 100 * np.mean(lg.argmax(1) == ref.argmax(1))))
        ok = ok and err < 1e-3
    return ok


# ----------------------------------------------------------------------------
# Training / evaluation
# ----------------------------------------------------------------------------

def pack_windows(seqs, n_ctx):
    """Greedy packing of whole sequences (BOS ... EOS) into windows of <= n_ctx
    tokens; a sequence longer than n_ctx is cut into n_ctx-token pieces that
    each form their own window(s)."""
    wins, cur = [], []
    for s in seqs:
        if len(s) > n_ctx:
            if cur:
                wins.append(cur)
                cur = []
            for i in range(0, len(s), n_ctx):
                piece = s[i:i + n_ctx]
                if len(piece) >= 2:
                    wins.append(piece)
            continue
        if len(cur) + len(s) > n_ctx:
            wins.append(cur)
            cur = []
        cur = cur + s
    if cur:
        wins.append(cur)
    return wins


@torch.no_grad()
def eval_windows(model, wins):
    model.eval()
    nll, n = 0.0, 0
    per = []
    for w in wins:
        x = torch.tensor([w])
        lg = model(x)[0, :-1].double()
        lp = torch.log_softmax(lg, -1)
        tgt = torch.tensor(w[1:])
        s = -lp[torch.arange(len(w) - 1), tgt].sum().item()
        per.append(s)
        nll += s
        n += len(w) - 1
    return nll, n, per


@torch.no_grad()
def greedy(model, prompt, n_new):
    model.eval()
    ids = list(prompt)
    for _ in range(n_new):
        lg = model(torch.tensor([ids[-model.cfg.n_ctx:]]))[0, -1]
        ids.append(int(torch.argmax(lg).item()))
    return ids[len(prompt):]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few minutes' run for development")
    ap.add_argument("--check-reference", action="store_true")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--name", default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="stop this process's training after this many minutes at a checkpoint (exit status 3)")
    ap.add_argument("--export-now", action="store_true",
                    help="export the checkpoint's model without training further")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--f16", action="store_true", help="store matrices as F16 (default F32)")
    ap.add_argument("--ckpt-dir", default=DEFAULT_CKPT_DIR,
                    help="checkpoints go to CKPT_DIR/<name>/ (default %(default)s)")
    ap.add_argument("--ckpt-minutes", type=float, default=3.0, help="minutes between checkpoints")
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint and start over")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.check_reference:
        sys.exit(0 if check_reference() else 1)

    t_start = time.time()
    log_lines = []

    def log(msg):
        line = "[%7.1fs] %s" % (time.time() - t_start, msg)
        print(line, flush=True)
        log_lines.append(line)

    quick = args.quick
    name = args.name or ("latte-tiny-mla-quick" if quick else "latte-tiny-mla")
    os.makedirs(args.out_dir, exist_ok=True)
    vocab_size = 2048
    cfg = Cfg(vocab=vocab_size, d=256, n_layer=4, n_head=8, q_lora=128, d_c=64, d_nope=32, d_rope=16, d_v=32,
              ff=768, n_dense=1, n_expert=8, n_used=2, n_shared=1, ff_exp=192, eps=1e-6, rope_base=10000.0,
              yarn_factor=4.0, yarn_orig_ctx=64, yarn_log_mul=0.0707, n_ctx=256)
    # A verse is ~38 tokens, so 256 tokens hold several; a shorter context than
    # 512 halves the attention work per token, which dominates a step on 2 cores.
    # Small batches: with so few tokens seen, more updates beat larger ones.
    batch, seq = 4, cfg.n_ctx
    steps = args.steps or (4 if quick else 1200)
    lr_max, lr_min, warmup, wd, aux_coef = 2e-3, 1e-4, (2 if quick else 30), 0.1, 0.01

    # ---- data
    verses = load_kjv()
    train_f, held_f = split_kjv(verses)
    if quick:
        train_f, held_f = train_f[:3000], held_f[:200]
    log("kjv: %d verses, %d train, %d held out (every 20th chapter)" % (len(verses), len(train_f), len(held_f)))
    with open(os.path.join(args.out_dir, "heldout.txt" if not quick else "heldout-quick.txt"), "w",
              encoding="utf-8") as f:
        f.write("".join(x + "\n" for x in held_f))

    # ---- checkpoint directory (outside the repository; see the docstring)
    ckpt_dir = os.path.join(args.ckpt_dir, name)
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt_path = os.path.join(ckpt_dir, "ckpt.pt")

    # ---- tokenizer (cached next to the checkpoint: BPE training takes a minute or two)
    t0 = time.time()
    corpus_hash = hashlib.sha256("\n".join(train_f).encode("utf-8")).hexdigest()
    bpe_cache = os.path.join(ckpt_dir, "bpe-%d-%s.json" % (vocab_size, corpus_hash[:16]))
    if os.path.exists(bpe_cache) and not args.fresh:
        merges = [tuple(m) for m in json.load(open(bpe_cache, encoding="utf-8"))]
        tok, types, merges = tokenizer_from_merges(merges)
        log("bpe: %d merges read from %s" % (len(merges), bpe_cache))
    else:
        tok, types, merges = build_tokenizer(train_f, vocab_size, log=log)
        with open(bpe_cache + ".tmp", "w", encoding="utf-8") as f:
            json.dump(merges, f, ensure_ascii=False)
        os.replace(bpe_cache + ".tmp", bpe_cache)
    assert len(tok.tokens) == vocab_size
    log("bpe: %d merges, vocab %d (%.1fs)" % (len(merges), len(tok.tokens), time.time() - t0))
    train_seqs = [[tok.bos_id] + tok.encode(x) + [tok.eos_id] for x in train_f]
    held_seqs = [[tok.bos_id] + tok.encode(x) + [tok.eos_id] for x in held_f]
    stream = np.array([t for s in train_seqs for t in s], dtype=np.int64)
    n_chars = sum(len(x) for x in train_f)
    log("train stream %d tokens (%.2f chars/token), held-out %d tokens" %
        (len(stream), n_chars / len(stream), sum(len(s) for s in held_seqs)))
    for x in held_f[:3]:
        assert tok.decode(tok.encode(x)) == x
    wins = pack_windows(held_seqs, cfg.n_ctx)

    # ---- model
    model = Model(cfg)
    model.init_weights(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    log("model: %d parameters; cfg %s" % (n_params, json.dumps(cfg.to_dict())))
    decay = [p for n_, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for n_, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=lr_max, betas=(0.9, 0.95), eps=1e-8)
    # What must agree for a checkpoint to be resumed.
    recipe = {"cfg": cfg.to_dict(), "seed": args.seed, "steps": steps, "batch": batch, "seq": seq,
              "lr": [lr_max, lr_min, warmup, wd, aux_coef], "corpus_sha256": corpus_hash,
              "merges_sha256": hashlib.sha256(json.dumps(merges).encode("utf-8")).hexdigest()}
    curve = []
    ema = None
    step = 0
    elapsed0 = 0.0       # training seconds spent before this process (resumed runs)
    resumed = []
    if os.path.exists(ckpt_path) and not args.fresh:
        ck = torch.load(ckpt_path)
        if ck["recipe"] != recipe:
            sys.exit("train_tiny_mla.py: %s was written with another recipe; use --fresh to start over "
                     "(or --ckpt-dir elsewhere)" % ckpt_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, curve, ema, elapsed0 = ck["step"], ck["curve"], ck["ema"], ck["elapsed"]
        resumed = ck.get("resumed", []) + [step]
        # The earlier processes' log lines first, so the JSON's log is the whole run's.
        log_lines[:0] = ck.get("log", []) + ["--- resumed ---"]
        log("resumed from %s at step %d (%.1f min of training done)" % (ckpt_path, step, elapsed0 / 60))
    elif args.export_now:
        sys.exit("train_tiny_mla.py: --export-now needs a checkpoint (%s is missing)" % ckpt_path)

    def save_ckpt():
        tmp = ckpt_path + ".tmp"
        torch.save({"recipe": recipe, "model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "curve": curve, "ema": ema, "elapsed": elapsed(), "resumed": resumed, "log": log_lines}, tmp)
        os.replace(tmp, ckpt_path)

    t_train = time.time()

    def elapsed():
        return elapsed0 + time.time() - t_train

    last_ckpt = time.time()
    model.train()
    t_process = time.time()
    while step < steps and not args.export_now:
        if args.max_minutes is not None and time.time() - t_process >= 60 * args.max_minutes:
            save_ckpt()
            log("--max-minutes %g reached at step %d of %d: checkpoint saved, run again to resume"
                % (args.max_minutes, step, steps))
            sys.exit(3)
        pr = step / steps
        if step < warmup:
            lr = lr_max * (step + 1) / warmup
        else:
            lr = lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * pr))
        for gp in opt.param_groups:
            gp["lr"] = lr
        # The crops of step s depend on (seed, s) only, so a resumed run sees
        # the batches an uninterrupted one would.
        offs = np.random.RandomState([args.seed, step]).randint(0, len(stream) - seq - 1, size=batch)
        xb = torch.from_numpy(np.stack([stream[o:o + seq] for o in offs]))
        yb = torch.from_numpy(np.stack([stream[o + 1:o + seq + 1] for o in offs]))
        logits = model(xb)
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), yb.reshape(-1))
        aux = model.aux_loss()
        opt.zero_grad(set_to_none=True)
        (loss + aux_coef * aux).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lv = loss.item()
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        curve.append(round(lv, 4))
        if step % (1 if quick else 10) == 0 or step == steps - 1:
            el = elapsed()
            log("step %4d/%d loss %.4f (ema %.4f) aux %.3f lr %.2e  %.2f s/step, %.0f tok/s" %
                (step, steps, lv, ema, float(aux), lr, el / (step + 1), (step + 1) * batch * seq / el))
        step += 1
        if time.time() - last_ckpt >= 60 * args.ckpt_minutes:
            save_ckpt()
            last_ckpt = time.time()
    if not args.export_now:
        save_ckpt()
    done_steps = step
    stopped_early = step < steps
    if stopped_early:
        log("exporting the checkpoint of step %d of %d (--export-now)" % (step, steps))
    train_secs = elapsed()
    model.eval()

    # ---- evaluation (PyTorch reference numbers)
    if quick:
        wins = wins[:6]
    nll, n, per = eval_windows(model, wins)
    ppl = math.exp(nll / n)
    log("held-out: %d windows, %d predicted tokens, mean NLL %.5f, perplexity %.4f" % (len(wins), n, nll / n, ppl))
    # training-split loss on a fixed sample of windows (same protocol)
    tw = pack_windows(train_seqs[:(100 if quick else 200)], cfg.n_ctx)
    tnll, tn, _ = eval_windows(model, tw)
    log("train-split sample: mean NLL %.5f, perplexity %.4f" % (tnll / tn, math.exp(tnll / tn)))

    prompts = []
    for x, s in zip(held_f, held_seqs):
        if len(s) >= 40 and len(prompts) < (4 if quick else 20):
            prompts.append(s[:1 + 12])  # BOS + first 12 tokens of the verse
    gens = []
    for p in prompts:
        c = greedy(model, p, 32)
        cu = c[:c.index(tok.eos_id)] if tok.eos_id in c else c
        gens.append({"prompt_ids": p, "prompt_text": tok.decode(p), "continuation_ids": c,
                     "continuation_text": tok.decode(c), "continuation_ids_until_eos": cu,
                     "continuation_text_until_eos": tok.decode(cu)})
    for g_ in gens[:4]:
        log("greedy: %r -> %r" % (g_["prompt_text"], g_["continuation_text"]))

    # ---- export
    gguf_path = os.path.join(args.out_dir, name + ".gguf")
    nbytes = export_gguf(model, tok, types, merges, gguf_path, name,
                         ftype=gg.GT.F16 if args.f16 else gg.GT.F32)
    log("wrote %s (%.2f MB)" % (gguf_path, nbytes / 1e6))

    # ---- re-import check: the GGUF gives the same function
    m2, r2 = model_from_gguf(gguf_path)
    with torch.no_grad():
        a = model(torch.tensor([wins[0]]))
        b = m2(torch.tensor([wins[0]]))
    reimport_err = float((a - b).abs().max())
    log("re-imported GGUF: max |logit diff| on held-out window 0 = %.3g" % reimport_err)
    assert reimport_err < (1e-4 if not args.f16 else 1e-1), reimport_err
    nll2, n2, _ = eval_windows(m2, wins[:2])
    nll1 = sum(per[:2])
    log("held-out windows 0-1: mean NLL %.6f (trained model) vs %.6f (re-imported GGUF)" % (nll1 / n2, nll2 / n2))

    tok_tests = ["Hello world", "The quick brown fox jumps over the lazy dog.",
                 "  two  spaces\tand a tab\n\nnewlines", "caf\u00e9 na\u00efve \u00c9cole",
                 "\u4e16\u754c\u4f60\u597d CJK", "emoji \U0001F600\U0001F680!", "digits 1234567890 3.14159",
                 "Don't panic!!! ...", "\u03a9mega \u0391\u03b2\u03b3 \u0416\u0443\u043a", "end with spaces   "]
    ev = {
        "model": os.path.basename(gguf_path),
        "gguf_bytes": nbytes,
        "config": cfg.to_dict(),
        "n_params": n_params,
        "kq_scale": kq_scale(cfg),
        "heldout": {
            "file": "models/heldout.txt (one verse per line)",
            "selection": "load_kjv(): the 31,102 verses of the King James Bible printed by `bible -f` "
                         "(Debian's bible-kjv and bible-kjv-text) in canonical order, one document per verse "
                         "(text without its reference); the 1,189 chapters are numbered in order and every "
                         "chapter with index % 20 == 19 is held out whole",
            "n_docs": len(held_f),
        },
        "perplexity": {
            "method": "each held-out verse is tokenized as [BOS] + encode(text) + [EOS] (no trailing newline); "
                      "these sequences are greedily packed, whole, into windows of at most n_ctx=%d tokens "
                      "(a sequence longer than n_ctx is cut into n_ctx-token pieces, each its own window); every "
                      "window is evaluated independently from position 0 (fresh cache); tokens 1..len-1 of each "
                      "window are predicted from their prefix within the window; perplexity = "
                      "exp(sum NLL / number of predicted tokens). The windows' token ids are listed below." % cfg.n_ctx,
            "n_ctx": cfg.n_ctx,
            "n_windows": len(wins),
            "windows_file": "models/%s.heldout.windows (one window per line, comma-separated ids)" % name,
            "n_predicted": n,
            "nll_sum": nll,
            "mean_nll": nll / n,
            "ppl": ppl,
            "per_window_nll": per,
            "reimport_check": {"max_abs_logit_diff_window0": reimport_err,
                               "mean_nll_windows01_trained": nll1 / n2, "mean_nll_windows01_gguf": nll2 / n2},
            "windows": wins,
        },
        "train_split_sample": {"n_predicted": tn, "mean_nll": tnll / tn, "ppl": math.exp(tnll / tn),
                               "what": "the first %d training verses, same packing and protocol" % (100 if quick else 200)},
        "greedy": {
            "method": "prompt = BOS + first 12 tokens of the first 20 held-out verses with >= 40 tokens "
                      "(incl. BOS/EOS); 32 new tokens by argmax (first maximum on ties), EOS not treated as a stop, "
                      "full-precision (float32) PyTorch naive form; "
                      "continuation_ids_until_eos = the part before the first EOS (what a runtime that stops at EOS, "
                      "like `latte run`, prints)",
            "n_new": 32,
            "cases": gens,
        },
        "tokenizer": {
            "model": "gpt2", "pre": "deepseek-llm", "vocab_size": len(tok.tokens), "n_merges": len(merges),
            "bos_id": tok.bos_id, "eos_id": tok.eos_id, "bos": BOS_TEXT, "eos": EOS_TEXT,
            "pre_regexes": PRE_REGEX_SOURCE,
            "tests": [{"text": t, "ids": tok.encode(t), "pieces": pre_split(t)} for t in tok_tests],
        },
        "train": {
            "seed": args.seed, "threads": args.threads, "steps": done_steps, "planned_steps": steps,
            "stopped_early": stopped_early, "resumed_at_steps": resumed,
            "batch": batch, "seq": seq, "tokens_seen": done_steps * batch * seq,
            "train_stream_tokens": int(len(stream)),
            "data": "random %d-token crops (numpy RandomState([seed, step])) of the concatenated training stream "
                    "[BOS] text [EOS] [BOS] text [EOS] ...; loss on every position" % seq,
            "optimizer": "AdamW betas (0.9,0.95) wd %.2g on matrices, lr %.1e warmup %d then cosine to %.1e, "
                         "grad clip 1.0, MoE load-balancing aux loss x%.2g" % (wd, lr_max, warmup, lr_min, aux_coef),
            "seconds": train_secs, "total_seconds": time.time() - t_start,
            "final_train_loss_ema": ema, "loss_curve": curve,
            "torch": torch.__version__,
        },
        "log": log_lines,
    }
    with open(os.path.join(args.out_dir, name + ".eval.json"), "w", encoding="utf-8") as f:
        json.dump(ev, f, ensure_ascii=False)
    # the same windows, one per line ("id,id,..."), for `latte perplexity --windows`
    with open(os.path.join(args.out_dir, name + ".heldout.windows"), "w") as f:
        f.write("".join(",".join(str(t) for t in w_) + "\n" for w_ in wins))
    log("wrote %s" % os.path.join(args.out_dir, name + ".eval.json"))


if __name__ == "__main__":
    main()
