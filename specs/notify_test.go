package specs

import (
	"strings"
	"testing"
)

func TestParseNotifyAndPauseAfter(t *testing.T) {
	t.Parallel()
	sp, err := Parse("nightly.md", []byte("---\nname: nightly\nschedule: \"0 3 * * *\"\npause_after_failures: 2\nnotify:\n  surfaces: [failed]\n  webhooks:\n    - url: https://h.example.com/x\n      events: [done]\n---\nDo it.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sp.PauseAfterFailures == nil || *sp.PauseAfterFailures != 2 || sp.Notify == nil ||
		len(sp.Notify.Surfaces) != 1 || sp.Notify.Webhooks[0].Events[0] != "done" {
		t.Fatalf("spec = %+v", sp.Sections)
	}
	_, err = Parse("bad.md", []byte("---\nname: bad\npause_after_failures: -1\nnotify:\n  webhooks:\n    - url: http://h.example.com/x\n---\nDo it.\n"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"bad.md:3: pause_after_failures: must not be negative", "bad.md:6: notify.webhooks[0].url: plain http only to a loopback"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
