package daemon

import (
	"log/slog"
	"sync"
	"time"
)

// Store outages (issue 20). With the database unreachable, every loop of the
// daemon that reads the store fails at once; retried at once, it would
// write an error line and open a connection thousands of times a second.
// Instead every loop reports its store errors to one storeHealth, which
// logs one error line when an outage starts, one a minute while it lasts,
// and one line when it ends, and which /healthz reads ("degraded", "store
// unreachable"); and each loop waits before its next try, longer each time
// (exponential, with jitter: a fleet of instances does not retry in step).

// outageLogEvery is how often an outage is logged again while it lasts.
const outageLogEvery = time.Minute

// storeHealth is the store's reachability as the daemon's loops find it.
type storeHealth struct {
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	since    time.Time // when the outage began; zero: reachable
	lastLog  time.Time
	lastErr  string
	failures int
}

// failed records a store error met doing what.
func (h *storeHealth) failed(what string, err error) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	h.lastErr = err.Error()
	switch {
	case h.since.IsZero():
		h.since, h.lastLog = now, now
		h.log.Error("store unreachable; retrying with backoff (logged again once a minute while it lasts)", "doing", what, "err", err)
	case now.Sub(h.lastLog) >= outageLogEvery:
		h.lastLog = now
		h.log.Error("store still unreachable", "for", now.Sub(h.since).Round(time.Second), "failures", h.failures, "doing", what, "err", err)
	}
}

// ok records a store call that worked: an outage, if any, is over.
func (h *storeHealth) ok() {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() {
		return
	}
	h.log.Info("store reachable again", "after", now.Sub(h.since).Round(time.Millisecond), "failures", h.failures)
	h.since, h.lastErr, h.failures = time.Time{}, "", 0
}

// down reports an outage going on: since when, and its last error.
func (h *storeHealth) down() (since time.Time, lastErr string, isDown bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since, h.lastErr, !h.since.IsZero()
}
