package webstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/web"
	"github.com/orchestrator-dev/orchestrator/questions"
)

func TestRuleBookOnTheStore(t *testing.T) {
	b, st := waitingRun(t)
	ctx := context.Background()
	d, err := b.Offer(ctx, answer("alice", questions.Answer{QuestionID: "qa", Labels: []string{"JWT"}}, questions.Answer{QuestionID: "qb", Labels: []string{"chi", "sqlc"}}))
	if err != nil || !d.Taken || !d.Closed {
		t.Fatalf("offer: %+v %v", d, err)
	}
	book := RuleBook{Store: st}
	if _, err := book.Remember(ctx, "r1-s1", "bob", "spec:7d"); err == nil {
		t.Error("bob kept alice's answer")
	}
	if _, err := book.Remember(ctx, "r1-s1", "alice", "team:7d"); err == nil {
		t.Error("an unknown scope was kept")
	}
	text, err := book.Remember(ctx, "r1-s1", "alice", "spec:7d")
	if err != nil || !strings.Contains(text, "for spec nightly until ") {
		t.Fatalf("remember: %q %v", text, err)
	}
	rules, err := book.Rules(ctx)
	if err != nil || len(rules) != 1 || rules[0].State != "active" || rules[0].MadeBy != "alice" || rules[0].Surface != web.SurfaceName ||
		rules[0].Decides != "Which auth method? → JWT / chi, sqlc" {
		t.Fatalf("rules = %+v, %v", rules, err)
	}
	if err := book.Revoke(ctx, rules[0].ID, "carol"); err != nil {
		t.Fatal(err)
	}
	if rules, _ := book.Rules(ctx); rules[0].State != "revoked" {
		t.Errorf("after revoke: %+v", rules)
	}
	if err := book.Revoke(ctx, "nope", "carol"); !errors.Is(err, web.ErrNotFound) {
		t.Errorf("revoke unknown: %v", err)
	}
}
