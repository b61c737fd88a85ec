package slack

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ surfaces.ProgressReporter = (*Surface)(nil)

// progressEvery is the least time between two edits of a run's status
// message (a final progress is always shown).
const progressEvery = 10 * time.Second

// progressState is where a run's status message stands.
type progressState struct {
	mu   sync.Mutex
	ts   string
	at   time.Time
	last string
}

// Progress implements surfaces.ProgressReporter: with a thread per run,
// one status message in the run's thread says how the run is going; it is
// edited at most every 10s, and the final progress always.
func (s *Surface) Progress(ctx context.Context, p surfaces.RunProgress) error {
	if p.RunID == "" || !s.threaded(ctx, p.RunID) {
		return nil
	}
	channel, thread, err := s.runThread(ctx, p.RunID, p.Title, false)
	if err != nil || thread == "" {
		return s.redact(err) // no thread: nothing was asked in it yet
	}
	s.mu.Lock()
	if s.progress == nil {
		s.progress = map[string]*progressState{}
	}
	ps := s.progress[p.RunID]
	if ps == nil {
		ps = &progressState{}
		s.progress[p.RunID] = ps
	}
	if p.Final {
		delete(s.progress, p.RunID)
	}
	s.mu.Unlock()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	text := progressText(p)
	if text == ps.last || (!p.Final && ps.ts != "" && time.Since(ps.at) < progressEvery) {
		return nil
	}
	key := "slack/" + s.cfg.ChannelID + "/progress/" + p.RunID
	if ps.ts == "" {
		if v, ok, err := s.refs.Ref(ctx, key); err != nil {
			return err
		} else if ok {
			ps.ts = v
		}
	}
	if ps.ts == "" {
		err = s.call(ctx, "post the run's status", func(ctx context.Context) error {
			_, ts, err := s.api.PostMessageContext(ctx, channel, slack.MsgOptionTS(thread), slack.MsgOptionText(text, false))
			ps.ts = ts
			return err
		})
		if err == nil {
			err = surfaces.SetRunRef(ctx, s.refs, p.RunID, key, ps.ts)
		}
	} else {
		err = s.call(ctx, "edit the run's status", func(ctx context.Context) error {
			_, _, _, err := s.api.UpdateMessageContext(ctx, channel, ps.ts, slack.MsgOptionText(text, false))
			return err
		})
	}
	if err != nil {
		return err
	}
	ps.at, ps.last = time.Now(), text
	return nil
}

func progressText(p surfaces.RunProgress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "⏳ *%s*", escape(p.Step, 80))
	if p.Turn > 0 {
		fmt.Fprintf(&b, " · turn %d", p.Turn)
	}
	if p.ToolUses > 0 {
		fmt.Fprintf(&b, " · %d tool uses", p.ToolUses)
	}
	if p.LastTool != "" {
		fmt.Fprintf(&b, " · last: `%s`", strings.ReplaceAll(plain(p.LastTool, 120), "`", "'"))
	}
	if p.CostUSD > 0 {
		fmt.Fprintf(&b, " · $%.4f", p.CostUSD)
	}
	if p.Elapsed > 0 {
		fmt.Fprintf(&b, " · %s", p.Elapsed.Round(time.Second))
	}
	if len(p.Refused) > 0 {
		fmt.Fprintf(&b, "\n%d tool call(s) refused", len(p.Refused)+p.RefusedMore)
	}
	if link := prLink(p.PRURL); p.Final && link != "" {
		b.WriteString("\n🔗 Pull request: " + link)
	}
	return b.String()
}
