package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Remembered decisions (issue 28). A person who answers a question may
// keep the answer as a rule for a scope — the run's spec, its repository
// (the run's working directory) or everything — until it expires or is
// revoked. A question set stored later whose fingerprint is the rule's
// (fingerprint: the questions' text, options and kind, whitespace and case
// aside; for an approval the tool, and the rule's pattern must allow the
// call) is answered by the rule in the transaction that stores it: it is
// never pending, so no surface asks it, and the run loop hands the answer
// to the model exactly once as any other. Every use is a rule_uses row.

// Rule scopes.
const (
	ScopeSpec = "spec" // the runs of one spec (by name)
	ScopeRepo = "repo" // the runs in one working directory
	ScopeAll  = "all"  // every run
)

// RuleSurface is the surface an answer given by a rule is recorded on.
const RuleSurface = "rule"

// DefaultRuleMaxLifetime is rules.max_lifetime's default.
const DefaultRuleMaxLifetime = 30 * 24 * time.Hour

// ErrRuleRevoked: the rule was revoked before.
var ErrRuleRevoked = errors.New("rule already revoked")

// Rule is a remembered decision.
type Rule struct {
	ID string
	// Scope is ScopeSpec, ScopeRepo or ScopeAll; ScopeValue the spec's
	// name or the working directory ("" for ScopeAll).
	Scope      string
	ScopeValue string
	// Kind is the kind of the sets it answers (questions.KindMarker,
	// KindAskTool or KindApproval).
	Kind        string
	Fingerprint string
	// Pattern is an approval rule's tool rule (approvals.Match syntax, or
	// questions.ToolRule's "exact:" form for the very call).
	Pattern string
	// Answers are the answers, by the questions' position (no question IDs).
	Answers []questions.Answer
	// Summary is the first question's text, or the approval's pattern.
	Summary   string
	MadeBy    string
	Surface   string
	FromRun   string
	FromSet   string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt time.Time
	RevokedBy string
	// Uses counts the sets it answered (ListRules, RuleByID).
	Uses int
}

// Active reports whether r answers questions at now.
func (r Rule) Active(now time.Time) bool { return r.RevokedAt.IsZero() && now.Before(r.ExpiresAt) }

// Provenance is the decision log's line for an answer the rule gave.
func (r Rule) Provenance() string {
	return fmt.Sprintf("rule %s, made by %s on %s from run %s, expires %s", r.ID, r.MadeBy,
		r.CreatedAt.UTC().Format("2006-01-02"), orDash(r.FromRun), r.ExpiresAt.UTC().Format("2006-01-02"))
}

// ScopeText says the rule's scope in words ("spec nightly").
func (r Rule) ScopeText() string {
	if r.Scope == ScopeAll {
		return "every run"
	}
	return r.Scope + " " + r.ScopeValue
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// SetRuleMaxLifetime sets rules.max_lifetime, the longest lifetime of a
// rule whose request names none (surfaces' requests); 0 is the default.
func (s *Store) SetRuleMaxLifetime(d time.Duration) { s.ruleMax.Store(int64(d)) }

func (s *Store) ruleMaxLifetime() time.Duration {
	if d := time.Duration(s.ruleMax.Load()); d > 0 {
		return d
	}
	return DefaultRuleMaxLifetime
}

// RuleRequest asks to keep the answer to an answered set as a rule.
type RuleRequest struct {
	SetID string
	// Scope is ScopeSpec, ScopeRepo or ScopeAll; its value is the set's
	// run's.
	Scope string
	// Lifetime is how long the rule lasts; 0 is MaxLifetime.
	Lifetime time.Duration
	// MaxLifetime is rules.max_lifetime (0: DefaultRuleMaxLifetime).
	MaxLifetime time.Duration
	// By and Surface name who keeps it where: By must have given every
	// answer of the set.
	By      string
	Surface string
	// Pattern is an approval rule's tool rule ("Bash(go test:*)"); ""
	// remembers the very call. It must allow the set's call.
	Pattern string
	// Offer, if set, is the offer to remember this request takes
	// (remember_offers.go): it is marked taken in the rule's transaction,
	// which fails with ErrOfferTaken or ErrOfferExpired when it is not
	// open.
	Offer *OfferRef
}

// ParseRemember reads a --remember value, "scope[:lifetime]" (spec:7d,
// repo:12h, all): the lifetime in Go's duration syntax or whole days
// ("7d"); none is the longest allowed (0).
func ParseRemember(v string) (scope string, lifetime time.Duration, err error) {
	scope, life, hasLife := strings.Cut(strings.TrimSpace(v), ":")
	scope = strings.ToLower(strings.TrimSpace(scope))
	switch scope {
	case ScopeSpec, ScopeRepo, ScopeAll:
	default:
		return "", 0, fmt.Errorf("remember %q: the scope must be spec, repo or all (as in spec:7d)", v)
	}
	if !hasLife {
		return scope, 0, nil
	}
	lifetime, err = ParseLifetime(life)
	if err != nil {
		return "", 0, fmt.Errorf("remember %q: %w", v, err)
	}
	return scope, lifetime, nil
}

// ParseLifetime reads a lifetime: whole days ("7d") or a Go duration
// ("36h"); it must be positive.
func ParseLifetime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if _, err := fmt.Sscanf(n, "%d", &days); err != nil || fmt.Sprint(days) != n || days > 100000 {
			return 0, fmt.Errorf("lifetime %q: not a number of days (as in 7d) or a duration (as in 36h)", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("lifetime %q: not a number of days (as in 7d) or a duration (as in 36h)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("lifetime %q: must be more than zero", s)
	}
	return d, nil
}

// normalize is s in lower case with its runs of white space one space.
func normalize(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// Fingerprint is what a rule and a set must share for the rule to answer
// the set: the kind and, for questions, each question's text, options and
// whether several may be chosen, after normalising white space and case;
// for an approval, the tool (its pattern decides the rest).
func Fingerprint(set questions.Set) string {
	kind := questions.KindOf(set)
	if kind == questions.KindApproval {
		tool := ""
		if set.Tool != nil {
			tool = set.Tool.Tool
		}
		return kind + "\n" + tool
	}
	var b strings.Builder
	b.WriteString(kind)
	for _, q := range set.Questions {
		b.WriteString("\n")
		b.WriteString(normalize(q.Text))
		for _, o := range q.Options {
			b.WriteString("\x1f")
			b.WriteString(normalize(o.Label))
		}
		if q.MultiSelect {
			b.WriteString("\x1e*")
		}
	}
	return b.String()
}

// rememberable says whether sets of kind can be answered by a rule.
func rememberable(kind string) bool {
	return kind == questions.KindMarker || kind == questions.KindAskTool || kind == questions.KindApproval
}

const ruleColumns = `id, scope, scope_value, kind, fingerprint, pattern, answers, summary, made_by, surface, from_run, from_set,
	created_at, expires_at, revoked_at, revoked_by`

// joinedRuleColumns are ruleColumns of rules ru on the nullable side of a
// join: a missing rule reads as one with no ID.
var joinedRuleColumns = func() string {
	var out []string
	for _, c := range strings.Split(ruleColumns, ",") {
		c = strings.TrimSpace(c)
		zero := "''"
		switch c {
		case "created_at", "expires_at", "revoked_at":
			zero = "0"
		case "answers":
			zero = "'[]'"
		}
		out = append(out, "COALESCE(ru."+c+", "+zero+")")
	}
	return strings.Join(out, ", ")
}()

func scanRule(row interface{ Scan(...any) error }, more ...any) (Rule, error) {
	var r Rule
	var answers string
	var created, expires, revoked int64
	if err := row.Scan(append([]any{&r.ID, &r.Scope, &r.ScopeValue, &r.Kind, &r.Fingerprint, &r.Pattern, &answers, &r.Summary,
		&r.MadeBy, &r.Surface, &r.FromRun, &r.FromSet, &created, &expires, &revoked, &r.RevokedBy}, more...)...); err != nil {
		return Rule{}, err
	}
	if err := json.Unmarshal([]byte(answers), &r.Answers); err != nil {
		return Rule{}, fmt.Errorf("rule %s: answers: %w", r.ID, err)
	}
	r.CreatedAt, r.ExpiresAt, r.RevokedAt = fromNanos(created), fromNanos(expires), fromNanos(revoked)
	return r, nil
}

func newRuleID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "r" + hex.EncodeToString(b[:]), nil
}

// runScope is what a run's rules are scoped by.
type runScope struct{ spec, workdir string }

func loadRunScope(ctx context.Context, q querier, runID string) (runScope, error) {
	var rs runScope
	err := q.QueryRowContext(ctx, `SELECT spec, workdir FROM runs WHERE id = ?`, runID).Scan(&rs.spec, &rs.workdir)
	if errors.Is(err, sql.ErrNoRows) {
		return runScope{}, fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	return rs, err
}

// Remember keeps the answer to an answered set as a rule, in one
// transaction: every question of the set must have been answered, all by
// req.By (only the person who answered keeps their answer); the scope's
// value is the set's run's (a spec rule needs a run made from a spec); the
// lifetime is at most req.MaxLifetime. Whether req.By may answer in the
// whole scope is the caller's to decide (docs/rules.md).
func (s *Store) Remember(ctx context.Context, req RuleRequest) (Rule, error) {
	maxLife := req.MaxLifetime
	if maxLife <= 0 {
		maxLife = s.ruleMaxLifetime()
	}
	life := req.Lifetime
	if life == 0 {
		life = maxLife
	}
	if life < 0 || life > maxLife {
		return Rule{}, fmt.Errorf("remember the answer to %s: a lifetime of %s is more than rules.max_lifetime (%s)", req.SetID, life, maxLife)
	}
	if strings.TrimSpace(req.By) == "" {
		return Rule{}, fmt.Errorf("remember the answer to %s: no one to make the rule", req.SetID)
	}
	id, err := newRuleID()
	if err != nil {
		return Rule{}, err
	}
	now := s.now().UTC()
	var out Rule
	err = s.tx(ctx, func(tx *txn) error {
		if req.Offer != nil {
			if err := takeRememberOffer(ctx, tx, *req.Offer, id, now); err != nil {
				return err
			}
		}
		rec, rows, err := loadSetRows(ctx, tx, req.SetID)
		if err != nil {
			return err
		}
		kind := questions.KindOf(rec.Set)
		if !rememberable(kind) {
			return fmt.Errorf("question set %s is of kind %s: only questions and approvals are remembered", rec.Set.ID, kind)
		}
		if rec.State == SetPending || rec.State == SetExpired || len(rec.Response.Answers) != len(rec.Set.Questions) {
			return fmt.Errorf("question set %s is %s: only a whole answer is remembered", rec.Set.ID, rec.State)
		}
		var answers []questions.Answer
		for _, q := range rec.Set.Questions {
			a := rows[q.ID]
			if a.by != req.By {
				return fmt.Errorf("question %s was answered by %s, not %s: only the person who answered keeps the answer as a rule", q.ID, a.by, req.By)
			}
			ans := a.a
			ans.QuestionID = ""
			answers = append(answers, ans)
		}
		rs, err := loadRunScope(ctx, tx, rec.Set.RunID)
		if err != nil {
			return err
		}
		r := Rule{ID: id, Scope: req.Scope, Kind: kind, Fingerprint: Fingerprint(rec.Set), Answers: answers, MadeBy: req.By,
			Surface: req.Surface, FromRun: rec.Set.RunID, FromSet: rec.Set.ID, CreatedAt: now, ExpiresAt: now.Add(life)}
		switch req.Scope {
		case ScopeSpec:
			if rs.spec == "" {
				return fmt.Errorf("run %s was not started from a spec: remember for its repo or for all", rec.Set.RunID)
			}
			r.ScopeValue = rs.spec
		case ScopeRepo:
			if rs.workdir == "" {
				return fmt.Errorf("run %s has no working directory yet: remember for its spec or for all", rec.Set.RunID)
			}
			r.ScopeValue = rs.workdir
		case ScopeAll:
		default:
			return fmt.Errorf("scope %q: must be spec, repo or all", req.Scope)
		}
		if len(rec.Set.Questions) > 0 {
			r.Summary = rec.Set.Questions[0].Text
		}
		if kind == questions.KindApproval {
			if rec.Set.Tool == nil {
				return fmt.Errorf("approval %s names no tool call", rec.Set.ID)
			}
			call := *rec.Set.Tool
			r.Pattern = strings.TrimSpace(req.Pattern)
			if r.Pattern == "" {
				if r.Pattern = questions.ToolRule(call); r.Pattern == "" {
					return fmt.Errorf("approval %s: its call's input is not JSON", rec.Set.ID)
				}
			} else {
				if err := approvals.Validate(r.Pattern); err != nil {
					return err
				}
				if !approvals.Match(r.Pattern, call.Tool, call.Input, rs.workdir) {
					return fmt.Errorf("rule %q does not allow the call it answers (%s)", r.Pattern, call.Tool)
				}
			}
			r.Summary = patternSummary(r.Pattern)
		} else if req.Pattern != "" {
			return fmt.Errorf("question set %s is not an approval: a pattern is for approvals only", rec.Set.ID)
		}
		body, err := encodeJSON(r.Answers)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO rules (`+ruleColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			r.ID, r.Scope, r.ScopeValue, r.Kind, r.Fingerprint, r.Pattern, body, r.Summary, r.MadeBy, r.Surface, r.FromRun, r.FromSet,
			nanos(r.CreatedAt), nanos(r.ExpiresAt), int64(0), "")
		out = r
		return err
	})
	if err != nil {
		return Rule{}, fmt.Errorf("remember the answer to %s: %w", req.SetID, err)
	}
	return out, nil
}

// patternSummary is how an approval rule's pattern reads: a tool rule as
// written, the very call as its tool and input.
func patternSummary(p string) string {
	if rest, ok := strings.CutPrefix(p, "exact:"); ok {
		return "this very call: " + rest
	}
	return p
}

// applyRules answers set, just stored pending in tx, by the newest rule in
// its run's scope that matches it, if any: the answers are stored as any
// other (by the rule's Provenance, on RuleSurface) and the use recorded.
// An approval rule answers only a call its pattern allows and the run's
// policy does not deny (checked now, whatever it was when the rule was
// made). It reports whether a rule answered.
func applyRules(ctx context.Context, tx *txn, set questions.Set, now time.Time) (applied bool, spec string, err error) {
	kind := questions.KindOf(set)
	if !rememberable(kind) || len(set.Questions) == 0 || (kind == questions.KindApproval && set.Tool == nil) {
		return false, "", nil
	}
	// One statement, with the run's spec and working directory (a row of
	// empty rule columns when no rule matches): every set stored pays it.
	rows, err := tx.QueryContext(ctx, `SELECT `+joinedRuleColumns+`, r.run_spec, r.run_workdir
		FROM (SELECT spec AS run_spec, workdir AS run_workdir FROM runs WHERE id = ?) r
		LEFT JOIN rules ru ON ru.fingerprint = ? AND ru.revoked_at = 0 AND ru.expires_at > ?
		AND (ru.scope = ? OR (ru.scope = ? AND ru.scope_value = r.run_spec AND ru.scope_value <> '') OR (ru.scope = ? AND ru.scope_value = r.run_workdir AND ru.scope_value <> ''))
		ORDER BY ru.created_at DESC, ru.id`, set.RunID, Fingerprint(set), nanos(now), ScopeAll, ScopeSpec, ScopeRepo)
	if err != nil {
		return false, "", fmt.Errorf("rules for question set %s: %w", set.ID, err)
	}
	var rules []Rule
	var rs runScope
	for rows.Next() {
		r, err := scanRule(rows, &rs.spec, &rs.workdir)
		if err != nil {
			rows.Close()
			return false, "", err
		}
		if r.ID != "" {
			rules = append(rules, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, "", err
	}
	var policy *approvals.Policy
	for _, r := range rules {
		if kind == questions.KindApproval {
			call := *set.Tool
			if !allowsCall(r.Pattern, call, rs.workdir) {
				continue
			}
			if policy == nil {
				if policy, err = loadPolicy(ctx, tx, set.RunID); err != nil {
					return false, "", err
				}
			}
			if policy.Decide(call.Tool, call.Input).Action == approvals.ActionDeny {
				continue // never past what the configuration or the spec denies
			}
		}
		if len(r.Answers) != len(set.Questions) {
			continue
		}
		resp := questions.Response{SetID: set.ID, By: r.Provenance(), Surface: RuleSurface, At: now}
		for i, a := range r.Answers {
			a.QuestionID = set.Questions[i].ID
			resp.Answers = append(resp.Answers, a)
		}
		if questions.CheckPartial(set, resp) != nil {
			continue // the set's options changed in a way the fingerprint does not see
		}
		if _, err := storeAnswers(ctx, tx, SetRecord{Set: set, State: SetPending}, map[string]answerRow{}, resp, now); err != nil {
			return false, "", err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rule_uses (rule_id, run_id, set_id, at) VALUES (?,?,?,?)`, r.ID, set.RunID, set.ID, nanos(now)); err != nil {
			return false, "", fmt.Errorf("record the use of rule %s: %w", r.ID, err)
		}
		return true, rs.spec, nil
	}
	return false, rs.spec, nil
}

// allowsCall reports whether an approval rule's pattern allows call.
func allowsCall(pattern string, call questions.ToolCall, workdir string) bool {
	if strings.HasPrefix(pattern, "exact:") {
		return approvals.AllowedForRun(pattern, call.Tool, call.Input)
	}
	return approvals.Match(pattern, call.Tool, call.Input, workdir)
}

// loadPolicy is the run's stored approvals policy (the zero policy when
// none is stored).
func loadPolicy(ctx context.Context, q querier, runID string) (*approvals.Policy, error) {
	var p approvals.Policy
	var body string
	err := q.QueryRowContext(ctx, `SELECT policy FROM run_policies WHERE run_id = ?`, runID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return &p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the approvals policy of run %s: %w", runID, err)
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		return nil, fmt.Errorf("the approvals policy of run %s: %w", runID, err)
	}
	return &p, nil
}

// RuleFilter selects rules.
type RuleFilter struct {
	// All includes revoked and expired rules.
	All bool
}

const ruleUseCount = `, (SELECT COUNT(*) FROM rule_uses u WHERE u.rule_id = rules.id)`

// Rules lists rules, newest first, with their use counts: only those in
// force unless f.All.
func (s *Store) Rules(ctx context.Context, f RuleFilter) ([]Rule, error) {
	q := `SELECT ` + ruleColumns + ruleUseCount + ` FROM rules`
	var args []any
	if !f.All {
		q += ` WHERE revoked_at = 0 AND expires_at > ?`
		args = append(args, nanos(s.now()))
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at DESC, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer rows.Close()
	var out []Rule
	for rows.Next() {
		var r Rule
		var uses int
		if r, err = scanRule(rows, &uses); err != nil {
			return nil, err
		}
		r.Uses = uses
		out = append(out, r)
	}
	return out, rows.Err()
}

// RuleByID returns a rule with its use count.
func (s *Store) RuleByID(ctx context.Context, id string) (Rule, error) {
	var uses int
	r, err := scanRule(s.db.QueryRowContext(ctx, `SELECT `+ruleColumns+ruleUseCount+` FROM rules WHERE id = ?`, strings.TrimSpace(id)), &uses)
	if errors.Is(err, sql.ErrNoRows) {
		return Rule{}, fmt.Errorf("rule %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Rule{}, fmt.Errorf("rule %s: %w", id, err)
	}
	r.Uses = uses
	return r, nil
}

// RevokeRule revokes a rule: it answers nothing from now on. A rule
// revoked before gives ErrRuleRevoked with the rule as it stands.
func (s *Store) RevokeRule(ctx context.Context, id, by string) (Rule, error) {
	now := s.now().UTC()
	var out Rule
	err := s.tx(ctx, func(tx *txn) error {
		r, err := scanRule(tx.QueryRowContext(ctx, `SELECT `+ruleColumns+` FROM rules WHERE id = ?`, strings.TrimSpace(id)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("rule %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		out = r
		if !r.RevokedAt.IsZero() {
			return fmt.Errorf("rule %s: %w (by %s on %s)", r.ID, ErrRuleRevoked, r.RevokedBy, r.RevokedAt.Format(time.RFC3339))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE rules SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at = 0`, nanos(now), by, r.ID); err != nil {
			return err
		}
		out.RevokedAt, out.RevokedBy = fromNanos(nanos(now)), by
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrRuleRevoked) {
			return out, err
		}
		return Rule{}, fmt.Errorf("revoke rule: %w", err)
	}
	return out, nil
}

// RuleUse is one set a rule answered.
type RuleUse struct {
	RuleID string
	RunID  string
	SetID  string
	At     time.Time
}

// RuleUses lists the uses of a rule (ruleID set) or the rules used in a
// run (runID set), oldest first.
func (s *Store) RuleUses(ctx context.Context, ruleID, runID string) ([]RuleUse, error) {
	q, arg := `SELECT rule_id, run_id, set_id, at FROM rule_uses WHERE rule_id = ? ORDER BY at, set_id`, ruleID
	if ruleID == "" {
		q, arg = `SELECT rule_id, run_id, set_id, at FROM rule_uses WHERE run_id = ? ORDER BY at, set_id`, runID
	}
	rows, err := s.db.QueryContext(ctx, q, arg)
	if err != nil {
		return nil, fmt.Errorf("rule uses: %w", err)
	}
	defer rows.Close()
	var out []RuleUse
	for rows.Next() {
		var u RuleUse
		var at int64
		if err := rows.Scan(&u.RuleID, &u.RunID, &u.SetID, &at); err != nil {
			return nil, err
		}
		u.At = fromNanos(at)
		out = append(out, u)
	}
	return out, rows.Err()
}

// DefaultRuleSuggestAfter is rules.suggest_after's default.
const DefaultRuleSuggestAfter = 5

// SetRuleSuggestAfter sets rules.suggest_after: after how many identical
// answers in a row to the same question in a spec's runs the next time it
// is asked suggests keeping the answer as a rule; 0 is the default, a
// negative number never suggests.
func (s *Store) SetRuleSuggestAfter(k int) { s.db.ruleSuggest.Store(int64(k)) }

func (d *db) ruleSuggestAfter() int {
	switch k := int(d.ruleSuggest.Load()); {
	case k == 0:
		return DefaultRuleSuggestAfter
	case k < 0:
		return 0
	default:
		return k
	}
}

// suggestWindow bounds the earlier sets a suggestion looks at.
const suggestWindow = 40

// suggestRule looks, for set just stored pending in tx (no rule answered
// it) in a run of spec, at the same question's latest answers in earlier
// runs of the spec: when the last k were given by people, the same way, the set's
// context gets a line that offers to keep that answer as a rule (every
// surface shows the context with the question). It reports whether it did.
// suggestQuery reads the newest answered sets of one fingerprint in a
// spec's other runs (TestSetFeedQueriesUseIndexes checks its plan).
const suggestQuery = `SELECT qs.id FROM question_sets qs JOIN runs r ON r.id = qs.run_id
	WHERE qs.fingerprint = ? AND qs.fingerprint <> '' AND qs.state IN (?, ?, ?) AND r.spec = ? AND qs.run_id <> ?
	ORDER BY qs.created_at DESC, qs.id LIMIT ?`

func suggestRule(ctx context.Context, tx *txn, set questions.Set, spec string, k int) (bool, error) {
	kind := questions.KindOf(set)
	if k <= 0 || spec == "" || !rememberable(kind) || len(set.Questions) == 0 {
		return false, nil
	}
	fp := questions.Fingerprint(set)
	if fp == "" {
		return false, nil
	}
	// One statement while there is nothing to suggest (every set of a
	// spec's run stored pays it), through the sets' fingerprint index: the
	// answers to this very question, never the spec's every set (a spec
	// with 30,000 runs waiting made each new set read them all).
	rows, err := tx.QueryContext(ctx, suggestQuery, fp, SetAnswered, SetResuming, SetResumed, spec, set.RunID, suggestWindow)
	if err != nil {
		return false, fmt.Errorf("earlier answers to question set %s: %w", set.ID, err)
	}
	var ids []any
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return false, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) < k {
		return false, err
	}
	recs, answers, err := loadSetsJoined(ctx, tx, `qs.id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return false, err
	}
	fp, call := Fingerprint(set), ""
	if kind == questions.KindApproval && set.Tool != nil {
		call = questions.ToolRule(*set.Tool)
	}
	var same []questions.Answer
	n := 0
	for i := len(recs) - 1; i >= 0 && n < k; i-- { // newest first
		rec := recs[i]
		if Fingerprint(rec.Set) != fp || (call != "" && (rec.Set.Tool == nil || questions.ToolRule(*rec.Set.Tool) != call)) {
			continue // another question of the spec
		}
		var got []questions.Answer
		byPerson := true
		for _, q := range rec.Set.Questions {
			a := answers[i][q.ID]
			byPerson = byPerson && a.srf != RuleSurface
			ans := a.a
			ans.QuestionID = ""
			got = append(got, ans)
		}
		if !byPerson || (same != nil && !sameAnswers(same, got)) {
			break // a rule's answer, or another answer: no streak
		}
		same = got
		n++
	}
	if n < k {
		return false, nil
	}
	set.Context = strings.TrimSpace(set.Context + "\n\n" + suggestion(same, n, spec))
	body, err := encodeJSON(set)
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET body = ? WHERE id = ?`, body, set.ID); err != nil {
		return false, fmt.Errorf("suggest a rule for question set %s: %w", set.ID, err)
	}
	return true, nil
}

// SuggestionPrefix starts the line a suggestion adds to a set's context.
const SuggestionPrefix = "Suggestion: answered "

func suggestion(answers []questions.Answer, n int, spec string) string {
	var parts []string
	for _, a := range answers {
		s := strings.Join(a.Labels, ", ")
		if a.Text != "" {
			s = strings.TrimPrefix(s+", "+a.Text, ", ")
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%s%q the last %d times in spec %s. To answer it so from now on, keep your answer as a rule: add `--remember spec:30d` to it (`orchestrator answer`, `/answer` on GitHub) or choose Remember in the web inbox.",
		SuggestionPrefix, strings.Join(parts, " / "), n, spec)
}

func sameAnswers(a, b []questions.Answer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Text != b[i].Text || strings.Join(a[i].Labels, "\x00") != strings.Join(b[i].Labels, "\x00") {
			return false
		}
	}
	return true
}
