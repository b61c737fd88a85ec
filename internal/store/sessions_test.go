package store

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSessionsRoundTrip: a saved session record comes back byte for byte
// (binary included: BYTEA on PostgreSQL), a later save replaces it, records
// are per run and session, a missing one is ok=false, and a record over
// the limit is refused with its size named.
func TestSessionsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	for _, id := range []string{"r1", "r2"} {
		if _, err := s.CreateRun(ctx, Run{ID: id, Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := s.Session(ctx, "r1", "s1"); ok || err != nil {
		t.Fatalf("before any save: %v %v", ok, err)
	}
	first := []byte(strings.Repeat(`{"type":"user","text":"héllo"}`+"\n", 2000) + "\x00\xff")
	if err := s.SaveSession(ctx, "r1", "s1", first); err != nil {
		t.Fatal(err)
	}
	longer := append(bytes.Clone(first), "more\n"...)
	if err := s.SaveSession(ctx, "r1", "s1", longer); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSession(ctx, "r2", "s1", []byte("other run\n")); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := open(t, dir).Session(ctx, "r1", "s1"); err != nil || !ok || !bytes.Equal(got, longer) {
		t.Fatalf("read back from another open: %d bytes, %v, %v; want %d", len(got), ok, err, len(longer))
	}
	if got, _, _ := s.Session(ctx, "r2", "s1"); string(got) != "other run\n" {
		t.Fatalf("r2's record: %q", got)
	}
	if _, ok, err := s.Session(ctx, "r1", "s2"); ok || err != nil {
		t.Fatalf("another session id: %v %v", ok, err)
	}
	if err := s.SaveSession(ctx, "r1", "s1", make([]byte, maxSessionBytes+1)); err == nil || !strings.Contains(err.Error(), "r1") {
		t.Fatalf("a record over the limit: %v", err)
	}
}
