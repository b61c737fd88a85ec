package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// show edits a question's message to show it answered.
func (s *Surface) show(ctx context.Context, channelID, messageID string, set questions.Set, idx int, a *answered) {
	content, embeds, comps := render(set, idx, a)
	err := s.editMessage(ctx, &discordgo.MessageEdit{
		ID:              messageID,
		Channel:         channelID,
		Content:         &content,
		Embeds:          &embeds,
		Components:      &comps,
		AllowedMentions: noMentions(),
	})
	if err != nil {
		s.log.Error("mark question answered", "set", set.ID, "message", messageID, "err", s.redact(err))
	}
}

// Resolve implements surfaces.Resolver: it shows set answered elsewhere on
// each question's message that does not show an answer yet, and disables
// its components. A message showing an answer taken here is not edited
// again.
func (s *Surface) Resolve(ctx context.Context, set questions.Set, resp questions.Response) error {
	var errs []error
	for i, q := range set.Questions {
		a := &answered{By: resp.By, Name: resp.By, Via: resp.Surface}
		if ans, ok := resp.Answer(q.ID); ok {
			a.Answer = ans
		}
		channelID, messageID, done, err := s.locate(ctx, set, q, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if messageID == "" || done {
			continue
		}
		content, embeds, comps := render(set, i, a)
		err = s.editMessage(ctx, &discordgo.MessageEdit{
			ID: messageID, Channel: channelID, Content: &content, Embeds: &embeds,
			Components: &comps, AllowedMentions: noMentions(),
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("discord: resolve %s: edit message %s: %w", set.ID, messageID, err))
		}
	}
	return s.redact(errors.Join(errs...))
}

// locate finds the message of question q of set, in memory or in Refs. It
// marks the question answered with a when it has no answer yet; done reports
// that the message shows an answer already (taken here, or shown before).
func (s *Surface) locate(ctx context.Context, set questions.Set, q questions.Question, a *answered) (channelID, messageID string, done bool, err error) {
	r := ref(set.ID, q.ID)
	s.mu.Lock()
	qs := s.byRef[r]
	if qs != nil && qs.st.set.ID != set.ID {
		qs = nil
	}
	if qs != nil {
		channelID, messageID = qs.channelID, qs.messageID
		if qs.ans == nil {
			qs.ans, qs.settled = a, true
			qs.shown = messageID != "" // edited below; else when known
		} else {
			done = true // shows an answer already, or is about to
		}
	}
	s.mu.Unlock()
	if done {
		return channelID, messageID, true, nil
	}
	if _, shown, err := s.refs.Ref(ctx, s.answerKey(set.ID, q.ID)); err != nil {
		return "", "", false, fmt.Errorf("discord: find answer of %s/%s: %w", set.ID, q.ID, err)
	} else if shown {
		return channelID, messageID, true, nil // answered here before a restart
	}
	if messageID != "" {
		return channelID, messageID, false, nil
	}
	v, ok, err := s.refs.Ref(ctx, s.msgKey(set.ID, q.ID))
	if err != nil {
		return "", "", false, fmt.Errorf("discord: find message of %s/%s: %w", set.ID, q.ID, err)
	}
	if !ok {
		return "", "", false, nil
	}
	if qs != nil {
		// Posted, its post not recorded yet: whichever of this edit and
		// the recording comes second shows the answer, once.
		s.mu.Lock()
		done = qs.shown
		qs.shown = true
		s.mu.Unlock()
	}
	channelID, messageID, _ = strings.Cut(v, "/")
	return channelID, messageID, done, nil
}

// Remind implements surfaces.Reminder: it replies to the first unanswered
// question's message.
func (s *Surface) Remind(ctx context.Context, set questions.Set) error {
	for _, q := range set.Questions {
		r := ref(set.ID, q.ID)
		s.mu.Lock()
		qs := s.byRef[r]
		var channelID, messageID string
		answeredHere := false
		if qs != nil {
			channelID, messageID, answeredHere = qs.channelID, qs.messageID, qs.ans != nil
		}
		s.mu.Unlock()
		if answeredHere {
			continue
		}
		if messageID == "" {
			v, ok, err := s.refs.Ref(ctx, s.msgKey(set.ID, q.ID))
			if err != nil {
				return fmt.Errorf("discord: remind %s: %w", set.ID, err)
			}
			if !ok {
				continue
			}
			if _, done, _ := s.refs.Ref(ctx, s.answerKey(set.ID, q.ID)); done {
				continue
			}
			channelID, messageID, _ = strings.Cut(v, "/")
		}
		_, err := s.dg.ChannelMessageSendComplex(channelID, &discordgo.MessageSend{
			Content:         "⏰ Still waiting for an answer to this question.",
			Reference:       &discordgo.MessageReference{MessageID: messageID, ChannelID: channelID},
			AllowedMentions: noMentions(),
		}, discordgo.WithContext(ctx))
		if err != nil {
			return s.redact(fmt.Errorf("discord: remind %s: %w", set.ID, err))
		}
		return nil
	}
	return fmt.Errorf("discord: remind %s: no unanswered question of this set was posted on Discord", set.ID)
}
