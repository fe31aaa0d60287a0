#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""h2_conformance.py PORT [ROOT_FILE] - the HTTP/2 server (the HTTP demo,
h2c by prior knowledge) against RFC 9113 and RFC 7541, in sections
modelled on h2spec's, and against the published attacks on HTTP/2
servers: each case hand-builds its frames (Debian's python3-hpack makes
the header blocks; a client library would refuse to send the bad ones)
and checks what the server answers - a response, RST_STREAM or GOAWAY
with the RFC's error code - and that it serves a new connection after.

Where RFC 9113 allows a connection error for a stream error, either is
taken (as h2spec does). Every case prints PASS or FAIL; the exit status
is 1 if any failed. ROOT_FILE names a file of 1 MiB or more the server
serves (GET /big), for the flow-control cases.
"""
import os
import socket
import struct
import sys
import time

from hpack import Encoder

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20
(NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT,
 STREAM_CLOSED, FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR,
 CONNECT_ERROR, ENHANCE_YOUR_CALM) = range(12)
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
WAIT = 5.0  # seconds for an answer that must come

PORT = int(sys.argv[1])
failures = 0
passes = 0


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def setting(ident, value):
    return struct.pack(">HI", ident, value)


class Conn:
    """A connection that sends what it is told and reads frames."""

    def __init__(self, preface=True, settings=b""):
        self.s = socket.create_connection(("127.0.0.1", PORT))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.enc = Encoder()
        self.buf = b""
        self.eof = False
        if preface:
            self.send(PREFACE + frame(SETTINGS, 0, 0, settings))

    def send(self, data):
        """A send the server cut off (it closed on a flood) is no end of
        what it sent first: its GOAWAY may wait unread in our socket."""
        try:
            self.s.sendall(data)
        except OSError:
            pass

    def block(self, path="/plaintext", method="GET", extra=(), authority="h"):
        hdrs = [(":method", method), (":scheme", "http"), (":path", path),
                (":authority", authority)] + list(extra)
        return self.enc.encode(hdrs)

    def request(self, sid, path="/plaintext", method="GET", extra=(), end=True):
        flags = END_HEADERS | (END_STREAM if end else 0)
        self.send(frame(HEADERS, flags, sid, self.block(path, method, extra)))

    def read_frame(self, timeout):
        """(type, flags, sid, payload), or None at EOF or after timeout."""
        end = time.time() + timeout
        while len(self.buf) < 9 or len(self.buf) < 9 + \
                int.from_bytes(self.buf[:3], "big"):
            left = end - time.time()
            if self.eof or left <= 0:
                return None
            self.s.settimeout(left)
            try:
                data = self.s.recv(65536)
            except socket.timeout:
                return None
            except OSError:
                data = b""
            if not data:
                self.eof = True
                return None
            self.buf += data
        n = int.from_bytes(self.buf[:3], "big")
        f = (self.buf[3], self.buf[4],
             int.from_bytes(self.buf[5:9], "big") & 0x7fffffff, self.buf[9:9 + n])
        self.buf = self.buf[9 + n:]
        return f

    def until(self, pred, timeout=WAIT):
        """The first frame pred takes, None if EOF or time came first.
        SETTINGS are acknowledged, PINGs answered on the way."""
        end = time.time() + timeout
        while True:
            f = self.read_frame(max(0.0, end - time.time()))
            if f is None:
                return None
            if f[0] == SETTINGS and not f[1] & ACK:
                self.send(frame(SETTINGS, ACK, 0))
            if pred(f):
                return f

    def closed(self, timeout=WAIT):
        """Does the server close the connection (after any frames)?"""
        self.until(lambda f: False, timeout)
        return self.eof

    def close(self):
        self.s.close()


def goaway_code(f):
    return int.from_bytes(f[3][4:8], "big")


def rst_code(f):
    return int.from_bytes(f[3][:4], "big")


def conn_error(c, codes):
    """A GOAWAY with one of codes, then the close. (The RFC allows a close
    alone; this server always says why.)"""
    f = c.until(lambda f: f[0] == GOAWAY)
    if f is None:
        return "no GOAWAY"
    if goaway_code(f) not in codes:
        return "GOAWAY %d, want %s" % (goaway_code(f), codes)
    return None if c.closed() else "GOAWAY, but no close"


def stream_error(c, sid, codes):
    """RST_STREAM on sid with one of codes, or a connection error with one."""
    f = c.until(lambda f: (f[0] == RST_STREAM and f[2] == sid) or f[0] == GOAWAY)
    if f is None:
        return None if c.eof else "no RST_STREAM on %d, no GOAWAY" % sid
    code = rst_code(f) if f[0] == RST_STREAM else goaway_code(f)
    return None if code in codes else "code %d, want %s" % (code, codes)


def answered(c, sid, status=b"200"):
    """A response on sid: its HEADERS and the END_STREAM."""
    got = c.until(lambda f: f[2] == sid and f[0] in (HEADERS, RST_STREAM, GOAWAY))
    if got is None or got[0] != HEADERS:
        return "no HEADERS on stream %d (%s)" % (sid, got and got[0])
    if not got[1] & END_STREAM and c.until(lambda f: f[2] == sid and f[1] & END_STREAM
                                           and f[0] == DATA) is None:
        return "stream %d did not end" % sid
    return None


def serves_still():
    """A new connection is answered: the server lives on."""
    c = Conn()
    c.request(1)
    err = answered(c, 1)
    c.close()
    return err


def case(section, text):
    def wrap(fn):
        fn.section = section
        fn.text = text
        CASES.append(fn)
        return fn
    return wrap


CASES = []

# -------------------------------------------------- 3.4 connection preface


@case("3.4", "a bad connection preface: GOAWAY or close")
def bad_preface():
    c = Conn(preface=False)
    c.send(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + frame(SETTINGS, 0, 0))
    return None if c.closed() else "still open"


@case("3.4", "a preface not followed by SETTINGS: PROTOCOL_ERROR")
def preface_without_settings():
    c = Conn(preface=False)
    c.send(PREFACE + frame(PING, 0, 0, b"12345678"))
    return conn_error(c, [PROTOCOL_ERROR])


@case("3.4", "the server's preface is SETTINGS, and it acknowledges ours")
def server_preface():
    c = Conn()
    f = c.until(lambda f: True)
    if f is None or f[0] != SETTINGS or f[1] & ACK:
        return "first frame %s" % (f and f[0])
    return None if c.until(lambda f: f[0] == SETTINGS and f[1] & ACK) else "no ACK"

# ------------------------------------------------------- 4 frame format


@case("4.1", "an unknown frame type is ignored")
def unknown_type():
    c = Conn()
    c.send(frame(0x20, 0, 0, b"xx"))
    c.request(1)
    return answered(c, 1)


@case("4.1", "unknown flags and the reserved bit are ignored")
def unknown_flags():
    c = Conn()
    c.send(frame(PING, 0x16, 0, b"12345678"))
    block = c.block()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS | 0x40, 1, block)[:5] +
           struct.pack(">I", 0x80000001) + block)
    return answered(c, 1)


@case("4.2", "a DATA frame over SETTINGS_MAX_FRAME_SIZE: FRAME_SIZE_ERROR")
def data_too_large():
    c = Conn()
    c.request(1, "/echo", "POST", end=False)
    c.send(frame(DATA, 0, 1, b"x" * 16385))
    return stream_error(c, 1, [FRAME_SIZE_ERROR])


@case("4.2", "a HEADERS frame over SETTINGS_MAX_FRAME_SIZE: FRAME_SIZE_ERROR")
def headers_too_large():
    c = Conn()
    block = c.block() + c.enc.encode([("x-pad", "a" * 17000)], huffman=False)
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block))
    return conn_error(c, [FRAME_SIZE_ERROR])


@case("4.3", "a header block that does not decode: COMPRESSION_ERROR")
def bad_block():
    c = Conn()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, b"\x80"))  # index 0
    return conn_error(c, [COMPRESSION_ERROR])


@case("4.3", "a PRIORITY between HEADERS and CONTINUATION: PROTOCOL_ERROR")
def priority_inside_block():
    c = Conn()
    block = c.block()
    c.send(frame(HEADERS, END_STREAM, 1, block[:2]) +
           frame(PRIORITY, 0, 3, b"\0\0\0\0\x10") +
           frame(CONTINUATION, END_HEADERS, 1, block[2:]))
    return conn_error(c, [PROTOCOL_ERROR])

# --------------------------------------------------------- 5.1 streams


@case("5.1", "DATA on an idle stream: PROTOCOL_ERROR")
def data_idle():
    c = Conn()
    c.send(frame(DATA, 0, 1, b"x"))
    return conn_error(c, [PROTOCOL_ERROR])


@case("5.1", "RST_STREAM on an idle stream: PROTOCOL_ERROR")
def rst_idle():
    c = Conn()
    c.send(frame(RST_STREAM, 0, 1, struct.pack(">I", CANCEL)))
    return conn_error(c, [PROTOCOL_ERROR])


@case("5.1", "WINDOW_UPDATE on an idle stream: PROTOCOL_ERROR")
def window_idle():
    c = Conn()
    c.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 100)))
    return conn_error(c, [PROTOCOL_ERROR])


@case("5.1", "CONTINUATION on an idle stream: PROTOCOL_ERROR")
def continuation_idle():
    c = Conn()
    c.send(frame(CONTINUATION, END_HEADERS, 1, c.block()))
    return conn_error(c, [PROTOCOL_ERROR])


@case("5.1", "DATA on a half-closed (remote) stream: STREAM_CLOSED")
def data_half_closed():
    c = Conn()
    c.request(1, "/delay?ms=300")
    c.send(frame(DATA, 0, 1, b"x"))
    return stream_error(c, 1, [STREAM_CLOSED])


@case("5.1", "HEADERS on a half-closed (remote) stream: STREAM_CLOSED")
def headers_half_closed():
    c = Conn()
    c.request(1, "/delay?ms=300")
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, c.block()))
    return stream_error(c, 1, [STREAM_CLOSED])


def error_or_ignored(c, sid, codes, next_sid):
    """A stream error on sid with one of codes, or the frame ignored: the
    next request on the connection is answered."""
    c.request(next_sid)
    f = c.until(lambda f: f[0] in (RST_STREAM, GOAWAY) and f[2] in (0, sid) or
                (f[0] == HEADERS and f[2] == next_sid))
    if f is None:
        return "no answer" if not c.eof else None
    if f[0] == HEADERS:
        return None
    code = rst_code(f) if f[0] == RST_STREAM else goaway_code(f)
    return None if code in codes else "code %d, want %s" % (code, codes)


@case("5.1", "DATA on a closed stream: STREAM_CLOSED, or ignored (RFC 9113: MAY)")
def data_closed():
    c = Conn()
    c.request(1)
    err = answered(c, 1)
    if err:
        return err
    c.send(frame(DATA, 0, 1, b"x"))
    return error_or_ignored(c, 1, [STREAM_CLOSED, PROTOCOL_ERROR], 3)


@case("5.1.1", "an even stream identifier from a client: PROTOCOL_ERROR")
def even_id():
    c = Conn()
    c.request(2)
    return conn_error(c, [PROTOCOL_ERROR])


@case("5.1.1", "a stream identifier lower than one used: ignored (nghttp2's choice over "
      "RFC 9113's PROTOCOL_ERROR: a late trailer after a reset must not end a connection)")
def lower_id():
    c = Conn()
    c.request(5)
    answered(c, 5)
    c.request(3)
    return error_or_ignored(c, 3, [PROTOCOL_ERROR], 7)


@case("5.1.2", "past SETTINGS_MAX_CONCURRENT_STREAMS: REFUSED_STREAM")
def over_concurrency():
    c = Conn()
    for sid in range(1, 202, 2):  # 101 streams whose handlers wait
        c.request(sid, "/delay?ms=1000")
    err = stream_error(c, 201, [REFUSED_STREAM, PROTOCOL_ERROR])
    if err:
        return err
    return answered(c, 1)


@case("5.3.1", "a stream that depends on itself: PROTOCOL_ERROR")
def self_dependency():
    c = Conn()
    c.send(frame(PRIORITY, 0, 1, struct.pack(">I", 1) + b"\x10"))
    return stream_error(c, 1, [PROTOCOL_ERROR])


@case("5.5", "an unknown frame inside a header block: PROTOCOL_ERROR")
def unknown_inside_block():
    c = Conn()
    block = c.block()
    c.send(frame(HEADERS, END_STREAM, 1, block[:2]) + frame(0x20, 0, 0, b"") +
           frame(CONTINUATION, END_HEADERS, 1, block[2:]))
    return conn_error(c, [PROTOCOL_ERROR])

# ------------------------------------------------------ 6 frame definitions


@case("6.1", "DATA on stream 0: PROTOCOL_ERROR")
def data_stream0():
    c = Conn()
    c.send(frame(DATA, 0, 0, b"x"))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.1", "DATA whose padding is its whole length: PROTOCOL_ERROR")
def data_bad_padding():
    c = Conn()
    c.request(1, "/echo", "POST", end=False)
    c.send(frame(DATA, PADDED, 1, b"\x05abcd"))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.1", "padded DATA: the padding is dropped, the body echoed")
def data_padded():
    c = Conn()
    c.request(1, "/echo", "POST", end=False)
    c.send(frame(DATA, PADDED | END_STREAM, 1, b"\x03abc\0\0\0"))
    f = c.until(lambda f: f[0] == DATA and f[2] == 1)
    return None if f and f[3] == b"abc" else "got %r" % (f and f[3])


@case("6.2", "HEADERS on stream 0: PROTOCOL_ERROR")
def headers_stream0():
    c = Conn()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 0, c.block()))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.2", "HEADERS whose padding is its whole length: PROTOCOL_ERROR")
def headers_bad_padding():
    c = Conn()
    block = c.block()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS | PADDED, 1,
                 bytes([len(block) + 1]) + block))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.2", "HEADERS with priority and padding: answered")
def headers_priority_padded():
    c = Conn()
    block = c.block()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS | PADDED | PRIO, 1,
                 b"\x02" + struct.pack(">I", 0) + b"\x10" + block + b"\0\0"))
    return answered(c, 1)


@case("6.3", "PRIORITY on stream 0: PROTOCOL_ERROR")
def priority_stream0():
    c = Conn()
    c.send(frame(PRIORITY, 0, 0, b"\0\0\0\1\x10"))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.3", "PRIORITY of a length other than 5: FRAME_SIZE_ERROR")
def priority_length():
    c = Conn()
    c.send(frame(PRIORITY, 0, 1, b"\0\0\0\0\x10\0"))
    return stream_error(c, 1, [FRAME_SIZE_ERROR])


@case("6.4", "RST_STREAM on stream 0: PROTOCOL_ERROR")
def rst_stream0():
    c = Conn()
    c.send(frame(RST_STREAM, 0, 0, struct.pack(">I", CANCEL)))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.4", "RST_STREAM of a length other than 4: FRAME_SIZE_ERROR")
def rst_length():
    c = Conn()
    c.request(1, "/delay?ms=300")
    c.send(frame(RST_STREAM, 0, 1, b"\0\0\0\x08\0"))
    return conn_error(c, [FRAME_SIZE_ERROR])


@case("6.5", "SETTINGS ACK with a payload: FRAME_SIZE_ERROR")
def settings_ack_payload():
    c = Conn()
    c.send(frame(SETTINGS, ACK, 0, setting(3, 100)))
    return conn_error(c, [FRAME_SIZE_ERROR])


@case("6.5", "SETTINGS on a stream: PROTOCOL_ERROR")
def settings_stream():
    c = Conn()
    c.send(frame(SETTINGS, 0, 1, setting(3, 100)))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.5", "SETTINGS of a length not a multiple of 6: FRAME_SIZE_ERROR")
def settings_length():
    c = Conn()
    c.send(frame(SETTINGS, 0, 0, setting(3, 100)[:5]))
    return conn_error(c, [FRAME_SIZE_ERROR])


@case("6.5.2", "SETTINGS_ENABLE_PUSH other than 0 or 1: PROTOCOL_ERROR")
def settings_push():
    c = Conn()
    c.send(frame(SETTINGS, 0, 0, setting(2, 2)))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.5.2", "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1: FLOW_CONTROL_ERROR")
def settings_window():
    c = Conn()
    c.send(frame(SETTINGS, 0, 0, setting(4, 1 << 31)))
    return conn_error(c, [FLOW_CONTROL_ERROR])


@case("6.5.2", "SETTINGS_MAX_FRAME_SIZE out of range: PROTOCOL_ERROR")
def settings_frame_size():
    for v in (16383, 1 << 24):
        c = Conn()
        c.send(frame(SETTINGS, 0, 0, setting(5, v)))
        err = conn_error(c, [PROTOCOL_ERROR])
        if err:
            return "%d: %s" % (v, err)
    return None


@case("6.5.2", "an unknown setting is ignored")
def settings_unknown():
    c = Conn()
    c.send(frame(SETTINGS, 0, 0, setting(0xff, 1)))
    c.request(1)
    return answered(c, 1)


@case("6.7", "PING is answered with its payload, ACK set")
def ping_answered():
    c = Conn()
    c.send(frame(PING, 0, 0, b"runtime!"))
    f = c.until(lambda f: f[0] == PING)
    return None if f and f[1] & ACK and f[3] == b"runtime!" else "got %r" % (f,)


@case("6.7", "PING on a stream: PROTOCOL_ERROR")
def ping_stream():
    c = Conn()
    c.send(frame(PING, 0, 1, b"12345678"))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.7", "PING of a length other than 8: FRAME_SIZE_ERROR")
def ping_length():
    c = Conn()
    c.send(frame(PING, 0, 0, b"1234567"))
    return conn_error(c, [FRAME_SIZE_ERROR])


@case("6.8", "GOAWAY on a stream: PROTOCOL_ERROR")
def goaway_stream():
    c = Conn()
    c.send(frame(GOAWAY, 0, 1, struct.pack(">II", 0, 0)))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.9", "WINDOW_UPDATE of 0 on the connection: PROTOCOL_ERROR")
def window_zero_conn():
    c = Conn()
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0)))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.9", "WINDOW_UPDATE of 0 on a stream: PROTOCOL_ERROR")
def window_zero_stream():
    c = Conn()
    c.request(1, "/delay?ms=300")
    c.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0)))
    return stream_error(c, 1, [PROTOCOL_ERROR])


@case("6.9", "WINDOW_UPDATE of a length other than 4: FRAME_SIZE_ERROR")
def window_length():
    c = Conn()
    c.send(frame(WINDOW_UPDATE, 0, 0, b"\0\0\0\1\0"))
    return conn_error(c, [FRAME_SIZE_ERROR])


@case("6.9.1", "the connection window past 2^31-1: FLOW_CONTROL_ERROR")
def window_overflow_conn():
    c = Conn()
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7fffffff)) +
           frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7fffffff)))
    return conn_error(c, [FLOW_CONTROL_ERROR])


@case("6.9.1", "a stream window past 2^31-1: FLOW_CONTROL_ERROR")
def window_overflow_stream():
    c = Conn()
    c.request(1, "/delay?ms=300")
    c.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0x7fffffff)))
    return stream_error(c, 1, [FLOW_CONTROL_ERROR])


@case("6.9.2", "SETTINGS_INITIAL_WINDOW_SIZE that overflows a window: FLOW_CONTROL_ERROR")
def settings_window_overflow():
    c = Conn()
    c.request(1, "/delay?ms=300")
    c.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0x7fffffff - 65535)))
    c.send(frame(SETTINGS, 0, 0, setting(4, 0x7fffffff)))
    return stream_error(c, 1, [FLOW_CONTROL_ERROR])


@case("6.10", "a header block in CONTINUATION frames: answered")
def continuations():
    c = Conn()
    block = c.block(extra=[("x-a", "1"), ("x-b", "2")])
    c.send(frame(HEADERS, END_STREAM, 1, block[:3]) +
           frame(CONTINUATION, 0, 1, block[3:6]) +
           frame(CONTINUATION, END_HEADERS, 1, block[6:]))
    return answered(c, 1)


@case("6.10", "CONTINUATION after END_HEADERS: PROTOCOL_ERROR")
def continuation_after_end():
    c = Conn()
    c.request(1, "/delay?ms=300")
    c.send(frame(CONTINUATION, END_HEADERS, 1, c.enc.encode([("x-a", "1")])))
    return conn_error(c, [PROTOCOL_ERROR])


@case("6.10", "CONTINUATION on another stream: PROTOCOL_ERROR")
def continuation_other_stream():
    c = Conn()
    block = c.block()
    c.send(frame(HEADERS, END_STREAM, 1, block[:2]) +
           frame(CONTINUATION, END_HEADERS, 3, block[2:]))
    return conn_error(c, [PROTOCOL_ERROR])

# ------------------------------------------------------ 8 HTTP semantics


def malformed(extra=(), path="/plaintext", method="GET", drop=None):
    c = Conn()
    hdrs = [(":method", method), (":scheme", "http"), (":path", path),
            (":authority", "h")]
    hdrs = [h for h in hdrs if h[0] != drop] + list(extra)
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, c.enc.encode(hdrs)))
    err = stream_error(c, 1, [PROTOCOL_ERROR])
    if err and answered(c, 1, b"400") is None:
        return None  # a 400 is as good as a reset
    return err


@case("8.2.1", "an upper-case field name: PROTOCOL_ERROR")
def upper_case():
    return malformed([("X-Upper", "1")])


@case("8.2.2", "connection-specific fields: PROTOCOL_ERROR")
def connection_specific():
    for name, value in (("connection", "keep-alive"), ("keep-alive", "1"),
                        ("transfer-encoding", "chunked"), ("upgrade", "h2c"),
                        ("proxy-connection", "x"), ("te", "gzip")):
        err = malformed([(name, value)])
        if err:
            return "%s: %s" % (name, err)
    return None


@case("8.2.2", "TE: trailers is allowed")
def te_trailers():
    c = Conn()
    c.request(1, extra=[("te", "trailers")])
    return answered(c, 1)


@case("8.3", "a pseudo-field after a regular one: PROTOCOL_ERROR")
def pseudo_after_regular():
    c = Conn()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, c.enc.encode(
        [(":method", "GET"), (":scheme", "http"), ("x-a", "1"), (":path", "/"),
         (":authority", "h")])))
    return stream_error(c, 1, [PROTOCOL_ERROR])


@case("8.3", "an unknown or a response pseudo-field: PROTOCOL_ERROR")
def bad_pseudo():
    for name in (":unknown", ":status"):
        err = malformed([(name, "1")])
        if err:
            return "%s: %s" % (name, err)
    return None


@case("8.3.1", ":method, :scheme or :path missing, or :path empty: PROTOCOL_ERROR")
def pseudo_missing():
    for drop in (":method", ":scheme", ":path"):
        err = malformed(drop=drop)
        if err:
            return "no %s: %s" % (drop, err)
    return malformed(path="")


@case("8.3.1", "a pseudo-field twice: PROTOCOL_ERROR")
def pseudo_twice():
    return malformed([(":path", "/other")])


@case("8.1.1", "a body longer than its content-length: PROTOCOL_ERROR")
def content_length_over():
    c = Conn()
    c.request(1, "/echo", "POST", extra=[("content-length", "3")], end=False)
    c.send(frame(DATA, END_STREAM, 1, b"abcdef"))
    return stream_error(c, 1, [PROTOCOL_ERROR])


@case("8.1.1", "a body shorter than its content-length: PROTOCOL_ERROR")
def content_length_under():
    c = Conn()
    c.request(1, "/echo", "POST", extra=[("content-length", "9")], end=False)
    c.send(frame(DATA, END_STREAM, 1, b"abc"))
    return stream_error(c, 1, [PROTOCOL_ERROR])


@case("8.1", "trailers after a body: the body echoed")
def trailers():
    c = Conn()
    c.request(1, "/echo", "POST", end=False)
    c.send(frame(DATA, 0, 1, b"abc"))
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, c.enc.encode([("x-t", "1")])))
    f = c.until(lambda f: f[0] == DATA and f[2] == 1)
    return None if f and f[3] == b"abc" else "got %r" % (f,)

# ------------------------------------------------------------ RFC 7541 HPACK


@case("hpack 2.3.3", "an index past the tables: COMPRESSION_ERROR")
def hpack_index():
    c = Conn()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, b"\x82\x86\x84\xff\x7f"))
    return conn_error(c, [COMPRESSION_ERROR])


@case("hpack 6.3", "a table size update over the setting: COMPRESSION_ERROR")
def hpack_table_size():
    c = Conn()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, b"\x3f\xe2\x1f\x82\x86\x84"))  # 4097
    return conn_error(c, [COMPRESSION_ERROR])


@case("hpack 5.2", "a Huffman string with the EOS symbol: COMPRESSION_ERROR")
def hpack_eos():
    c = Conn()
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1,
                 b"\x82\x86\x84\x41\x84\xff\xff\xff\xff"))
    return conn_error(c, [COMPRESSION_ERROR])

# ------------------------------------------------------------- the attacks


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@case("attack", "rapid reset (CVE-2023-44487): cut off, ENHANCE_YOUR_CALM")
def rapid_reset():
    c = Conn()
    burst = b""
    for i in range(3000):
        sid = 2 * i + 1
        burst += frame(HEADERS, END_STREAM | END_HEADERS, sid, c.block("/delay?ms=1000"))
        burst += frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL))
    c.send(burst)
    return conn_error(c, [ENHANCE_YOUR_CALM, PROTOCOL_ERROR])


@case("attack", "CONTINUATION flood (CVE-2024-27316): cut off")
def continuation_flood():
    c = Conn()
    flood = frame(HEADERS, END_STREAM, 1, c.block())
    for i in range(10000):
        flood += frame(CONTINUATION, 0, 1, c.enc.encode([("x-a%d" % i, "b" * 10)]))
    c.send(flood)
    return conn_error(c, [ENHANCE_YOUR_CALM, PROTOCOL_ERROR, COMPRESSION_ERROR])


@case("attack", "an HPACK bomb (a large field referenced thousands of times): cut off")
def hpack_bomb():
    c = Conn(settings=setting(1, 65536))
    first = c.enc.encode([("x-bomb", "b" * 4000)])  # into the dynamic table
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, c.block() + first))
    c.until(lambda f: f[2] == 1 and f[1] & END_STREAM)
    refs = c.block() + b"\xbe" * 12000  # index 62: the field again and again
    c.send(frame(HEADERS, END_STREAM, 3, refs[:16000]) +
           frame(CONTINUATION, END_HEADERS, 3, refs[16000:]))
    return conn_error(c, [ENHANCE_YOUR_CALM, COMPRESSION_ERROR])


def unread_flood(make):
    """Frames whose answers the peer never reads: cut off, memory bounded."""
    c = Conn()
    c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    chunk = b"".join(make(i) for i in range(1000))
    end = time.time() + 10
    sent = 0
    c.s.settimeout(1)
    while time.time() < end:
        try:
            c.s.sendall(chunk)
            sent += 1000
        except (socket.timeout, OSError):
            break
    c.s.settimeout(None)
    err = conn_error(c, [ENHANCE_YOUR_CALM, PROTOCOL_ERROR, NO_ERROR])
    return err


@case("attack", "a SETTINGS flood, never read: cut off")
def settings_flood():
    return unread_flood(lambda i: frame(SETTINGS, 0, 0, setting(3, 100)))


@case("attack", "a PING flood, never read: cut off")
def ping_flood():
    return unread_flood(lambda i: frame(PING, 0, 0, b"%08d" % i))


@case("attack", "an empty-frame flood: cut off")
def empty_flood():
    c = Conn()
    c.request(1, "/echo", "POST", end=False)
    c.send(frame(DATA, 0, 1, b"") * 5000)
    return conn_error(c, [ENHANCE_YOUR_CALM])


@case("attack", "a zero window held: the stream ends at the idle timeout")
def zero_window():
    if len(sys.argv) < 3:
        return "no ROOT_FILE given"
    c = Conn(settings=setting(4, 0))
    c.request(1, "/big")
    f = c.until(lambda f: f[2] == 1 and f[0] in (RST_STREAM, DATA), 15)
    if f is None or f[0] != RST_STREAM:
        return "got %r" % (f and f[0])
    return None


@case("attack", "many slow streams: bounded by the limit and the timeout")
def slow_streams():
    c = Conn()
    for sid in range(1, 202, 2):
        c.request(sid, "/echo", "POST", end=False)
        c.send(frame(DATA, 0, sid, b"x"))
    err = stream_error(c, 201, [REFUSED_STREAM, PROTOCOL_ERROR])
    if err:
        return err
    f = c.until(lambda f: f[2] == 1 and f[0] in (HEADERS, RST_STREAM), 15)
    return None if f else "stream 1 never ended"


def main():
    global failures, passes
    pid = int(os.environ.get("SERVER_PID", "0"))
    before = rss_kb(pid) if pid else 0
    for fn in CASES:
        try:
            err = fn()
        except Exception as e:  # a broken case is a failure, not a crash
            err = "exception %r" % e
        if err is None:
            err = serves_still()
        if err is None:
            passes += 1
            print("PASS: %s %s" % (fn.section, fn.text))
        else:
            failures += 1
            print("FAIL: %s %s: %s" % (fn.section, fn.text, err))
        sys.stdout.flush()
    if pid:
        after = rss_kb(pid)
        ok = after - before < 64 * 1024
        print("%s: the server's RSS grew %d KiB over the run (bound 64 MiB)" %
              ("PASS" if ok else "FAIL", after - before))
        passes += ok
        failures += not ok
    print("%d passed, %d failed" % (passes, failures))
    sys.exit(1 if failures else 0)


main()
