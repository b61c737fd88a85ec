package store

import (
	"context"
	"testing"
)

// TestInbox: an event kept twice (a redelivery) is listed once, apart
// from another source's; dropped, it is gone.
func TestInbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	in, other := s.InboxFor("slack"), s.InboxFor("other")
	for range 2 {
		if err := in.Keep(ctx, "Ev1", []byte(`{"event_id":"Ev1"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Keep(ctx, "Ev2", []byte(`{"event_id":"Ev2"}`)); err != nil {
		t.Fatal(err)
	}
	if err := other.Keep(ctx, "Ev1", []byte(`x`)); err != nil {
		t.Fatal(err)
	}
	kept, err := in.Kept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0].Key != "Ev1" || string(kept[0].Body) != `{"event_id":"Ev1"}` || kept[1].Key != "Ev2" {
		t.Fatalf("kept = %+v, want Ev1 then Ev2", kept)
	}
	if err := in.Drop(ctx, "Ev1"); err != nil {
		t.Fatal(err)
	}
	if kept, err = in.Kept(ctx); err != nil || len(kept) != 1 || kept[0].Key != "Ev2" {
		t.Fatalf("after a drop: %+v %v", kept, err)
	}
	if kept, err = other.Kept(ctx); err != nil || len(kept) != 1 || string(kept[0].Body) != "x" {
		t.Fatalf("the other source: %+v %v", kept, err)
	}
	if err := in.Keep(ctx, "", nil); err == nil {
		t.Error("an event without a key was kept")
	}
}
