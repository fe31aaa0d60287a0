// SPDX-License-Identifier: MIT
//
// go_https: the Go peer of bench/bench-tls.sh - net/http over crypto/tls,
// GET /plaintext answered "Hello, World!". Go's defaults otherwise: session
// tickets on, no idle timeout. HTTP/1.1 only, as the other servers (ALPN
// "http/1.1"), so a client offering h2 gets no different server.
//
// usage: go_https PORT CERT KEY   (listens on 127.0.0.1:PORT)
package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: go_https PORT CERT KEY")
		os.Exit(2)
	}
	body := []byte("Hello, World!")
	mux := http.NewServeMux()
	mux.HandleFunc("/plaintext", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	srv := &http.Server{
		Addr:         "127.0.0.1:" + os.Args[1],
		Handler:      mux,
		TLSConfig:    &tls.Config{NextProtos: []string{"http/1.1"}},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	fmt.Fprintln(os.Stderr, srv.ListenAndServeTLS(os.Args[2], os.Args[3]))
	os.Exit(1)
}
