package webstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
)

// RuleBook is web.RuleBook on the store: the remembered decisions
// (docs/rules.md). A person signed in to the web inbox may answer every
// run, so they may keep a rule of any scope.
type RuleBook struct {
	Store *store.Store
	// Now defaults to time.Now.
	Now func() time.Time
}

var _ web.RuleBook = RuleBook{}

// Rules implements web.RuleBook.
func (b RuleBook) Rules(ctx context.Context) ([]web.RuleView, error) {
	rules, err := b.Store.Rules(ctx, store.RuleFilter{All: true})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if b.Now != nil {
		now = b.Now()
	}
	out := make([]web.RuleView, 0, len(rules))
	for _, r := range rules {
		state := "active"
		switch {
		case !r.RevokedAt.IsZero():
			state = "revoked"
		case !now.Before(r.ExpiresAt):
			state = "expired"
		}
		out = append(out, web.RuleView{ID: r.ID, Scope: r.ScopeText(), Decides: decides(r), MadeBy: r.MadeBy, Surface: r.Surface,
			FromRun: r.FromRun, State: state, Uses: r.Uses, Created: r.CreatedAt, Expires: r.ExpiresAt})
	}
	return out, nil
}

// decides says what a rule answers, to which question.
func decides(r store.Rule) string {
	var parts []string
	for _, a := range r.Answers {
		s := strings.Join(a.Labels, ", ")
		if a.Text != "" {
			s = strings.TrimPrefix(s+", "+a.Text, ", ")
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%s → %s", r.Summary, strings.Join(parts, " / "))
}

// Revoke implements web.RuleBook.
func (b RuleBook) Revoke(ctx context.Context, id, by string) error {
	_, err := b.Store.RevokeRule(ctx, id, by)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("rule %s: %w", id, web.ErrNotFound)
	}
	return err
}

// Remember implements web.RuleBook.
func (b RuleBook) Remember(ctx context.Context, setID, by, remember string) (string, error) {
	scope, life, err := store.ParseRemember(remember)
	if err != nil {
		return "", err
	}
	r, err := b.Store.Remember(ctx, store.RuleRequest{SetID: setID, Scope: scope, Lifetime: life, By: by, Surface: web.SurfaceName})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Kept as rule %s for %s until %s", r.ID, r.ScopeText(), r.ExpiresAt.UTC().Format("2006-01-02")), nil
}
