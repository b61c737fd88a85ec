package surfaces

import (
	"context"
	"testing"
)

type plainRefs map[string]string

func (r plainRefs) SetRef(_ context.Context, key, value string) error { r[key] = value; return nil }

type runRefs struct {
	plainRefs
	runs map[string]string
}

func (r runRefs) SetRunRef(_ context.Context, runID, key, value string) error {
	r.plainRefs[key], r.runs[key] = value, runID
	return nil
}

// TestSetRunRef: refs that keep runs are told the run; a ref of no run,
// or refs that keep none, take a plain SetRef.
func TestSetRunRef(t *testing.T) {
	ctx := context.Background()
	r := runRefs{plainRefs{}, map[string]string{}}
	if err := SetRunRef(ctx, r, "run-1", "msg/s1", "C/1"); err != nil || r.plainRefs["msg/s1"] != "C/1" || r.runs["msg/s1"] != "run-1" {
		t.Fatalf("with runs: %v, %v, %v", err, r.plainRefs, r.runs)
	}
	if err := SetRunRef(ctx, r, "", "cursor", "x"); err != nil || r.plainRefs["cursor"] != "x" {
		t.Fatalf("no run: %v, %v", err, r.plainRefs)
	}
	if _, ok := r.runs["cursor"]; ok {
		t.Fatalf("a ref of no run was stored as a run's: %v", r.runs)
	}
	p := plainRefs{}
	if err := SetRunRef(ctx, p, "run-1", "msg/s1", "C/1"); err != nil || p["msg/s1"] != "C/1" {
		t.Fatalf("without runs: %v, %v", err, p)
	}
}
