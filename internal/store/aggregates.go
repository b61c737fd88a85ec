package store

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// The aggregate reads: what `orchestrator status` and /metrics show of the
// runs and questions as counts, sums and extremes, each one statement
// (GROUP BY) whatever the number of runs, and the newest waiting sets with
// a total, so that neither reads every row when 100,000 runs wait.

// AggFilter narrows the aggregate reads; zero fields match everything.
type AggFilter struct {
	Spec   string      // the runs of this spec only ("" matches every spec and prompt)
	Status []RunStatus // RunCounts: runs in these statuses only
	Kind   []string    // PendingCounts, NewestWaitingSets: sets of these kinds only (questions.Kind*)
}

// RunCount is how many runs of one spec are in one status, what they cost
// and when the last of them changed.
type RunCount struct {
	Spec        string // "" for runs of a prompt
	Status      RunStatus
	Runs        int
	CostUSD     float64
	LastUpdated time.Time // the newest updated_at among them
}

// RunCounts counts the runs by spec and status, with their cost and their
// newest change: one statement (on the index runs_spec_status).
func (s *Store) RunCounts(ctx context.Context, f AggFilter) ([]RunCount, error) {
	q := `SELECT spec, status, COUNT(*), COALESCE(SUM(cost_usd), 0), MAX(updated_at) FROM runs WHERE 1=1`
	var args []any
	if f.Spec != "" {
		q += ` AND spec = ?`
		args = append(args, f.Spec)
	}
	if len(f.Status) > 0 {
		q += ` AND status IN (` + placeholders(len(f.Status)) + `)`
		for _, st := range f.Status {
			args = append(args, st)
		}
	}
	rows, err := s.db.QueryContext(ctx, q+` GROUP BY spec, status ORDER BY spec, status`, args...)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	var out []RunCount
	for rows.Next() {
		var c RunCount
		var last int64
		if err := rows.Scan(&c.Spec, &c.Status, &c.Runs, &c.CostUSD, &last); err != nil {
			return nil, fmt.Errorf("count runs: %w", err)
		}
		c.LastUpdated = fromNanos(last)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return out, nil
}

// PendingCount is what waits for an answer among the runs of one spec, in
// sets of one kind: the sets, their questions not answered yet, and when
// the oldest and newest of the sets were asked.
type PendingCount struct {
	Spec      string // "" for runs of a prompt
	Kind      string // questions.Kind*
	Sets      int
	Questions int // questions of the sets not answered yet
	Oldest    time.Time
	Newest    time.Time
}

// PendingCounts counts the pending question sets by their run's spec and
// their kind, with their unanswered questions and the oldest and newest:
// two statements (the sets, then the questions with no answer), both on
// the index question_sets_state_created.
func (s *Store) PendingCounts(ctx context.Context, f AggFilter) ([]PendingCount, error) {
	where, args := pendingWhere(f)
	rows, err := s.db.QueryContext(ctx, `SELECT r.spec, qs.kind, COUNT(*), MIN(qs.created_at), MAX(qs.created_at)
		FROM question_sets qs JOIN runs r ON r.id = qs.run_id WHERE `+where+` GROUP BY r.spec, qs.kind`, args...)
	if err != nil {
		return nil, fmt.Errorf("count pending question sets: %w", err)
	}
	type key struct{ spec, kind string }
	byKey := map[key]*PendingCount{}
	for rows.Next() {
		var c PendingCount
		var oldest, newest int64
		if err := rows.Scan(&c.Spec, &c.Kind, &c.Sets, &oldest, &newest); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count pending question sets: %w", err)
		}
		c.Oldest, c.Newest = fromNanos(oldest), fromNanos(newest)
		byKey[key{c.Spec, c.Kind}] = &c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count pending question sets: %w", err)
	}
	// A pending set's questions without an answer (a set may hold the
	// answers to some of its questions already).
	rows, err = s.db.QueryContext(ctx, `SELECT r.spec, qs.kind, COUNT(*)
		FROM question_sets qs JOIN runs r ON r.id = qs.run_id JOIN questions q ON q.set_id = qs.id
		LEFT JOIN answers a ON a.set_id = q.set_id AND a.question_id = q.id
		WHERE a.set_id IS NULL AND `+where+` GROUP BY r.spec, qs.kind`, args...)
	if err != nil {
		return nil, fmt.Errorf("count pending questions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k key
		var n int
		if err := rows.Scan(&k.spec, &k.kind, &n); err != nil {
			return nil, fmt.Errorf("count pending questions: %w", err)
		}
		if c, ok := byKey[k]; ok { // a set answered in between has no count
			c.Questions = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count pending questions: %w", err)
	}
	out := make([]PendingCount, 0, len(byKey))
	for _, c := range byKey {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Spec != out[j].Spec {
			return out[i].Spec < out[j].Spec
		}
		return out[i].Kind < out[j].Kind
	})
	return out, nil
}

// pendingWhere is the condition on qs (question_sets) and r (their runs)
// of the pending sets f selects.
func pendingWhere(f AggFilter) (string, []any) {
	where := `qs.state = ?`
	args := []any{SetPending}
	if f.Spec != "" {
		where += ` AND r.spec = ?`
		args = append(args, f.Spec)
	}
	if len(f.Kind) > 0 {
		where += ` AND qs.kind IN (` + placeholders(len(f.Kind)) + `)`
		for _, k := range f.Kind {
			args = append(args, k)
		}
	}
	return where, args
}

// WaitingFilter selects the pending question sets NewestWaitingSets lists.
type WaitingFilter struct {
	Spec  string   // of this spec's runs only
	Kind  []string // of these kinds only
	Limit int      // at most this many, newest first; 0 lists every one
}

// NewestWaitingSets returns the newest pending question sets f selects (at most
// f.Limit), newest first, with their answers so far, and how many sets f
// selects in all: two statements, whatever the number waiting.
func (s *Store) NewestWaitingSets(ctx context.Context, f WaitingFilter) ([]SetRecord, int, error) {
	where, args := pendingWhere(AggFilter{Spec: f.Spec, Kind: f.Kind})
	from := `question_sets qs`
	if f.Spec != "" {
		from += ` JOIN runs r ON r.id = qs.run_id` // else no need: every set has its run
	}
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+from+` WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count waiting question sets: %w", err)
	}
	if total == 0 {
		return []SetRecord{}, 0, nil
	}
	page := `SELECT qs.id FROM ` + from + ` WHERE ` + where + ` ORDER BY qs.created_at DESC, qs.id DESC`
	if f.Limit > 0 {
		page += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	recs, _, err := loadSetsJoined(ctx, s.db, `qs.id IN (`+page+`)`, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("waiting question sets: %w", err)
	}
	// loadSetsJoined reads them oldest first.
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	return recs, total, nil
}

// ActiveRun is the newest run of a spec that runs or waits.
type ActiveRun struct {
	Spec   string
	RunID  string
	Status RunStatus
}

// NewestActive returns, for each spec with a run that runs or waits (of
// spec alone when set), the newest such run, by spec: the scheduler skips
// the spec's ticks while it is there. One statement.
func (s *Store) NewestActive(ctx context.Context, spec string) (map[string]ActiveRun, error) {
	cond := func(t string) string {
		c := t + `status IN (?, ?)`
		if spec != "" {
			c += ` AND ` + t + `spec = ?`
		}
		return c
	}
	args := []any{RunRunning, RunWaiting}
	if spec != "" {
		args = append(args, spec)
	}
	args = append(args, args...)
	rows, err := s.db.QueryContext(ctx, `SELECT r.spec, r.id, r.status FROM runs r
		JOIN (SELECT spec, MAX(created_at) AS newest FROM runs WHERE `+cond("")+` GROUP BY spec) n
		ON n.spec = r.spec AND n.newest = r.created_at
		WHERE `+cond("r.")+` ORDER BY r.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("newest active runs: %w", err)
	}
	defer rows.Close()
	out := map[string]ActiveRun{}
	for rows.Next() {
		var a ActiveRun
		if err := rows.Scan(&a.Spec, &a.RunID, &a.Status); err != nil {
			return nil, fmt.Errorf("newest active runs: %w", err)
		}
		if _, ok := out[a.Spec]; !ok { // ties: the first by ID, as ListRuns orders them
			out[a.Spec] = a
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("newest active runs: %w", err)
	}
	return out, nil
}
