// SPDX-License-Identifier: MIT
// ws_interop_node.js - Node's ws package (the npm registry's; Debian:
// node-ws), an independent peer, both ways:
//   node ws_interop_node.js client PORT  - against the HTTP demo's /ws
//     echo, without and with permessage-deflate: the subprotocol, text of
//     every UTF-8 length, binary at the length boundaries and 1 MiB, a
//     ping answered, the close with the server's 1000. A PASS or FAIL
//     line per check; exit 1 if any failed.
//   node ws_interop_node.js serve DEFLATE - an echo server (deflate
//     accepted if DEFLATE is 1) on a free port it prints ("port N"), and
//     per connection the extensions agreed ("agreed: ..." or "agreed:
//     none").
'use strict';
const WebSocket = require('ws');

let failed = 0;
function check(name, ok) {
  console.log((ok ? 'PASS: ' : 'FAIL: ') + name);
  if (!ok) failed++;
}

function opened(url, deflate) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['x', 'echo'], { perMessageDeflate: deflate, maxPayload: 0 });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

function next(ws, event) {
  return new Promise((resolve) => ws.once(event, (...args) => resolve(args)));
}

async function echoes(ws, tag) {
  const text = 'ascii \u00e9 \u20ac \ud834\udd1e '.repeat(1000);
  ws.send(text);
  const [t, isBinary] = await next(ws, 'message');
  check(tag + 'text of every UTF-8 length comes back', !isBinary && t.toString() === text);
  for (const n of [0, 1, 125, 126, 127, 65535, 65536, 1 << 20]) {
    const data = Buffer.alloc(n);
    for (let i = 0; i < n; i++) data[i] = (i * 7) & 0xff;
    ws.send(data);
    const [got, bin] = await next(ws, 'message');
    check(tag + 'binary of ' + n + ' bytes comes back', bin && Buffer.compare(got, data) === 0);
  }
  ws.ping('p1');
  const [pong] = await next(ws, 'pong');
  check(tag + 'a ping is answered with its payload', pong.toString() === 'p1');
}

async function client(port) {
  for (const deflate of [false, true]) {
    const tag = deflate ? 'deflate: ' : 'plain: ';
    const ws = await opened('ws://127.0.0.1:' + port + '/ws', deflate);
    check(tag + 'the subprotocol offered is chosen', ws.protocol === 'echo');
    check(tag + 'permessage-deflate agreed as offered',
          (ws.extensions.indexOf('permessage-deflate') >= 0) === deflate);
    await echoes(ws, tag);
    ws.close(1000, 'bye');
    const [code] = await next(ws, 'close');
    check(tag + 'the close is answered with 1000', code === 1000);
  }
  process.exit(failed ? 1 : 0);
}

function serve(deflate) {
  const wss = new WebSocket.Server({ port: 0, host: '127.0.0.1', perMessageDeflate: deflate });
  wss.on('listening', () => console.log('port ' + wss.address().port));
  wss.on('connection', (ws) => {
    console.log('agreed: ' + (ws.extensions || 'none'));
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
}

if (process.argv[2] === 'client')
  client(Number(process.argv[3])).catch((e) => { console.log('FAIL: ' + e); process.exit(1); });
else if (process.argv[2] === 'serve')
  serve(process.argv[3] === '1');
else {
  console.error('usage: ws_interop_node.js client PORT | serve DEFLATE');
  process.exit(2);
}
