package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// `orchestrator rules`: the remembered decisions (docs/rules.md).

func (m *Main) newRulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "List, show and revoke remembered decisions (answer --remember)",
		Long: `rules manages the decisions people kept when answering ('answer QID 1
--remember spec:7d'): each answers the same question in its scope at once,
asking nobody, until it expires or is revoked. Every use is recorded, and each
run's decision log ('show', the pull request) names the rule that answered.`,
		Annotations: noSurfacesAnnotation(),
	}
	var all, asJSON bool
	list := &cobra.Command{
		Use:         "list",
		Short:       "List the rules in force (--all: revoked and expired ones too)",
		Annotations: noSurfacesAnnotation(),
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runRulesList(cmd.Context(), all, asJSON)
		},
	}
	list.Flags().BoolVar(&all, "all", false, "list revoked and expired rules too")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON (docs/json.md)")
	show := &cobra.Command{
		Use:         "show RULE",
		Short:       "Show a rule and the question sets it answered",
		Annotations: noSurfacesAnnotation(),
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runRulesShow(cmd.Context(), args[0])
		},
	}
	revoke := &cobra.Command{
		Use:         "revoke RULE",
		Short:       "Revoke a rule: the question it answered is asked again",
		Annotations: noSurfacesAnnotation(),
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runRulesRevoke(cmd.Context(), args[0])
		},
	}
	cmd.AddCommand(list, show, revoke)
	return cmd
}

// jsonRule is a rule in `rules list --json` (docs/json.md).
type jsonRule struct {
	ID         string           `json:"id"`
	Scope      string           `json:"scope"`
	ScopeValue string           `json:"scope_value,omitempty"`
	Kind       string           `json:"kind"`
	Question   string           `json:"question"`
	Pattern    string           `json:"pattern,omitempty"`
	Answers    []jsonRuleAnswer `json:"answers"`
	MadeBy     string           `json:"made_by"`
	Surface    string           `json:"surface"`
	FromRun    string           `json:"from_run,omitempty"`
	FromSet    string           `json:"from_set,omitempty"`
	CreatedAt  time.Time        `json:"created_at"`
	ExpiresAt  time.Time        `json:"expires_at"`
	RevokedAt  *time.Time       `json:"revoked_at,omitempty"`
	RevokedBy  string           `json:"revoked_by,omitempty"`
	Active     bool             `json:"active"`
	Uses       int              `json:"uses"`
}

type jsonRuleAnswer struct {
	Labels []string `json:"labels,omitempty"`
	Text   string   `json:"text,omitempty"`
}

// rulesReport is the output of rules list --json.
type rulesReport struct {
	V     int        `json:"v"`
	Rules []jsonRule `json:"rules"`
}

func newJSONRule(r store.Rule, now time.Time) jsonRule {
	out := jsonRule{ID: r.ID, Scope: r.Scope, ScopeValue: r.ScopeValue, Kind: r.Kind, Question: questions.Printable(r.Summary),
		Pattern: questions.Printable(r.Pattern), Answers: []jsonRuleAnswer{}, MadeBy: questions.Printable(r.MadeBy), Surface: r.Surface,
		FromRun: r.FromRun, FromSet: r.FromSet, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
		RevokedBy: questions.Printable(r.RevokedBy), Active: r.Active(now), Uses: r.Uses}
	if !r.RevokedAt.IsZero() {
		t := r.RevokedAt.UTC()
		out.RevokedAt = &t
	}
	for _, a := range r.Answers {
		out.Answers = append(out.Answers, jsonRuleAnswer{Labels: printableAll(a.Labels), Text: questions.Printable(a.Text)})
	}
	return out
}

// ruleWhat says what a rule decides, in a few words.
func ruleWhat(r store.Rule) string {
	var parts []string
	for _, a := range r.Answers {
		s := strings.Join(a.Labels, ", ")
		if a.Text != "" {
			if s != "" {
				s += ", "
			}
			s += a.Text
		}
		parts = append(parts, s)
	}
	ans := strings.Join(parts, " / ")
	if r.Kind == questions.KindApproval {
		// A grant: "Allow `Bash(go test:*)`".
		switch ans {
		case questions.AllowOnce, questions.AllowForRun:
			return fmt.Sprintf("Allow `%s`", r.Summary)
		case questions.Deny:
			return fmt.Sprintf("Deny `%s`", r.Summary)
		}
		return fmt.Sprintf("%q to `%s`", ans, r.Summary)
	}
	return fmt.Sprintf("%q to %q", ans, r.Summary)
}

func ruleState(r store.Rule, now time.Time) string {
	switch {
	case !r.RevokedAt.IsZero():
		return "revoked"
	case !now.Before(r.ExpiresAt):
		return "expired"
	}
	return "active"
}

func (m *Main) runRulesList(ctx context.Context, all, asJSON bool) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	rules, err := st.Rules(ctx, store.RuleFilter{All: all})
	if err != nil {
		return err
	}
	now := time.Now()
	if asJSON {
		rep := rulesReport{V: jsonVersion, Rules: []jsonRule{}}
		for _, r := range rules {
			rep.Rules = append(rep.Rules, newJSONRule(r, now))
		}
		return writeJSON(m.Stdout, rep)
	}
	if len(rules) == 0 {
		fmt.Fprintln(m.Stdout, "no rules.")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tSCOPE\tSTATE\tEXPIRES\tUSES\tBY\tDECIDES")
	for _, r := range rules {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, safe(r.ScopeText(), 40), ruleState(r, now), r.ExpiresAt.UTC().Format("2006-01-02 15:04"),
			r.Uses, safe(r.MadeBy, 30), safe(ruleWhat(r), 80))
	}
	return tw.Flush()
}

func (m *Main) runRulesShow(ctx context.Context, id string) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	r, err := st.RuleByID(ctx, id)
	if err != nil {
		return err
	}
	uses, err := st.RuleUses(ctx, r.ID, "")
	if err != nil {
		return err
	}
	now := time.Now()
	w := m.Stdout
	fmt.Fprintf(w, "rule %s (%s)\n", r.ID, ruleState(r, now))
	fmt.Fprintf(w, "  decides: %s\n", safe(ruleWhat(r), 300))
	fmt.Fprintf(w, "  scope:   %s\n", safe(r.ScopeText(), 200))
	fmt.Fprintf(w, "  made by: %s on %s at %s, from run %s (set %s)\n", safe(r.MadeBy, 60), r.Surface, r.CreatedAt.UTC().Format(time.RFC3339), r.FromRun, r.FromSet)
	fmt.Fprintf(w, "  expires: %s\n", r.ExpiresAt.UTC().Format(time.RFC3339))
	if !r.RevokedAt.IsZero() {
		fmt.Fprintf(w, "  revoked: by %s at %s\n", safe(r.RevokedBy, 60), r.RevokedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "  used: %d\n", len(uses))
	for _, u := range uses {
		fmt.Fprintf(w, "    %s  run %s, set %s\n", u.At.UTC().Format(time.RFC3339), u.RunID, u.SetID)
	}
	return nil
}

func (m *Main) runRulesRevoke(ctx context.Context, id string) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	r, err := st.RevokeRule(ctx, id, whoami())
	if errors.Is(err, store.ErrRuleRevoked) {
		return fmt.Errorf("rule %s was revoked already, by %s at %s", r.ID, r.RevokedBy, r.RevokedAt.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "revoked rule %s: %s is asked again.\n", r.ID, safe(ruleWhat(r), 200))
	return nil
}

// lifetimeText says a rule's lifetime in days when it is whole days.
func lifetimeText(d time.Duration) string {
	if day := 24 * time.Hour; d >= day && d%day == 0 {
		if d == day {
			return "1 day"
		}
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}
