package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// envPprof, when set to a loopback address ("127.0.0.1:6060"), makes serve
// answer Go's profiling endpoints (/debug/pprof/) there: how the
// performance figures of the README were looked into. Never public.
const envPprof = "ORCHESTRATOR_PPROF"

// servePprof serves the profiling endpoints until ctx ends, when envPprof
// asks for them.
func servePprof(ctx context.Context, log *slog.Logger) {
	addr := os.Getenv(envPprof)
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Error(envPprof+" must be a loopback address such as 127.0.0.1:6060; profiling is off", "addr", addr)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("profiling endpoints", "addr", addr, "err", err)
		}
	}()
}
