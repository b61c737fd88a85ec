package slack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Keys under which Refs remember things, scoped by channel.
func (s *Surface) msgKey(setID string) string {
	return "slack/" + s.cfg.ChannelID + "/message/" + setID
}

func (s *Surface) answerKey(setID, qID string) string {
	return "slack/" + s.cfg.ChannelID + "/answer/" + setID + "/" + qID
}

func (s *Surface) shownKey(setID string) string {
	return "slack/" + s.cfg.ChannelID + "/shown/" + setID
}

func (s *Surface) threadKey(runID string) string {
	return "slack/" + s.cfg.ChannelID + "/thread/" + runID
}

// postTimeout bounds posting a message once started.
const postTimeout = 30 * time.Second

// ensurePosted finds or posts the message of st, and loads the answers
// taken before a restart.
func (s *Surface) ensurePosted(ctx context.Context, st *setState) error {
	select {
	case st.posting <- struct{}{}:
		defer func() { <-st.posting }()
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	known := st.ts != ""
	s.mu.Unlock()
	if known {
		return nil
	}
	set := st.set
	prior := map[string]*answered{}
	for _, q := range set.Questions {
		v, ok, err := s.refs.Ref(ctx, s.answerKey(set.ID, q.ID))
		if err != nil {
			return fmt.Errorf("slack: ask %s: read answer of %s: %w", set.ID, q.ID, err)
		}
		var a answered
		if ok && json.Unmarshal([]byte(v), &a) == nil {
			prior[q.ID] = &a
		}
	}
	channel, ts := "", ""
	// baseline is what the message shows when no edit was remembered.
	_, open := render(set, map[string]*answered{}, "")
	baseline := fingerprint(open)
	v, ok, err := s.refs.Ref(ctx, s.msgKey(set.ID))
	if err != nil {
		return fmt.Errorf("slack: ask %s: read its message: %w", set.ID, err)
	}
	if ok {
		channel, ts, _ = strings.Cut(v, "/")
	} else {
		c, thread, err := s.threadFor(ctx, set)
		if err != nil {
			return err
		}
		// A process that died between posting and remembering the post
		// left the message there: find it by its metadata.
		if found, err := s.findPosted(ctx, c, thread, "set_id", set.ID); err != nil {
			return err
		} else if found != "" {
			channel, ts, ok = c, found, true
			if err := surfaces.SetRunRef(ctx, s.refs, set.RunID, s.msgKey(set.ID), channel+"/"+ts); err != nil {
				s.log.Error("remember posted message", "set", set.ID, "err", err)
			}
			s.log.Info("found the question posted before", "set", set.ID, "ts", ts)
		}
	}
	if !ok {
		c, thread, err := s.threadFor(ctx, set)
		if err != nil {
			return err
		}
		text, blocks := render(set, prior, "")
		baseline = fingerprint(blocks)
		// A post once started is finished and remembered even if ctx ends
		// meanwhile: a message posted but not remembered would be posted
		// again.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), postTimeout)
		defer cancel()
		opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...),
			slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "orchestrator_question", EventPayload: map[string]any{"set_id": set.ID, "run_id": set.RunID}})}
		if thread != "" {
			opts = append(opts, slack.MsgOptionTS(thread))
		}
		err = s.call(pctx, "post question "+set.ID, func(ctx context.Context) error {
			var err error
			channel, ts, err = s.api.PostMessageContext(ctx, c, opts...)
			return err
		})
		if err != nil {
			return err
		}
		if err := surfaces.SetRunRef(pctx, s.refs, set.RunID, s.msgKey(set.ID), channel+"/"+ts); err != nil {
			s.log.Error("remember posted message", "set", set.ID, "err", err)
		}
		s.log.Info("asked", "set", set.ID, "channel", channel, "ts", ts)
	}
	shown, known, _ := s.refs.Ref(ctx, s.shownKey(set.ID))
	if !known {
		shown = baseline
	}
	s.mu.Lock()
	st.channel, st.ts = channel, ts
	if st.shown == "" {
		st.shown = shown
	}
	for id, a := range prior {
		if st.ans[id] == nil {
			st.ans[id] = a
		}
	}
	all := len(st.ans) == len(set.Questions)
	s.mu.Unlock()
	// Answered before a restart (the edit may have been lost), or answered
	// elsewhere or closed while posting: show it. A message that shows
	// what it should is not edited.
	s.refresh(ctx, st)
	if all {
		s.finish(st)
	}
	return nil
}

// findPosted looks among the channel's recent messages (or the thread's)
// for one of ours whose metadata has key = value, and returns its ts.
func (s *Surface) findPosted(ctx context.Context, channel, thread, key, value string) (string, error) {
	var msgs []slack.Message
	err := s.call(ctx, "look for a message posted before", func(ctx context.Context) error {
		var err error
		if thread != "" {
			msgs, _, _, err = s.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: thread, Limit: 200, IncludeAllMetadata: true})
			return err
		}
		res, err := s.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: channel, Limit: 100, IncludeAllMetadata: true})
		if err == nil {
			msgs = res.Messages
		}
		return err
	})
	if err != nil {
		return "", err
	}
	for _, m := range msgs {
		if !strings.HasPrefix(m.Metadata.EventType, "orchestrator_") {
			continue
		}
		if v, _ := m.Metadata.EventPayload[key].(string); v == value {
			return m.Timestamp, nil
		}
	}
	return "", nil
}

// threadFor returns the channel and thread (empty: none) set is asked in.
func (s *Surface) threadFor(ctx context.Context, set questions.Set) (channel, thread string, err error) {
	if !s.threaded(ctx, set.RunID) {
		return s.cfg.ChannelID, "", nil
	}
	return s.runThread(ctx, set.RunID, set.Title, true)
}

// threaded reports whether run is asked in a thread: with thread_per_run,
// or when the run lives in a thread of its own making (ownThread).
func (s *Surface) threaded(ctx context.Context, run string) bool {
	if s.cfg.ThreadPerRun {
		return true
	}
	if run == "" {
		return false
	}
	own, err := s.ownThread(ctx, run)
	if err != nil {
		s.log.Warn("find the thread a run lives in", "run", run, "err", s.redact(err))
	}
	return own != ""
}

// ownThread is the thread run says it lives in (Config.RunThread: a run
// started by a mention), "" for none.
func (s *Surface) ownThread(ctx context.Context, run string) (string, error) {
	if s.cfg.RunThread == nil || run == "" {
		return "", nil
	}
	t, err := s.cfg.RunThread(ctx, run)
	if err != nil {
		return "", fmt.Errorf("slack: find the thread of run %s: %w", run, err)
	}
	return t, nil
}

// runThread returns the thread of run (its first message), starting it
// when create is set.
func (s *Surface) runThread(ctx context.Context, run, title string, create bool) (channel, thread string, err error) {
	if run == "" {
		return s.cfg.ChannelID, "", nil
	}
	s.threads.Lock()
	defer s.threads.Unlock()
	key := s.threadKey(run)
	if v, ok, err := s.refs.Ref(ctx, key); err != nil {
		return "", "", fmt.Errorf("slack: read the thread of run %s: %w", run, err)
	} else if ok {
		return s.cfg.ChannelID, v, nil
	}
	if own, err := s.ownThread(ctx, run); err != nil {
		return "", "", err
	} else if own != "" {
		if err := surfaces.SetRunRef(ctx, s.refs, run, key, own); err != nil {
			s.log.Error("remember the thread", "run", run, "err", err)
		}
		return s.cfg.ChannelID, own, nil
	}
	if !create {
		return s.cfg.ChannelID, "", nil
	}
	if found, err := s.findPosted(ctx, s.cfg.ChannelID, "", "run_id", run); err != nil {
		return "", "", err
	} else if found != "" {
		if err := surfaces.SetRunRef(ctx, s.refs, run, key, found); err != nil {
			s.log.Error("remember the thread", "run", run, "err", err)
		}
		return s.cfg.ChannelID, found, nil
	}
	if strings.TrimSpace(title) == "" {
		title = "run " + run
	}
	text := "🤖 *" + escape(title, 200) + "* (`" + strings.ReplaceAll(escape(run, 80), "`", "'") + "`): questions and progress of this run follow in the thread."
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), postTimeout)
	defer cancel()
	var ts string
	err = s.call(pctx, "start the thread of run "+run, func(ctx context.Context) error {
		var err error
		_, ts, err = s.api.PostMessageContext(ctx, s.cfg.ChannelID, slack.MsgOptionText(text, false),
			slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "orchestrator_run", EventPayload: map[string]any{"run_id": run}}))
		return err
	})
	if err != nil {
		return "", "", err
	}
	if err := surfaces.SetRunRef(pctx, s.refs, run, key, ts); err != nil {
		s.log.Error("remember the thread", "run", run, "err", err)
	}
	return s.cfg.ChannelID, ts, nil
}

// refresh edits the set's message to show what st holds, unless it shows
// that already: a message is edited once per change.
func (s *Surface) refresh(ctx context.Context, st *setState) {
	s.mu.Lock()
	set, channel, ts := st.set, st.channel, st.ts
	ans := make(map[string]*answered, len(st.ans))
	for k, v := range st.ans {
		ans[k] = v
	}
	closed := st.closed
	s.mu.Unlock()
	if ts == "" {
		return
	}
	text, blocks := render(set, ans, closed)
	fp := fingerprint(blocks)
	s.mu.Lock()
	if st.shown == fp {
		s.mu.Unlock()
		return
	}
	prev := st.shown
	st.shown = fp
	s.mu.Unlock()
	err := s.call(ctx, "edit the message of "+set.ID, func(ctx context.Context) error {
		_, _, _, err := s.api.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...))
		return err
	})
	if err != nil {
		s.mu.Lock()
		if st.shown == fp {
			st.shown = prev
		}
		s.mu.Unlock()
		s.log.Error("edit the question's message", "set", set.ID, "err", err)
		return
	}
	if err := surfaces.SetRunRef(ctx, s.refs, set.RunID, s.shownKey(set.ID), fp); err != nil {
		s.log.Warn("remember the message's state", "set", set.ID, "err", err)
	}
}

// fingerprint identifies what blocks show.
func fingerprint(blocks []slack.Block) string {
	b, _ := json.Marshal(blocks)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// waitPosting waits until no post of st is in flight.
func waitPosting(ctx context.Context, st *setState) error {
	select {
	case st.posting <- struct{}{}:
		<-st.posting
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stateFor returns the state of set: the one watched or asked here, or a
// new one found through Refs (release lets it go). ts is empty when the
// set was never posted here.
func (s *Surface) stateFor(ctx context.Context, set questions.Set) (st *setState, release func(), err error) {
	s.mu.Lock()
	if st := s.sets[set.ID]; st != nil {
		st.waiters++
		s.mu.Unlock()
		release = func() { s.leave(st, false) }
		if err := waitPosting(ctx, st); err != nil {
			release()
			return nil, nil, err
		}
		return st, release, nil
	}
	s.mu.Unlock()
	st = s.join(set, nil, false)
	release = func() { s.leave(st, false) }
	v, ok, err := s.refs.Ref(ctx, s.msgKey(set.ID))
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("slack: find the message of %s: %w", set.ID, err)
	}
	if ok {
		if err := s.ensurePosted(ctx, st); err != nil {
			release()
			return nil, nil, err
		}
	}
	_ = v
	return st, release, nil
}

// Resolve implements surfaces.Resolver: the message shows the answer
// given elsewhere, its controls removed.
func (s *Surface) Resolve(ctx context.Context, set questions.Set, final questions.Response) error {
	st, release, err := s.stateFor(ctx, set)
	if err != nil {
		return s.redact(err)
	}
	defer release()
	s.mu.Lock()
	for _, q := range set.Questions {
		if st.ans[q.ID] != nil {
			continue
		}
		a := &answered{By: final.By, Name: final.By, Via: final.Surface}
		if x, ok := final.Answer(q.ID); ok {
			a.Answer = x
		}
		st.ans[q.ID] = a
	}
	s.mu.Unlock()
	s.refresh(ctx, st)
	s.finish(st)
	return nil
}

// CloseSet implements surfaces.Closer: the message says why the set closed
// and its controls are removed.
func (s *Surface) CloseSet(ctx context.Context, set questions.Set, reason string) error {
	st, release, err := s.stateFor(ctx, set)
	if err != nil {
		return s.redact(err)
	}
	defer release()
	s.mu.Lock()
	if st.closed == "" {
		st.closed = "Closed: " + reason
	}
	s.mu.Unlock()
	s.refresh(ctx, st)
	s.finish(st)
	return nil
}

// Remind implements surfaces.Reminder: a reply in the message's thread.
func (s *Surface) Remind(ctx context.Context, set questions.Set) error {
	s.mu.Lock()
	if st := s.sets[set.ID]; st != nil {
		s.mu.Unlock()
		if err := waitPosting(ctx, st); err != nil {
			return err
		}
	} else {
		s.mu.Unlock()
	}
	v, ok, err := s.refs.Ref(ctx, s.msgKey(set.ID))
	if err != nil {
		return fmt.Errorf("slack: remind %s: %w", set.ID, err)
	}
	if !ok {
		return fmt.Errorf("slack: remind %s: %w", set.ID, surfaces.ErrNotAsked)
	}
	channel, ts, _ := strings.Cut(v, "/")
	thread := ts
	if s.threaded(ctx, set.RunID) {
		if _, t, err := s.runThread(ctx, set.RunID, "", false); err == nil && t != "" {
			thread = t
		}
	}
	return s.call(ctx, "remind "+set.ID, func(ctx context.Context) error {
		_, _, err := s.api.PostMessageContext(ctx, channel, slack.MsgOptionTS(thread),
			slack.MsgOptionText("⏰ Still waiting for an answer to this question.", false))
		return err
	})
}

// RunEnded implements surfaces.RunEnder: with a thread per run, the run's
// end is said in its thread.
func (s *Surface) RunEnded(ctx context.Context, p surfaces.RunProgress) error {
	if p.RunID == "" || !s.threaded(ctx, p.RunID) {
		return nil
	}
	key := "slack/" + s.cfg.ChannelID + "/ended/" + p.RunID
	if _, done, err := s.refs.Ref(ctx, key); err != nil || done {
		return err
	}
	channel, thread, err := s.runThread(ctx, p.RunID, p.Title, false)
	if err != nil || thread == "" {
		return s.redact(err)
	}
	icon := "❌"
	switch p.Step {
	case "done":
		icon = "✅"
	case "cancelled":
		icon = "⛔"
	}
	text := fmt.Sprintf("%s The run %s.", icon, escape(p.Step, 40))
	if p.CostUSD > 0 {
		text += fmt.Sprintf(" Cost $%.4f.", p.CostUSD)
	}
	if link := prLink(p.PRURL); link != "" {
		text += "\n🔗 Pull request: " + link
	}
	if sum := strings.TrimSpace(p.Summary); sum != "" {
		text += "\n" + escape(sum, 2500) // links (a pull request's URL) stay readable: Slack links bare URLs
	}
	err = s.call(ctx, "say the run ended", func(ctx context.Context) error {
		_, _, err := s.api.PostMessageContext(ctx, channel, slack.MsgOptionTS(thread), slack.MsgOptionText(text, false))
		return err
	})
	if err != nil {
		return err
	}
	return surfaces.SetRunRef(ctx, s.refs, p.RunID, key, "1")
}

// prLink is a pull request's page as a Slack link, or "" when u is not a
// plain http(s) URL (it never carries Slack's link syntax out of its place).
func prLink(u string) string {
	u = strings.TrimSpace(u)
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return ""
	}
	if strings.ContainsAny(u, "<>| \t\r\n") || len(u) > 500 {
		return ""
	}
	return "<" + strings.ReplaceAll(u, "&", "&amp;") + ">"
}
