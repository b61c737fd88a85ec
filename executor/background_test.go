package executor

import "testing"

// TestBackgroundTasksFromTheCLIsLines: the set of tasks in flight follows
// the CLI's system lines (as CLI 2.1.330 prints them).
func TestBackgroundTasksFromTheCLIsLines(t *testing.T) {
	t.Parallel()
	lines := []struct {
		line string
		want int
	}{
		{`{"type":"system","subtype":"background_tasks_changed","tasks":[{"task_id":"bv6u1sjr6","task_type":"local_bash","description":"bg"}],"session_id":"s"}`, 1},
		{`{"type":"system","subtype":"task_started","task_id":"bv6u1sjr6","tool_use_id":"toolu_1","is_backgrounded":true,"task_type":"local_bash","session_id":"s"}`, 1},
		{`{"type":"system","subtype":"task_started","task_id":"second","session_id":"s"}`, 2},
		{`{"type":"system","subtype":"task_updated","task_id":"bv6u1sjr6","patch":{"status":"completed"},"session_id":"s"}`, 2},
		{`{"type":"system","subtype":"task_notification","task_id":"bv6u1sjr6","status":"completed","session_id":"s"}`, 1},
		{`{"type":"system","subtype":"background_tasks_changed","tasks":[],"session_id":"s"}`, 0},
	}
	var bg backgroundTasks
	p := &Parser{}
	for _, l := range lines {
		ev, err := p.ParseLine([]byte(l.line))
		if err != nil {
			t.Fatalf("%s: %v", l.line, err)
		}
		so, ok := ev.(*SystemOther)
		if !ok {
			t.Fatalf("%s: parsed as %T", l.line, ev)
		}
		bg.observe(so)
		if got := bg.inFlight(); got != l.want {
			t.Fatalf("after %s: %d in flight, want %d", l.line, got, l.want)
		}
	}
}
