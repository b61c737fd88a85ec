package discord

import (
	"context"
	"fmt"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Open connects to the gateway if not connected yet. Ask calls it; calling
// it first surfaces a bad token or channel at start-up.
func (s *Surface) Open(ctx context.Context) error {
	s.connMu.Lock()
	if s.closed {
		s.connMu.Unlock()
		return fmt.Errorf("discord: surface closed: %w", surfaces.ErrUnavailable)
	}
	if s.fatal != nil {
		s.connMu.Unlock()
		return s.fatal
	}
	if s.opened {
		s.connMu.Unlock()
		return nil
	}
	a := s.attempt
	if a == nil {
		a = &connectAttempt{done: make(chan struct{})}
		s.attempt = a
		go s.open(a)
	}
	s.connMu.Unlock()
	select {
	case <-a.done:
		if a.err != nil {
			return a.err
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Surface) open(a *connectAttempt) {
	err := s.dg.Open()
	fatal, ok := refusedToken(err)
	if code, text, final := fatalCode(err); final {
		fatal, ok = fatalError(code, text), true
	}
	if ok {
		s.setFatal(fatal)
		s.connMu.Lock()
		s.attempt = nil
		a.err = s.fatal
		s.connMu.Unlock()
		close(a.done)
		return
	}
	s.connMu.Lock()
	s.attempt = nil
	closed := s.closed
	if err == nil {
		s.opened = true
	} else {
		a.err = s.redact(fmt.Errorf("discord: connect to the gateway: %w", err))
		s.log.Error("connect to the gateway", "err", a.err)
	}
	s.connMu.Unlock()
	if err == nil && closed {
		s.dg.Close()
	}
	close(a.done)
}

// Close disconnects from Discord. Asks still waiting return an error
// wrapping surfaces.ErrUnavailable; the questions stay posted and a new
// surface (a restarted process) takes their answers.
func (s *Surface) Close() error {
	s.connMu.Lock()
	if s.closed {
		s.connMu.Unlock()
		return nil
	}
	s.closed = true
	opened := s.opened
	s.opened = false
	s.connMu.Unlock()
	s.cancel()
	for _, f := range s.unhook {
		f()
	}
	if opened {
		if err := s.dg.Close(); err != nil {
			return s.redact(fmt.Errorf("discord: close: %w", err))
		}
	}
	return nil
}
