package store

import (
	"context"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// A comment's decision is recorded once (the first wins), survives a
// reopen, and sets are open only while pending.
func TestCommentDecisionsFirstWinsAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	const key = "github/acme/app/comment/1006"
	if d, err := s.CommentDecision(ctx, key); err != nil || d != "" {
		t.Fatalf("undecided comment: %q, %v", d, err)
	}
	if d, err := s.DecideComment(ctx, key, "ambiguous"); err != nil || d != "ambiguous" {
		t.Fatalf("DecideComment = %q, %v", d, err)
	}
	if d, err := s.DecideComment(ctx, key, "taken"); err != nil || d != "ambiguous" {
		t.Fatalf("second DecideComment = %q, %v; want the first decision kept", d, err)
	}
	if _, err := s.DecideComment(ctx, "", "taken"); err == nil {
		t.Error("DecideComment with no key succeeded")
	}
	set := newWaitingRun(t, s, "r1", "qa")
	if open, err := s.SetOpen(ctx, set.ID); err != nil || !open {
		t.Fatalf("SetOpen(pending) = %v, %v", open, err)
	}
	if open, err := s.SetOpen(ctx, "nope"); err != nil || open {
		t.Fatalf("SetOpen(unknown) = %v, %v", open, err)
	}
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "t", Surface: "terminal",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	if open, err := s.SetOpen(ctx, set.ID); err != nil || open {
		t.Fatalf("SetOpen(answered) = %v, %v", open, err)
	}
	s.Close()
	s2 := open(t, dir)
	if d, err := s2.CommentDecision(ctx, key); err != nil || d != "ambiguous" {
		t.Fatalf("after reopen: %q, %v", d, err)
	}
}

// SetAnswer gives the answer a set was closed with, with its author, surface
// and time as given (a GitHub comment's), after a reopen too; none for a
// set pending or unknown.
func TestSetAnswerIsTheAnswerTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	set := newWaitingRun(t, s, "r1", "qa")
	if _, ok, err := s.SetAnswer(ctx, set.ID); err != nil || ok {
		t.Fatalf("SetAnswer(pending) = %v, %v", ok, err)
	}
	if _, ok, err := s.SetAnswer(ctx, "nope"); err != nil || ok {
		t.Fatalf("SetAnswer(unknown) = %v, %v", ok, err)
	}
	at := time.Date(2026, 11, 26, 10, 0, 7, 0, time.UTC)
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "@alice", Surface: "github", At: at,
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	got, ok, err := s.SetAnswer(ctx, set.ID)
	if err != nil || !ok || got.By != "@alice" || got.Surface != "github" || !got.At.Equal(at) {
		t.Fatalf("SetAnswer = %+v, %v, %v", got, ok, err)
	}
}
