package surfaces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

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

// CheckPartial reports whether resp is a valid answer to some questions of
// set: the set's ID, at least one answer, each to a question of set, in the
// set's order, each with only offered labels (one at most unless the
// question is multiSelect), free text only where accepted, and not empty.
// A response with one answer per question that passes is complete.
func CheckPartial(set questions.Set, resp questions.Response) error {
	if resp.SetID != set.ID {
		return fmt.Errorf("answer is to set %q, not %q", resp.SetID, set.ID)
	}
	if len(resp.Answers) == 0 {
		return fmt.Errorf("answer to set %s answers no question", set.ID)
	}
	next := 0 // answers must follow the set's order
	for i, a := range resp.Answers {
		j := slices.IndexFunc(set.Questions, func(q questions.Question) bool { return q.ID == a.QuestionID })
		if j < 0 {
			return fmt.Errorf("answer %d of set %s is to question %q, which the set does not have", i+1, set.ID, a.QuestionID)
		}
		if j < next {
			return fmt.Errorf("answer %d of set %s is to question %q, out of order or twice", i+1, set.ID, a.QuestionID)
		}
		next = j + 1
		if err := checkAnswer(set, i, set.Questions[j], a); err != nil {
			return err
		}
	}
	return nil
}

func checkAnswer(set questions.Set, i int, q questions.Question, a questions.Answer) error {
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
	return nil
}
