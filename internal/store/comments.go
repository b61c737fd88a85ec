package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Decisions about comments read as possible answers (GitHub's), kept so that
// a comment is decided once, ever: live, after a restart, and whichever
// process reads it. The key names the comment (the surface makes it); the
// decision is the surface's word for what it was (taken, invalid, ...).

// CommentDecision returns the decision recorded for the comment named key,
// "" if none.
func (s *Store) CommentDecision(ctx context.Context, key string) (string, error) {
	var d string
	err := s.db.QueryRowContext(ctx, `SELECT decision FROM comment_decisions WHERE key = ?`, key).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("decision about comment %s: %w", key, err)
	}
	return d, nil
}

// DecideComment records decision for the comment named key unless one is
// recorded already, and returns the one recorded: the first wins.
func (s *Store) DecideComment(ctx context.Context, key, decision string) (string, error) {
	if key == "" || decision == "" {
		return "", errors.New("record a comment's decision: empty key or decision")
	}
	var got string
	err := s.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO comment_decisions (key, decision, decided_at) VALUES (?,?,?) ON CONFLICT (key) DO NOTHING`,
			key, decision, nanos(s.now())); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT decision FROM comment_decisions WHERE key = ?`, key).Scan(&got)
	})
	if err != nil {
		return "", fmt.Errorf("record the decision about comment %s: %w", key, err)
	}
	return got, nil
}

// SetOpen reports whether the question set id is pending (waits for an
// answer); false for a set the store does not know.
func (s *Store) SetOpen(ctx context.Context, id string) (bool, error) {
	var state SetState
	err := s.db.QueryRowContext(ctx, `SELECT state FROM question_sets WHERE id = ?`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("question set %s: %w", id, err)
	}
	return state == SetPending, nil
}

// SetAnswer returns the answer the question set id was closed with, and
// whether it has one (answered, whatever happened since; false for a set
// pending, expired without an answer, or unknown). A surface uses it to
// recognise a comment the store took as an answer when the process stopped
// before it recorded its decision about that comment.
func (s *Store) SetAnswer(ctx context.Context, id string) (questions.Response, bool, error) {
	rec, err := s.QuestionSet(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return questions.Response{}, false, nil
	}
	if err != nil {
		return questions.Response{}, false, err
	}
	switch rec.State {
	case SetAnswered, SetResuming, SetResumed:
		return rec.Response, len(rec.Response.Answers) > 0, nil
	}
	return questions.Response{}, false, nil
}
