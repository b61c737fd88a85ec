package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Offer decides an answer offered for a question set, for every surface,
// `orchestrator answer` and the web inbox alike (it is what
// surfaces.Answers' Offer does; the decision is a questions.Decision): in
// one write transaction it reads the set and its answers, refuses resp when
// the set is closed, when resp is not a valid answer to some of its
// questions (questions.CheckPartial) or does not say who gave it where, and
// otherwise stores the answers to the questions still open (the first
// answer to each question wins), closing the set once every question has
// one. A decision against resp is not an error; an error is a failure to
// decide (the database).
func (s *Store) Offer(ctx context.Context, resp questions.Response) (questions.Decision, error) {
	return s.OfferFor(ctx, "", resp)
}

// OfferFor is Offer for the sets of run runID only: an answer to another
// run's set is refused. With runID "" it is Offer.
func (s *Store) OfferFor(ctx context.Context, runID string, resp questions.Response) (questions.Decision, error) {
	var d questions.Decision
	var rec SetRecord
	now := s.now().UTC()
	err := s.tx(ctx, func(tx *txn) error {
		var rows map[string]answerRow
		var err error
		rec, rows, err = loadSetRows(ctx, tx, resp.SetID)
		if errors.Is(err, ErrNotFound) {
			d = questions.Decision{Invalid: noSetError(resp.SetID)}
			return nil
		}
		if err != nil {
			return err
		}
		var open questions.Response
		if d, open = decide(runID, rec, resp); !d.Taken {
			return nil
		}
		if open.At.IsZero() {
			open.At = now
		}
		rec, err = storeAnswers(ctx, tx, rec, rows, open, now)
		return err
	})
	if err != nil {
		return questions.Decision{}, fmt.Errorf("offer answer to set %s: %w", resp.SetID, err)
	}
	if !d.Taken {
		return d, nil
	}
	if rec.State == SetPending {
		d.Pending = pendingIDs(rec)
		return d, nil
	}
	s.changed(rec.Set.ID)
	final := rec.Response
	d.Final, d.Closed = &final, true
	return d, nil
}

// noSetError is the decision about an answer to a set the store does not
// have; it wraps ErrNotFound.
type noSetError string

func (e noSetError) Error() string { return fmt.Sprintf("no question set %q", string(e)) }
func (e noSetError) Unwrap() error { return ErrNotFound }

// decide is the decision about resp for rec as it stands, and the answers
// of resp to store (in the set's order, only those to questions still
// open) when it is taken.
func decide(runID string, rec SetRecord, resp questions.Response) (questions.Decision, questions.Response) {
	if runID != "" && rec.Set.RunID != runID {
		return questions.Decision{Invalid: fmt.Errorf("question set %s is not one of run %s", resp.SetID, runID)}, resp
	}
	if rec.State != SetPending {
		return closedDecision(rec), resp
	}
	resp = questions.InSetOrder(rec.Set, resp)
	if err := questions.CheckPartial(rec.Set, resp); err != nil {
		return questions.Decision{Invalid: err, Pending: pendingIDs(rec)}, resp
	}
	if strings.TrimSpace(resp.By) == "" || strings.TrimSpace(resp.Surface) == "" {
		return questions.Decision{Invalid: errors.New("the answer does not say who gave it where"), Pending: pendingIDs(rec)}, resp
	}
	open := resp
	open.Answers = nil
	for _, ans := range resp.Answers {
		if _, done := rec.Response.Answer(ans.QuestionID); !done {
			open.Answers = append(open.Answers, ans)
		}
	}
	if len(open.Answers) == 0 {
		return questions.Decision{Invalid: fmt.Errorf("already answered by %s", rec.Response.By), Pending: pendingIDs(rec)}, resp
	}
	return questions.Decision{Taken: true}, open
}

// closedDecision is the decision about any answer to a set no longer
// pending.
func closedDecision(rec SetRecord) questions.Decision {
	if rec.State == SetExpired {
		return questions.Decision{Closed: true}
	}
	final := rec.Response
	return questions.Decision{Closed: true, Final: &final}
}

func pendingIDs(rec SetRecord) []string {
	var out []string
	for _, q := range questions.Unanswered(rec.Set, rec.Response).Questions {
		out = append(out, q.ID)
	}
	return out
}

// storeAnswers stores the answers of resp to questions of rec's pending set
// that have none yet (rows: those stored), and marks the set answered once
// every question has one. It returns the set as it then stands, composed
// without reading it again.
func storeAnswers(ctx context.Context, tx *txn, rec SetRecord, rows map[string]answerRow, resp questions.Response, now time.Time) (SetRecord, error) {
	for _, a := range resp.Answers {
		if _, ok := rows[a.QuestionID]; ok {
			continue // the first answer wins
		}
		body, err := encodeJSON(a)
		if err != nil {
			return SetRecord{}, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO answers (set_id, question_id, body, answered_by, surface, at) VALUES (?,?,?,?,?,?)
			ON CONFLICT(set_id, question_id) DO NOTHING`, rec.Set.ID, a.QuestionID, body, resp.By, resp.Surface, nanos(resp.At)); err != nil {
			return SetRecord{}, err
		}
		rows[a.QuestionID] = answerRow{a: a, by: resp.By, srf: resp.Surface, at: nanos(resp.At)}
	}
	rec.Response = composeResponse(rec.Set, rows)
	if len(rec.Response.Answers) == len(rec.Set.Questions) {
		if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ?, answered_at = ? WHERE id = ?`, SetAnswered, nanos(now), rec.Set.ID); err != nil {
			return SetRecord{}, err
		}
		rec.State, rec.AnsweredAt = SetAnswered, fromNanos(nanos(now))
	}
	return rec, nil
}
