package discord

import (
	"context"
	"errors"
	"fmt"

	"github.com/bwmarrin/discordgo"
)

// A run's thread (Config.ThreadPerRun) is archived by Discord after a week
// without activity (its auto_archive_duration), or by a person. Discord
// then refuses edits and reactions in it (50083 "Operation cannot be
// performed on an archived thread"); a new message unarchives it. An edit
// that meets an archived thread unarchives it (PATCH /channels/{thread}
// {"archived": false}) and is made again.

// isArchived reports whether err is Discord's refusal of an operation in an
// archived thread.
func isArchived(err error) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Message != nil && re.Message.Code == discordgo.ErrCodePerformedOperationOnArchivedThread
}

// unarchive reopens the archived thread channelID.
func (s *Surface) unarchive(ctx context.Context, channelID string) error {
	no := false
	if _, err := s.dg.ChannelEditComplex(channelID, &discordgo.ChannelEdit{Archived: &no}, discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("unarchive thread %s: %w", channelID, err)
	}
	s.log.Info("unarchived the run's thread to edit in it", "thread", channelID)
	return nil
}

// inThread runs op, and when Discord refuses it because channelID is an
// archived thread, unarchives the thread and runs op again.
func (s *Surface) inThread(ctx context.Context, channelID string, op func() error) error {
	err := op()
	if !isArchived(err) {
		return err
	}
	if uerr := s.unarchive(ctx, channelID); uerr != nil {
		return errors.Join(err, uerr)
	}
	return op()
}

// editMessage edits a message, in an archived thread too.
func (s *Surface) editMessage(ctx context.Context, e *discordgo.MessageEdit) error {
	return s.inThread(ctx, e.Channel, func() error {
		_, err := s.dg.ChannelMessageEditComplex(e, discordgo.WithContext(ctx))
		return err
	})
}
