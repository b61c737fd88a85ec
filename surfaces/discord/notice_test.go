package discord

import (
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
)

// TestNoticeOncePerKey: a notice goes to the channel (the run has no
// thread), once per key, also from a new process sharing the refs, with
// no mention.
func TestNoticeOncePerKey(t *testing.T) {
	srv := discordtest.NewServer(t)
	refs := &MemoryRefs{}
	for i := 0; i < 2; i++ {
		s := newSurface(t, srv, refs)
		if err := s.Notice(testCtx(t), "run-7", "nightly/paused/run-7", "The schedule of spec nightly is paused. @everyone"); err != nil {
			t.Fatal(err)
		}
	}
	var got int
	for _, m := range srv.Messages(discordtest.ChannelID) {
		if strings.Contains(m.Content, "The schedule of spec nightly is paused.") {
			got++
		}
	}
	if got != 1 {
		t.Fatalf("%d notices, want 1", got)
	}
}
