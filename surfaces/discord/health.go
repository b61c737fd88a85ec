package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ surfaces.HealthReporter = (*Surface)(nil)

// healthTransport notes whether Discord answers the surface's requests:
// a request that gets no response (its client's timeout, a network error)
// makes the surface unhealthy until one does.
type healthTransport struct {
	base http.RoundTripper
	log  func() *slog.Logger // the surface's, once built

	mu       sync.Mutex
	noAnswer error
}

func (t *healthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil && req.Context().Err() != nil && !errors.Is(req.Context().Err(), context.DeadlineExceeded) {
		return resp, err // the caller gave up: that says nothing of Discord
	}
	t.mu.Lock()
	was := t.noAnswer
	if err != nil {
		t.noAnswer = fmt.Errorf("the Discord API did not answer %s %s: %w", req.Method, req.URL.Path, err)
	} else {
		t.noAnswer = nil
	}
	t.mu.Unlock()
	if l := t.log(); l != nil {
		switch {
		case err != nil && was == nil:
			l.Warn("no answer from Discord; the surface is unhealthy until Discord answers", "method", req.Method, "path", req.URL.Path, "err", err)
		case err == nil && was != nil:
			l.Info("Discord answers again", "method", req.Method, "path", req.URL.Path)
		}
	}
	return resp, err
}

// Health reports whether Discord answers the surface's requests: nil while
// its last request got an answer, else why not (surfaces.HealthReporter);
// after a final gateway close (fatal.go), that close and what to change.
// It makes no request.
func (s *Surface) Health() error {
	if err := s.fatalErr(); err != nil {
		return err // Discord refused the gateway for good (fatal.go)
	}
	if s.health == nil {
		return nil
	}
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.redact(s.health.noAnswer)
}
