package daemon

import (
	"fmt"
	"net/http"
	"sort"
	"time"
)

// routes builds the HTTP handler; a bad or clashing pattern of Handlers is
// an error (http.ServeMux panics on them).
func (d *Daemon) routes() (mux *http.ServeMux, err error) {
	mux = http.NewServeMux()
	var pattern string
	defer func() {
		if r := recover(); r != nil {
			mux, err = nil, fmt.Errorf("handler %q: %v", pattern, r)
		}
	}()
	pattern = "/healthz"
	mux.HandleFunc(pattern, d.healthz)
	pattern = "/statusz"
	mux.HandleFunc(pattern, d.statusz)
	pattern = "/metrics"
	mux.Handle(pattern, d.cfg.Metrics.Handler())
	patterns := make([]string, 0, len(d.cfg.Handlers))
	for p := range d.cfg.Handlers {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns)
	for _, p := range patterns {
		pattern = p
		h := d.cfg.Handlers[p]
		if h == nil {
			return nil, fmt.Errorf("handler %q: nil", p)
		}
		mux.Handle(p, h)
	}
	return mux, nil
}

// Handler is the daemon's HTTP handler: /healthz, /statusz, /metrics and
// Handlers.
func (d *Daemon) Handler() http.Handler { return d.mux }

// Addr is the address the HTTP server listens on, once Ready; empty before,
// or when Listen is empty.
func (d *Daemon) Addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr
}

// httpGrace is how long shutdown lets open HTTP requests finish before it
// closes their connections.
const httpGrace = 2 * time.Second
