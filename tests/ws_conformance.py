#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# ws_conformance.py - a WebSocket conformance suite in the spirit of
# Autobahn|Testsuite, written against RFC 6455 (WebSocket) and RFC 7692
# (permessage-deflate) directly: raw sockets, frames built and read by
# hand (zlib, hashlib and base64 only), so that it can send what a
# client library would refuse to.
#
#   ws_conformance.py server-cases PORT
#     A client against a server's echo endpoint, ws://127.0.0.1:PORT/ws
#     (the HTTP demo's /ws: each data message back as it came, the
#     subprotocol "echo", permessage-deflate with no context takeover,
#     message_max 16 MiB). Each case opens its own connection (the 101
#     and its Sec-WebSocket-Accept checked) and checks the answers: the
#     opening handshake, echoes at the length boundaries and in chopped
#     writes, pings and pongs, reserved bits and opcodes, fragments,
#     UTF-8, the close handshake and close codes, masking, length limits
#     and forms, permessage-deflate's negotiation and messages. A
#     failure the server must report is checked as its close code, then
#     the end of the TCP connection.
#   ws_conformance.py client-cases
#     A raw server for the library's client, examples/ws_echo --connect
#     URL [--deflate] WORD... (path: $WS_ECHO, default ./examples/ws_echo):
#     on its own port on 127.0.0.1, per case it runs ws_echo and answers
#     as the case wants - the handshake request checked, client frames
#     masked with a new key each, replies fragmented and with pings,
#     replies at the length boundaries, bad server frames and bad 101s
#     that the client must fail on, the close handshake, permessage-deflate.
#
# Every case prints "PASS: name" or "FAIL: name (detail)"; the exit
# status is 1 if any failed. Reads are bounded (10 s), so a hang fails.
# tests/ws_conformance.sh runs both modes on each engine.
import base64
import hashlib
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TIMEOUT = 10.0                  # seconds for any one read
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
RSV1, RSV2, RSV3 = 4, 2, 1
TAIL = b"\x00\x00\xff\xff"      # RFC 7692 7.2.1: removed, appended back
MESSAGE_MAX = 16 << 20          # the demo's (the library's default)
READ_MAX = 64 << 20             # a frame larger than this is not read
OPNAMES = {CONT: "continuation", TEXT: "text", BINARY: "binary", CLOSE: "close",
           PING: "ping", PONG: "pong"}

failed = 0
passed = 0


class Fail(Exception):
    """A case's failure: its detail."""


def report(name, detail=None):
    global failed, passed
    if detail is None:
        passed += 1
        print("PASS: " + name, flush=True)
    else:
        failed += 1
        print("FAIL: %s (%s)" % (name, detail), flush=True)


def run_case(name, fn, *args, **kw):
    try:
        fn(*args, **kw)
        report(name)
    except Fail as e:
        report(name, str(e))
    except Exception as e:  # a bug of the case, or the socket's error
        report(name, "%s: %s" % (type(e).__name__, e))


def short(b, n=40):
    """bytes for a message: the first n, and the length."""
    b = bytes(b)
    return "%r%s (%d bytes)" % (b[:n], "..." if len(b) > n else "", len(b))


def same(what, got, want):
    """got == want, or Fail saying where they differ."""
    if got == want:
        return
    if len(got) != len(want):
        raise Fail("%s: %d bytes, wanted %d: %s" % (what, len(got), len(want), short(got)))
    i = next(i for i in range(len(got)) if got[i] != want[i])
    raise Fail("%s differs at byte %d of %d: %r, wanted %r" % (what, i, len(got),
                                                               got[i:i + 8], want[i:i + 8]))


def accept_of(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def mask_bytes(data, key):
    n = len(data)
    if not n:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


def build(op, payload=b"", fin=True, rsv=0, mask=True, length=None, form=None):
    """A frame: mask True (a fresh key), bytes (that key) or False; length
    and form (7, 16, 64) to lie about the length or its encoding."""
    payload = bytes(payload)
    n = len(payload) if length is None else length
    if form is None:
        form = 7 if n < 126 else 16 if n < 65536 else 64
    b0 = (0x80 if fin else 0) | (rsv << 4) | op
    m = 0x80 if mask is not False else 0
    if form == 7:
        head = bytes([b0, m | n])
    elif form == 16:
        head = bytes([b0, m | 126]) + struct.pack("!H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack("!Q", n)
    if mask is False:
        return head + payload
    key = mask if isinstance(mask, bytes) else os.urandom(4)
    return head + key + mask_bytes(payload, key)


def close_payload(code, reason=b""):
    return struct.pack("!H", code) + reason


def ascii_text(n):
    pat = b"abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ."
    return (pat * (n // len(pat) + 1))[:n]


def rand_bytes(n, seed=1):
    return random.Random(seed).randbytes(n)


def utf8_ok(b):
    try:
        bytes(b).decode("utf-8", "strict")
        return True
    except UnicodeDecodeError:
        return False


# ------------------------------------------------------- extension header

def parse_extensions(value):
    """Sec-WebSocket-Extensions: [(name, [(param, value or None)])];
    Fail on a malformed one."""
    out = []
    for ext in value.split(","):
        parts = [p.strip() for p in ext.split(";")]
        if not parts[0] or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", parts[0]):
            raise Fail("malformed Sec-WebSocket-Extensions %r" % value)
        params = []
        for p in parts[1:]:
            k, eq, v = p.partition("=")
            k, v = k.strip(), v.strip()
            if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
                v = v[1:-1]
            params.append((k.lower(), v if eq else None))
        out.append((parts[0].lower(), params))
    return out


PMD_PARAMS = ("server_no_context_takeover", "client_no_context_takeover",
              "server_max_window_bits", "client_max_window_bits")


def bits_of(v):
    return int(v) if v is not None and re.fullmatch(r"[0-9]{1,2}", v) and 8 <= int(v) <= 15 \
        else None


def pmd_response(offer, value):
    """The server's answer, value, to our offer (RFC 7692 7): None if it
    declined, else the agreed parameters; Fail if the answer is not one
    the RFC allows for any of the offers."""
    if value is None:
        return None
    exts = parse_extensions(value)
    if len(exts) != 1 or exts[0][0] != "permessage-deflate":
        raise Fail("Sec-WebSocket-Extensions %r: not one permessage-deflate" % value)
    params = exts[0][1]
    names = [k for k, _ in params]
    if len(set(names)) != len(names):
        raise Fail("%r: a parameter twice (RFC 7692 7)" % value)
    got = {}
    for k, v in params:
        if k not in PMD_PARAMS:
            raise Fail("%r: parameter %s not RFC 7692's" % (value, k))
        if k.endswith("takeover"):
            if v is not None:
                raise Fail("%r: %s with a value" % (value, k))
            got[k] = True
        else:
            if bits_of(v) is None:  # in a response, both need a value 8..15
                raise Fail("%r: %s=%r not 8..15 (RFC 7692 7.1.2)" % (value, k, v))
            got[k] = bits_of(v)
    why = []
    for name, oparams in parse_extensions(offer):
        if name != "permessage-deflate":
            continue
        o = dict(oparams)
        if "server_no_context_takeover" in o and "server_no_context_takeover" not in got:
            why.append("server_no_context_takeover offered, not in the answer (7.1.1.1)")
            continue
        if "server_max_window_bits" in o and \
                got.get("server_max_window_bits", 99) > (bits_of(o["server_max_window_bits"]) or 0):
            why.append("server_max_window_bits=%s offered, the answer's missing or more "
                       "(7.1.2.1)" % o["server_max_window_bits"])
            continue
        if "client_max_window_bits" in got and "client_max_window_bits" not in o:
            why.append("client_max_window_bits answered, not offered (7.1.2.2)")
            continue
        if bits_of(o.get("client_max_window_bits")) and \
                got.get("client_max_window_bits", 0) > bits_of(o["client_max_window_bits"]):
            why.append("client_max_window_bits above the offer's (7.1.2.2)")
            continue
        break
    else:
        raise Fail("answer %r to offer %r: %s" % (value, offer, "; ".join(why)))
    # the client's window: the answer's, else what the offer promised
    offered = bits_of(o.get("client_max_window_bits")) or 15
    return {"server_bits": got.get("server_max_window_bits", 15),
            "client_bits": got.get("client_max_window_bits", offered),
            "snct": "server_no_context_takeover" in got,
            "cnct": "client_no_context_takeover" in got}


def deflate_msg(data, bits=15, final=False, split_at=None):
    """data compressed as RFC 7692 7.2.1 says (a sync flush, its tail off),
    or with BFINAL set (final); split_at: a sync flush there too."""
    c = zlib.compressobj(6, zlib.DEFLATED, -bits)
    if split_at is not None:
        z = c.compress(data[:split_at]) + c.flush(zlib.Z_SYNC_FLUSH) + c.compress(data[split_at:])
    else:
        z = c.compress(data)
    if final:
        return z + c.flush(zlib.Z_FINISH)
    z += c.flush(zlib.Z_SYNC_FLUSH)
    assert z.endswith(TAIL)
    return z[:-4]


# ------------------------------------------------------------- a peer

class Eof(Fail):
    pass


class Peer:
    """One end of a WebSocket over sock: frames out (masked if client),
    frames in (checked: masked only from a client, RSV bits only as
    agreed, controls whole and short, lengths in their shortest form)."""

    def __init__(self, sock, buf=b"", client=True):
        self.sock = sock
        self.buf = bytearray(buf)
        self.client = client
        self.pmd = None            # agreed permessage-deflate parameters
        self.inflater = None
        self.masks = []            # the peer's mask keys, frame by frame
        self.frames = []           # the peer's frames' (opcode, fin, rsv, len)
        self.pongs = []

    # -- out
    def send(self, data):
        self.sock.sendall(data)

    def frame(self, op, payload=b"", mask=None, **kw):
        return build(op, payload, mask=self.client if mask is None else mask, **kw)

    def send_frame(self, op, payload=b"", **kw):
        self.send(self.frame(op, payload, **kw))

    def our_bits(self):
        return self.pmd["client_bits" if self.client else "server_bits"]

    def their_bits(self):
        return self.pmd["server_bits" if self.client else "client_bits"]

    def send_message(self, op, data, compress=False):
        if compress:
            self.send_frame(op, deflate_msg(data, self.our_bits()), rsv=RSV1)
        else:
            self.send_frame(op, data)

    # -- in
    def read_exact(self, n, what="a frame"):
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(max(1 << 16, min(n - len(self.buf), 1 << 22)))
            except socket.timeout:
                raise Fail("nothing for %.0f s while waiting for %s" % (TIMEOUT, what))
            except ConnectionResetError:
                raise Eof("connection reset while waiting for %s" % what)
            if not chunk:
                raise Eof("connection closed while waiting for %s" % what)
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_frame(self, what="a frame"):
        b0, b1 = self.read_exact(2, what)
        fin, rsv, op = bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0xF
        masked, n = bool(b1 & 0x80), b1 & 0x7F
        side = "server" if self.client else "client"
        if n == 126:
            n = struct.unpack("!H", self.read_exact(2, what))[0]
            if n < 126:
                raise Fail("%s frame length %d in the 16-bit form (RFC 6455 5.2)" % (side, n))
        elif n == 127:
            n = struct.unpack("!Q", self.read_exact(8, what))[0]
            if n < 65536 or n >> 63:
                raise Fail("%s frame length %d in the 64-bit form (RFC 6455 5.2)" % (side, n))
        if masked == self.client:
            raise Fail("%s frame %s (RFC 6455 5.1)" % (side, "masked" if masked else "unmasked"))
        key = self.read_exact(4, what) if masked else None
        if key is not None:
            self.masks.append(key)
        if op not in OPNAMES:
            raise Fail("%s frame with reserved opcode %#x" % (side, op))
        if rsv & ~(RSV1 if self.pmd else 0) or (rsv and op & 8):
            raise Fail("%s %s frame with RSV bits %d%d%d (RFC 6455 5.2)" % (
                side, OPNAMES[op], rsv >> 2, rsv >> 1 & 1, rsv & 1))
        if op & 8 and (n > 125 or not fin):
            raise Fail("%s %s frame of %d bytes, FIN %d (RFC 6455 5.5)" % (
                side, OPNAMES[op], n, fin))
        if n > READ_MAX:
            raise Fail("%s frame of %d bytes" % (side, n))
        payload = self.read_exact(n, what)
        if key is not None:
            payload = mask_bytes(payload, key)
        self.frames.append((op, fin, rsv, n))
        return op, fin, rsv, payload

    def inflate(self, data):
        takeover = not self.pmd["snct" if self.client else "cnct"]
        if self.inflater is None or not takeover:
            self.inflater = zlib.decompressobj(-self.their_bits())
        try:
            out = self.inflater.decompress(data + TAIL, READ_MAX)
        except zlib.error as e:
            raise Fail("a compressed message that does not inflate with a window of %d bits: "
                       "%s" % (self.their_bits(), e))
        if self.inflater.unconsumed_tail:
            raise Fail("a compressed message over %d bytes" % READ_MAX)
        return out

    def recv_message(self, what="a message", answer_pings=True):
        """The next data message (type, bytes), reassembled and inflated;
        pings answered, pongs kept; a close fails."""
        op = None
        parts = []
        compressed = False
        while True:
            fop, fin, rsv, payload = self.read_frame(what)
            if fop == PING:
                if answer_pings:
                    self.send_frame(PONG, payload)
                continue
            if fop == PONG:
                self.pongs.append(payload)
                continue
            if fop == CLOSE:
                raise Fail("a close (%s) instead of %s" % (describe_close(payload), what))
            if fop == CONT:
                if op is None:
                    raise Fail("a continuation frame with no message under way")
                if rsv:
                    raise Fail("RSV1 on a continuation frame (RFC 7692 6)")
            else:
                if op is not None:
                    raise Fail("a new %s frame inside a message" % OPNAMES[fop])
                op, compressed = fop, bool(rsv & RSV1)
            parts.append(payload)
            if fin:
                break
        data = b"".join(parts)
        if compressed:
            data = self.inflate(data)
        if op == TEXT and not utf8_ok(data):
            raise Fail("a text message that is not UTF-8: %s" % short(data))
        return op, data

    def expect_message(self, op, data, what=None):
        what = what or "the echo of %s" % short(data, 16)
        got_op, got = self.recv_message(what)
        if got_op != op:
            raise Fail("%s: a %s message, wanted %s" % (what, OPNAMES[got_op], OPNAMES[op]))
        same(what, got, data)

    def expect_pong(self, payload):
        op, fin, rsv, got = self.read_frame("the pong")
        if op != PONG:
            raise Fail("a %s frame (%s) came first, wanted the pong of %s" % (
                OPNAMES[op], short(got, 16), short(payload, 16)))
        same("the pong's payload", got, payload)

    def expect_eof(self, within=TIMEOUT, after="the close frame"):
        """Nothing more, and the TCP connection's end within that many s."""
        if self.buf:
            raise Fail("bytes after %s: %s" % (after, short(self.buf)))
        self.sock.settimeout(within)
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            raise Fail("TCP connection still open %.0f s after the close" % within)
        except ConnectionResetError:
            return
        finally:
            self.sock.settimeout(TIMEOUT)
        if chunk:
            raise Fail("bytes after %s: %s" % (after, short(chunk)))

    def expect_close(self, codes, reply=True, data_ok=True, within=TIMEOUT):
        """Frames up to a close (data ignored if data_ok); its code one of
        codes (None: no code); then our close back (if reply) and the TCP
        end (within that many s)."""
        codes = codes if isinstance(codes, (tuple, list, set)) else (codes,)
        seen = []
        while True:
            try:
                op, fin, rsv, payload = self.read_frame("a close %s" % "/".join(map(str, codes)))
            except Eof as e:
                raise Fail("%s; no close frame (wanted %s)%s" % (
                    e, "/".join(map(str, codes)),
                    ", after " + ", ".join(seen) if seen else ""))
            if op == CLOSE:
                break
            if op == PONG:
                self.pongs.append(payload)
            if op in (TEXT, BINARY, CONT) and not data_ok:
                raise Fail("a %s frame %s came, wanted only the close" % (OPNAMES[op],
                                                                         short(payload, 16)))
            seen.append("%s %s" % (OPNAMES[op], short(payload, 16)))
        code = parse_close(payload)
        if code not in codes:
            raise Fail("close %s, wanted %s" % (describe_close(payload),
                                                 "/".join(map(str, codes))))
        if reply:
            try:
                self.send_frame(CLOSE, b"" if code is None else close_payload(code))
            except OSError:
                pass
        self.expect_eof(within)
        return code


def parse_close(payload):
    if len(payload) == 0:
        return None
    if len(payload) == 1:
        raise Fail("a close frame of 1 byte")
    if not utf8_ok(payload[2:]):
        raise Fail("a close reason that is not UTF-8: %s" % short(payload[2:]))
    return struct.unpack("!H", payload[:2])[0]


def describe_close(payload):
    if len(payload) < 2:
        return "with payload %r" % bytes(payload)
    return "%d%s" % (struct.unpack("!H", payload[:2])[0],
                     " %r" % bytes(payload[2:]) if len(payload) > 2 else "")


# --------------------------------------------------- the server's cases

PORT = 0


def http_head(sock, buf=b""):
    """An HTTP head off sock: (first line, {lower name: [values]}, rest)."""
    while b"\r\n\r\n" not in buf:
        try:
            chunk = sock.recv(1 << 16)
        except socket.timeout:
            raise Fail("no HTTP head in %.0f s" % TIMEOUT)
        except ConnectionResetError:
            raise Eof("connection reset before an HTTP head")
        if not chunk:
            raise Eof("connection closed before an HTTP head (%s)" % short(buf))
        buf += chunk
        if len(buf) > 1 << 16:
            raise Fail("an HTTP head over 64 KiB")
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or name != name.strip():
            raise Fail("malformed header line %r" % line)
        fields.setdefault(name.lower(), []).append(value.strip())
    return lines[0], fields, rest


def field(fields, name):
    v = fields.get(name)
    return None if v is None else ", ".join(v)


def has_token(value, token):
    return value is not None and token in [t.strip().lower() for t in value.split(",")]


def request(lines, body=b""):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return s


OPEN = []  # the case's sockets, closed after it


def connect(protocols=None, extensions=None, headers=()):
    """A WebSocket to /ws, the 101 checked: its Peer (peer.fields: the
    101's header fields; peer.pmd: permessage-deflate's, if agreed)."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET /ws HTTP/1.1", "Host: 127.0.0.1:%d" % PORT, "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
    if protocols:
        lines.append("Sec-WebSocket-Protocol: " + protocols)
    if extensions:
        lines.append("Sec-WebSocket-Extensions: " + extensions)
    s = request(lines + list(headers))
    OPEN.append(s)
    status, fields, rest = http_head(s)
    if not re.fullmatch(r"HTTP/1\.1 101( .*)?", status):
        raise Fail("handshake answered %r, wanted 101" % status)
    if (field(fields, "upgrade") or "").lower() != "websocket":
        raise Fail("101 with Upgrade %r (RFC 6455 4.2.2)" % field(fields, "upgrade"))
    if not has_token(field(fields, "connection"), "upgrade"):
        raise Fail("101 with Connection %r (RFC 6455 4.2.2)" % field(fields, "connection"))
    if field(fields, "sec-websocket-accept") != accept_of(key):
        raise Fail("Sec-WebSocket-Accept %r, wanted %r (RFC 6455 4.2.2)" % (
            field(fields, "sec-websocket-accept"), accept_of(key)))
    proto = field(fields, "sec-websocket-protocol")
    if proto is not None and (not protocols or proto not in
                              [p.strip() for p in protocols.split(",")]):
        raise Fail("subprotocol %r not among those offered, %r (RFC 6455 4.2.2)" % (
            proto, protocols))
    ext = field(fields, "sec-websocket-extensions")
    if ext is not None and not extensions:
        raise Fail("Sec-WebSocket-Extensions %r answered to no offer (RFC 6455 9.1)" % ext)
    p = Peer(s, rest, client=True)
    p.fields = fields
    p.pmd = pmd_response(extensions, ext) if extensions else None
    return p


def server_case(name, fn, *args, **kw):
    try:
        run_case(name, fn, *args, **kw)
    finally:
        for s in OPEN:
            s.close()
        OPEN.clear()


# -- the handshake

def hs_basic():
    c = connect()
    if "sec-websocket-protocol" in c.fields:
        raise Fail("a subprotocol with none offered")
    c.send_message(TEXT, b"hello")
    c.expect_message(TEXT, b"hello")


def hs_protocol(offer, want):
    c = connect(protocols=offer)
    got = field(c.fields, "sec-websocket-protocol")
    if got != want:
        raise Fail("Sec-WebSocket-Protocol %r, wanted %r" % (got, want))


def hs_refused(lines, want_status, want_fields=()):
    s = request(lines)
    OPEN.append(s)
    status, fields, rest = http_head(s)
    code = status.split(" ")[1] if " " in status else status
    if code == "101":
        keys = [l.split(":", 1)[1].strip() for l in lines
                if l.lower().startswith("sec-websocket-key:")]
        acc = field(fields, "sec-websocket-accept")
        which = [i + 1 for i, k in enumerate(keys) if accept_of(k) == acc]
        raise Fail("101: the handshake was taken%s" % (
            " (Sec-WebSocket-Accept for key %d of %d)" % (which[0], len(keys))
            if which and len(keys) > 1 else ""))
    if want_status and code != want_status:
        raise Fail("answered %r, wanted %s" % (status, want_status))
    for k, v in want_fields:
        if field(fields, k) != v:
            raise Fail("%s: %r, wanted %r" % (k, field(fields, k), v))


def hs_variant(lines):
    """A handshake in another allowed form: a 101, and an echo."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [l.replace("KEY", key) for l in lines]
    s = request(lines)
    OPEN.append(s)
    status, fields, rest = http_head(s)
    if not re.fullmatch(r"HTTP/1\.1 101( .*)?", status):
        raise Fail("answered %r, wanted 101" % status)
    if field(fields, "sec-websocket-accept") != accept_of(key):
        raise Fail("Sec-WebSocket-Accept %r" % field(fields, "sec-websocket-accept"))
    c = Peer(s, rest)
    c.fields = fields
    ext = field(fields, "sec-websocket-extensions")
    offer = ", ".join(l.split(":", 1)[1] for l in lines
                      if l.lower().startswith("sec-websocket-extensions:"))
    c.pmd = pmd_response(offer, ext) if offer else None
    c.send_message(TEXT, b"variant", compress=c.pmd is not None)
    c.expect_message(TEXT, b"variant")
    return c


def hs_two_protocol_lines():
    c = hs_variant(["GET /ws HTTP/1.1", "Host: 127.0.0.1:%d" % PORT, "Upgrade: websocket",
                    "Connection: Upgrade", "Sec-WebSocket-Key: KEY",
                    "Sec-WebSocket-Version: 13", "Sec-WebSocket-Protocol: chat",
                    "Sec-WebSocket-Protocol: echo"])
    if field(c.fields, "sec-websocket-protocol") != "echo":
        raise Fail("subprotocol %r, wanted 'echo'" % field(c.fields, "sec-websocket-protocol"))


def hs_two_extension_lines():
    c = hs_variant(["GET /ws HTTP/1.1", "Host: 127.0.0.1:%d" % PORT, "Upgrade: websocket",
                    "Connection: Upgrade", "Sec-WebSocket-Key: KEY",
                    "Sec-WebSocket-Version: 13", "Sec-WebSocket-Extensions: x-foo",
                    "Sec-WebSocket-Extensions: permessage-deflate"])
    if c.pmd is None:
        raise Fail("permessage-deflate in a second Sec-WebSocket-Extensions line not taken")


def ws_lines(key=None, version="13", method="GET", drop=()):
    key = key or base64.b64encode(os.urandom(16)).decode()
    lines = ["%s /ws HTTP/1.1" % method, "Host: 127.0.0.1:%d" % PORT, "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: " + key,
             "Sec-WebSocket-Version: " + version]
    if method == "POST":
        lines.append("Content-Length: 0")
    return [l for l in lines if not any(l.startswith(d) for d in drop)]


# -- framing

def echo(op, data):
    c = connect()
    c.send_message(op, data)
    c.expect_message(op, data)


def payload_of(op, n, seed=1):
    return ascii_text(n) if op == TEXT else rand_bytes(n, seed + n)


def chopped_small():
    c = connect()
    data = b"chopped, byte by byte"
    for b in c.frame(TEXT, data):
        c.send(bytes([b]))
        time.sleep(0.002)
    c.expect_message(TEXT, data)


def chopped_big():
    c = connect()
    data = rand_bytes(256 << 10, 7)
    wire = c.frame(BINARY, data)
    rng = random.Random(3)
    i = 0
    while i < len(wire):
        k = rng.randint(1, 9000)
        c.send(wire[i:i + k])
        i += k
    c.expect_message(BINARY, data)


def chopped_head():
    c = connect()
    data = rand_bytes(70000, 9)
    wire = c.frame(BINARY, data)
    for a, b in ((0, 1), (1, 5), (5, 11), (11, 13), (13, len(wire))):
        c.send(wire[a:b])
        time.sleep(0.01)
    c.expect_message(BINARY, data)


def many_in_one_write(n):
    c = connect()
    msgs = [(TEXT if i % 2 else BINARY, ascii_text(i * 37 % 300) if i % 2 else
             rand_bytes(i * 53 % 70000, i)) for i in range(n)]
    c.send(b"".join(c.frame(op, d) for op, d in msgs))
    for i, (op, d) in enumerate(msgs):
        c.expect_message(op, d, "echo %d of %d" % (i + 1, n))


def zero_mask():
    c = connect()
    c.send_frame(TEXT, b"a mask of zeros", mask=b"\0\0\0\0")
    c.expect_message(TEXT, b"a mask of zeros")


# -- pings and pongs

def ping_answered(payload):
    c = connect()
    c.send_frame(PING, payload)
    c.send_frame(TEXT, b"after the ping")
    c.expect_pong(payload)
    c.expect_message(TEXT, b"after the ping")


def pings_in_one_write():
    c = connect()
    pays = [b"ping %d" % i for i in range(10)]
    c.send(b"".join(c.frame(PING, p) for p in pays) + c.frame(TEXT, b"then this"))
    for p in pays:
        c.expect_pong(p)
    c.expect_message(TEXT, b"then this")


def unsolicited_pong():
    c = connect()
    c.send_frame(PONG, b"unasked")
    c.send_frame(PONG, b"")
    c.send_frame(TEXT, b"after the pongs")
    op, fin, rsv, got = c.read_frame("the echo")
    if op != TEXT or not fin or got != b"after the pongs":
        raise Fail("a %s frame %s came, wanted the echo only" % (OPNAMES.get(op, op), short(got)))


def big_ping():
    c = connect()
    c.send_frame(PING, bytes(126))
    c.expect_close(1002)


# -- reserved bits and opcodes

def rsv_set(bits, op=TEXT):
    c = connect()
    c.send_frame(op, b"reserved" if op != PING else b"", rsv=bits)
    c.expect_close(1002)


def reserved_opcode(op):
    c = connect()
    c.send_frame(TEXT, b"before")
    c.send_frame(op, b"" if op & 8 else b"reserved opcode")
    c.send_frame(PING, b"after")
    c.expect_message(TEXT, b"before")
    c.expect_close(1002)


# -- fragmentation

def fragments(op, data, n, pings=False):
    c = connect()
    cuts = [len(data) * i // n for i in range(n + 1)]
    wire = []
    for i in range(n):
        wire.append(c.frame(op if i == 0 else CONT, data[cuts[i]:cuts[i + 1]], fin=i == n - 1))
        if pings and i < n - 1:
            wire.append(c.frame(PING, b"between %d" % i))
    for w in wire:
        c.send(w)
    if pings:
        for i in range(n - 1):
            c.expect_pong(b"between %d" % i)
    c.expect_message(op, data)


def empty_fragments():
    c = connect()
    c.send(c.frame(TEXT, b"", fin=False) + c.frame(CONT, b"middle", fin=False) +
           c.frame(CONT, b"", fin=False) + c.frame(CONT, b"", fin=True))
    c.expect_message(TEXT, b"middle")


def close_between_fragments():
    c = connect()
    c.send(c.frame(TEXT, b"never ", fin=False) + c.frame(CLOSE, close_payload(1000)))
    c.expect_close(1000, reply=False, data_ok=False)


def fragment_error(*frames):
    c = connect()
    c.send(b"".join(c.frame(*f[:2], **(f[2] if len(f) > 2 else {})) for f in frames))
    c.expect_close(1002)


# -- UTF-8

VALID_UTF8 = [
    ("1-byte: ASCII and U+0000, U+007F", b"plain \x00 \x7f"),
    ("2-byte: U+0080, U+00E9, U+07FF", "\u0080 \u00e9 \u07ff".encode()),
    ("3-byte: U+0800, U+20AC, U+D7FF, U+E000, U+FFFD, U+FFFF",
     "\u0800 \u20ac \ud7ff \ue000 \ufffd \uffff".encode()),
    ("4-byte: U+10000, U+1D11E, U+10FFFF", "\U00010000 \U0001d11e \U0010ffff".encode()),
    ("Greek kosme", "\u03ba\u1f79\u03c3\u03bc\u03b5".encode()),
]

INVALID_UTF8 = [
    ("0xFF", b"ab\xffcd"),
    ("0xFE", b"\xfe"),
    ("a lone continuation byte 0x80", b"ab\x80"),
    ("overlong '/' C0 AF", b"\xc0\xaf"),
    ("overlong C1 BF", b"\xc1\xbf"),
    ("overlong E0 80 AF", b"\xe0\x80\xaf"),
    ("overlong F0 80 80 AF", b"\xf0\x80\x80\xaf"),
    ("surrogate U+D800 (ED A0 80)", b"x\xed\xa0\x80y"),
    ("surrogate U+DFFF (ED BF BF)", b"\xed\xbf\xbf"),
    ("a surrogate pair in CESU-8", b"\xed\xa0\x80\xed\xb0\x80"),
    ("U+110000 (F4 90 80 80)", b"\xf4\x90\x80\x80"),
    ("a 5-byte form F8 88 80 80 80", b"\xf8\x88\x80\x80\x80"),
    ("a truncated final 3-byte sequence", b"ab\xe2\x82"),
    ("a truncated final 4-byte sequence", b"\xf0\x9d\x84"),
    ("kosme, then U+D800, then text",
     b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited"),
]


def utf8_fragments(parts):
    c = connect()
    n = len(parts)
    c.send(b"".join(c.frame(TEXT if i == 0 else CONT, p, fin=i == n - 1)
                    for i, p in enumerate(parts)))
    c.expect_message(TEXT, b"".join(parts))


def utf8_bad(parts, last=True):
    c = connect()
    n = len(parts)
    c.send(b"".join(c.frame(TEXT if i == 0 else CONT, p, fin=last and i == n - 1)
                    for i, p in enumerate(parts)))
    c.expect_close(1007)


# -- the close

def close_normal():
    c = connect()
    c.send_frame(CLOSE, close_payload(1000, b"done here"))
    # 5.5.1: the server closes the TCP connection at once (not after 5 s)
    code = c.expect_close((1000,), reply=False, data_ok=False, within=3)
    if code != 1000:
        raise Fail("answered with %s" % code)


def close_empty():
    c = connect()
    c.send_frame(CLOSE, b"")
    c.expect_close((None, 1000), reply=False, data_ok=False)


def close_code(code, want):
    c = connect()
    c.send_frame(CLOSE, close_payload(code, b"code %d" % code))
    c.expect_close(want, reply=False, data_ok=False)


def close_raw(payload, want):
    c = connect()
    c.send_frame(CLOSE, payload)
    c.expect_close(want, reply=False, data_ok=False)


def close_then_data():
    c = connect()
    c.send(c.frame(CLOSE, close_payload(1000)) + c.frame(TEXT, b"after the close") +
           c.frame(PING, b"after the close"))
    c.expect_close(1000, reply=False, data_ok=False)
    if c.pongs:
        raise Fail("a pong after the close: %s" % short(c.pongs[0]))


def fail_no_wait():
    c = connect()
    c.send_frame(TEXT, b"rsv", rsv=RSV2)
    c.expect_close(1002, reply=False, within=3)


def two_closes():
    c = connect()
    c.send(c.frame(CLOSE, close_payload(1000)) + c.frame(CLOSE, close_payload(1001)))
    c.expect_close(1000, reply=False, data_ok=False)


def big_then_close():
    c = connect()
    data = ascii_text(1 << 20)
    c.send(c.frame(TEXT, data) + c.frame(CLOSE, close_payload(1000)))
    c.expect_message(TEXT, data)
    c.expect_close(1000, reply=False, data_ok=False)


def data_then_close():
    c = connect()
    c.send(c.frame(TEXT, b"before the close") + c.frame(CLOSE, close_payload(1000)))
    c.expect_message(TEXT, b"before the close")
    c.expect_close(1000, reply=False, data_ok=False)


# -- masking

def unmasked(op, payload):
    c = connect()
    c.send_frame(op, payload, mask=False)
    c.expect_close(1002)


# -- limits

def claimed(length, want):
    c = connect()
    c.send(c.frame(BINARY, b"", length=length, form=64))
    c.expect_close(want)


def non_minimal(n, form):
    c = connect()
    c.send_frame(BINARY, bytes(n), form=form)
    c.expect_close(1002)


def send_behind(c, data):
    """data written by a thread (the server may stop reading it)."""
    def go():
        try:
            c.sock.sendall(data)
        except OSError:
            pass
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def over_max_frame():
    c = connect()
    t = send_behind(c, c.frame(BINARY, bytes(MESSAGE_MAX + 1)))
    c.expect_close(1009)
    t.join(TIMEOUT)


def over_max_fragments():
    c = connect()
    half = MESSAGE_MAX // 2
    t = send_behind(c, c.frame(BINARY, bytes(half), fin=False) +
                    c.frame(CONT, bytes(half), fin=False) + c.frame(CONT, b"!", fin=True))
    c.expect_close(1009)
    t.join(TIMEOUT)


def at_max():
    c = connect()
    data = rand_bytes(MESSAGE_MAX, 11)
    t = send_behind(c, c.frame(BINARY, data))
    c.expect_message(BINARY, data)
    t.join(TIMEOUT)


# -- permessage-deflate

PMD = "permessage-deflate; client_no_context_takeover; server_no_context_takeover"


def pmd_offer(offer, accept=True):
    c = connect(extensions=offer)
    if not accept:
        if c.pmd is not None:
            raise Fail("accepted: %r (RFC 7692 7 says decline)" %
                       field(c.fields, "sec-websocket-extensions"))
        c.send_message(TEXT, b"plain, then")
        c.expect_message(TEXT, b"plain, then")
        return
    if c.pmd is None:
        raise Fail("declined (no Sec-WebSocket-Extensions)")
    # a long-distance repeat: a window smaller than agreed shows
    block = rand_bytes(3000, 5)
    data = block * 40 + ascii_text(20000)
    c.send_message(BINARY, data, compress=True)
    c.expect_message(BINARY, data)
    c.send_message(TEXT, ascii_text(5000), compress=True)
    c.expect_message(TEXT, ascii_text(5000))


def pmd_echo(op, data, **kw):
    c = connect(extensions=PMD)
    if c.pmd is None:
        raise Fail("permessage-deflate declined")
    c.send_frame(op, deflate_msg(data, c.pmd["client_bits"], **kw), rsv=RSV1)
    c.expect_message(op, data)


def pmd_empty_byte():
    c = connect(extensions=PMD)
    c.send_frame(TEXT, b"\x00", rsv=RSV1)  # RFC 7692 7.2.3.6
    c.expect_message(TEXT, b"")


def pmd_fragments():
    c = connect(extensions=PMD)
    data = ascii_text(100000) + rand_bytes(20000, 3)
    z = deflate_msg(data)
    cuts = [0, 10, len(z) // 2, len(z) - 3, len(z)]
    for i in range(4):
        c.send_frame(BINARY if i == 0 else CONT, z[cuts[i]:cuts[i + 1]], fin=i == 3,
                     rsv=RSV1 if i == 0 else 0)
        if i < 3:
            c.send_frame(PING, b"p%d" % i)
    for i in range(3):
        c.expect_pong(b"p%d" % i)
    c.expect_message(BINARY, data)


def pmd_empty_first():
    c = connect(extensions=PMD)
    data = ascii_text(5000)
    z = deflate_msg(data)
    c.send(c.frame(TEXT, b"", rsv=RSV1, fin=False) + c.frame(CONT, z[:100], fin=False) +
           c.frame(CONT, z[100:], fin=False) + c.frame(CONT, b"", fin=True))
    c.expect_message(TEXT, data)


def pmd_mixed():
    c = connect(extensions=PMD)
    for i, comp in enumerate((True, False, True, False, True)):
        data = ascii_text(3000 + i)
        c.send_message(TEXT, data, compress=comp)
        c.expect_message(TEXT, data)


def pmd_fails(codes, build_frames):
    c = connect(extensions=PMD)
    if c.pmd is None:
        raise Fail("permessage-deflate declined")
    frames = build_frames(c)
    t = send_behind(c, b"".join(frames))
    c.expect_close(codes)
    t.join(TIMEOUT)


def bomb(c):
    c2 = zlib.compressobj(9, zlib.DEFLATED, -15)
    z = c2.compress(bytes(20 << 20)) + c2.flush(zlib.Z_SYNC_FLUSH)
    return [c.frame(BINARY, z[:-4], rsv=RSV1)]


def at_max_inflated():
    c = connect(extensions=PMD)
    data = ascii_text(MESSAGE_MAX)
    c.send_frame(TEXT, deflate_msg(data), rsv=RSV1)
    c.expect_message(TEXT, data)


def server_cases(port):
    global PORT
    PORT = port
    S = server_case
    # the opening handshake (RFC 6455 4.2)
    S("handshake: 101, Sec-WebSocket-Accept, Upgrade, Connection; an echo", hs_basic)
    S("handshake: subprotocol 'echo' chosen from 'chat, echo'", hs_protocol, "chat, echo", "echo")
    S("handshake: no subprotocol when none in common ('chat')", hs_protocol, "chat", None)
    S("handshake: version 12 -> 426 with Sec-WebSocket-Version: 13 (4.4)", hs_refused,
      ws_lines(version="12"), "426", [("sec-websocket-version", "13")])
    S("handshake: no Sec-WebSocket-Key -> 400 (4.2.1)", hs_refused,
      ws_lines(drop=("Sec-WebSocket-Key",)), "400")
    S("handshake: a key of 8 bytes -> 400 (4.2.1)", hs_refused,
      ws_lines(key=base64.b64encode(os.urandom(8)).decode()), "400")
    S("handshake: POST -> no 101 (4.2.1)", hs_refused, ws_lines(method="POST"), None)
    S("handshake: HTTP/1.0 -> no 101 (4.2.1)", hs_refused,
      [l.replace("HTTP/1.1", "HTTP/1.0") for l in ws_lines()], None)
    S("handshake: no Upgrade: websocket -> no 101 (4.2.1)", hs_refused,
      ws_lines(drop=("Upgrade",)), None)
    S("handshake: no Host -> 400 (4.2.1)", hs_refused, ws_lines(drop=("Host",)), "400")
    S("handshake: two Sec-WebSocket-Key fields -> 400 (4.2.1, 11.3.1)", hs_refused,
      ws_lines() + ["Sec-WebSocket-Key: " + base64.b64encode(os.urandom(16)).decode()], "400")
    S("handshake: two Sec-WebSocket-Version fields -> no 101 (4.2.1, 11.3.5)", hs_refused,
      ws_lines() + ["Sec-WebSocket-Version: 13"], None)
    S("handshake: a 24-character key not base64 -> 400 (4.2.1)", hs_refused,
      ws_lines(key="!!!!!!!!!!!!!!!!!!!!!!=="), "400")
    S("handshake: 'Upgrade: WebSocket', 'Connection: keep-alive, upgrade' taken (4.2.1)",
      hs_variant, ["GET /ws HTTP/1.1", "host: 127.0.0.1:%d" % PORT, "Upgrade: WebSocket",
                   "Connection: keep-alive, upgrade", "sec-websocket-key: KEY",
                   "SEC-WEBSOCKET-VERSION: 13"])
    S("handshake: subprotocols offered over two header lines", hs_two_protocol_lines)
    S("handshake: permessage-deflate in a second Sec-WebSocket-Extensions line",
      hs_two_extension_lines)

    # framing (RFC 6455 5.2)
    for op in (TEXT, BINARY):
        for n in (0, 1, 125, 126, 127, 128, 65535, 65536, 65537, 1 << 20):
            S("framing: %s of %d bytes echoed" % (OPNAMES[op], n), echo, op, payload_of(op, n))
    S("framing: a text frame written 1 byte at a time", chopped_small)
    S("framing: a 256 KiB binary frame in random-sized writes", chopped_big)
    S("framing: a frame's head split inside its 64-bit length and mask", chopped_head)
    S("framing: 6 messages in one write echoed in order", many_in_one_write, 6)
    S("framing: 100 messages in one write echoed in order", many_in_one_write, 100)
    S("framing: a mask key of zeros", zero_mask)

    # pings and pongs (RFC 6455 5.5.2, 5.5.3)
    S("ping: empty ping -> empty pong, before the next echo", ping_answered, b"")
    S("ping: 125-byte binary ping -> identical pong, before the next echo", ping_answered,
      bytes(range(125)))
    S("ping: 10 pings in one write -> 10 pongs in order", pings_in_one_write)
    S("pong: unsolicited pongs are ignored", unsolicited_pong)
    S("ping: 126-byte ping -> 1002 (5.5)", big_ping)

    # reserved bits and opcodes (RFC 6455 5.2)
    for bits, name in ((RSV1, "RSV1"), (RSV2, "RSV2"), (RSV3, "RSV3"), (7, "RSV1-3")):
        S("reserved: %s on a text frame, no extension -> 1002" % name, rsv_set, bits)
    S("reserved: RSV2 on a ping -> 1002", rsv_set, RSV2, PING)
    for op in list(range(3, 8)) + list(range(0xB, 0x10)):
        S("reserved: opcode %#x -> 1002 (after the echo before it)" % op, reserved_opcode, op)

    # fragmentation (RFC 6455 5.4)
    S("fragments: text in 2 fragments echoed whole", fragments, TEXT, ascii_text(1000), 2)
    S("fragments: text in 3 fragments, pings between answered first", fragments, TEXT,
      ascii_text(3000), 3, True)
    S("fragments: binary in 16 fragments, pings between answered first", fragments, BINARY,
      rand_bytes(70000, 2), 16, True)
    S("fragments: 1 MiB binary in 64 fragments", fragments, BINARY, rand_bytes(1 << 20, 4), 64)
    S("fragments: 1 MiB text in 16384 fragments of 64 bytes", fragments, TEXT,
      ascii_text(1 << 20), 16384)
    S("fragments: empty first and last fragments", empty_fragments)
    S("fragments: a continuation with no message (FIN) -> 1002", fragment_error,
      (CONT, b"orphan"))
    S("fragments: a continuation with no message (no FIN) -> 1002", fragment_error,
      (CONT, b"orphan", {"fin": False}))
    S("fragments: a continuation after a whole message -> 1002", fragment_error,
      (TEXT, b"whole"), (CONT, b"late"))
    S("fragments: a new text while a message is open -> 1002", fragment_error,
      (TEXT, b"open ", {"fin": False}), (TEXT, b"again"))
    S("fragments: a new binary while a text is open -> 1002", fragment_error,
      (TEXT, b"open ", {"fin": False}), (BINARY, b"again"))
    S("fragments: a ping without FIN -> 1002", fragment_error,
      (PING, b"half", {"fin": False}), (CONT, b"rest"))
    S("fragments: a pong without FIN -> 1002", fragment_error,
      (PONG, b"half", {"fin": False}), (CONT, b"rest"))
    S("fragments: a close without FIN -> 1002", fragment_error,
      (CLOSE, close_payload(1000), {"fin": False}), (CONT, b""))
    S("fragments: a close between fragments is answered 1000", close_between_fragments)

    # UTF-8 (RFC 6455 5.6, 8.1; RFC 3629)
    for name, text in VALID_UTF8:
        S("utf-8: valid %s echoed" % name, echo, TEXT, text)
    S("utf-8: U+20AC split across fragments (1 | 2 bytes)", utf8_fragments,
      [b"price \xe2", b"\x82\xac"])
    S("utf-8: U+1D11E split into 4 one-byte fragments", utf8_fragments,
      [b"\xf0", b"\x9d", b"\x84", b"\x9e"])
    S("utf-8: kosme in 1-byte fragments", utf8_fragments,
      [bytes([b]) for b in "\u03ba\u1f79\u03c3\u03bc\u03b5".encode()])
    for name, text in INVALID_UTF8:
        S("utf-8: invalid %s -> 1007" % name, utf8_bad, [text])
    S("utf-8: invalid byte in a later fragment -> 1007", utf8_bad,
      [b"hello ", b"world", b" \xff ", b"end"])
    S("utf-8: a sequence cut at the last fragment's end -> 1007", utf8_bad,
      [b"ab\xe2", b"\x82"])
    S("utf-8: surrogate in fragment 2, fragment 3 never sent -> 1007 (fail fast)", utf8_bad,
      [b"hello", b"\xed\xa0\x80"], False)

    # the close (RFC 6455 5.5.1, 7.1, 7.4)
    S("close: 1000 with a reason -> 1000 answered, then the TCP close", close_normal)
    S("close: an empty close -> an empty close (or 1000) answered", close_empty)
    S("close: 1000 with a 123-byte reason (the most) -> 1000", close_raw,
      close_payload(1000, b"r" * 123), 1000)
    S("close: a 124-byte reason (126-byte payload) -> 1002", close_raw,
      close_payload(1000, b"r" * 124), 1002)
    for code in (0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535):
        S("close: code %d refused -> 1002" % code, close_code, code, 1002)
    for code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000,
                 4999):
        S("close: code %d echoed" % code, close_code, code, code)
    S("close: a 1-byte payload -> 1002", close_raw, b"\x03", 1002)
    S("close: a reason not UTF-8 -> 1007", close_raw, close_payload(1000, b"bad \xff"), 1007)
    S("close: data and a ping after the close are not answered", close_then_data)
    S("close: a message before the close is echoed, then 1000", data_then_close)
    S("close: 1 MiB text and a close in one write: the echo, then 1000", big_then_close)
    S("close: two closes: one answer, then the TCP close", two_closes)
    S("close: after failing (1002) the server ends TCP without waiting for our close (7.1.7)",
      fail_no_wait)

    # masking (RFC 6455 5.1, 5.3)
    S("masking: an unmasked text frame -> 1002", unmasked, TEXT, b"in the clear")
    S("masking: an unmasked ping -> 1002", unmasked, PING, b"in the clear")
    S("masking: an unmasked continuation -> 1002", fragment_error,
      (TEXT, b"masked, ", {"fin": False}), (CONT, b"unmasked", {"mask": False}))

    # limits and length forms (RFC 6455 5.2, 7.4.1, 10.4)
    S("limits: a head claiming 2^62 bytes, then nothing -> 1009 at once", claimed, 1 << 62,
      1009)
    S("limits: a 64-bit length with its top bit set -> 1002", claimed, 1 << 63, 1002)
    S("limits: length 5 in the 16-bit form -> 1002", non_minimal, 5, 16)
    S("limits: length 125 in the 16-bit form -> 1002", non_minimal, 125, 16)
    S("limits: length 200 in the 64-bit form -> 1002", non_minimal, 200, 64)
    S("limits: length 65535 in the 64-bit form -> 1002", non_minimal, 65535, 64)
    S("limits: a message of exactly 16 MiB (message_max) echoed", at_max)
    S("limits: a frame of 16 MiB + 1 -> 1009", over_max_frame)
    S("limits: fragments adding up to 16 MiB + 1 -> 1009", over_max_fragments)

    # permessage-deflate (RFC 7692)
    S("deflate: offer '%s' accepted, checked, used" % PMD, pmd_offer, PMD)
    S("deflate: offer 'permessage-deflate' accepted, used", pmd_offer, "permessage-deflate")
    S("deflate: offer with client_max_window_bits accepted, used", pmd_offer,
      "permessage-deflate; client_max_window_bits")
    S("deflate: offer with server_max_window_bits=10 (window obeyed)", pmd_offer,
      "permessage-deflate; server_max_window_bits=10; client_max_window_bits")
    S("deflate: offer with server_max_window_bits=9 (window obeyed)", pmd_offer,
      "permessage-deflate; server_max_window_bits=9")
    S("deflate: offer with a quoted value and no blanks (server_max_window_bits=\"10\")",
      pmd_offer, 'permessage-deflate;server_max_window_bits="10"')
    S("deflate: offer with server_max_window_bits=010 declined (7.1.2.1: no leading zero)",
      pmd_offer, "permessage-deflate; server_max_window_bits=010", False)
    S("deflate: offer with client_max_window_bits=7 declined (7.1.2.2)", pmd_offer,
      "permessage-deflate; client_max_window_bits=7", False)
    S("deflate: offer with client_max_window_bits=9", pmd_offer,
      "permessage-deflate; client_max_window_bits=9")
    S("deflate: two offers (the first server_max_window_bits=8): a valid answer to one",
      pmd_offer, "permessage-deflate; server_max_window_bits=8, permessage-deflate")
    S("deflate: an unknown extension before it ignored", pmd_offer,
      "x-unknown-ext; a=1, permessage-deflate; client_no_context_takeover")
    S("deflate: offer with an unknown parameter declined (7)", pmd_offer,
      "permessage-deflate; foo", False)
    S("deflate: offer with a parameter twice declined (7)", pmd_offer,
      "permessage-deflate; client_no_context_takeover; client_no_context_takeover", False)
    S("deflate: offer with server_max_window_bits without a value declined (7.1.2.1)",
      pmd_offer, "permessage-deflate; server_max_window_bits", False)
    S("deflate: offer with server_max_window_bits=16 declined (7.1.2.1)", pmd_offer,
      "permessage-deflate; server_max_window_bits=16", False)
    S("deflate: compressed empty message (payload 0x00, 7.2.3.6)", pmd_empty_byte)
    S("deflate: compressed empty message (as zlib makes it)", pmd_echo, TEXT, b"")
    S("deflate: compressed 1-byte message", pmd_echo, BINARY, b"x")
    S("deflate: compressed 100 KB text", pmd_echo, TEXT, ascii_text(100000))
    S("deflate: compressed 100 KB random binary", pmd_echo, BINARY, rand_bytes(100000, 8))
    S("deflate: compressed text of every UTF-8 length", pmd_echo, TEXT,
      "a \u00e9 \u20ac \U0001d11e ".encode() * 2000)
    S("deflate: compressed with a sync flush inside", pmd_echo, BINARY,
      ascii_text(30000), split_at=12345)
    S("deflate: compressed with BFINAL set, no tail removed (7.2.3)", pmd_echo, BINARY,
      ascii_text(30000), final=True)
    S("deflate: a compressed message in 4 fragments, pings between", pmd_fragments)
    S("deflate: compressed and uncompressed messages in turn (no context kept)", pmd_mixed)
    S("deflate: a compressed message with empty first and last fragments", pmd_empty_first)
    S("deflate: a compressed message inflating to exactly 16 MiB echoed", at_max_inflated)
    S("deflate: RSV1 on a continuation -> 1002 (7692 6)", pmd_fails, 1002, lambda c: [
        c.frame(TEXT, deflate_msg(b"first part, "), rsv=RSV1, fin=False),
        c.frame(CONT, deflate_msg(b"second"), rsv=RSV1)])
    S("deflate: RSV1 on a ping -> 1002 (7692 6)", pmd_fails, 1002, lambda c: [
        c.frame(PING, b"", rsv=RSV1)])
    S("deflate: RSV2 with permessage-deflate agreed -> 1002", pmd_fails, 1002, lambda c: [
        c.frame(TEXT, b"rsv2", rsv=RSV2)])
    S("deflate: a deflate bomb (20 MiB of zeros, 20 KB sent) -> 1009", pmd_fails, 1009, bomb)
    S("deflate: compressed text inflating to invalid UTF-8 -> 1007", pmd_fails, 1007,
      lambda c: [c.frame(TEXT, deflate_msg(b"valid, then \xed\xa0\x80"), rsv=RSV1)])
    S("deflate: data that is not deflate -> failed (1002/1007)", pmd_fails, (1002, 1007),
      lambda c: [c.frame(BINARY, b"\xff\xff\xff\xff not deflate at all", rsv=RSV1)])


# --------------------------------------------------- the client's cases

WS_ECHO = os.environ.get("WS_ECHO", "./examples/ws_echo")
KEYS = []  # every connection's Sec-WebSocket-Key


class ClientRun:
    """ws_echo --connect against our listening socket: its request head
    read (self.line, self.fields), answered by the case."""

    def __init__(self, lsock, words, deflate=False, runs=None):
        runs.append(self)  # closed (ws_echo killed) by the caller, come what may
        self.sock = None
        self.proc = None
        self.port = lsock.getsockname()[1]
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        args = [WS_ECHO, "--connect", "ws://127.0.0.1:%d/" % self.port]
        args += ["--deflate"] if deflate else []
        self.proc = subprocess.Popen(args + list(words), stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.err)
        end = time.monotonic() + TIMEOUT
        lsock.settimeout(0.1)
        while self.sock is None:
            try:
                self.sock, _ = lsock.accept()
            except socket.timeout:
                if self.proc.poll() is not None:
                    raise Fail("ws_echo exited %d without connecting: %s" % (
                        self.proc.returncode, self.stderr()))
                if time.monotonic() > end:
                    raise Fail("ws_echo did not connect in %.0f s" % TIMEOUT)
        self.sock.settimeout(TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.line, self.fields, rest = http_head(self.sock)
        self.peer = Peer(self.sock, rest, client=False)
        self.key = field(self.fields, "sec-websocket-key")
        KEYS.append(self.key)

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace").strip()[-300:]

    def respond(self, accept=None, extra=(), status="101 Switching Protocols", plain=False,
                drop=()):
        lines = ["HTTP/1.1 " + status]
        if not plain:
            lines += ["Upgrade: websocket", "Connection: Upgrade",
                      "Sec-WebSocket-Accept: " + (accept or accept_of(self.key or ""))]
        lines = [l for l in lines if l.split(":")[0].lower() not in drop] + list(extra)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def finish(self):
        """ws_echo's exit status and stdout (bytes)."""
        try:
            rc = self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail("ws_echo still running %.0f s on" % TIMEOUT)
        self.out.seek(0)
        return rc, self.out.read()

    def close(self):
        if self.sock:
            self.sock.close()
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
        self.err.close()

    # -- conversations
    def expect_word(self, word):
        op, data = self.peer.recv_message("the client's message %r" % word[:20])
        if op != TEXT:
            raise Fail("the client sent a %s message, wanted text" % OPNAMES[op])
        same("the client's message", data, word.encode())

    def expect_client_close(self, code=1000):
        """The client's close (masked, code), ours back, our TCP close."""
        while True:
            op, fin, rsv, payload = self.peer.read_frame("the client's close")
            if op == CLOSE:
                break
            if op == PONG:
                self.peer.pongs.append(payload)
            else:
                raise Fail("a %s frame %s before the client's close" % (OPNAMES[op],
                                                                       short(payload, 20)))
        got = parse_close(payload)
        if got != code:
            raise Fail("the client closed with %s, wanted %d" % (describe_close(payload), code))
        self.peer.send_frame(CLOSE, close_payload(code))
        self.sock.shutdown(socket.SHUT_WR)   # the server closes first (7.1.1)
        self.peer.expect_eof()

    def expect_done(self, printed, rc_ok=True):
        rc, out = self.finish()
        want = b"".join(p + b"\n" for p in printed) + b"ws_echo: closed with 1000\n"
        if rc != 0:
            raise Fail("ws_echo exited %d: %s" % (rc, self.stderr()))
        same("ws_echo's output", out, want)

    def expect_failed(self):
        rc, out = self.finish()
        if rc == 0:
            raise Fail("ws_echo exited 0 (output %s)" % short(out))
        if b"closed with" in out:
            raise Fail("ws_echo printed %s" % short(out))


def check_request(r, deflate=False):
    """The client's opening handshake, RFC 6455 4.1 (and 7692's offer)."""
    if r.line != "GET / HTTP/1.1":
        raise Fail("request line %r" % r.line)
    if field(r.fields, "host") != "127.0.0.1:%d" % r.port:
        raise Fail("Host %r" % field(r.fields, "host"))
    if (field(r.fields, "upgrade") or "").lower() != "websocket":
        raise Fail("Upgrade %r" % field(r.fields, "upgrade"))
    if not has_token(field(r.fields, "connection"), "upgrade"):
        raise Fail("Connection %r" % field(r.fields, "connection"))
    try:
        raw = base64.b64decode(r.key or "", validate=True)
    except Exception:
        raw = b""
    if len(raw) != 16 or base64.b64encode(raw).decode() != r.key:
        raise Fail("Sec-WebSocket-Key %r: not 16 bytes in base64" % r.key)
    if field(r.fields, "sec-websocket-version") != "13":
        raise Fail("Sec-WebSocket-Version %r" % field(r.fields, "sec-websocket-version"))
    ext = field(r.fields, "sec-websocket-extensions")
    if not deflate:
        if ext is not None:
            raise Fail("Sec-WebSocket-Extensions %r offered without --deflate" % ext)
        return
    if ext is None:
        raise Fail("no Sec-WebSocket-Extensions with --deflate")
    offers = [o for o in parse_extensions(ext) if o[0] == "permessage-deflate"]
    if not offers:
        raise Fail("no permessage-deflate in %r" % ext)
    for _, params in offers:
        names = [k for k, _ in params]
        for k, v in params:
            if k not in PMD_PARAMS or len(set(names)) != len(names) or \
                    (k.endswith("takeover") and v is not None) or \
                    (k == "server_max_window_bits" and bits_of(v) is None) or \
                    (k == "client_max_window_bits" and v is not None and bits_of(v) is None):
                raise Fail("an offer RFC 7692 7.1 does not allow: %r" % ext)


def client_case(lsock, name, fn, words, deflate=False):
    runs = []
    try:
        run_case(name, lambda: fn(ClientRun(lsock, words, deflate, runs)))
    finally:
        for run in runs:
            run.close()


def cc_handshake(r):
    check_request(r)
    r.respond()
    r.expect_word("hello")
    r.peer.send_frame(TEXT, b"hello")
    r.expect_client_close()
    r.expect_done([b"hello"])


def cc_masks(r):
    r.respond()
    words = ["one", "two", "three", "wide \u2713 text \U0001d11e"]
    for w in words:
        r.expect_word(w)
        r.peer.send_frame(TEXT, w.encode())
    r.expect_client_close()
    if len(r.peer.masks) != 5 or len(set(r.peer.masks)) != 5:
        raise Fail("mask keys %s: not one new each frame (RFC 6455 5.3)" %
                   [m.hex() for m in r.peer.masks])
    r.expect_done([w.encode() for w in words])


def cc_fragmented(r):
    r.respond()
    r.peer.send_frame(PING, b"x" * 125)   # before anything: answered
    r.expect_word("fragmented")
    r.peer.send(r.peer.frame(TEXT, b"frag", fin=False) + r.peer.frame(PING, b"p1") +
                r.peer.frame(CONT, b"men", fin=False) + r.peer.frame(PING, b"") +
                r.peer.frame(CONT, b"", fin=False) + r.peer.frame(CONT, b"ted", fin=True))
    r.expect_client_close()
    if r.peer.pongs != [b"x" * 125, b"p1", b""]:
        raise Fail("pongs %r, wanted the pings' payloads in order (RFC 6455 5.5.3)" %
                   [short(p, 8) for p in r.peer.pongs])
    r.expect_done([b"fragmented"])


def cc_lengths(sizes):
    def case(r):
        r.respond()
        printed = []
        for i, n in enumerate(sizes):
            r.expect_word("w%d" % i)
            data = ascii_text(n)
            r.peer.send_frame(TEXT, data)
            printed.append(data)
        r.expect_client_close()
        r.expect_done(printed)
    return case


def cc_fails_on(frames, code, behind=False):
    """A bad server frame for the first word: the client's close with
    code, and ws_echo fails (behind: written by a thread)."""
    def case(r):
        r.respond()
        r.expect_word("w")
        if behind:
            send_behind(r.peer, b"".join(frames(r.peer)))
        else:
            r.peer.send(b"".join(frames(r.peer)))
        while True:
            op, fin, rsv, payload = r.peer.read_frame("the client's close %d" % code)
            if op == CLOSE:
                break
        got = parse_close(payload)
        if got != code:
            raise Fail("the client closed with %s, wanted %d" % (describe_close(payload), code))
        r.peer.expect_eof()
        r.expect_failed()
    return case


def cc_bad_101(accept=None, extra=(), status="101 Switching Protocols", plain=False,
               drop=()):
    """A 101 the client must refuse: no frame from it, ws_echo fails."""
    def case(r):
        r.respond(accept=accept, extra=extra, status=status, plain=plain, drop=drop)
        try:
            op, fin, rsv, payload = r.peer.read_frame("the client's end")
        except Eof:
            pass
        else:
            raise Fail("ws_echo took the 101 and sent a %s frame %s" % (OPNAMES[op],
                                                                        short(payload, 20)))
        r.expect_failed()
    return case


def cc_same_write(r):
    """The 101, a ping and the reply in one write."""
    lines = ["HTTP/1.1 101 Switching Protocols", "upgrade: WebSocket",
             "connection: keep-alive, UPGRADE", "Sec-WebSocket-Accept: " + accept_of(r.key)]
    r.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() +
                   r.peer.frame(PONG, b"unasked") + r.peer.frame(PING, b"early"))
    r.expect_word("w")
    r.peer.send_frame(TEXT, b"reply")
    r.expect_client_close()
    if r.peer.pongs != [b"early"]:
        raise Fail("pongs %r, wanted [b'early']" % r.peer.pongs)
    r.expect_done([b"reply"])


def cc_server_close_answered(r):
    """The server's close while the client waits for its echo: answered
    with the same code (5.5.1), ws_echo then ends (no echo came)."""
    r.respond()
    r.expect_word("w")
    r.peer.send_frame(CLOSE, close_payload(3000, b"going"))
    while True:
        op, fin, rsv, payload = r.peer.read_frame("the client's answering close")
        if op == CLOSE:
            break
        if op != PONG:
            raise Fail("a %s frame before the client's close" % OPNAMES[op])
    if parse_close(payload) != 3000:
        raise Fail("the client answered %s, wanted 3000 echoed" % describe_close(payload))
    r.sock.shutdown(socket.SHUT_WR)
    r.peer.expect_eof()
    rc, out = r.finish()
    if b"closed with" in out:
        raise Fail("ws_echo printed %s" % short(out))


def cc_server_closes(r):
    r.respond()
    r.expect_word("last")
    r.peer.send(r.peer.frame(TEXT, b"last") + r.peer.frame(CLOSE, close_payload(1000, b"bye")))
    op, fin, rsv, payload = r.peer.read_frame("the client's close")
    if op != CLOSE or parse_close(payload) != 1000:
        raise Fail("a %s frame %s, wanted the client's close 1000" % (OPNAMES[op],
                                                                     short(payload, 20)))
    r.sock.shutdown(socket.SHUT_WR)
    r.peer.expect_eof()
    r.expect_done([b"last"])


ANSWER = "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; " \
    "client_no_context_takeover"


def cc_deflate(r):
    check_request(r, deflate=True)
    r.respond(extra=[ANSWER])
    r.peer.pmd = {"server_bits": 15, "client_bits": 15, "snct": True, "cnct": True}
    words = ["hi", "z" * 3000, "wide \u2713 text \U0001d11e " * 40,
             "wide \u2713 text \U0001d11e " * 40]
    for w in words:
        n = len(r.peer.frames)
        r.expect_word(w)
        rsv = r.peer.frames[n][2]
        if len(w) >= 1000 and not rsv & RSV1:
            raise Fail("a %d-byte message sent uncompressed (fine, but unexpected)" % len(w))
        r.peer.send_frame(TEXT, deflate_msg(w.encode()), rsv=RSV1)
    r.expect_client_close()
    r.expect_done([w.encode() for w in words])


def cc_deflate_replies(r):
    check_request(r, deflate=True)
    r.respond(extra=[ANSWER])
    r.peer.pmd = {"server_bits": 15, "client_bits": 15, "snct": True, "cnct": True}
    long = ascii_text(20000)
    r.expect_word("a")     # compressed, in 3 fragments, a ping between
    z = deflate_msg(long)
    r.peer.send(r.peer.frame(TEXT, z[:7], rsv=RSV1, fin=False) + r.peer.frame(PING, b"zp") +
                r.peer.frame(CONT, z[7:-5], fin=False) + r.peer.frame(CONT, z[-5:]))
    r.expect_word("b")     # uncompressed after agreement
    r.peer.send_frame(TEXT, b"plain reply")
    r.expect_word("c")     # compressed empty
    r.peer.send_frame(TEXT, b"\x00", rsv=RSV1)
    r.expect_word("d")     # BFINAL set, no tail removed
    r.peer.send_frame(TEXT, deflate_msg(b"final block " * 50, final=True), rsv=RSV1)
    r.expect_client_close()
    if r.peer.pongs != [b"zp"]:
        raise Fail("pongs %r, wanted [b'zp']" % r.peer.pongs)
    r.expect_done([long, b"plain reply", b"", b"final block " * 50])


def cc_deflate_declined(r):
    check_request(r, deflate=True)
    r.respond()
    r.expect_word("z" * 3000)
    if any(f[2] for f in r.peer.frames):
        raise Fail("RSV1 set with permessage-deflate declined")
    r.peer.send_frame(TEXT, b"z" * 3000)
    r.expect_client_close()
    r.expect_done([b"z" * 3000])


def client_cases():
    if not os.access(WS_ECHO, os.X_OK):
        report("client: ws_echo at %s" % WS_ECHO, "not an executable file (set WS_ECHO)")
        return
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    C = lambda *a, **kw: client_case(lsock, *a, **kw)  # noqa: E731
    C("client: handshake - GET, Host, Upgrade, Connection, a 16-byte key, version 13 (4.1)",
      cc_handshake, ["hello"])
    C("client: every frame masked with a new key (5.3), echoes printed, close 1000", cc_masks,
      ["one", "two", "three", "wide \u2713 text \U0001d11e"])
    C("client: a reply in fragments with pings between; pongs masked, same payload",
      cc_fragmented, ["fragmented"])
    C("client: a reply of 0 bytes", cc_lengths([0]), ["w0"])
    C("client: a reply of 65536 bytes", cc_lengths([65536]), ["w0"])
    C("client: replies of 125, 126, 127, 65535, 65537 bytes and 1 MiB",
      cc_lengths([125, 126, 127, 65535, 65537, 1 << 20]), ["w%d" % i for i in range(6)])
    C("client: a masked server frame -> 1002 (5.1)", cc_fails_on(
        lambda p: [p.frame(TEXT, b"masked", mask=True)], 1002), ["w"])
    C("client: RSV1 with no extension -> 1002 (5.2)", cc_fails_on(
        lambda p: [p.frame(TEXT, b"rsv", rsv=RSV1)], 1002), ["w"])
    C("client: reserved opcode 3 -> 1002 (5.2)", cc_fails_on(
        lambda p: [p.frame(3, b"op")], 1002), ["w"])
    C("client: a 126-byte ping -> 1002 (5.5)", cc_fails_on(
        lambda p: [p.frame(PING, bytes(126))], 1002), ["w"])
    C("client: a continuation with no message -> 1002 (5.4)", cc_fails_on(
        lambda p: [p.frame(CONT, b"orphan")], 1002), ["w"])
    C("client: length 5 in the 16-bit form -> 1002 (5.2)", cc_fails_on(
        lambda p: [p.frame(TEXT, b"short", form=16)], 1002), ["w"])
    C("client: text that is not UTF-8 -> 1007 (8.1)", cc_fails_on(
        lambda p: [p.frame(TEXT, b"bad \xed\xa0\x80")], 1007), ["w"])
    C("client: a close code 1005 from the server -> 1002 (7.4.1)", cc_fails_on(
        lambda p: [p.frame(CLOSE, close_payload(1005))], 1002), ["w"])
    C("client: a wrong Sec-WebSocket-Accept -> fails, no data sent (4.1)",
      cc_bad_101(accept=base64.b64encode(b"x" * 20).decode()), ["w"])
    C("client: a 101 with no Upgrade -> fails, no data sent (4.1)",
      cc_bad_101(drop=("upgrade",)), ["w"])
    C("client: a 101 with 'Upgrade: h2c' -> fails, no data sent (4.1)",
      cc_bad_101(drop=("upgrade",), extra=["Upgrade: h2c"]), ["w"])
    C("client: a 101 with no Connection: Upgrade -> fails, no data sent (4.1)",
      cc_bad_101(drop=("connection",)), ["w"])
    C("client: a subprotocol not offered -> fails, no data sent (4.1)",
      cc_bad_101(extra=["Sec-WebSocket-Protocol: chat"]), ["w"])
    C("client: an extension not offered -> fails, no data sent (4.1)",
      cc_bad_101(extra=[ANSWER]), ["w"])
    C("client: a 403 -> fails, no data sent (4.1)",
      cc_bad_101(status="403 Forbidden", plain=True, extra=["Content-Length: 0"]), ["w"])
    C("client: the server's close after the last reply answered with 1000", cc_server_closes,
      ["last"])
    C("client: the server's close 3000 while it waits answered with 3000 (5.5.1)",
      cc_server_close_answered, ["w"])
    C("client: 'upgrade: WebSocket', 'connection: keep-alive, UPGRADE', then frames in the "
      "101's write", cc_same_write, ["w"])
    C("client: a head claiming 2^62 bytes -> 1009 at once", cc_fails_on(
        lambda p: [p.frame(BINARY, b"", length=1 << 62, form=64)], 1009), ["w"])
    C("client: a 64-bit length with its top bit set -> 1002 (5.2)", cc_fails_on(
        lambda p: [p.frame(BINARY, b"", length=1 << 63, form=64)], 1002), ["w"])
    C("client: a reply of 16 MiB + 1 bytes (over message_max) -> 1009", cc_fails_on(
        lambda p: [p.frame(TEXT, ascii_text(MESSAGE_MAX + 1))], 1009, behind=True), ["w"])
    C("client: two Sec-WebSocket-Accept fields, the second wrong -> fails (4.1, 11.3.3)",
      cc_bad_101(extra=["Sec-WebSocket-Accept: " + base64.b64encode(b"y" * 20).decode()]),
      ["w"])
    C("client: a 1-byte close payload -> 1002 (5.5.1)", cc_fails_on(
        lambda p: [p.frame(CLOSE, b"\x03")], 1002), ["w"])
    C("client: a close reason not UTF-8 -> 1007 (5.5.1, 8.1)", cc_fails_on(
        lambda p: [p.frame(CLOSE, close_payload(1000, b"\xff"))], 1007), ["w"])
    C("client: a new text inside a fragmented reply -> 1002 (5.4)", cc_fails_on(
        lambda p: [p.frame(TEXT, b"open", fin=False), p.frame(TEXT, b"again")], 1002), ["w"])
    C("client: a fragmented ping -> 1002 (5.5)", cc_fails_on(
        lambda p: [p.frame(PING, b"half", fin=False), p.frame(CONT, b"rest")], 1002), ["w"])
    C("client: --deflate offered and agreed; compressed frames inflate; compressed replies",
      cc_deflate, ["hi", "z" * 3000] + ["wide \u2713 text \U0001d11e " * 40] * 2,
      deflate=True)
    C("client: --deflate: replies fragmented, uncompressed, empty, with BFINAL",
      cc_deflate_replies, ["a", "b", "c", "d"], deflate=True)
    C("client: --deflate declined by the server: plain frames", cc_deflate_declined,
      ["z" * 3000], deflate=True)
    C("client: --deflate: RSV1 on a continuation -> 1002 (7692 6)", cc_deflate_fails(
        lambda p: [p.frame(TEXT, deflate_msg(b"one"), rsv=RSV1, fin=False),
                   p.frame(CONT, deflate_msg(b"two"), rsv=RSV1)], 1002), ["w"], deflate=True)
    C("client: --deflate: a deflate bomb reply (20 MiB of zeros) -> 1009", cc_deflate_fails(
        bomb, 1009, behind=True), ["w"], deflate=True)
    C("client: --deflate: two Sec-WebSocket-Extensions fields in the 101 -> fails (11.3.2)",
      cc_bad_101(extra=[ANSWER, ANSWER]), ["w"], deflate=True)
    C("client: --deflate: an answer with an unknown parameter -> fails (7692 7)",
      cc_bad_101(extra=["Sec-WebSocket-Extensions: permessage-deflate; foo"]), ["w"],
      deflate=True)
    C("client: --deflate: an answer with client_max_window_bits not offered -> fails "
      "(7692 7.1.2.2)", cc_bad_101(extra=[ANSWER + "; client_max_window_bits=10"]), ["w"],
      deflate=True)
    lsock.close()
    report("client: a new Sec-WebSocket-Key each connection (4.1)", None
           if len(KEYS) == len(set(KEYS)) and KEYS else "keys %r" % KEYS)


def cc_deflate_fails(frames, code, behind=False):
    inner = cc_fails_on(frames, code, behind)

    def case(r):
        r.respond(extra=[ANSWER])
        r.peer.pmd = {"server_bits": 15, "client_bits": 15, "snct": True, "cnct": True}
        r.respond = lambda **kw: None
        inner(r)
    return case


def main():
    socket.setdefaulttimeout(TIMEOUT)
    if len(sys.argv) == 3 and sys.argv[1] == "server-cases":
        server_cases(int(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "client-cases":
        client_cases()
    else:
        sys.stderr.write("usage: %s server-cases PORT | client-cases\n" % sys.argv[0])
        return 2
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
