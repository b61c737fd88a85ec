package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// AskRun stores a question the run itself asks, not the model (one of kind
// questions.KindSecrets, after the last turn): a pending set of its kind on
// the given surfaces, in one transaction with the run's status, waiting. It
// is idempotent on the set's ID: a set stored before is left as it is
// (created false), answered or not.
func (s *Store) AskRun(ctx context.Context, set questions.Set, surfaces []string) (created bool, err error) {
	now := s.now().UTC()
	err = s.tx(ctx, func(tx *txn) error {
		var one int
		switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM question_sets WHERE id = ?`, set.ID).Scan(&one); {
		case err == nil:
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if err := insertSet(ctx, tx, set, surfaces, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET kind = ? WHERE id = ?`, questions.KindOf(set), set.ID); err != nil {
			return err
		}
		created = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("ask run %s's own question: %w", set.RunID, err)
	}
	return created, nil
}
