package specs

import "testing"

// TestParseSlackSurface: a spec asks on Slack in its own channel, without
// a thread per run, and escalates to Slack.
func TestParseSlackSurface(t *testing.T) {
	t.Parallel()
	sp, err := Parse("s.md", []byte("---\nsurfaces:\n  - slack: {channel: C0123456789, thread_per_run: false}\n---\nT\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Surfaces) != 1 || sp.Surfaces[0].Name != "slack" || sp.Surfaces[0].Override.Value == nil {
		t.Fatalf("surfaces = %+v", sp.Surfaces)
	}
	if got := sp.Surfaces[0].Override.Keys; len(got) != 2 || got[0] != "channel" || got[1] != "thread_per_run" {
		t.Errorf("override keys = %v", got)
	}
	sp, err = Parse("s.md", []byte("---\nsurfaces: [terminal]\nescalate_to: slack\n---\nT\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sp.EscalateTo != "slack" {
		t.Errorf("escalate_to = %q", sp.EscalateTo)
	}
}
