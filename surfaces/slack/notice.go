package slack

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ surfaces.Noticer = (*Surface)(nil)

// Notice implements surfaces.Noticer: text is posted in the run's thread
// (when the run has one), else in the channel, once per key (remembered in
// Refs). Slack's mrkdwn in the text is escaped: nobody is mentioned.
func (s *Surface) Notice(ctx context.Context, runID, key, text string) error {
	rkey := "slack/" + s.cfg.ChannelID + "/notice/" + key
	if _, ok, err := s.refs.Ref(ctx, rkey); err != nil {
		return fmt.Errorf("slack: notice %s: %w", key, err)
	} else if ok {
		return nil
	}
	thread := ""
	if runID != "" && s.threaded(ctx, runID) {
		_, t, err := s.runThread(ctx, runID, "", false)
		if err != nil {
			return s.redact(fmt.Errorf("slack: notice %s: %w", key, err))
		}
		thread = t
	}
	opts := []slack.MsgOption{slack.MsgOptionText(escape(text, 3000), false)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	var ts string
	err := s.call(ctx, "post a notice", func(ctx context.Context) error {
		var err error
		_, ts, err = s.api.PostMessageContext(ctx, s.cfg.ChannelID, opts...)
		return err
	})
	if err != nil {
		return err
	}
	if err := surfaces.SetRunRef(ctx, s.refs, runID, rkey, ts); err != nil {
		s.log.Error("remember a notice", "key", key, "err", err)
	}
	return nil
}
