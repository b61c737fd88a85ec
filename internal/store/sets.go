package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// SetState is where a question set stands.
type SetState string

// Question set states.
const (
	SetPending  SetState = "pending"  // asked, waiting for an answer
	SetAnswered SetState = "answered" // every question answered; not yet handed to the model
	SetResuming SetState = "resuming" // claimed by a turn that carries the answer
	SetResumed  SetState = "resumed"  // the answer reached the model
	SetExpired  SetState = "expired"  // given up on (question timeout, run failed or cancelled)
)

// SetRecord is a stored question set and where it stands.
type SetRecord struct {
	Set      questions.Set
	State    SetState
	Surfaces []string
	// Response is the answer, complete once State is past pending; while
	// pending it holds the answers given so far, if any.
	Response    questions.Response
	CreatedAt   time.Time
	AnsweredAt  time.Time
	ClaimedAt   time.Time
	ResumedAt   time.Time
	RemindedAt  time.Time
	EscalatedAt time.Time
}

// insertSet stores set, pending, and makes its run waiting.
func insertSet(ctx context.Context, tx *txn, set questions.Set, surfaces []string, now time.Time) error {
	if err := insertSetRows(ctx, tx, set, surfaces, now); err != nil {
		return err
	}
	return updateRun(ctx, tx, set.RunID, RunUpdate{Status: RunWaiting}, now)
}

// insertSetRows stores set, pending (or answered, when a rule answers it:
// applyRules); its run is left as it is.
func insertSetRows(ctx context.Context, tx *txn, set questions.Set, surfaces []string, now time.Time) error {
	if set.ID == "" || set.RunID == "" {
		return errors.New("store question set: no ID or run ID")
	}
	if surfaces == nil {
		surfaces = []string{}
	}
	body, err := encodeJSON(set)
	if err != nil {
		return err
	}
	surf, err := encodeJSON(surfaces)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO question_sets (id, run_id, turn, state, body, surfaces, created_at, kind, fingerprint) VALUES (?,?,?,?,?,?,?,?,?)`,
		set.ID, set.RunID, set.Turn, SetPending, body, surf, nanos(now), questions.KindOf(set), questions.Fingerprint(set))
	if err != nil {
		return fmt.Errorf("store question set %s: %w", set.ID, err)
	}
	for i, q := range set.Questions {
		if _, err := tx.ExecContext(ctx, `INSERT INTO questions (id, set_id, position) VALUES (?,?,?)`, q.ID, set.ID, i); err != nil {
			return fmt.Errorf("store question %s of set %s: %w", q.ID, set.ID, err)
		}
	}
	// A remembered decision in scope answers it before anyone is asked;
	// else the same answer given often enough is suggested as one
	// (rules.go).
	applied, spec, err := applyRules(ctx, tx, set, now)
	if err != nil || applied {
		return err
	}
	_, err = suggestRule(ctx, tx, set, spec, tx.d.ruleSuggestAfter())
	return err
}

const setColumns = `id, state, body, surfaces, created_at, answered_at, claimed_at, resumed_at, reminded_at, escalated_at`

func scanSet(row interface{ Scan(...any) error }) (SetRecord, error) {
	var r SetRecord
	var id, body, surfaces string
	var created, answered, claimed, resumed, reminded, escalated int64
	if err := row.Scan(&id, &r.State, &body, &surfaces, &created, &answered, &claimed, &resumed, &reminded, &escalated); err != nil {
		return SetRecord{}, err
	}
	if err := json.Unmarshal([]byte(body), &r.Set); err != nil {
		return SetRecord{}, fmt.Errorf("question set %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(surfaces), &r.Surfaces); err != nil {
		return SetRecord{}, fmt.Errorf("question set %s: surfaces: %w", id, err)
	}
	r.CreatedAt, r.AnsweredAt, r.ClaimedAt = fromNanos(created), fromNanos(answered), fromNanos(claimed)
	r.ResumedAt, r.RemindedAt, r.EscalatedAt = fromNanos(resumed), fromNanos(reminded), fromNanos(escalated)
	return r, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func loadSet(ctx context.Context, q querier, id string) (SetRecord, error) {
	r, _, err := loadSetRows(ctx, q, id)
	return r, err
}

// setsWithAnswers reads sets with their answers in one statement: a row
// per answer (one, its answer columns NULL, for a set without any). Its
// condition is on qs, the question_sets.
const setsWithAnswers = `SELECT qs.id, qs.state, qs.body, qs.surfaces, qs.created_at, qs.answered_at, qs.claimed_at, qs.resumed_at,
	qs.reminded_at, qs.escalated_at, a.question_id, a.body, a.answered_by, a.surface, a.at
	FROM question_sets qs LEFT JOIN answers a ON a.set_id = qs.id WHERE `

// loadSetRows is loadSet that also returns the set's answers as stored, by
// question ID, for a change to compose the set's response again
// (storeAnswers) without reading it back. One statement.
func loadSetRows(ctx context.Context, q querier, id string) (SetRecord, map[string]answerRow, error) {
	recs, rows, err := loadSetsJoined(ctx, q, `qs.id = ?`, id)
	if err != nil {
		return SetRecord{}, nil, fmt.Errorf("question set %s: %w", id, err)
	}
	if len(recs) == 0 {
		return SetRecord{}, nil, fmt.Errorf("question set %s: %w", id, ErrNotFound)
	}
	return recs[0], rows[0], nil
}

// loadSetsJoined reads the sets where selects, oldest first, with their
// answers (setsWithAnswers), and returns each set's answers as stored too.
func loadSetsJoined(ctx context.Context, q querier, where string, args ...any) ([]SetRecord, []map[string]answerRow, error) {
	rows, err := q.QueryContext(ctx, setsWithAnswers+where+` ORDER BY qs.created_at, qs.id`, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var recs []SetRecord
	var answers []map[string]answerRow
	for rows.Next() {
		var qid, body, by, srf sql.NullString
		var at sql.NullInt64
		r, err := scanSet(scanWith{rows, []any{&qid, &body, &by, &srf, &at}})
		if err != nil {
			return nil, nil, err
		}
		if n := len(recs); n == 0 || recs[n-1].Set.ID != r.Set.ID {
			recs, answers = append(recs, r), append(answers, map[string]answerRow{})
		}
		if !qid.Valid {
			continue // no answer yet
		}
		a := answerRow{by: by.String, srf: srf.String, at: at.Int64}
		if err := json.Unmarshal([]byte(body.String), &a.a); err != nil {
			return nil, nil, fmt.Errorf("answer to %s: %w", qid.String, err)
		}
		answers[len(answers)-1][qid.String] = a
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	for i := range recs {
		recs[i].Response = composeResponse(recs[i].Set, answers[i])
	}
	return recs, answers, nil
}

// OpenSets returns the run's sets still open, pending or answered but not
// yet handed over, oldest first, with their answers: one statement (the
// run loop reads them at every step).
func (s *Store) OpenSets(ctx context.Context, runID string) ([]SetRecord, error) {
	recs, _, err := loadSetsJoined(ctx, s.db, `qs.run_id = ? AND qs.state IN (?, ?)`, runID, SetAnswered, SetPending)
	if err != nil {
		return nil, fmt.Errorf("open question sets of run %s: %w", runID, err)
	}
	return recs, nil
}

// scanWith scans a row's columns into scanSet's and then into more.
type scanWith struct {
	rows *sql.Rows
	more []any
}

func (s scanWith) Scan(dest ...any) error { return s.rows.Scan(append(dest, s.more...)...) }

// answerRow is one stored answer to a question.
type answerRow struct {
	a       questions.Answer
	by, srf string
	at      int64
}

// scanAnswerRow reads question_id (into qid), body, answered_by, surface
// and at, after the columns in extra.
func scanAnswerRow(rows *sql.Rows, qid *string, extra ...any) (answerRow, error) {
	var r answerRow
	var body string
	if err := rows.Scan(append(extra, qid, &body, &r.by, &r.srf, &r.at)...); err != nil {
		return answerRow{}, err
	}
	if err := json.Unmarshal([]byte(body), &r.a); err != nil {
		return answerRow{}, fmt.Errorf("answer to %s: %w", *qid, err)
	}
	return r, nil
}

// composeResponse is set's response from its answers by question ID, in
// question order.
func composeResponse(set questions.Set, byQ map[string]answerRow) questions.Response {
	resp := questions.Response{SetID: set.ID}
	var bys, srfs []string
	var last int64
	for _, qu := range set.Questions {
		r, ok := byQ[qu.ID]
		if !ok {
			continue
		}
		resp.Answers = append(resp.Answers, r.a)
		bys = appendUnique(bys, r.by)
		srfs = appendUnique(srfs, r.srf)
		if r.at > last {
			last = r.at
		}
	}
	resp.By, resp.Surface, resp.At = strings.Join(bys, ", "), strings.Join(srfs, ", "), fromNanos(last)
	return resp
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// QuestionSet returns the stored set with the given ID.
func (s *Store) QuestionSet(ctx context.Context, id string) (SetRecord, error) {
	return loadSet(ctx, s.db, id)
}

// SetFilter selects question sets; zero fields match everything.
type SetFilter struct {
	RunID string
	State []SetState
}

// QuestionSets returns sets, oldest first.
func (s *Store) QuestionSets(ctx context.Context, f SetFilter) ([]SetRecord, error) {
	where := `1=1`
	var args []any
	if f.RunID != "" {
		where += ` AND run_id = ?`
		args = append(args, f.RunID)
	}
	if len(f.State) > 0 {
		where += ` AND state IN (` + placeholders(len(f.State)) + `)`
		for _, st := range f.State {
			args = append(args, st)
		}
	}
	return loadSets(ctx, s.db, where, args)
}

// FindQuestion finds a question by its short ID (or a set by its ID) among
// the sets still waiting for an answer first, then among all sets. It
// returns the set and, when a question ID was given, the question.
func (s *Store) FindQuestion(ctx context.Context, id string) (SetRecord, *questions.Question, error) {
	id = strings.TrimSpace(id)
	if r, err := loadSet(ctx, s.db, id); err == nil {
		return r, nil, nil
	} else if !errors.Is(err, ErrNotFound) {
		return SetRecord{}, nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT q.set_id, qs.state FROM questions q JOIN question_sets qs ON qs.id = q.set_id
		WHERE lower(q.id) = lower(?) ORDER BY qs.created_at DESC`, id)
	if err != nil {
		return SetRecord{}, nil, fmt.Errorf("find question %s: %w", id, err)
	}
	var pending, all []string
	for rows.Next() {
		var setID string
		var st SetState
		if err := rows.Scan(&setID, &st); err != nil {
			rows.Close()
			return SetRecord{}, nil, err
		}
		all = append(all, setID)
		if st == SetPending {
			pending = append(pending, setID)
		}
	}
	rows.Close()
	candidates := pending
	if len(candidates) == 0 {
		candidates = all
	}
	switch {
	case len(candidates) == 0:
		return SetRecord{}, nil, fmt.Errorf("question %s: %w", id, ErrNotFound)
	case len(candidates) > 1:
		return SetRecord{}, nil, fmt.Errorf("question %s: %w: %d waiting question sets have a question with this ID; answer by set ID (%s)",
			id, ErrAmbiguous, len(candidates), strings.Join(candidates, ", "))
	}
	r, err := loadSet(ctx, s.db, candidates[0])
	if err != nil {
		return SetRecord{}, nil, err
	}
	for i := range r.Set.Questions {
		if strings.EqualFold(r.Set.Questions[i].ID, id) {
			q := r.Set.Questions[i]
			return r, &q, nil
		}
	}
	return SetRecord{}, nil, fmt.Errorf("question %s: %w", id, ErrNotFound)
}

// RecordAnswer stores the answers of resp for a pending set, unchecked: the
// run's own answers (a preset's, a timeout's). The first answer to each
// question wins: answers to questions already answered are ignored. Once
// every question has an answer the set becomes answered. A set that is no
// longer pending gives ErrAlreadyAnswered (its record tells who answered).
// The returned record is the set after the change. Answers people give go
// through Offer, which decides whether to take them.
func (s *Store) RecordAnswer(ctx context.Context, resp questions.Response) (SetRecord, error) {
	var rec SetRecord
	now := s.now().UTC()
	if resp.At.IsZero() {
		resp.At = now
	}
	err := s.tx(ctx, func(tx *txn) error {
		r, rows, err := loadSetRows(ctx, tx, resp.SetID)
		if err != nil {
			return err
		}
		if r.State != SetPending {
			rec = r
			return fmt.Errorf("question set %s: %w (%s by %s on %s)", r.Set.ID, ErrAlreadyAnswered, r.State, r.Response.By, r.Response.Surface)
		}
		for _, a := range resp.Answers {
			if _, ok := r.Set.Question(a.QuestionID); !ok {
				return fmt.Errorf("question set %s has no question %q", r.Set.ID, a.QuestionID)
			}
		}
		rec, err = storeAnswers(ctx, tx, r, rows, resp, now)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrAlreadyAnswered) {
			return rec, err
		}
		return SetRecord{}, fmt.Errorf("record answer: %w", err)
	}
	if rec.State != SetPending {
		s.changed(rec.Set.ID)
	}
	return rec, nil
}

// ExpireSets gives up on a run's sets that are still pending or answered but
// not handed over (the run failed or was cancelled).
func (s *Store) ExpireSets(ctx context.Context, runID string) error {
	// A write transaction, as every change of a set's state: on PostgreSQL
	// its writers' lock comes before the set feed's (feed.go).
	err := s.tx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ? WHERE run_id = ? AND state IN (?, ?)`,
			SetExpired, runID, SetPending, SetAnswered)
		return err
	})
	if err != nil {
		return fmt.Errorf("expire question sets of run %s: %w", runID, err)
	}
	s.changed()
	return nil
}

// MarkReminded records that a reminder for the set went out.
func (s *Store) MarkReminded(ctx context.Context, setID string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE question_sets SET reminded_at = ? WHERE id = ?`, nanos(at), setID)
	return err
}

// MarkEscalated records that the set was escalated to another surface.
func (s *Store) MarkEscalated(ctx context.Context, setID string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE question_sets SET escalated_at = ? WHERE id = ?`, nanos(at), setID)
	return err
}

// SetSurfaces records the surfaces a set is asked on (escalation adds one).
func (s *Store) SetSurfaces(ctx context.Context, setID string, surfaces []string) error {
	list := append([]string(nil), surfaces...)
	sort.Strings(list)
	body, err := encodeJSON(list)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `UPDATE question_sets SET surfaces = ? WHERE id = ?`, body, setID)
	return err
}

// Ref returns a value a surface stored under key (e.g. the message it posted
// for a question), for idempotent posting across restarts.
func (s *Store) Ref(ctx context.Context, surface, key string) (string, bool, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM surface_refs WHERE surface = ? AND key = ?`, surface, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ref %s/%s: %w", surface, key, err)
	}
	return v, true, nil
}

// SetRef stores a surface's value under key, of no run (or of the run it
// was stored for before: SetRunRef).
func (s *Store) SetRef(ctx context.Context, surface, key, value string) error {
	return s.SetRunRef(ctx, surface, "", key, value)
}

// Refs is the store seen by one surface: its Ref and SetRef methods take no
// surface name.
type Refs struct {
	s       *Store
	surface string
}

// RefsFor returns the refs of the named surface.
func (s *Store) RefsFor(surface string) Refs { return Refs{s: s, surface: surface} }

// Ref returns the value stored under key.
func (r Refs) Ref(ctx context.Context, key string) (string, bool, error) {
	return r.s.Ref(ctx, r.surface, key)
}

// SetRef stores value under key.
func (r Refs) SetRef(ctx context.Context, key, value string) error {
	return r.s.SetRef(ctx, r.surface, key, value)
}
