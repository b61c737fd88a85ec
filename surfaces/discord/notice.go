package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ surfaces.Noticer = (*Surface)(nil)

func (s *Surface) noticeKey(key string) string {
	return "discord/" + s.cfg.ChannelID + "/notice/" + key
}

// Notice posts text in the run's thread (when the run has one), else in
// the channel, once per key: the message is remembered in Refs, and a
// notice of a key remembered is not posted again. Nobody is mentioned.
func (s *Surface) Notice(ctx context.Context, runID, key, text string) error {
	if _, ok, err := s.refs.Ref(ctx, s.noticeKey(key)); err != nil {
		return fmt.Errorf("discord: notice %s: %w", key, err)
	} else if ok {
		return nil
	}
	channelID := s.cfg.ChannelID
	if s.cfg.ThreadPerRun && runID != "" {
		if id, ok, err := s.refs.Ref(ctx, s.threadKey(runID)); err != nil {
			return fmt.Errorf("discord: notice %s: read thread of run %s: %w", key, runID, err)
		} else if ok {
			channelID = id
		}
	}
	send := &discordgo.MessageSend{Content: clip(sanitize(text, true), 2000), AllowedMentions: noMentions()}
	m, err := s.dg.ChannelMessageSendComplex(channelID, send, discordgo.WithContext(ctx))
	if err != nil && channelID != s.cfg.ChannelID {
		// The run's thread is gone or archived: the channel then.
		m, err = s.dg.ChannelMessageSendComplex(s.cfg.ChannelID, send, discordgo.WithContext(ctx))
	}
	if err != nil {
		return s.redact(fmt.Errorf("discord: notice %s: %w", key, err))
	}
	if err := surfaces.SetRunRef(ctx, s.refs, runID, s.noticeKey(key), m.ChannelID+"/"+m.ID); err != nil {
		s.log.Error("remember notice", "key", key, "err", err)
	}
	return nil
}
