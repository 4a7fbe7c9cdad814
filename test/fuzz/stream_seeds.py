#!/usr/bin/env python3
"""Seeds for the fuzz_stream target (test/fuzz/fuzz_stream.c), written in
its input format: the scenarios of test/unit/test_stream.c (forwarding whole
and in pieces, every owner action, back-pressure, messages larger than the
buffer, rewrites and pooler messages, destinations going mid-message) and
issue 40's overflow (a head rewritten longer, then a read outside the
turn's batch: test_rewrite_read_outside_batch). Writes
test/fuzz/corpus/fuzz_stream/ (committed; run it again after changing the
input format, whose tables below must stay in step with the C file).

usage: python3 test/fuzz/stream_seeds.py

The input format
----------------
Byte 0, flags: io_uring batches where the kernel gives a ring (0x01), A read
outside the batch through ops of its own as a TLS stream is (0x02),
stream_read_now(A) before every turn's end (0x04), small socket buffers
toward B (0x08), toward C (0x10), into A (0x20), max_whole 100000 (0x40),
32 kB buffers instead of 16 kB (0x80).
Byte 1: 1 + (b % 40) messages, five bytes each:
  size class and value (two bytes, see SIZE), what A's owner does (ACT,
  modulo 16: 12-15 forward), a (MORE_FORWARD: it waits for 1 + a * len / 256
  bytes; REWRITE: the old head is 5 + a % 96 bytes), b (REWRITE: the new
  head is 5 + b % 96 bytes, at most 64 more than the old one).
Then driver ops, one byte each (what = low 4 bits, arg = high 4), see DRIVE;
writes take one byte more (the piece's size, see chunk()). At the end
everything is written, A resumed, B and C read until nothing moves; A then
hears EOF.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from session_seeds import write_corpus  # noqa: E402
OUT = os.path.join(HERE, "corpus", "fuzz_stream")

BATCHING, OWN_OPS, READ_NOW, SMALL_B, SMALL_C, SMALL_A, MAX_WHOLE, BIG_BUF = (
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80)
ACT = {"forward": 0, "skip": 1, "consume_now": 2, "consume_full": 3, "full_forward": 4,
       "more_forward": 5, "pause": 6, "flush": 7, "rewrite": 8, "inject_flushed": 9,
       "inject_now": 10, "close": 11}
DRIVE = {"write": 0, "turns": 3, "reading": 5, "resume": 6, "inject": 7, "forget": 8,
         "leave": 9, "close_a": 10, "eof_a": 11, "write_all": 12}


def size(n, bufsize=16384):
    """The two bytes of a message of n wire bytes (type byte included)."""
    if 5 <= n < 5 + 64:
        return [0, n - 5]
    if n - 5 < 8192:
        v = n - 5
        return [0x40 | v >> 8, v & 0xff]
    if bufsize - 128 <= n < bufsize + 128:
        return [0x60, n - (bufsize - 128)]
    if (n - 5) % 8 == 0 and (n - 5) // 8 < 8192:
        v = (n - 5) // 8
        return [0xa0 | v >> 8, v & 0xff]
    if n >= 65536 and (n - 65536) % 32 == 0 and (n - 65536) // 32 < 8192:
        v = (n - 65536) // 32
        return [0xc0 | v >> 8, v & 0xff]
    raise ValueError("no encoding for a message of %d bytes" % n)


def chunk(n):
    """The op's argument and byte for a piece of about n bytes."""
    if n <= 256:
        return 0, n - 1
    if n <= 1024:
        return 4 | (n - 1) >> 8, (n - 1) & 0xff
    if n <= 256 * 64:
        return 8, min(255, (n - 1) // 64)
    return 12, min(255, (n - 1) // 1024)


class Script:
    def __init__(self, flags=0, bufsize=16384):
        self.flags = flags
        self.bufsize = bufsize
        self.msgs = []
        self.ops = bytearray()

    def msg(self, n, act="forward", a=0, b=0):
        self.msgs.append(size(n, self.bufsize) + [ACT[act], a, b])
        return self

    def grow(self, n, by=20, old=9):
        return self.msg(n, "rewrite", old - 5, old + by - 5)

    def shrink(self, n, by=6, old=15):
        return self.msg(n, "rewrite", old - 5, old - by - 5)

    def op(self, what, arg=0):
        self.ops.append(DRIVE[what] | arg << 4)
        return self

    def write(self, n):
        arg, b = chunk(n)
        self.ops.extend([DRIVE["write"] | arg << 4, b])
        return self

    def turns(self, n=1):
        while n > 0:
            k = min(n, 16)
            self.op("turns", k - 1)
            n -= k
        return self

    def data(self):
        out = bytearray([self.flags, len(self.msgs) - 1])
        for m in self.msgs:
            out.extend(m)
        return bytes(out + self.ops)


def unit_scenarios():
    """test/unit/test_stream.c's scenarios, in both batching modes."""
    seeds = {}
    for mode, flags in (("", 0), ("-uring", BATCHING)):
        s = Script(flags)
        for i in range(30):
            s.msg(9 + i * 13 % 40)
        seeds["forward-coalesced" + mode] = s.data()
        s = Script(flags)
        for n in (57, 30, 20, 9):
            s.msg(n)
        for _ in range(40):
            s.write(1).turns(1)
        seeds["forward-1-byte-writes" + mode] = s.data()
        s = Script(flags).msg(300000).msg(20).msg(9)
        seeds["forward-large" + mode] = s.data()
        s = Script(flags)
        for n, act in ((30, "forward"), (25, "skip"), (40005, "forward"), (100, "skip"),
                       (20005, "skip"), (12, "forward")):
            s.msg(n, act)
        seeds["skip" + mode] = s.data()
        s = Script(flags)
        for n, act in ((30, "forward"), (40005, "consume_full"), (50, "forward"),
                       (70016, "more_forward"), (100000, "full_forward"), (100, "consume_now"),
                       (49157, "more_forward"), (20, "forward")):
            s.msg(n, act, 255 if act == "more_forward" else 0)
        seeds["need-full-beyond-buffer" + mode] = s.data()
        s = Script(flags | SMALL_B).msg(300000, "full_forward").msg(9)
        s.op("reading").turns(64).op("reading")
        seeds["need-full-slow-peer" + mode] = s.data()
        s = Script(flags)
        s.msg(30).msg(40, "pause").msg(50).msg(60, "flush").msg(70)
        s.op("write_all").turns(8).op("resume").turns(8)
        seeds["pause-resume" + mode] = s.data()
        s = Script(flags)
        for n, act in ((30, "forward"), (12, "grow"), (40, "grow"), (9, "grow"), (33, "grow"),
                       (20, "shrink"), (60, "inject_flushed"), (30000 // 8 * 8 + 5, "grow"),
                       (50, "forward"), (15, "inject_flushed"), (40005, "shrink"), (16, "grow"),
                       (21, "grow")):
            if act == "grow":
                s.grow(n)
            elif act == "shrink":
                s.shrink(n)
            else:
                s.msg(n, act)
        seeds["rewrite-and-inject" + mode] = s.data()
        s = Script(flags | SMALL_B)
        for i in range(6):
            s.msg(2000)
        s.op("reading").op("write_all").turns(16).op("inject").op("forget").turns(8)
        seeds["forget-whole-messages-go-first" + mode] = s.data()
        s = Script(flags | SMALL_B).msg(200000)
        s.op("reading").op("write_all").turns(32).op("inject").op("forget").turns(8)
        seeds["forget-mid-message-tears" + mode] = s.data()
        s = Script(flags).msg(100000)
        s.write(30000).turns(8).op("inject").op("close_a").turns(8)
        seeds["close-mid-message-tears" + mode] = s.data()
        s = Script(flags).msg(30).msg(40, "close").msg(50)
        seeds["close-inside-callback" + mode] = s.data()
        s = Script(flags | SMALL_B | SMALL_C)
        for i in range(12):
            s.msg(5000 if i % 3 else 70016, "inject_now" if i % 4 == 1 else "forward")
        s.write(20000).turns(4).op("leave").write(100000).turns(4).op("inject", 1).turns(8)
        seeds["leave-mid-stream" + mode] = s.data()
        s = Script(flags | MAX_WHOLE).msg(30).msg(150016, "consume_full").msg(20)
        seeds["need-full-too-large" + mode] = s.data()
    return seeds


def issue40_seeds():
    """test_rewrite_read_outside_batch: heads rewritten longer, A read a
    second time before the turn's send batch ran. Before the fix compact()
    wrote past the buffer (or, full, A stopped reading for good)."""
    seeds = {}
    for name, flags in (("issue40-rewrite-read-outside-batch", BATCHING | OWN_OPS | READ_NOW),
                        ("issue40-rewrite-read-now", BATCHING | READ_NOW)):
        s = Script(flags)
        s.grow(100000).grow(16384).msg(30).grow(16300).shrink(50005).grow(9)
        seeds[name] = s.data()
        s = Script(flags)
        s.grow(100000).grow(16384).msg(30).grow(16300).shrink(50005).grow(9)
        for _ in range(24):
            s.write(5000).turns(1)
        seeds[name + "-pieces"] = s.data()
    return seeds


def main():
    write_corpus(OUT, {**unit_scenarios(), **issue40_seeds()})


if __name__ == "__main__":
    main()
