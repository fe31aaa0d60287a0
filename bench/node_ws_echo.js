// SPDX-License-Identifier: MIT
//
// node_ws_echo: the Node.js peer of bench/bench-ws.sh - the ws package's
// WebSocketServer on node:http, /ws an echo of every message as it came
// (binary or text, the same bytes), ws's defaults otherwise. DEFLATE 1
// accepts permessage-deflate when offered, its compression matched to the
// demo server's so both do the same work: level 1, and whole messages
// from THRESHOLD bytes on (default 64, the demo's; ws's own default,
// 1024, would leave small echoes uncompressed). No context takeover is
// what the client offers, and ws grants it.
//
// usage: NODE_PATH=DIR/node_modules node node_ws_echo.js PORT DEFLATE [THRESHOLD]
// (listens on 127.0.0.1:PORT)
'use strict';

const http = require('node:http');
const { WebSocketServer } = require('ws');

const [port, deflate, threshold = '64'] = process.argv.slice(2);
if (!/^\d+$/.test(port || '') || !/^[01]$/.test(deflate || '') || !/^\d+$/.test(threshold)) {
  console.error('usage: node node_ws_echo.js PORT DEFLATE(0|1) [THRESHOLD]');
  process.exit(2);
}

const perMessageDeflate = deflate === '1' && {
  threshold: Number(threshold),
  zlibDeflateOptions: { level: 1 },
};
const server = http.createServer((req, res) => {
  res.writeHead(404).end();
});
const wss = new WebSocketServer({ server, path: '/ws', perMessageDeflate });

wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  ws.on('error', () => ws.terminate());
});
process.on('SIGTERM', () => process.exit(0));
server.listen(Number(port), '127.0.0.1', 4096);
