package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack"
)

// Runs started from Slack mentions (triggers.slack): the Slack surface
// reads the app_mention events (surfaces/slack/mention.go); slackTriggers
// makes their runs, as issueTriggers does for GitHub issues. The run lives
// in the mention's thread (slackOrigin, read back by buildSlack's
// RunThread).

// slackOrigin is the Slack message a run was started from, kept in its
// options: its questions, progress and end go to that thread.
type slackOrigin struct {
	Channel string `json:"channel"`
	Thread  string `json:"thread"`
	User    string `json:"user,omitempty"`
}

// slackTriggers is the slack.MentionHandler of serve.
type slackTriggers struct {
	m  *Main
	st *store.Store
	r  *runner.Runner
}

var _ slack.MentionHandler = (*slackTriggers)(nil)

// startSlackTriggers makes the Slack surface start runs from mentions when
// triggers.slack is enabled, and connects it to Socket Mode (app_token) or
// mounts its Events API endpoint on serve (signing_secret).
func (m *Main) startSlackTriggers(ctx context.Context, st *store.Store, r *runner.Runner, ss *surfaceSet) error {
	tc := m.Config.Triggers.Slack
	if !tc.Enabled {
		return nil
	}
	sf, err := ss.get("slack", nil)
	if err != nil {
		return configError(fmt.Errorf("triggers.slack: %w", err))
	}
	sl, ok := sf.(*slack.Surface)
	if !ok {
		return configError(errors.New("triggers.slack is enabled but the slack surface is not built: enable surfaces.slack"))
	}
	h := &slackTriggers{m: m, st: st, r: r}
	if _, data, known, err := (&issueTriggers{m: m}).findSpec(tc.Spec); err != nil {
		return configError(fmt.Errorf("triggers.slack.spec: %w", err))
	} else if data == nil {
		m.Logger.Warn("triggers.slack.spec names no spec of specs.dir: free-text mentions get a reply and start nothing until it exists",
			"spec", tc.Spec, "dir", m.Config.Specs.Dir, "known", strings.Join(known, ", "))
	}
	sl.HandleMentions(h)
	if sc := m.Config.Surfaces.Slack; sc.SigningSecret != "" && m.handlers != nil {
		// The Events API over HTTP (Event Subscriptions' Request URL):
		// mentions of an app without Socket Mode come there.
		m.handlers["POST /webhooks/slack/events"] = sl.EventsHandler()
	}
	go func() {
		if err := sl.Open(ctx); err != nil && ctx.Err() == nil {
			m.Logger.Error("slack: cannot connect to Socket Mode: mentions start no run", "err", err)
		}
	}()
	return nil
}

// slackTriggerPlace is what the triggers table's repo column holds for a
// channel: max_runs_per_hour counts per channel.
func slackTriggerPlace(channel string) string { return "slack:" + channel }

func slackTriggerOrigin(m slack.Mention) string {
	return fmt.Sprintf("slack mention in %s by %s (%s)", m.Channel, m.User, m.TS)
}

// Refuse implements slack.MentionHandler.
func (h *slackTriggers) Refuse(ctx context.Context, m slack.Mention) (bool, error) {
	return h.st.RecordTrigger(ctx, store.Trigger{Key: m.Key(), Repo: slackTriggerPlace(m.Channel), Origin: slackTriggerOrigin(m), Outcome: store.TriggerRefused})
}

// Start implements slack.MentionHandler: it makes the queued run of m,
// recorded with m's event in one transaction, for any serve instance to
// take.
func (h *slackTriggers) Start(ctx context.Context, m slack.Mention) (string, error) {
	tc := h.m.Config.Triggers.Slack
	if tc.Mention == "" && m.BotMention == "" {
		return "", errors.New("slack: the bot's own mention is unknown (auth.test failed): set triggers.slack.mention")
	}
	name, text, ok := parseSlackMention(m, tc.Mention)
	if !ok {
		return "", nil // the bot is mentioned, but not asked for a run
	}
	ev := store.Trigger{Key: m.Key(), Repo: slackTriggerPlace(m.Channel), Origin: slackTriggerOrigin(m)}
	if name == "" {
		name = tc.Spec
	}
	sp, data, known, err := (&issueTriggers{m: h.m}).findSpec(name)
	if err != nil {
		return "", err
	}
	if data == nil {
		ev.Outcome = triggerUnknownSpec
		first, err := h.st.RecordTrigger(ctx, ev)
		if err != nil || !first {
			return "", err
		}
		list := "none"
		if len(known) > 0 {
			list = "`" + strings.Join(known, "`, `") + "`"
		}
		return fmt.Sprintf("There is no spec named `%s` in the orchestrator's spec folder, so no run was started. Known specs: %s.",
			strings.ReplaceAll(questions.Clean(name), "`", "'"), list), nil
	}
	n, opts := specRun(sp, data)
	task := strings.TrimSpace(sp.Body)
	if task == "" {
		task = "Do the work the Slack message below asks for."
	}
	n.Prompt = task + "\n\n" + questions.FormatChat(questions.ChatText{Where: "Slack channel " + m.Channel, Author: m.User, Text: text}, 0)
	first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	title := strings.Join(strings.Fields(questions.Clean(first)), " ")
	if title == "" {
		title = sp.Name
	}
	n.Title = truncateRunes("slack: "+title, 72)
	opts.Slack = &slackOrigin{Channel: m.Channel, Thread: m.Thread(), User: m.User}
	n, err = h.m.finishRun(n, opts, runFlags{})
	if err != nil {
		return "", err
	}
	if !slices.Contains(n.Surfaces, "slack") {
		n.Surfaces = append(n.Surfaces, "slack") // its questions are asked in the thread
	}
	n.Queued = true
	n.Trigger = &ev
	n.TriggerLimit = tc.MaxRunsPerHour
	run, err := h.r.Create(ctx, n)
	switch {
	case errors.Is(err, store.ErrTriggerTaken):
		return "", nil
	case errors.Is(err, store.ErrTriggerLimit):
		return fmt.Sprintf("This channel has started %d runs in the last hour, the most the orchestrator is configured for (triggers.slack.max_runs_per_hour), so no run was started. Ask again later.", tc.MaxRunsPerHour), nil
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("▶️ Started run `%s` (spec `%s`): its questions and progress follow in this thread.", run.ID, sp.Name), nil
}

// slackRunThread is buildSlack's slack.Config.RunThread: the thread of the
// mention that started the run, when it was started by one in channel.
func slackRunThread(st *store.Store, channel string) func(ctx context.Context, runID string) (string, error) {
	return func(ctx context.Context, runID string) (string, error) {
		run, err := st.Run(ctx, runID)
		if errors.Is(err, store.ErrNotFound) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		o, err := decodeRunOptions(run)
		if err != nil || o.Slack == nil || o.Slack.Channel != channel {
			return "", err
		}
		return o.Slack.Thread, nil
	}
}

// parseSlackMention reads m as ParseMention reads a GitHub comment: the
// message must start with mention (empty: the bot's own), after the bot's
// mention when mention is a word of its own ("<@U…> !deploy run login").
func parseSlackMention(m slack.Mention, mention string) (spec, text string, ok bool) {
	body := m.Text
	if mention == "" {
		mention = m.BotMention
	} else if m.BotMention != "" {
		body = strings.TrimPrefix(strings.TrimSpace(body), m.BotMention)
	}
	if mention == "" {
		return "", "", false
	}
	return github.ParseMention(body, mention)
}

// slackInbox is the Slack surface's EventInbox: the store's inbox, where a
// mention taken over HTTP waits from its 200 until its run is made.
type slackInbox struct{ store.Inbox }

// Kept implements slack.EventInbox.
func (i slackInbox) Kept(ctx context.Context) ([]slack.KeptEvent, error) {
	kept, err := i.Inbox.Kept(ctx)
	out := make([]slack.KeptEvent, len(kept))
	for j, k := range kept {
		out[j] = slack.KeptEvent{Key: k.Key, Body: k.Body}
	}
	return out, err
}
