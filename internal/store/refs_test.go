package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestPurgeRefsByRunAndAge: a ref written for a run is kept as long as
// the run, whatever its age, and a later write that names no run keeps
// its run; a ref of no run, or of a run that is gone, goes once it was
// last written before the cutoff; one written again since stays.
func TestPurgeRefsByRunAndAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	cutoff := now.Add(-24 * time.Hour)
	at := func(when time.Time) { s.now = func() time.Time { return when } }
	defer func() { s.now = time.Now }()

	at(old)
	if _, err := s.CreateRun(ctx, Run{ID: "live", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	gh, slack := s.RefsFor("github"), s.RefsFor("slack")
	for _, w := range []struct {
		refs     Refs
		run, key string
	}{
		{gh, "", "cursor/o/stale"},
		{gh, "", "cursor/o/again"},
		{slack, "live", "msg/live-s1"},
		{slack, "live", "shown/live-s1"},
		{slack, "gone", "msg/gone-s1"},
	} {
		if err := w.refs.SetRunRef(ctx, w.run, w.key, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	at(now)
	if err := gh.SetRef(ctx, "cursor/o/again", "v2"); err != nil {
		t.Fatal(err)
	}
	if err := gh.SetRef(ctx, "cursor/o/new", "v1"); err != nil {
		t.Fatal(err)
	}
	if err := slack.SetRef(ctx, "shown/live-s1", "v2"); err != nil { // no run named: it keeps "live"
		t.Fatal(err)
	}
	// The same key of another surface is another ref.
	if err := gh.SetRunRef(ctx, "live", "msg/live-s1", "gh"); err != nil {
		t.Fatal(err)
	}

	n, err := s.PurgeRefs(ctx, cutoff)
	if err != nil || n != 2 {
		t.Fatalf("PurgeRefs = %d, %v; want 2 (the stale cursor, the gone run's message)", n, err)
	}
	left := func() []string {
		rows, err := s.db.QueryContext(ctx, `SELECT surface, key, value, run_id FROM surface_refs ORDER BY surface, key`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var sf, k, v, r string
			if err := rows.Scan(&sf, &k, &v, &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, sf+" "+k+"="+v+" run "+r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := []string{
		"github cursor/o/again=v2 run ",
		"github cursor/o/new=v1 run ",
		"github msg/live-s1=gh run live",
		"slack msg/live-s1=v1 run live",
		"slack shown/live-s1=v2 run live",
	}
	if got := left(); !slices.Equal(got, want) {
		t.Fatalf("refs left:\n%q\nwant\n%q", got, want)
	}
	if n, err := s.PurgeRefs(ctx, cutoff); err != nil || n != 0 {
		t.Fatalf("second PurgeRefs = %d, %v; want nothing", n, err)
	}

	// The run purged, its refs go with it; the refs of no run stay.
	at(old)
	if err := s.UpdateRun(ctx, "live", RunUpdate{Status: RunDone}); err != nil {
		t.Fatal(err)
	}
	at(now)
	if p, err := s.PurgeRuns(ctx, cutoff, 0); err != nil || !slices.Equal(p.Runs, []string{"live"}) {
		t.Fatalf("PurgeRuns = %+v, %v; want [live]", p, err)
	}
	if got := left(); !slices.Equal(got, want[:2]) {
		t.Fatalf("refs left after the run's purge:\n%q\nwant\n%q", got, want[:2])
	}
}
