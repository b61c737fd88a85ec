package surfaces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Ask asks set on every surface of ss at once, each handing the answers
// people give to answers, and returns once every surface's Ask returned: it
// picks no winner (answers.Offer decides). Cancel ctx once the set is
// answered; Ask then waits for the surfaces to return: no goroutine
// outlives it.
//
// A surface that fails (any error but its context ending) is logged and
// left out; the others keep going. If ctx ends, Ask returns ctx.Err(). A
// surface returning nil (the set is closed) makes Ask return nil once the
// others returned. If every surface fails, Ask returns the surfaces' errors
// joined; when every one of them is unavailable, the error also wraps
// ErrUnavailable (so does asking on no surface at all).
//
// A nil logger discards the log.
func Ask(ctx context.Context, logger *slog.Logger, set questions.Set, answers Answers, ss ...Surface) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(ss) == 0 {
		return fmt.Errorf("ask %s: no surface: %w", set.ID, ErrUnavailable)
	}
	type result struct {
		s   Surface
		err error
	}
	results := make(chan result, len(ss))
	for _, s := range ss {
		go func() { results <- result{s, s.Ask(ctx, set, answers)} }()
	}
	var (
		errs        []error
		unavailable int
		closed      bool
	)
	for range ss {
		r := <-results
		name := r.s.Name()
		switch {
		case r.err == nil:
			closed = true
		case ctx.Err() != nil && errors.Is(r.err, ctx.Err()):
			// ctx ended: reported once below
		case errors.Is(r.err, ErrUnavailable):
			unavailable++
			logger.Info("surface cannot take an answer", "set", set.ID, "surface", name, "err", r.err)
			errs = append(errs, fmt.Errorf("%s: %w", name, r.err))
		default:
			logger.Warn("surface failed to ask", "set", set.ID, "surface", name, "err", r.err)
			errs = append(errs, fmt.Errorf("%s: %w", name, r.err))
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if closed {
		return nil
	}
	err := errors.Join(errs...)
	if unavailable == len(ss) {
		return fmt.Errorf("ask %s: no surface can take an answer: %w", set.ID, err)
	}
	return fmt.Errorf("ask %s: every surface failed: %w", set.ID, err)
}
