package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Native asking and tool approvals (issue 13). A tool call the model makes
// that a person decides — an AskUserQuestion call or a permission request —
// is a ToolCall row keyed by its tool_use_id, with a question set of kind
// ask_tool or approval asked like any other. The decision is taken from the
// set's answer and handed to the orchestrator's PreToolUse hook exactly
// once: TakeToolDecision marks it used in the same transaction that reads
// it, so a resumed session that fires the hook again for the same call
// never gets it twice.

// Tool call decisions.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// ToolCall is a stored tool call and its decision.
type ToolCall struct {
	ToolUseID string
	RunID     string
	// SetID is the question set asked about the call ("" when the policy
	// or a rule decided it without a question).
	SetID string
	// Kind is questions.KindAskTool or questions.KindApproval.
	Kind  string
	Tool  string
	Input json.RawMessage
	// Decision is "", DecisionAllow or DecisionDeny.
	Decision string
	// Reason is a refusal's reason (told to the model).
	Reason string
	// UpdatedInput is the input an allowed call runs with (AskUserQuestion:
	// with its answers); nil for the call's own input.
	UpdatedInput json.RawMessage
	// DecidedBy says who or what decided ("policy: Bash(rm:*)", "@alice on
	// github", …).
	DecidedBy string
	// Deferred: a turn parked on the call (the hook answered defer).
	Deferred  bool
	CreatedAt time.Time
	DecidedAt time.Time
	// UsedAt is when the decision was handed to the CLI (zero: not yet).
	UsedAt time.Time
}

const toolColumns = `tool_use_id, run_id, set_id, kind, tool, input, decision, reason, updated_input, decided_by, deferred, created_at, decided_at, used_at`

func scanToolCall(row interface{ Scan(...any) error }) (ToolCall, error) {
	var c ToolCall
	var input, updated string
	var deferred int
	var created, decided, used int64
	if err := row.Scan(&c.ToolUseID, &c.RunID, &c.SetID, &c.Kind, &c.Tool, &input, &c.Decision, &c.Reason, &updated,
		&c.DecidedBy, &deferred, &created, &decided, &used); err != nil {
		return ToolCall{}, err
	}
	if input != "" {
		c.Input = json.RawMessage(input)
	}
	if updated != "" {
		c.UpdatedInput = json.RawMessage(updated)
	}
	c.Deferred = deferred != 0
	c.CreatedAt, c.DecidedAt, c.UsedAt = fromNanos(created), fromNanos(decided), fromNanos(used)
	return c, nil
}

func loadToolCall(ctx context.Context, q querier, toolUseID string) (ToolCall, error) {
	c, err := scanToolCall(q.QueryRowContext(ctx, `SELECT `+toolColumns+` FROM tool_calls WHERE tool_use_id = ?`, toolUseID))
	if errors.Is(err, sql.ErrNoRows) {
		return ToolCall{}, fmt.Errorf("tool call %s: %w", toolUseID, ErrNotFound)
	}
	return c, err
}

// ToolCall returns the stored tool call with that tool_use_id.
func (s *Store) ToolCall(ctx context.Context, toolUseID string) (ToolCall, error) {
	return loadToolCall(ctx, s.db, toolUseID)
}

// ToolCalls returns a run's tool calls, oldest first.
func (s *Store) ToolCalls(ctx context.Context, runID string) ([]ToolCall, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+toolColumns+` FROM tool_calls WHERE run_id = ? ORDER BY created_at, tool_use_id`, runID)
	if err != nil {
		return nil, fmt.Errorf("tool calls of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []ToolCall
	for rows.Next() {
		c, err := scanToolCall(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func insertToolCall(ctx context.Context, tx *txn, c ToolCall, now time.Time) error {
	if c.ToolUseID == "" || c.RunID == "" {
		return errors.New("store tool call: no tool_use_id or run ID")
	}
	var decided int64
	if c.Decision != "" {
		decided = nanos(now)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO tool_calls (tool_use_id, run_id, set_id, kind, tool, input, decision, reason, updated_input, decided_by, created_at, decided_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		c.ToolUseID, c.RunID, c.SetID, c.Kind, c.Tool, string(c.Input), c.Decision, c.Reason, string(c.UpdatedInput), c.DecidedBy, nanos(now), decided)
	if err != nil {
		return fmt.Errorf("store tool call %s: %w", c.ToolUseID, err)
	}
	return nil
}

// AskTool records a tool call that people are asked about, with its
// question set (of the call's kind), in one transaction. It is idempotent on
// the tool_use_id: a call stored before is returned as it is (created
// false), whoever stored it (the run loop or the hook). While the CLI
// process lives (live), the run stays running; otherwise it is waiting, as
// for any question.
func (s *Store) AskTool(ctx context.Context, call ToolCall, set questions.Set, surfaces []string, live bool) (ToolCall, bool, error) {
	now := s.now().UTC()
	created := false
	var out ToolCall
	err := s.tx(ctx, func(tx *txn) error {
		c, err := loadToolCall(ctx, tx, call.ToolUseID)
		if err == nil {
			out = c
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		if set.RunID != call.RunID || set.ID == "" {
			return fmt.Errorf("tool call %s: the set is not of run %s", call.ToolUseID, call.RunID)
		}
		call.SetID, call.Decision = set.ID, ""
		if err := insertToolCall(ctx, tx, call, now); err != nil {
			return err
		}
		if err := insertSet(ctx, tx, set, surfaces, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET kind = ? WHERE id = ?`, questions.KindOf(set), set.ID); err != nil {
			return err
		}
		// A rule may have answered the set (applyRules): the call is
		// decided now, its decision handed out as any other.
		stored := call
		if err := decideFromSet(ctx, tx, &stored, now); err != nil {
			return err
		}
		if live {
			if err := updateRun(ctx, tx, call.RunID, RunUpdate{Status: RunRunning}, now); err != nil {
				return err
			}
		}
		created = true
		out, err = loadToolCall(ctx, tx, call.ToolUseID)
		return err
	})
	if err != nil {
		return ToolCall{}, false, fmt.Errorf("ask about tool call: %w", err)
	}
	return out, created, nil
}

// DecideTool records a tool call decided without a person (the policy, a
// rule allowed for the run): call.Decision and DecidedBy are set. A call
// stored before keeps its decision, if it has one (first decision wins).
func (s *Store) DecideTool(ctx context.Context, call ToolCall) (ToolCall, error) {
	if call.Decision != DecisionAllow && call.Decision != DecisionDeny {
		return ToolCall{}, fmt.Errorf("decide tool call %s: decision %q", call.ToolUseID, call.Decision)
	}
	now := s.now().UTC()
	var out ToolCall
	err := s.tx(ctx, func(tx *txn) error {
		c, err := loadToolCall(ctx, tx, call.ToolUseID)
		switch {
		case errors.Is(err, ErrNotFound):
			if err := insertToolCall(ctx, tx, call, now); err != nil {
				return err
			}
		case err != nil:
			return err
		case c.Decision == "":
			if _, err := tx.ExecContext(ctx, `UPDATE tool_calls SET decision = ?, reason = ?, updated_input = ?, decided_by = ?, decided_at = ? WHERE tool_use_id = ?`,
				call.Decision, call.Reason, string(call.UpdatedInput), call.DecidedBy, nanos(now), call.ToolUseID); err != nil {
				return err
			}
		}
		out, err = loadToolCall(ctx, tx, call.ToolUseID)
		return err
	})
	if err != nil {
		return ToolCall{}, fmt.Errorf("decide tool call: %w", err)
	}
	return out, nil
}

// Take is what TakeToolDecision found.
type Take int

const (
	// TakeNone: no decision yet (unknown call, or its set still pending).
	TakeNone Take = iota
	// TakeFirst: the decision, handed out now for the first time.
	TakeFirst
	// TakeAgain: the decision was handed out before (the CLI fired the hook
	// again for the same call: its earlier process died while it ran).
	TakeAgain
)

// TakeToolDecision is the hook's read. In one transaction: a call whose set
// has been answered gets its decision from the answer (an approval's
// verdict, "Allow for this run" adding the call's rule to the run; an
// AskUserQuestion's answers as its updated input; an expired set is a
// refusal); a decided call is marked used, and its set resumed. A decision
// is handed out once (TakeFirst); after that TakeAgain.
func (s *Store) TakeToolDecision(ctx context.Context, toolUseID string) (ToolCall, Take, error) {
	now := s.now().UTC()
	var out ToolCall
	take := TakeNone
	err := s.tx(ctx, func(tx *txn) error {
		c, err := loadToolCall(ctx, tx, toolUseID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.Decision == "" && c.SetID != "" {
			if err := decideFromSet(ctx, tx, &c, now); err != nil {
				return err
			}
		}
		out = c
		if c.Decision == "" {
			return nil
		}
		if !c.UsedAt.IsZero() {
			take = TakeAgain
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tool_calls SET used_at = ? WHERE tool_use_id = ?`, nanos(now), toolUseID); err != nil {
			return err
		}
		if c.SetID != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ?, resumed_at = ? WHERE id = ? AND state IN (?, ?)`,
				SetResumed, nanos(now), c.SetID, SetAnswered, SetResuming); err != nil {
				return err
			}
		}
		out.UsedAt = now
		take = TakeFirst
		return nil
	})
	if err != nil {
		return ToolCall{}, TakeNone, fmt.Errorf("take the decision for tool call %s: %w", toolUseID, err)
	}
	return out, take, nil
}

// decideFromSet fills c's decision from its answered (or expired) set.
func decideFromSet(ctx context.Context, tx *txn, c *ToolCall, now time.Time) error {
	rec, err := loadSet(ctx, tx, c.SetID)
	if err != nil {
		return err
	}
	switch rec.State {
	case SetPending:
		return nil
	case SetExpired:
		c.Decision, c.Reason, c.DecidedBy = DecisionDeny, "no one answered in time", "timeout"
	default:
		c.DecidedBy = rec.Response.By + " on " + rec.Response.Surface
		switch questions.KindOf(rec.Set) {
		case questions.KindAskTool:
			in, err := questions.AskToolAnswers(rec.Set, rec.Response)
			if err != nil {
				return err
			}
			c.Decision, c.UpdatedInput = DecisionAllow, in
		case questions.KindApproval:
			v, err := questions.ApprovalVerdict(rec.Set, rec.Response)
			if err != nil {
				return err
			}
			if !v.Allow {
				c.Decision, c.Reason = DecisionDeny, v.Reason
				break
			}
			c.Decision = DecisionAllow
			// "Allow for this run" allows this very call again, nothing
			// broader (questions.ToolRule).
			if v.ForRun && rec.Set.Tool != nil {
				if r := questions.ToolRule(*rec.Set.Tool); r != "" {
					if err := addRunRule(ctx, tx, c.RunID, r, now); err != nil {
						return err
					}
				}
			}
		default:
			return fmt.Errorf("set %s of tool call %s is of kind %s", c.SetID, c.ToolUseID, questions.KindOf(rec.Set))
		}
	}
	c.DecidedAt = now
	_, err = tx.ExecContext(ctx, `UPDATE tool_calls SET decision = ?, reason = ?, updated_input = ?, decided_by = ?, decided_at = ? WHERE tool_use_id = ?`,
		c.Decision, c.Reason, string(c.UpdatedInput), c.DecidedBy, nanos(now), c.ToolUseID)
	return err
}

// MarkToolDeferred records that a turn parked on the call.
func (s *Store) MarkToolDeferred(ctx context.Context, toolUseID string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE tool_calls SET deferred = 1 WHERE tool_use_id = ?`, toolUseID)
	if err != nil {
		return fmt.Errorf("mark tool call %s deferred: %w", toolUseID, err)
	}
	return nil
}

func addRunRule(ctx context.Context, tx *txn, runID, rule string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO run_rules (run_id, rule, created_at) VALUES (?,?,?) ON CONFLICT DO NOTHING`, runID, rule, nanos(now))
	if err != nil {
		return fmt.Errorf("add rule %q to run %s: %w", rule, runID, err)
	}
	return nil
}

// AddRunRule allows calls matching rule (the CLI's rule syntax) for the rest
// of the run.
func (s *Store) AddRunRule(ctx context.Context, runID, rule string) error {
	return s.tx(ctx, func(tx *txn) error { return addRunRule(ctx, tx, runID, rule, s.now().UTC()) })
}

// RunRules are the rules allowed for the rest of a run, oldest first.
func (s *Store) RunRules(ctx context.Context, runID string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT rule FROM run_rules WHERE run_id = ? ORDER BY created_at, rule`, runID)
	if err != nil {
		return nil, fmt.Errorf("rules of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// SetKinds returns the kind of each of the given sets (questions.KindMarker
// for a set stored before kinds existed).
func (s *Store) SetKinds(ctx context.Context, runID string) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, kind FROM question_sets WHERE run_id = ?`, runID)
	if err != nil {
		return nil, fmt.Errorf("kinds of the sets of run %s: %w", runID, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, kind string
		if err := rows.Scan(&id, &kind); err != nil {
			return nil, err
		}
		out[id] = kind
	}
	return out, rows.Err()
}

// SetRunPolicy stores the run's approvals policy (JSON, as the approvals
// package encodes it) for the orchestrator's hook, replacing the one before.
func (s *Store) SetRunPolicy(ctx context.Context, runID string, policy json.RawMessage) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO run_policies (run_id, policy, updated_at) VALUES (?,?,?)
		ON CONFLICT(run_id) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at`,
		runID, string(policy), nanos(s.now().UTC()))
	if err != nil {
		return fmt.Errorf("store the approvals policy of run %s: %w", runID, err)
	}
	return nil
}

// RunPolicy returns the run's approvals policy (nil when none was stored).
func (s *Store) RunPolicy(ctx context.Context, runID string) (json.RawMessage, error) {
	var p string
	err := s.db.QueryRowContext(ctx, `SELECT policy FROM run_policies WHERE run_id = ?`, runID).Scan(&p)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the approvals policy of run %s: %w", runID, err)
	}
	return json.RawMessage(p), nil
}

// DropToolCall settles a call the CLI dropped without running it (it keeps
// one deferred call of a turn): refused with reason, never handed out, and
// its question set expired so nobody is asked about it any more. A call
// that already has a decision is left as it is.
func (s *Store) DropToolCall(ctx context.Context, toolUseID, reason string) error {
	now := s.now().UTC()
	err := s.tx(ctx, func(tx *txn) error {
		c, err := loadToolCall(ctx, tx, toolUseID)
		if err != nil {
			return err
		}
		if c.Decision != "" || !c.UsedAt.IsZero() {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tool_calls SET decision = ?, reason = ?, decided_by = 'orchestrator', decided_at = ? WHERE tool_use_id = ?`,
			DecisionDeny, reason, nanos(now), toolUseID); err != nil {
			return err
		}
		if c.SetID != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ? WHERE id = ? AND state IN (?, ?)`,
				SetExpired, c.SetID, SetPending, SetAnswered); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drop tool call %s: %w", toolUseID, err)
	}
	return nil
}

// A call made again after a crash (issue 20). A live approval (the CLI
// alive, its hook holding the call) whose process died cannot be handed to
// the CLI any more: the resumed session holds the call as interrupted. The
// answer given for it then runs the call through the model: the run loop
// tells the model to make the same call again, and leaves a grant — a
// tool call row keyed retryPrefix+tool_use_id with the call's tool, input
// and decision — that the run's next identical call takes, once.

// retryPrefix starts the tool_use_id of a grant row (the CLI's IDs start
// with "toolu_").
const retryPrefix = "retry:"

// RetryToolCall settles an answered call whose process died before its
// decision was handed out, in one transaction: the decision is taken from
// its set (as TakeToolDecision does, the set itself left for the answer
// turn to claim), the call is marked used — its tool_use_id is never
// handed out any more — and an allowed call leaves its grant. granted
// reports that a grant exists (made now or by an earlier try); a call whose
// decision was handed out before (it may have run) gets none.
func (s *Store) RetryToolCall(ctx context.Context, toolUseID string) (c ToolCall, granted bool, err error) {
	now := s.now().UTC()
	err = s.tx(ctx, func(tx *txn) error {
		c, err = loadToolCall(ctx, tx, toolUseID)
		if err != nil {
			return err
		}
		if _, gerr := loadToolCall(ctx, tx, retryPrefix+toolUseID); gerr == nil {
			granted = true
			return nil
		} else if !errors.Is(gerr, ErrNotFound) {
			return gerr
		}
		if c.Decision == "" && c.SetID != "" {
			if err := decideFromSet(ctx, tx, &c, now); err != nil {
				return err
			}
		}
		if c.Decision == "" || !c.UsedAt.IsZero() {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tool_calls SET used_at = ? WHERE tool_use_id = ?`, nanos(now), toolUseID); err != nil {
			return err
		}
		c.UsedAt = now
		if c.Decision != DecisionAllow {
			return nil
		}
		g := ToolCall{ToolUseID: retryPrefix + toolUseID, RunID: c.RunID, Kind: c.Kind, Tool: c.Tool, Input: c.Input,
			Decision: DecisionAllow, UpdatedInput: c.UpdatedInput, DecidedBy: c.DecidedBy}
		if len(c.UpdatedInput) > 0 {
			g.Input = c.UpdatedInput
		}
		if err := insertToolCall(ctx, tx, g, now); err != nil {
			return err
		}
		granted = true
		return nil
	})
	if err != nil {
		return ToolCall{}, false, fmt.Errorf("settle the interrupted tool call %s: %w", toolUseID, err)
	}
	return c, granted, nil
}

// UseRetryGrant decides call (a call of run call.RunID not stored yet) from
// an unused grant of the run for the same tool and input (RetryToolCall),
// in one transaction: the grant is used up and the call stored allowed, by
// whoever allowed the interrupted call. ok is false when no grant matches
// (or the call was stored before: it keeps what it has).
func (s *Store) UseRetryGrant(ctx context.Context, call ToolCall) (out ToolCall, ok bool, err error) {
	now := s.now().UTC()
	err = s.tx(ctx, func(tx *txn) error {
		if _, err := loadToolCall(ctx, tx, call.ToolUseID); err == nil {
			return nil
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+toolColumns+` FROM tool_calls WHERE run_id = ? AND tool = ? AND used_at = 0 AND decision = ? AND tool_use_id LIKE ? ORDER BY created_at, tool_use_id`,
			call.RunID, call.Tool, DecisionAllow, retryPrefix+"%")
		if err != nil {
			return err
		}
		var grants []ToolCall
		for rows.Next() {
			g, err := scanToolCall(rows)
			if err != nil {
				rows.Close()
				return err
			}
			grants = append(grants, g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, g := range grants {
			if !sameJSON(g.Input, call.Input) {
				continue
			}
			res, err := tx.ExecContext(ctx, `UPDATE tool_calls SET used_at = ? WHERE tool_use_id = ? AND used_at = 0`, nanos(now), g.ToolUseID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return err // taken meanwhile
			}
			call.Decision, call.Reason, call.SetID = DecisionAllow, "", ""
			call.DecidedBy = g.DecidedBy + " (for the call " + g.ToolUseID[len(retryPrefix):] + ", interrupted by a restart)"
			if err := insertToolCall(ctx, tx, call, now); err != nil {
				return err
			}
			out, err = loadToolCall(ctx, tx, call.ToolUseID)
			ok = err == nil
			return err
		}
		return nil
	})
	if err != nil {
		return ToolCall{}, false, fmt.Errorf("take a grant for tool call %s: %w", call.ToolUseID, err)
	}
	return out, ok, nil
}

// sameJSON reports whether a and b are the same JSON value (key order and
// spacing aside).
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	return reflect.DeepEqual(va, vb)
}
