package slack

import (
	"context"
	"strings"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// Mention is an app_mention event: someone mentioned the bot in the
// surface's channel. Its text is untrusted.
type Mention struct {
	// EventID is Slack's event_id: the same on every redelivery.
	EventID string
	Channel string
	User    string
	// Text is the message as Slack gives it, mentions as <@U…>.
	Text string
	// TS is the message's timestamp; ThreadTS the thread it was posted
	// in ("" at the channel's top level).
	TS, ThreadTS string
	// BotMention is the bot's own mention, "<@U…>" ("" when auth.test
	// failed).
	BotMention string
}

// Key names the event whatever delivers it, however often.
func (m Mention) Key() string { return "slack:event:" + m.EventID }

// Thread is the thread a run started by m lives in: the thread m was
// posted in, else m itself.
func (m Mention) Thread() string {
	if m.ThreadTS != "" {
		return m.ThreadTS
	}
	return m.TS
}

// MentionHandler starts runs from mentions (serve's triggers.slack).
type MentionHandler interface {
	// Refuse records that m came from someone not allowed to start runs;
	// first is false when it was recorded already (a redelivery), and
	// the person is then not told again.
	Refuse(ctx context.Context, m Mention) (first bool, err error)
	// Start starts the run m asks for, once per m.Key(); reply, when not
	// empty, is said in m's thread (why no run started, or which did).
	Start(ctx context.Context, m Mention) (reply string, err error)
}

// HandleMentions makes the surface hand the app_mention events of its
// channel to h: by an allowed person (allow_users, allow_groups) to Start,
// by anyone else to Refuse (told once, by an ephemeral message); bots are
// ignored. Events come through Socket Mode, or over HTTP (EventsHandler);
// the mentions an Inbox kept from before a restart are handed to h again.
func (s *Surface) HandleMentions(h MentionHandler) {
	s.mu.Lock()
	s.mentions = h
	s.mu.Unlock()
	if s.cfg.Inbox != nil && h != nil {
		go s.replayKept() // events.go
	}
}

// onEventsAPI handles an Events API envelope, acknowledged already.
func (s *Surface) onEventsAPI(ev slackevents.EventsAPIEvent) {
	if ev.Type != slackevents.CallbackEvent {
		return
	}
	var eventID string
	switch cb := ev.Data.(type) {
	case *slackevents.EventsAPICallbackEvent:
		eventID = cb.EventID
	case slackevents.EventsAPICallbackEvent:
		eventID = cb.EventID
	}
	var am *slackevents.AppMentionEvent
	switch d := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		am = d
	case slackevents.AppMentionEvent:
		am = &d
	default:
		return
	}
	s.onMention(eventID, am)
}

// onMention hands an app_mention to the mention handler.
func (s *Surface) onMention(eventID string, am *slackevents.AppMentionEvent) {
	s.mu.Lock()
	h := s.mentions
	s.mu.Unlock()
	switch {
	case h == nil:
		return
	case am.BotID != "" || am.User == "":
		return // bots never start runs
	case am.Channel != s.cfg.ChannelID:
		s.log.Debug("mention in another channel ignored", "channel", am.Channel)
		return
	case eventID == "":
		s.log.Warn("app_mention without an event_id ignored", "user", am.User, "ts", am.TimeStamp)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, workTimeout)
	defer cancel()
	m := Mention{EventID: eventID, Channel: am.Channel, User: am.User, Text: am.Text, TS: am.TimeStamp, ThreadTS: am.ThreadTimeStamp,
		BotMention: s.botMention(ctx)}
	ok, err := s.allowed(ctx, m.User)
	if err != nil {
		s.log.Error("check who may start a run", "user", m.User, "event", eventID, "err", s.redact(err))
		err = s.call(ctx, "tell a permission was not checked", func(ctx context.Context) error {
			_, err := s.api.PostEphemeralContext(ctx, m.Channel, m.User, slack.MsgOptionTS(m.Thread()),
				slack.MsgOptionText("Your permission to start runs could not be checked just now, so no run was started; please try again.", false))
			return err
		})
		if err != nil {
			s.log.Warn("tell someone their permission was not checked", "user", m.User, "err", s.redact(err))
		}
		return
	}
	if !ok {
		first, err := h.Refuse(ctx, m)
		if err != nil {
			s.log.Error("record a refused mention", "event", eventID, "err", s.redact(err))
			return
		}
		if !first {
			return
		}
		s.log.Info("refused a run asked by someone who may not start one", "user", m.User, "event", eventID)
		err = s.call(ctx, "refuse a mention", func(ctx context.Context) error {
			_, err := s.api.PostEphemeralContext(ctx, m.Channel, m.User, slack.MsgOptionTS(m.Thread()),
				slack.MsgOptionText("Only the people allowed to answer the orchestrator's questions here can start runs, so no run was started.", false))
			return err
		})
		if err != nil {
			s.log.Warn("tell someone their mention started nothing", "user", m.User, "err", s.redact(err))
		}
		return
	}
	reply, err := h.Start(ctx, m)
	if err != nil {
		s.log.Error("start a run from a mention", "event", eventID, "user", m.User, "err", s.redact(err))
		reply = "⚠️ The orchestrator could not start a run (its log says why)."
	}
	if strings.TrimSpace(reply) == "" {
		return
	}
	err = s.call(ctx, "answer a mention", func(ctx context.Context) error {
		_, _, err := s.api.PostMessageContext(ctx, m.Channel, slack.MsgOptionTS(m.Thread()), slack.MsgOptionText(escape(reply, 2000), false))
		return err
	})
	if err != nil {
		s.log.Warn("answer a mention", "event", eventID, "err", s.redact(err))
	}
}

// botMention is the bot's own mention, "<@U…>", from auth.test (asked
// once); "" when it cannot be had.
func (s *Surface) botMention(ctx context.Context) string {
	s.mu.Lock()
	me := s.me
	s.mu.Unlock()
	if me != "" {
		return me
	}
	var res *slack.AuthTestResponse
	err := s.call(ctx, "find the bot's user", func(ctx context.Context) error {
		var err error
		res, err = s.api.AuthTestContext(ctx)
		return err
	})
	if err != nil || res.UserID == "" {
		s.log.Warn("find the bot's user (auth.test)", "err", s.redact(err))
		return ""
	}
	me = "<@" + res.UserID + ">"
	s.mu.Lock()
	s.me = me
	s.mu.Unlock()
	return me
}
