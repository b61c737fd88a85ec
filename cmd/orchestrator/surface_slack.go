package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack"
)

// buildSlack makes a Slack surface for the channel of its block. Its
// messages are remembered in the store, so that a restarted process finds
// them instead of posting again; a click on a set this process does not
// watch is decided by the store.
func buildSlack(m *Main, block config.SurfaceConfig, st *store.Store) (surfaces.Surface, error) {
	sc := *block.(*config.Slack)
	cfg := slack.Config{
		BotToken:      sc.BotToken,
		AppToken:      sc.AppToken,
		SigningSecret: sc.SigningSecret,
		ChannelID:     sc.Channel,
		ThreadPerRun:  sc.ThreadPerRun,
		AllowUsers:    sc.AllowUsers,
		AllowGroups:   sc.AllowGroups,
		APIURL:        sc.APIURL,
		Logger:        m.Logger.With("surface", "slack"),
	}
	if st != nil {
		cfg.Refs = st.RefsFor("slack")
		cfg.Lookup = func(ctx context.Context, setID string) (questions.Set, surfaces.Answers, bool, error) {
			rec, err := st.QuestionSet(ctx, setID)
			if errors.Is(err, store.ErrNotFound) {
				return questions.Set{}, nil, false, nil
			}
			if err != nil {
				return questions.Set{}, nil, false, err
			}
			return rec.Set, runOffers{st: st, runID: rec.Set.RunID}, rec.State == store.SetPending, nil
		}
		cfg.RunThread = slackRunThread(st, sc.Channel) // trigger_slack.go
		cfg.Inbox = slackInbox{st.InboxFor("slack")}   // trigger_slack.go
		cfg.Offers = runner.RememberOffers{Store: st}  // a "remember" click after a restart or on another instance
	}
	transport := http.DefaultTransport
	if m.metrics != nil {
		transport = m.metrics.InstrumentTransport("slack", transport)
	}
	cfg.HTTPClient = &http.Client{Transport: transport, Timeout: sc.RequestTimeout.Std()}
	sf, err := slack.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	m.OnClose(sf.Close)
	if m.handlers != nil && sc.SigningSecret != "" {
		// Interactivity over HTTP: any Slack surface decides any click
		// (the store finds the set), so one handler serves them all.
		m.handlers["POST /webhooks/slack"] = sf.Handler()
	}
	return sf, nil
}
