package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Keys under which Refs remember things, scoped by channel.
func (s *Surface) msgKey(setID, qID string) string {
	return "discord/" + s.cfg.ChannelID + "/message/" + setID + "/" + qID
}

func (s *Surface) answerKey(setID, qID string) string {
	return "discord/" + s.cfg.ChannelID + "/answer/" + setID + "/" + qID
}

func (s *Surface) threadKey(runID string) string {
	return "discord/" + s.cfg.ChannelID + "/thread/" + runID
}

// ensurePosted finds or posts the message of every question of st, and
// loads answers taken before a restart.
func (s *Surface) ensurePosted(ctx context.Context, st *setState) error {
	select {
	case st.posting <- struct{}{}:
		defer func() { <-st.posting }()
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, qs := range st.qs {
		s.mu.Lock()
		known := qs.messageID != ""
		s.mu.Unlock()
		if known {
			continue
		}
		if err := s.postQuestion(ctx, qs); err != nil {
			return err
		}
	}
	s.finishIfShown(st)
	return nil
}

// postTimeout bounds posting one question message.
const postTimeout = 30 * time.Second

func (s *Surface) postQuestion(ctx context.Context, qs *qState) error {
	set, q := qs.st.set, qs.q
	var prior *answered
	if v, ok, err := s.refs.Ref(ctx, s.answerKey(set.ID, q.ID)); err != nil {
		return fmt.Errorf("discord: ask %s: read answer of %s: %w", set.ID, q.ID, err)
	} else if ok {
		var a answered
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			s.log.Warn("unreadable stored answer, ignoring it", "set", set.ID, "question", q.ID, "err", err)
		} else {
			prior = &a
		}
	}

	channelID, messageID := "", ""
	if v, ok, err := s.refs.Ref(ctx, s.msgKey(set.ID, q.ID)); err != nil {
		return fmt.Errorf("discord: ask %s: read message of %s: %w", set.ID, q.ID, err)
	} else if ok {
		c, m, _ := strings.Cut(v, "/")
		_, err := s.dg.ChannelMessage(c, m, discordgo.WithContext(ctx))
		switch {
		case err == nil:
			channelID, messageID = c, m
		case isNotFound(err):
			s.log.Info("posted message is gone, posting again", "set", set.ID, "question", q.ID, "message", m)
		default:
			return fmt.Errorf("discord: ask %s: look up message %s: %w", set.ID, m, err)
		}
	}

	if messageID == "" {
		c, err := s.channelFor(ctx, set)
		if err != nil {
			return err
		}
		content, embeds, comps := render(set, qs.idx, prior)
		// A post once started is finished and remembered even if ctx ends
		// meanwhile: a message posted but not remembered would be posted
		// again by the next Ask.
		pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), postTimeout)
		defer pcancel()
		m, err := s.dg.ChannelMessageSendComplex(c, &discordgo.MessageSend{
			Content:         content,
			Embeds:          embeds,
			Components:      comps,
			AllowedMentions: noMentions(),
		}, discordgo.WithContext(pctx))
		if err != nil {
			return fmt.Errorf("discord: ask %s: post question %s: %w", set.ID, q.ID, err)
		}
		channelID, messageID = c, m.ID
		if err := surfaces.SetRunRef(pctx, s.refs, set.RunID, s.msgKey(set.ID, q.ID), c+"/"+m.ID); err != nil {
			s.log.Error("remember posted message", "set", set.ID, "question", q.ID, "err", err)
		}
		s.log.Info("asked", "set", set.ID, "question", q.ID, "channel", c, "message", m.ID)
	} else if prior != nil {
		// Answered before a restart: show it, in case the edit was lost.
		s.show(ctx, channelID, messageID, set, qs.idx, prior)
	}

	s.mu.Lock()
	if prior != nil && qs.ans == nil {
		qs.ans, qs.settled, qs.at = prior, true, time.Now()
	}
	late := s.messageKnownLocked(qs, channelID, messageID, prior != nil)
	s.mu.Unlock()
	if late != nil {
		// Like the post, its edit is finished even if ctx ends.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), postTimeout)
		defer cancel()
		s.show(sctx, channelID, messageID, set, qs.idx, late)
	}
	return nil
}

// messageKnownLocked records the message of qs, unless one is recorded
// already; shows says whether it shows qs's answer. It returns the answer
// the message must be edited to show: one taken (or shown answered
// elsewhere) while it was being posted, whose edit found no message to
// edit (an "All N runs" click in another run, a Resolve). Nil when the
// message shows it, or whoever took it will show it.
func (s *Surface) messageKnownLocked(qs *qState, channelID, messageID string, shows bool) *answered {
	if qs.messageID != "" {
		return nil
	}
	qs.channelID, qs.messageID = channelID, messageID
	s.byMsg[messageID] = qs
	if shows {
		qs.shown = true
		return nil
	}
	if qs.ans == nil || !qs.settled || qs.shown {
		return nil
	}
	qs.shown = true
	return qs.ans
}

// channelFor returns where set is asked: the configured channel, or the
// run's thread in it.
func (s *Surface) channelFor(ctx context.Context, set questions.Set) (string, error) {
	if !s.cfg.ThreadPerRun {
		return s.cfg.ChannelID, nil
	}
	s.threads.Lock()
	defer s.threads.Unlock()
	run := set.RunID
	if run == "" {
		run = set.ID
	}
	key := s.threadKey(run)
	if id, ok, err := s.refs.Ref(ctx, key); err != nil {
		return "", fmt.Errorf("discord: ask %s: read thread of run %s: %w", set.ID, run, err)
	} else if ok {
		return id, nil
	}
	title := set.Title
	if strings.TrimSpace(title) == "" {
		title = "run " + run
	}
	th, err := s.dg.ThreadStartComplex(s.cfg.ChannelID, &discordgo.ThreadStart{
		Name:                clip(sanitize(title, false), 100),
		AutoArchiveDuration: 10080,
		Type:                discordgo.ChannelTypeGuildPublicThread,
	}, discordgo.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("discord: ask %s: start thread for run %s: %w", set.ID, run, err)
	}
	if err := surfaces.SetRunRef(ctx, s.refs, set.RunID, key, th.ID); err != nil {
		s.log.Error("remember thread", "run", run, "err", err)
	}
	s.log.Info("started thread", "run", run, "thread", th.ID)
	return th.ID, nil
}

func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

func isNotFound(err error) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusNotFound
}
