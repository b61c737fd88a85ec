package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// The same question answered together (issue 28). Pending sets whose
// questions are the same (questions.Fingerprint, stored with each set when
// it is made) form a group across runs: Group finds a set's fellows with
// one indexed query, and AnswerGroup answers the sets a person may answer
// in one transaction, recording the shared decision in each set it was
// stored in (group_answers), for every run's decision log.

// GroupRun is a run a question also waits in: its pending set of the same
// fingerprint.
type GroupRun = questions.GroupRun

// Group returns the other pending sets of setID's group (the pending sets
// of other runs with the same fingerprint), oldest first, at most max of
// them (max <= 0: all); none for a set that is never grouped. setID itself
// may be in any state. One indexed read (two when setID's fingerprint is
// to be read).
func (s *Store) Group(ctx context.Context, setID string, max int) ([]GroupRun, error) {
	var fp, runID string
	err := s.db.QueryRowContext(ctx, `SELECT fingerprint, run_id FROM question_sets WHERE id = ?`, setID).Scan(&fp, &runID)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("group of question set %s: %w", setID, ErrNotFound)
		}
		return nil, fmt.Errorf("group of question set %s: %w", setID, err)
	}
	if fp == "" {
		return nil, nil
	}
	out, err := groupOf(ctx, s.db, fp, runID, max)
	if err != nil {
		return nil, fmt.Errorf("group of question set %s: %w", setID, err)
	}
	return out, nil
}

// groupQuery reads the pending sets of a fingerprint but a run's, by the
// index question_sets_fingerprint: its condition names the index's
// (a fingerprint that is not empty), which SQLite and PostgreSQL's generic plans need to
// use a partial index.
const groupQuery = `SELECT qs.id, qs.run_id, r.spec, r.title FROM question_sets qs JOIN runs r ON r.id = qs.run_id
	WHERE qs.fingerprint = ? AND qs.fingerprint <> '' AND qs.state = ? AND qs.run_id <> ? ORDER BY qs.created_at, qs.id`

// groupOf is the pending sets of fingerprint fp, but those of run runID:
// at most max (max <= 0: all).
func groupOf(ctx context.Context, q querier, fp, runID string, max int) ([]GroupRun, error) {
	limit := ""
	if max > 0 {
		limit = " LIMIT " + strconv.Itoa(max)
	}
	rows, err := q.QueryContext(ctx, groupQuery+limit, fp, SetPending, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []GroupRun
	for rows.Next() {
		var g GroupRun
		if err := rows.Scan(&g.SetID, &g.RunID, &g.Spec, &g.Title); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// GroupOutcome is what became of a shared answer in one set.
type GroupOutcome = questions.GroupOutcome

// GroupAnswer is the result of AnswerGroup: the outcomes, the answered
// set's first, then the others in the order given.
type GroupAnswer = questions.GroupDecision

// AnswerGroup answers resp's set and the sets others of its group (set
// IDs from Group, those the person may answer: the caller checks each
// surface's rights) in one write transaction. Each set is decided as Offer
// decides (first valid answer wins per set; resp's answers go to the
// questions at the same positions of each other set); a set that is no
// longer pending is skipped and reported, as is one whose fingerprint is
// not resp's set's. The sets that took the answer record the shared
// decision (DecisionLog names it and the runs it covered).
func (s *Store) AnswerGroup(ctx context.Context, resp questions.Response, others []string) (GroupAnswer, error) {
	return s.AnswerGroupFor(ctx, "", resp, others)
}

// AnswerGroupFor is AnswerGroup when resp's set must be one of run runID
// (a surface answering for the run it asks for); with runID "" it is
// AnswerGroup.
func (s *Store) AnswerGroupFor(ctx context.Context, runID string, resp questions.Response, others []string) (GroupAnswer, error) {
	now := s.now().UTC()
	if resp.At.IsZero() {
		resp.At = now
	}
	var out GroupAnswer
	var closed []string
	err := s.tx(ctx, func(tx *txn) error {
		out, closed = GroupAnswer{}, nil
		first, err := loadGroupSet(ctx, tx, resp.SetID)
		if errors.Is(err, ErrNotFound) {
			out.Sets = []GroupOutcome{{GroupRun: GroupRun{SetID: resp.SetID}, Decision: questions.Decision{Invalid: noSetError(resp.SetID)}}}
			return nil
		}
		if err != nil {
			return err
		}
		fp := questions.Fingerprint(first.rec.Set)
		id := groupID(resp.SetID, resp.At)
		seen := map[string]bool{}
		for i, setID := range append([]string{resp.SetID}, others...) {
			if seen[setID] {
				continue
			}
			seen[setID] = true
			g := first
			if i > 0 {
				if g, err = loadGroupSet(ctx, tx, setID); errors.Is(err, ErrNotFound) {
					out.Sets = append(out.Sets, GroupOutcome{GroupRun: GroupRun{SetID: setID}, Decision: questions.Decision{Invalid: noSetError(setID)}})
					continue
				} else if err != nil {
					return err
				}
			}
			o := GroupOutcome{GroupRun: g.run}
			r := questions.ForSet(first.rec.Set, g.rec.Set, resp)
			switch {
			case i > 0 && (fp == "" || questions.Fingerprint(g.rec.Set) != fp):
				o.Decision = questions.Decision{Invalid: fmt.Errorf("question set %s does not ask the same as %s", setID, resp.SetID)}
			case i > 0 && g.rec.Set.RunID == first.rec.Set.RunID:
				o.Decision = questions.Decision{Invalid: fmt.Errorf("question set %s is of the same run as %s", setID, resp.SetID)}
			default:
				var open questions.Response
				own := ""
				if i == 0 {
					own = runID
				}
				o.Decision, open = decide(own, g.rec, r)
				if !o.Decision.Taken {
					break
				}
				rec, err := storeAnswers(ctx, tx, g.rec, g.rows, open, now)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO group_answers (group_id, set_id, answered_by, surface, at) VALUES (?,?,?,?,?)`,
					id, setID, resp.By, resp.Surface, nanos(resp.At)); err != nil {
					return err
				}
				if rec.State == SetPending {
					o.Decision.Pending = pendingIDs(rec)
				} else {
					final := rec.Response
					o.Decision.Final, o.Decision.Closed = &final, true
					closed = append(closed, setID)
				}
			}
			out.Sets = append(out.Sets, o)
		}
		if out.Taken() > 0 {
			out.ID = id
		}
		return nil
	})
	if err != nil {
		return GroupAnswer{}, fmt.Errorf("answer the group of set %s: %w", resp.SetID, err)
	}
	if len(closed) > 0 {
		s.changed(closed...)
	}
	return out, nil
}

// groupSet is a set read for AnswerGroup.
type groupSet struct {
	rec  SetRecord
	rows map[string]answerRow
	run  GroupRun
}

func loadGroupSet(ctx context.Context, tx *txn, setID string) (groupSet, error) {
	rec, rows, err := loadSetRows(ctx, tx, setID)
	if err != nil {
		return groupSet{}, err
	}
	g := groupSet{rec: rec, rows: rows, run: GroupRun{SetID: setID, RunID: rec.Set.RunID}}
	err = tx.QueryRowContext(ctx, `SELECT spec, title FROM runs WHERE id = ?`, rec.Set.RunID).Scan(&g.run.Spec, &g.run.Title)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return groupSet{}, err
	}
	return g, nil
}

// groupID names a shared decision: "g" and 11 hex digits from the answered
// set and when the answer was given.
func groupID(setID string, at time.Time) string {
	h := sha256.Sum256([]byte(setID + "\x00" + strconv.FormatInt(at.UnixNano(), 10)))
	return "g" + hex.EncodeToString(h[:])[:11]
}

// SharedDecision is a shared answer a set took (AnswerGroup): who gave it,
// where and when, and the other runs it answered.
type SharedDecision struct {
	ID      string
	By      string
	Surface string
	At      time.Time
	// Others are the other sets that took it, with their runs.
	Others []GroupRun
}

// sharedDecisions returns the shared decisions the run's sets took, by set
// ID. One statement.
func sharedDecisions(ctx context.Context, q querier, runID string) (map[string][]SharedDecision, error) {
	rows, err := q.QueryContext(ctx, `SELECT g.set_id, g.group_id, g.answered_by, g.surface, g.at, COALESCE(o.set_id, ''), COALESCE(oqs.run_id, ''),
		COALESCE(r.spec, ''), COALESCE(r.title, '')
		FROM question_sets qs JOIN group_answers g ON g.set_id = qs.id
		LEFT JOIN group_answers o ON o.group_id = g.group_id AND o.set_id <> g.set_id
		LEFT JOIN question_sets oqs ON oqs.id = o.set_id
		LEFT JOIN runs r ON r.id = oqs.run_id
		WHERE qs.run_id = ? ORDER BY g.set_id, g.at, g.group_id, oqs.created_at, o.set_id`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]SharedDecision{}
	for rows.Next() {
		var setID string
		var d SharedDecision
		var at int64
		var o GroupRun
		if err := rows.Scan(&setID, &d.ID, &d.By, &d.Surface, &at, &o.SetID, &o.RunID, &o.Spec, &o.Title); err != nil {
			return nil, err
		}
		list := out[setID]
		if n := len(list); n == 0 || list[n-1].ID != d.ID {
			d.At = fromNanos(at)
			list = append(list, d)
		}
		if o.SetID != "" {
			list[len(list)-1].Others = append(list[len(list)-1].Others, o)
		}
		out[setID] = list
	}
	return out, rows.Err()
}
