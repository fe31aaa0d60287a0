#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# ws_interop.py PORT - Debian's python3-websockets, an independent client,
# against the HTTP demo's /ws echo: the subprotocol, text with characters
# of every UTF-8 length, binary at the length boundaries and 4 MiB, a
# message in fragments, a ping answered, the close handshake with the
# server's 1000; with permessage-deflate (agreed, no context kept by the
# server), then without. Prints a PASS or FAIL line per check and exits 1
# if any failed.
# ws_interop.py serve - an echo server of python3-websockets for the
# library's client, on a free port it prints ("port N"), until killed.
import asyncio
import sys

import websockets

failed = 0


def check(name, ok):
    global failed
    print(("PASS: " if ok else "FAIL: ") + name)
    failed += 0 if ok else 1


async def main():
    await session("deflate")
    await session(None)


async def session(compression):
    url = "ws://127.0.0.1:%d/ws" % port
    tag = "deflate: " if compression else "plain: "

    def ok(name, cond):
        check(tag + name, cond)

    async with websockets.connect(url, subprotocols=["x", "echo"], max_size=None,
                                  compression=compression) as ws:
        ok("the subprotocol offered is chosen", ws.subprotocol == "echo")
        if compression:
            ok("permessage-deflate is agreed, no context kept by the server",
               len(ws.extensions) == 1 and ws.extensions[0].name == "permessage-deflate"
               and ws.extensions[0].remote_no_context_takeover)
        else:
            ok("no extension unless offered", ws.extensions == [])
        text = "ascii é € 𝄞 " * 1000
        await ws.send(text)
        ok("text of every UTF-8 length comes back", await ws.recv() == text)
        for n in (0, 1, 125, 126, 127, 65535, 65536, 4 << 20):
            data = bytes((i * 7) & 0xff for i in range(n))
            await ws.send(data)
            got = await ws.recv()
            ok("binary of %d bytes comes back" % n, got == data)
        await ws.send(["frag", "ment", "ed"])
        ok("a message in fragments comes back whole", await ws.recv() == "fragmented")
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 10)
        ok("a ping is answered", True)
    ok("the close handshake ends with 1000", ws.close_code == 1000)


async def echo(ws, path=None):
    async for message in ws:
        await ws.send(message)


async def serve():
    async with websockets.serve(echo, "127.0.0.1", 0) as server:
        print("port %d" % server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()


if sys.argv[1] == "serve":
    asyncio.run(serve())
port = int(sys.argv[1])
asyncio.run(asyncio.wait_for(main(), 60))
sys.exit(1 if failed else 0)
