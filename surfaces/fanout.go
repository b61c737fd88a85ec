package surfaces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Ask asks set on every surface of ss at once and returns the first valid
// answer. Once a surface has answered, the other surfaces' Asks are
// cancelled and Ask waits for them to return: no goroutine outlives it.
//
// A surface that fails (any error but its context ending) or returns an
// invalid response is logged and left out; the others keep going. If ctx
// ends first, Ask returns ctx.Err(). If every surface fails, Ask returns the
// surfaces' errors joined; when every one of them is unavailable, the error
// also wraps ErrUnavailable (so does asking on no surface at all).
//
// A nil logger discards the log.
func Ask(ctx context.Context, logger *slog.Logger, set questions.Set, ss ...Surface) (questions.Response, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := ctx.Err(); err != nil {
		return questions.Response{}, err
	}
	if len(ss) == 0 {
		return questions.Response{}, fmt.Errorf("ask %s: no surface: %w", set.ID, ErrUnavailable)
	}
	type result struct {
		s    Surface
		resp questions.Response
		err  error
	}
	askCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, len(ss))
	for _, s := range ss {
		go func() {
			resp, err := s.Ask(askCtx, set)
			results <- result{s, resp, err}
		}()
	}

	var (
		winner      *questions.Response
		errs        []error
		unavailable = 0
	)
	for range ss {
		r := <-results
		name := r.s.Name()
		switch {
		case winner != nil:
			if r.err == nil {
				logger.Debug("answer arrived after another surface's", "set", set.ID, "surface", name, "by", r.resp.By)
			}
		case r.err != nil:
			if ctx.Err() != nil && errors.Is(r.err, ctx.Err()) {
				continue // ctx ended: reported once below
			}
			if errors.Is(r.err, ErrUnavailable) {
				unavailable++
				logger.Info("surface cannot take an answer", "set", set.ID, "surface", name, "err", r.err)
			} else {
				logger.Warn("surface failed to ask", "set", set.ID, "surface", name, "err", r.err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", name, r.err))
		default:
			resp := r.resp
			if resp.Surface == "" {
				resp.Surface = name
			}
			if resp.At.IsZero() {
				resp.At = time.Now()
			}
			if err := CheckResponse(set, resp); err != nil {
				logger.Warn("surface returned an invalid answer", "set", set.ID, "surface", name, "err", err)
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			winner = &resp
			cancel()
		}
	}
	if winner != nil {
		return *winner, nil
	}
	if err := ctx.Err(); err != nil {
		return questions.Response{}, err
	}
	err := errors.Join(errs...)
	if unavailable == len(ss) {
		return questions.Response{}, fmt.Errorf("ask %s: no surface can take an answer: %w", set.ID, err)
	}
	return questions.Response{}, fmt.Errorf("ask %s: every surface failed: %w", set.ID, err)
}

// CheckResponse reports whether resp is a complete, valid answer to set: the
// set's ID, one answer per question in order, only offered labels (one at
// most unless the question is multiSelect), free text only where accepted,
// and no empty answer.
func CheckResponse(set questions.Set, resp questions.Response) error {
	if resp.SetID != set.ID {
		return fmt.Errorf("answer is to set %q, not %q", resp.SetID, set.ID)
	}
	if len(resp.Answers) != len(set.Questions) {
		return fmt.Errorf("answer to set %s has %d answers for %d questions", set.ID, len(resp.Answers), len(set.Questions))
	}
	for i, q := range set.Questions {
		a := resp.Answers[i]
		if a.QuestionID != q.ID {
			return fmt.Errorf("answer %d of set %s is to question %q, not %q", i+1, set.ID, a.QuestionID, q.ID)
		}
		if len(a.Labels) == 0 && a.Text == "" {
			return fmt.Errorf("answer to question %s is empty", q.ID)
		}
		if len(a.Labels) > 1 && !q.MultiSelect {
			return fmt.Errorf("answer to question %s chooses %d options; it takes one", q.ID, len(a.Labels))
		}
		for _, l := range a.Labels {
			if !slices.ContainsFunc(q.Options, func(o questions.Option) bool { return o.Label == l }) {
				return fmt.Errorf("answer to question %s chooses %q, which is not an option", q.ID, l)
			}
		}
		if a.Text != "" && !q.AcceptsFreeText() {
			return fmt.Errorf("answer to question %s has free text; it takes options only", q.ID)
		}
	}
	return nil
}
