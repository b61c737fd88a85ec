package github

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ surfaces.ProgressReporter = (*Surface)(nil)

// DefaultProgressInterval is the least time between two edits of a run's
// status comment.
const DefaultProgressInterval = 10 * time.Second

// progressState is a run's status comment: where it is, when it was last
// written, and the progress waiting for the next allowed write.
type progressState struct {
	mu      sync.Mutex
	issue   int
	comment int64
	last    time.Time
	pending *surfaces.RunProgress
	timer   *time.Timer
}

func progressMarker(runID string) string {
	return fmt.Sprintf("<!-- orchestrator:progress run=%s -->", markerValue(runID))
}

func (s *Surface) progressState(runID string) *progressState {
	key := s.key("progress\x00" + runID)
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	st := s.c.progress[key]
	if st == nil {
		st = &progressState{}
		s.c.progress[key] = st
	}
	return st
}

// Progress implements surfaces.ProgressReporter. With SurfaceConfig.Progress
// set it keeps one status comment per run on the run's issue, written at
// once the first time, then at most every ProgressInterval (the latest
// progress is kept and written when the interval has passed), and at once
// for the final one. After a restart it finds the run's comment again by its
// hidden marker.
func (s *Surface) Progress(ctx context.Context, p surfaces.RunProgress) error {
	if !s.cfg.Progress || p.RunID == "" {
		return nil
	}
	st := s.progressState(p.RunID)
	st.mu.Lock()
	defer st.mu.Unlock()
	now := s.c.now()
	if !p.Final && !st.last.IsZero() && now.Sub(st.last) < s.c.progressIv {
		st.pending = &p
		if st.timer == nil {
			st.timer = time.AfterFunc(st.last.Add(s.c.progressIv).Sub(now), func() { s.flushProgress(st) })
		}
		return nil
	}
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	st.pending = nil
	err := s.writeProgress(ctx, st, p)
	if p.Final {
		// The drive is over: a later one finds the comment by its marker.
		s.c.mu.Lock()
		delete(s.c.progress, s.key("progress\x00"+p.RunID))
		s.c.mu.Unlock()
	}
	return err
}

// flushProgress writes the progress that waited for the interval.
func (s *Surface) flushProgress(st *progressState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.timer = nil
	if st.pending == nil {
		return
	}
	p := *st.pending
	st.pending = nil
	ctx, cancel := context.WithTimeout(s.c.ctx, time.Minute)
	defer cancel()
	if err := s.writeProgress(ctx, st, p); err != nil {
		s.c.log.Warn("github: update the run's status comment", "run", p.RunID, "err", err)
	}
}

// writeProgress creates or edits the run's status comment. st.mu is held.
func (s *Surface) writeProgress(ctx context.Context, st *progressState, p surfaces.RunProgress) error {
	if st.issue == 0 {
		n, err := s.issueFor(ctx, questions.Set{ID: p.RunID, RunID: p.RunID, Title: p.Title}, true)
		if err != nil {
			return err
		}
		st.issue = n
	}
	if st.comment == 0 {
		id, err := s.findProgressComment(ctx, st.issue, p.RunID)
		if err != nil {
			return err
		}
		st.comment = id
	}
	marker := progressMarker(p.RunID)
	body := renderProgress(p) + "\n\n" + marker
	if st.comment == 0 {
		c, err := s.createComment(ctx, st.issue, body, marker)
		if err != nil {
			return fmt.Errorf("github: post the status comment of run %s on %s#%d: %w", p.RunID, s.repo(), st.issue, err)
		}
		st.comment = c.GetID()
	} else if _, _, err := s.c.api.Issues.EditComment(ctx, s.owner, s.name, st.comment, &gh.IssueComment{Body: gh.String(body)}); err != nil {
		return fmt.Errorf("github: edit the status comment of run %s on %s: %w", p.RunID, s.repo(), err)
	}
	st.last = s.c.now()
	return nil
}

// findProgressComment looks for the run's status comment on issue.
func (s *Surface) findProgressComment(ctx context.Context, issue int, runID string) (int64, error) {
	comments, _, err := s.listIssueComments(ctx, issue)
	if err != nil {
		return 0, fmt.Errorf("github: find the status comment of run %s: %w", runID, err)
	}
	me, err := s.c.self(ctx)
	if err != nil {
		return 0, fmt.Errorf("github: find the status comment of run %s: %w", runID, err)
	}
	return findMarked(me.ownOnly(comments), progressMarker(runID)).GetID(), nil
}

// renderProgress is the status comment's text, without its marker.
func renderProgress(p surfaces.RunProgress) string {
	var b strings.Builder
	icon := "⏳"
	if p.Final {
		icon = "✅"
		if step := strings.ToLower(p.Step); strings.HasPrefix(step, "failed") || strings.HasPrefix(step, "cancelled") {
			icon = "❌"
		} else if !strings.HasPrefix(step, "done") {
			icon = "⏸"
		}
	}
	title := truncate(cleanLine(p.Title), 200)
	if title == "" {
		title = "run " + truncate(cleanLine(p.RunID), 100)
	}
	fmt.Fprintf(&b, "### %s %s\n\n", icon, title)
	facts := []string{"**" + truncate(cleanLine(p.Step), 200) + "**"}
	if p.ToolUses > 0 {
		facts = append(facts, fmt.Sprintf("%d tool use%s", p.ToolUses, plural(p.ToolUses)))
	}
	if p.LastTool != "" && !p.Final {
		facts = append(facts, "last: `"+strings.ReplaceAll(truncate(cleanLine(p.LastTool), 120), "`", "'")+"`")
	}
	facts = append(facts, fmt.Sprintf("$%.4f", p.CostUSD), p.Elapsed.Round(time.Second).String())
	b.WriteString(strings.Join(facts, " · "))
	fmt.Fprintf(&b, "\n\n_Run `%s`, turn %d._", strings.ReplaceAll(cleanLine(p.RunID), "`", "'"), p.Turn)
	if u := cleanLine(p.PRURL); p.Final && (strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")) {
		b.WriteString("\n\nPull request: " + u)
	}
	if n := len(p.Refused) + p.RefusedMore; n > 0 {
		fmt.Fprintf(&b, "\n\n✋ Refused by the CLI: %d tool call%s (allow what the task needs with `allowed_tools`):", n, plural(n))
		for _, c := range p.Refused {
			call := truncate(cleanLine(c.Tool), 60)
			if sum := truncate(cleanLine(c.Summary), 100); sum != "" {
				call += ": " + sum
			}
			fmt.Fprintf(&b, "\n- `%s` (turn %d)", strings.ReplaceAll(call, "`", "'"), c.Turn)
		}
		if p.RefusedMore > 0 {
			fmt.Fprintf(&b, "\n- and %d more", p.RefusedMore)
		}
	}
	if p.Final && strings.TrimSpace(p.Summary) != "" {
		fmt.Fprintf(&b, "\n\n<details><summary>Summary</summary>\n\n%s\n\n</details>", truncate(clean(p.Summary), 4000))
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
