// SPDX-License-Identifier: MIT
//
// go_ws_echo: the Go peer of bench/bench-ws.sh - gorilla/websocket on
// net/http, /ws an echo of every message as it came (its type, its bytes),
// with Go's and gorilla's defaults otherwise: no read or idle timeout, the
// HTTP server's buffers reused for the WebSocket. With -deflate it accepts
// permessage-deflate when offered (gorilla: no context takeover, level 1)
// and compresses what it writes. A message is copied from its reader to
// its writer through a pooled buffer: no per-message allocation beyond
// gorilla's own, none held by an idle connection. Run it with
// GOMAXPROCS=1 to match the one-core servers it is measured against.
//
// usage: go_ws_echo [-deflate] PORT   (listens on 127.0.0.1:PORT)
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"github.com/gorilla/websocket"
)

var bufs = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// echo copies messages back until the peer goes.
func echo(c *websocket.Conn) {
	defer c.Close()
	for {
		mt, r, err := c.NextReader()
		if err != nil {
			return
		}
		w, err := c.NextWriter(mt)
		if err != nil {
			return
		}
		b := bufs.Get().(*[]byte)
		_, err = io.CopyBuffer(w, r, *b)
		bufs.Put(b)
		if err != nil || w.Close() != nil {
			return
		}
	}
}

func main() {
	deflate := flag.Bool("deflate", false, "accept permessage-deflate")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: go_ws_echo [-deflate] PORT")
		os.Exit(2)
	}
	up := websocket.Upgrader{
		EnableCompression: *deflate,
		Subprotocols:      []string{"echo"},
		CheckOrigin:       func(*http.Request) bool { return true },
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return // answered with an error by Upgrade
		}
		echo(c)
	})
	srv := &http.Server{Addr: "127.0.0.1:" + flag.Arg(0), Handler: mux}
	fmt.Fprintln(os.Stderr, srv.ListenAndServe())
	os.Exit(1)
}
