// SPDX-License-Identifier: MIT
//
// go_http_idle: the Go peer of bench/bench-idle.sh - plain net/http, GET
// /plaintext answered "Hello, World!", with Go's defaults otherwise: no
// read or idle timeout, so keep-alive connections stay open until the
// client closes them. Run it with GOMAXPROCS=1 to match the one-core
// servers it is measured against.
//
// usage: go_http_idle PORT   (listens on 127.0.0.1:PORT)
package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go_http_idle PORT")
		os.Exit(2)
	}
	body := []byte("Hello, World!")
	mux := http.NewServeMux()
	mux.HandleFunc("/plaintext", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	srv := &http.Server{Addr: "127.0.0.1:" + os.Args[1], Handler: mux}
	fmt.Fprintln(os.Stderr, srv.ListenAndServe())
	os.Exit(1)
}
