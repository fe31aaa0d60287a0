#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""h2_seeds.py - writes fuzz/corpus/h2, the seeds of fuzz_h2_server.

    /usr/bin/python3 fuzz/h2_seeds.py [DIR]     (DIR: fuzz/corpus/h2)

Needs Debian's python3-hpack (/usr/bin/python3 has it). Each seed is an
input of fuzz_h2_server (fuzz_http_server.c built with -DFUZZ_H2): byte 0
the options, then the frames the client sends after the preface and its
empty SETTINGS, which the harness sends first. Frames are built by hand
(bad ones too), header blocks with hpack, one encoder per seed as one
connection has. A seed's pieces are split at 0xFF (an empty piece: the
pause of OPT_SLOW); a seed whose bytes hold a 0xFF is written for
OPT_FRAMES instead (a write per frame, every byte sent). The files are
what is committed; run this again after changing a seed.
"""
import os
import sys

import hpack

MARKER = b"\xff"

# Byte 0 (fuzz_http_server.c).
PLAIN_RECV, FEW_STREAMS, FILE_COPY, ACCESS_LOG = 0x01, 0x02, 0x04, 0x08
DRAINING, DRAIN_LATE, SLOW, FRAMES = 0x10, 0x20, 0x40, 0x80

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0, 1, 2, 3, 4
PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 5, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20


def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + \
        stream.to_bytes(4, "big") + payload


def u32(v):
    return v.to_bytes(4, "big")


def settings(*pairs, flags=0):
    return frame(SETTINGS, flags, 0, b"".join(k.to_bytes(2, "big") + u32(v) for k, v in pairs))


def window_update(stream, inc):
    return frame(WINDOW_UPDATE, 0, stream, u32(inc))


def rst(stream, code=8):  # CANCEL
    return frame(RST_STREAM, 0, stream, u32(code))


def data(stream, body, flags=0):
    return frame(DATA, flags, stream, body)


class Conn:
    """One connection's header blocks: its HPACK encoder."""

    def __init__(self, huffman=False):
        self.enc = hpack.Encoder()
        self.huffman = huffman

    def block(self, fields):
        return self.enc.encode(fields, huffman=self.huffman)

    def headers(self, stream, fields, flags=END_HEADERS | END_STREAM):
        return frame(HEADERS, flags, stream, self.block(fields))

    def request(self, stream, method="GET", path="/plaintext", extra=(), end=True):
        fields = [(":method", method), (":scheme", "http"), (":path", path),
                  (":authority", "localhost")] + list(extra)
        return self.headers(stream, fields, END_HEADERS | (END_STREAM if end else 0))


# A GET's pseudo-fields but its :path.
GET = [(":method", "GET"), (":scheme", "http"), (":authority", "localhost")]


def requests():
    """Requests of the routes and files, answered whole."""
    s = {}
    c = Conn()
    s["get_plaintext"] = (0, [c.request(1)])
    c = Conn()
    s["get_files"] = (0, [c.request(1, path="/hello.txt"), c.request(3, path="/"),
                          c.request(5, path="/sub/data.json"), c.request(7, path="/empty.txt"),
                          c.request(9, path="/nothing")])
    c = Conn()
    s["head_file"] = (0, [c.request(1, "HEAD", "/hello.txt")])
    c = Conn()
    s["get_mid_windows"] = (0, [c.request(1, path="/mid.bin"),
                                window_update(0, 1 << 20) + window_update(1, 1 << 20)])
    c = Conn()
    s["get_big_copy"] = (FILE_COPY, [c.request(1, path="/big.bin"),
                                     window_update(0, 1 << 20), window_update(1, 1 << 20)])
    c = Conn()
    s["get_big_no_window"] = (0, [c.request(1, path="/big.bin")])
    c = Conn()
    s["routes"] = (0, [c.request(1, path="/stats"), c.request(3, path="/limited"),
                       c.request(5, path="/delay?ms=3"), c.request(7, "DELETE", "/plaintext"),
                       c.request(9, path="/plaintext?q=1")])
    c = Conn()
    s["escape_root"] = (0, [c.request(1, path="/out.txt"), c.request(3, path="/up/secret.txt"),
                            c.request(5, path="/../secret.txt"),
                            c.request(7, path="/%2e%2e/secret.txt")])
    c = Conn()
    s["plain_recv_log"] = (PLAIN_RECV | ACCESS_LOG, [c.request(1), c.request(3, path="/hello.txt")])
    return s


def bodies():
    """Request bodies: DATA, padding, trailers, their lengths and limits."""
    s = {}
    c = Conn()
    s["post_echo"] = (0, [c.request(1, "POST", "/echo", [("content-length", "5")], end=False),
                          data(1, b"hello", END_STREAM)])
    c = Conn()
    s["post_echo_pieces"] = (0, [c.request(1, "POST", "/echo", end=False),
                                 data(1, b"one "), data(1, b"two "),
                                 data(1, b"three", END_STREAM)])
    c = Conn()
    s["post_echo_trailers"] = (0, [c.request(1, "POST", "/echo", end=False), data(1, b"body"),
                                   c.headers(1, [("x-checksum", "abc")])])
    c = Conn()
    s["get_trailers"] = (0, [c.request(1, end=False), c.headers(1, [("x-trailer", "1")])])
    c = Conn()
    head = c.block([(":method", "POST"), (":scheme", "http"), (":path", "/echo"),
                    (":authority", "localhost")])
    s["padding"] = (0, [frame(HEADERS, END_HEADERS | PADDED, 1, bytes([4]) + head + bytes(4)),
                        frame(DATA, PADDED, 1, bytes([3]) + b"abc" + bytes(3)),
                        frame(DATA, PADDED | END_STREAM, 1, bytes([0]) + b"def")])
    c = Conn()
    s["padding_too_long"] = (0, [c.request(1, "POST", "/echo", end=False),
                                 frame(DATA, PADDED, 1, bytes([9]) + b"abc")])
    c = Conn()
    s["expect_continue"] = (0, [c.request(1, "POST", "/echo", [("content-length", "4"),
                                                               ("expect", "100-continue")],
                                          end=False), data(1, b"body", END_STREAM)])
    c = Conn()
    s["expect_unknown"] = (0, [c.request(1, "POST", "/echo", [("expect", "nothing")], end=False)])
    return s


def body_limits():
    """Bodies against their Content-Length and body_max."""
    s = {}
    c = Conn()
    s["content_length_short"] = (0, [c.request(1, "POST", "/echo", [("content-length", "10")],
                                               end=False), data(1, b"short", END_STREAM)])
    c = Conn()
    s["content_length_long"] = (0, [c.request(1, "POST", "/echo", [("content-length", "2")],
                                              end=False), data(1, b"toolong", END_STREAM)])
    c = Conn()
    s["body_too_big"] = (0, [c.request(1, "POST", "/echo", [("content-length", "100000")],
                                       end=False), data(1, b"x" * 5000)])
    c = Conn()
    s["body_over_max"] = (0, [c.request(1, "POST", "/echo", end=False),
                              data(1, b"y" * 3000), data(1, b"z" * 3000, END_STREAM)])
    c = Conn()
    s["empty_data"] = (0, [c.request(1, "POST", "/echo", end=False)] +
                       [data(1, b"") for _ in range(20)] + [data(1, b"", END_STREAM)])
    return s


def header_blocks():
    """CONTINUATION, HPACK good and bad."""
    s = {}
    c = Conn()
    head = c.block([(":method", "GET"), (":scheme", "http"), (":path", "/hello.txt"),
                    (":authority", "localhost"), ("user-agent", "seed"), ("accept", "*/*")])
    s["continuation"] = (0, [frame(HEADERS, END_STREAM, 1, head[:5]),
                             frame(CONTINUATION, 0, 1, head[5:12]),
                             frame(CONTINUATION, END_HEADERS, 1, head[12:])])
    s["continuation_other_stream"] = (0, [frame(HEADERS, END_STREAM, 1, head[:5]),
                                          frame(CONTINUATION, END_HEADERS, 3, head[5:])])
    s["continuation_interrupted"] = (0, [frame(HEADERS, END_STREAM, 1, head[:5]),
                                         frame(PING, 0, 0, bytes(8))])
    s["continuation_many"] = (0, [frame(HEADERS, END_STREAM, 1, head[:1])] +
                              [frame(CONTINUATION, 0, 1, head[i:i + 1])
                               for i in range(1, len(head) - 1)] +
                              [frame(CONTINUATION, END_HEADERS, 1, head[-1:])])
    s["bad_hpack"] = (0, [frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x80"),
                          frame(HEADERS, END_HEADERS | END_STREAM, 3, b"\xbe\x7e")])
    s["bad_hpack_index"] = (0, [frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                      b"\x82\x84\x86\xfe\x01")])
    c = Conn()
    big = "x" * 3000
    fields = GET + [(":path", "/plaintext"), ("x-big", big)]
    s["hpack_bomb"] = (0, [c.headers(1, fields), c.headers(3, fields + [("x-big", big)] * 39)])
    c = Conn(huffman=True)
    s["huffman"] = (0, [c.request(1, path="/hello.txt", extra=[("user-agent", "h2 seed~~")]),
                        c.request(3, path="/hello.txt", extra=[("user-agent", "h2 seed~~")])])
    c = Conn()
    fresh = Conn().block([(":method", "GET"), (":scheme", "http"), (":path", "/"),
                          (":authority", "localhost")])
    s["table_size_update"] = (0, [settings((1, 0)), c.request(1),
                                  frame(HEADERS, END_HEADERS | END_STREAM, 3, b"\x20" + fresh)])
    c = Conn()
    s["huge_header"] = (0, [c.request(1, extra=[("x-huge", "h" * 13000)])])
    c = Conn()
    s["many_fields"] = (0, [c.request(1, extra=[("x-f%d" % i, "v") for i in range(150)])])
    return s


def heads():
    """Request heads the server refuses, or answers with an error."""
    s = {}
    c = Conn()
    s["connect"] = (0, [c.headers(1, [(":method", "CONNECT"), (":authority", "example:80")],
                                  END_HEADERS)])
    c = Conn()
    s["missing_path"] = (0, [c.headers(1, [(":method", "GET"), (":scheme", "http"),
                                           (":authority", "localhost")])])
    c = Conn()
    s["bad_fields"] = (0, [c.request(1, extra=[("Upper", "case")]),
                           c.request(3, extra=[("connection", "keep-alive")]),
                           c.request(5, extra=[("te", "trailers")]),
                           c.request(7, extra=[("x-bad", "a\r\nb")])])
    c = Conn()
    s["host_mismatch"] = (0, [c.request(1, extra=[("host", "other")]),
                              c.request(3, extra=[("host", "localhost")])])
    c = Conn()
    s["bad_targets"] = (0, [c.request(1, path="*"), c.request(3, path="no-slash"),
                            c.request(5, path="/%zz"), c.request(7, "OPTIONS", "*"),
                            c.request(9, path="/" + "a" * 9000)])
    return s


def streams():
    """Stream states: priorities, resets, ids, concurrency."""
    s = {}
    c = Conn()
    prio = u32(0) + bytes([15])
    s["priority"] = (0, [frame(PRIORITY, 0, 3, prio), frame(PRIORITY, 0, 1, u32(3) + bytes([200])),
                         frame(HEADERS, END_HEADERS | END_STREAM | PRIO, 1,
                               prio + c.block(GET + [(":path", "/plaintext")])),
                         frame(PRIORITY, 0, 5, u32(5) + bytes([1]))])
    c = Conn()
    s["rst_stream"] = (0, [c.request(1, path="/delay?ms=50"), rst(1)])
    c = Conn()
    s["rst_during_body"] = (0, [c.request(1, "POST", "/echo", [("content-length", "100")],
                                          end=False), data(1, b"partial"), rst(1),
                                c.request(3)])
    c = Conn()
    s["rapid_reset"] = (0, [b"".join(c.request(i, path="/delay?ms=20") + rst(i)
                                     for i in range(1, 60, 2))])
    c = Conn()
    s["many_streams"] = (0, [b"".join(c.request(i, path="/delay?ms=1") for i in range(1, 42, 2)),
                             c.request(43, path="/hello.txt")])
    c = Conn()
    s["few_streams"] = (FEW_STREAMS, [c.request(1, path="/delay?ms=5"),
                                      c.request(3, path="/delay?ms=5"),
                                      c.request(5, path="/delay?ms=5"), c.request(7)])
    s["stream_id_even"] = (0, [Conn().request(2)])
    c = Conn()
    s["stream_id_backwards"] = (0, [c.request(5), c.request(3)])
    s["data_on_idle"] = (0, [data(1, b"early", END_STREAM)])
    s["data_on_zero"] = (0, [data(0, b"zero")])
    return s


def windows_and_pings():
    """Flow control and PING."""
    s = {}
    s["ping"] = (0, [frame(PING, 0, 0, b"pingpong"), frame(PING, ACK, 0, bytes(8)),
                     frame(PING, 0, 0, b"short")])
    s["ping_flood"] = (0, [frame(PING, 0, 0, bytes([i]) * 8) for i in range(40)])
    c = Conn()
    s["window_update"] = (0, [window_update(0, 100), c.request(1, path="/mid.bin"),
                              window_update(1, 70000), window_update(0, 70000)])
    c = Conn()
    s["window_update_zero"] = (0, [c.request(1, "POST", "/echo", end=False),
                                   window_update(1, 0), window_update(0, 0)])
    s["window_overflow"] = (0, [window_update(0, 0x7fffffff), window_update(0, 0x7fffffff)])
    c = Conn()
    s["window_overflow_stream"] = (0, [c.request(1, "POST", "/echo", end=False),
                                       window_update(1, 0x7fffffff),
                                       window_update(1, 0x7fffffff)])
    return s


def connection():
    """SETTINGS, GOAWAY, and frames the server must refuse or ignore."""
    s = {}
    c = Conn()
    s["settings_values"] = (0, [settings((1, 0), (2, 0), (3, 10), (4, 1), (5, 32768),
                                         (6, 1000)),
                                c.request(1, path="/hello.txt"), settings(flags=ACK)])
    c = Conn()
    s["settings_small_window"] = (0, [settings((4, 0)), c.request(1, path="/index.html"),
                                      window_update(1, 5), window_update(1, 100)])
    s["settings_bad"] = (0, [settings((4, 0x80000000))])
    s["settings_bad_frame_size"] = (0, [settings((5, 100))])
    s["settings_bad_length"] = (0, [frame(SETTINGS, 0, 0, bytes(5))])
    s["settings_ack_with_payload"] = (0, [settings((3, 1), flags=ACK)])
    c = Conn()
    s["settings_large_frames"] = (0, [settings((5, 1 << 20)), c.request(1, path="/mid.bin"),
                                      window_update(0, 1 << 20), window_update(1, 1 << 20)])
    c = Conn()
    s["goaway"] = (0, [c.request(1), frame(GOAWAY, 0, 0, u32(0) + u32(0) + b"bye"),
                       c.request(3)])
    s["unknown_frame"] = (0, [frame(0x0a, 0, 0, b"origin"), frame(0x22, 0xfe, 3, b"x")])
    c = Conn()
    s["frame_too_large"] = (0, [c.request(1, "POST", "/echo", end=False),
                                (17000).to_bytes(3, "big") + bytes([DATA, 0]) + u32(1) + b"big"])
    s["push_promise_from_client"] = (0, [frame(PUSH_PROMISE, END_HEADERS, 1, u32(2) + b"\x82")])
    return s


def options():
    """Byte 0's picks: drains, 2 ms timeouts with a pause, a write per byte."""
    s = {}
    c = Conn()
    s["draining"] = (DRAINING, [c.request(1), c.request(3)])
    c = Conn()
    s["drain_late"] = (DRAIN_LATE, [c.request(1, path="/delay?ms=5"),
                                    c.request(3, path="/echo", method="POST", end=False)])
    c = Conn()
    req = c.request(1, path="/hello.txt")
    s["slow_head_timeout"] = (SLOW, [req[:12], b"", req[12:]])
    c = Conn()
    s["slow_idle"] = (SLOW, [c.request(1), b"", c.request(3)])
    c = Conn()
    req = c.request(1, path="/hello.txt")
    s["split_bytes"] = (0, [req[i:i + 1] for i in range(len(req))])
    return s


def seeds():
    """name -> (options, pieces)."""
    s = {}
    for group in (requests, bodies, body_limits, header_blocks, heads, streams,
                  windows_and_pings, connection, options):
        s.update(group())
    return s


def write(directory):
    os.makedirs(directory, exist_ok=True)
    for name, (opt, pieces) in sorted(seeds().items()):
        body = b"".join(pieces)
        if MARKER in body:
            assert b"" not in pieces, name + ": a pause needs the marker"
            out = bytes([opt | FRAMES]) + body
        else:
            out = bytes([opt]) + MARKER.join(pieces)
        with open(os.path.join(directory, name), "wb") as f:
            f.write(out)


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    write(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "h2"))
