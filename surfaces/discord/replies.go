package discord

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
)

func (s *Surface) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	s.log.Info("connected to the gateway", "bot", r.User.ID)
	s.catchUpAll()
}

func (s *Surface) onResumed(_ *discordgo.Session, _ *discordgo.Resumed) {
	s.log.Info("resumed the gateway session")
	s.catchUpAll()
}

// catchUpAll fetches the replies sent while the gateway was away, for every
// set being asked.
func (s *Surface) catchUpAll() {
	if !s.cfg.AcceptReplies {
		return
	}
	s.mu.Lock()
	sets := make([]*setState, 0, len(s.sets))
	for _, st := range s.sets {
		sets = append(sets, st)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, workTimeout)
	defer cancel()
	for _, st := range sets {
		s.catchUp(ctx, st)
	}
}

// catchUp reads the replies to st's unanswered questions posted since each
// question's message, oldest first, and takes the first valid one.
func (s *Surface) catchUp(ctx context.Context, st *setState) {
	for _, qs := range st.qs {
		s.mu.Lock()
		channelID, messageID, done := qs.channelID, qs.messageID, qs.ans != nil
		s.mu.Unlock()
		if messageID == "" || done {
			continue
		}
		after := messageID
		for range 10 { // at most 1000 messages
			msgs, err := s.dg.ChannelMessages(channelID, 100, "", after, "", discordgo.WithContext(ctx))
			if err != nil {
				s.log.Warn("fetch replies", "set", st.set.ID, "question", qs.q.ID, "err", s.redact(err))
				break
			}
			slices.SortFunc(msgs, func(a, b *discordgo.Message) int { return cmpSnowflake(a.ID, b.ID) })
			for _, m := range msgs {
				if ctx.Err() != nil {
					return
				}
				if m.MessageReference != nil && m.MessageReference.MessageID == messageID {
					s.handleReply(ctx, m)
				}
			}
			if len(msgs) < 100 {
				break
			}
			after = msgs[len(msgs)-1].ID
		}
	}
}

// cmpSnowflake orders Discord IDs: decimal numbers without leading zeros,
// so the shorter is the smaller.
func cmpSnowflake(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

func (s *Surface) onMessage(_ *discordgo.Session, m *discordgo.MessageCreate) {
	if m.Message == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, workTimeout)
	defer cancel()
	s.handleReply(ctx, m.Message)
}

// handleReply takes a reply to a question's message as its answer, when
// from an allowed person and valid.
func (s *Surface) handleReply(ctx context.Context, m *discordgo.Message) {
	if m.Author == nil || m.Author.Bot || m.MessageReference == nil {
		return
	}
	s.mu.Lock()
	qs := s.byMsg[m.MessageReference.MessageID]
	seen := qs != nil && qs.st.replies[m.ID]
	if qs != nil && !seen {
		if qs.st.replies == nil {
			qs.st.replies = map[string]bool{}
		}
		qs.st.replies[m.ID] = true
	}
	s.mu.Unlock()
	if qs == nil || seen {
		return
	}
	// From here on the reply is decided and acknowledged whatever becomes
	// of ctx: the runner ends an Ask as soon as the store has the answer,
	// which is before the reply's ✅, the question's message edited to show
	// it and the answer remembered.
	ctx, done := s.ackContext(ctx)
	defer done()
	c := clicker{id: m.Author.ID, name: displayName(m.Author, "")}
	if m.Member != nil {
		c.name = displayName(m.Author, m.Member.Nick)
		c.roles = m.Member.Roles
	} else if !s.allowed(c) && len(s.allowRoles) > 0 {
		// Messages read over REST carry no member: look the roles up.
		c.roles = s.roles(ctx, m)
	}
	if !s.allowed(c) {
		s.log.Info("ignored a reply from someone not allowed", "user", c.id, "message", m.ID)
		return
	}
	if strings.TrimSpace(m.Content) == "" {
		s.log.Warn("reply has no text: is the message content intent enabled for the bot?", "message", m.ID)
		return
	}
	ans, err := questions.ParseQuestionAnswer(qs.q, m.Content)
	if err != nil {
		s.replyTo(ctx, m, msgNotTaken+escape(err.Error(), 1800, true))
		return
	}
	ans.QuestionID = qs.q.ID
	a := &answered{Answer: ans, By: c.by(), Name: c.name}
	d, err := s.offer(ctx, qs, a)
	switch {
	case err != nil:
		s.mu.Lock()
		delete(qs.st.replies, m.ID) // not decided: the next catch-up offers it again
		s.mu.Unlock()
		s.replyTo(ctx, m, msgNotRecorded)
		return
	case d.Taken:
		if err := s.inThread(ctx, m.ChannelID, func() error {
			return s.dg.MessageReactionAdd(m.ChannelID, m.ID, "✅", discordgo.WithContext(ctx))
		}); err != nil {
			s.log.Warn("react to the answer", "message", m.ID, "err", s.redact(err))
		}
	case d.Invalid != nil:
		s.replyTo(ctx, m, msgNotTaken+escape(d.Invalid.Error(), 1800, true))
		return
	default:
		s.replyTo(ctx, m, s.tooLate(qs, d))
	}
	s.decided(ctx, qs, a, d)
}

// replyTo replies text to m.
func (s *Surface) replyTo(ctx context.Context, m *discordgo.Message, text string) {
	_, err := s.dg.ChannelMessageSendComplex(m.ChannelID, &discordgo.MessageSend{
		Content:         text,
		Reference:       &discordgo.MessageReference{MessageID: m.ID, ChannelID: m.ChannelID},
		AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		s.log.Warn("reply to an answer", "message", m.ID, "err", s.redact(err))
	}
}

// roles returns the roles of a message's author in its guild.
func (s *Surface) roles(ctx context.Context, m *discordgo.Message) []string {
	guild := m.GuildID
	if guild == "" {
		s.mu.Lock()
		guild = s.guilds[m.ChannelID]
		s.mu.Unlock()
	}
	if guild == "" {
		ch, err := s.dg.Channel(m.ChannelID, discordgo.WithContext(ctx))
		if err != nil {
			s.log.Warn("look up the channel's guild", "channel", m.ChannelID, "err", s.redact(err))
			return nil
		}
		guild = ch.GuildID
		s.mu.Lock()
		s.guilds[m.ChannelID] = guild
		s.mu.Unlock()
	}
	mem, err := s.dg.GuildMember(guild, m.Author.ID, discordgo.WithContext(ctx))
	if err != nil {
		s.log.Warn("look up the author's roles", "user", m.Author.ID, "err", fmt.Errorf("%w", s.redact(err)))
		return nil
	}
	return mem.Roles
}

// ackContext is ctx without its cancellation, ended when the surface closes
// or after workTimeout: what the surface does about a decision already made
// must not depend on the Ask that was waiting for it (surfaces.Surface).
func (s *Surface) ackContext(ctx context.Context) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workTimeout)
	stop := context.AfterFunc(s.ctx, cancel)
	return actx, func() {
		stop()
		cancel()
	}
}
