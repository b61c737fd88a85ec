package main

import (
	"context"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
)

// TestQueueFeedbackReadsOldKeys: feedback recorded under an old key
// (github:<kind>:<id>, before keys named the repository) is the same
// event as its new key's: not queued again; other feedback is, once.
func TestQueueFeedbackReadsOldKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.CreateRun(ctx, store.Run{ID: "r1", Prompt: "do it", Status: store.RunDone}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	if _, created, err := st.QueueFollowUp(ctx, "r1", "github:pr-comment:41", "@alice", "github", "rename the flag", at); err != nil || !created {
		t.Fatalf("the old key's follow-up: created %v, %v", created, err)
	}
	old := github.Feedback{RunID: "r1", Key: "github:pr-comment:acme/app:41", OldKey: "github:pr-comment:41", By: "@alice", Text: "rename the flag", At: at}
	if created, err := queueFeedback(ctx, st, old); err != nil || created {
		t.Errorf("feedback recorded under its old key: created %v, %v; want false, nil", created, err)
	}
	fresh := github.Feedback{RunID: "r1", Key: "github:pr-comment:acme/app:42", OldKey: "github:pr-comment:42", By: "@alice", Text: "add a test", At: at}
	for i, want := range []bool{true, false} {
		if created, err := queueFeedback(ctx, st, fresh); err != nil || created != want {
			t.Errorf("new feedback, take %d: created %v, %v; want %v", i+1, created, err, want)
		}
	}
	fus, err := st.FollowUps(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, f := range fus {
		keys[f.EventKey] = true
	}
	if len(fus) != 2 || !keys[fresh.Key] || !keys[old.OldKey] {
		t.Errorf("follow-ups %+v, want the old key's and %s", fus, fresh.Key)
	}
}
