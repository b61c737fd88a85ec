package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// clicker is who acted, as the surface checks and names them.
type clicker struct {
	id, name string
	roles    []string
}

func (c clicker) by() string { return fmt.Sprintf("%s (discord %s)", c.name, c.id) }

func interactionUser(in *discordgo.Interaction) (clicker, bool) {
	switch {
	case in.Member != nil && in.Member.User != nil:
		return clicker{id: in.Member.User.ID, name: displayName(in.Member.User, in.Member.Nick), roles: in.Member.Roles}, true
	case in.User != nil:
		return clicker{id: in.User.ID, name: displayName(in.User, "")}, true
	}
	return clicker{}, false
}

func displayName(u *discordgo.User, nick string) string {
	for _, n := range []string{nick, u.GlobalName, u.Username, u.ID} {
		if n := sanitize(n, false); n != "" {
			return clip(n, 64)
		}
	}
	return "someone"
}

// allowed reports whether c may answer: their user ID or one of their roles
// is allowed. Nobody is when both lists are empty.
func (s *Surface) allowed(c clicker) bool {
	if c.id != "" && s.allowUsers[c.id] {
		return true
	}
	return slices.ContainsFunc(c.roles, func(r string) bool { return s.allowRoles[r] })
}

const (
	msgNotAllowed        = "You are not allowed to answer this question."
	msgAnswered          = "This question was already answered by %s."
	msgAnsweredElsewhere = "This question was already answered elsewhere by %s (on %s)."
	msgClosed            = "This question is closed: it expired or its run was cancelled."
	msgNotOpen           = "This question is closed: it was answered, expired or its run was cancelled."
	msgNotRecorded       = "Your answer could not be recorded just now; please try again."
	msgNotTaken          = "That answer was not taken: "
)

// offerTimeout bounds offering an answer before the interaction is
// answered: Discord waits three seconds for it.
const offerTimeout = 2 * time.Second

// onInteraction handles a click, a menu choice or a form submission.
// discordgo runs it on its own goroutine. It finds the question by the
// custom ID among the sets watched or asked here, else through
// Config.Lookup; one that is open nowhere is answered that it is closed.
// The answer is offered to the store
// (a transaction, bounded by offerTimeout), then the interaction is
// acknowledged (or answered with an ephemeral message or the form) before
// anything that may be slow: remembering the answer, editing the message, a
// rate limit.
func (s *Surface) onInteraction(_ *discordgo.Session, ev *discordgo.InteractionCreate) {
	in := ev.Interaction
	if in == nil {
		return
	}
	cid, ok := interactionCustomID(in)
	if !ok {
		return
	}
	p, ok := parseCustomID(cid)
	if !ok {
		return
	}
	s.mu.Lock()
	qs := s.byRef[p.ref]
	doneBy, wasDone := s.finished[p.ref]
	s.mu.Unlock()
	c, ok := interactionUser(in)
	if !ok {
		return
	}
	if !s.allowed(c) {
		s.log.Info("refused an answer from someone not allowed", "user", c.id)
		s.respond(in, ephemeral(msgNotAllowed))
		return
	}
	if p.action == actRemb {
		s.rememberClicked(in, c, p.ref) // remember.go
		return
	}
	// Finding the set (when not watched here) and offering the answer share
	// one deadline: Discord waits three seconds for the acknowledgement.
	octx, ocancel := context.WithTimeout(s.ctx, offerTimeout)
	defer ocancel()
	lookedUp := false
	if qs == nil && !wasDone {
		// Neither watched nor asked here: the set was settled and let go,
		// or its run is another instance's, or not watched again yet after
		// a restart. The store decides (Config.Lookup); the click is
		// answered either way, never left to fail in Discord.
		q, release, settled, err := s.lookupSet(octx, p.ref)
		if q != nil && settled {
			took := p.action != actText && s.tookThisClick(octx, in, q, p, c)
			release()
			if took {
				// Another process took this click; its acknowledgement
				// may not have reached Discord yet.
				s.respond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
				return
			}
			q = nil
		}
		if q == nil && !settled && err == nil {
			// Nobody here can tell: another process connected to the same
			// bot may watch the set and answer first (every session gets
			// the click; the first answer wins). Give it that time, and
			// this process the time to watch it again.
			qs, doneBy, wasDone = s.notOpenHere(p.ref)
		}
		switch {
		case qs != nil || wasDone:
		case err != nil:
			s.log.Error("look up the set of a question not watched here", "ref", p.ref, "err", err)
			s.respond(in, ephemeral(msgNotRecorded))
			return
		case q == nil:
			s.log.Debug("interaction for a question not open here", "interaction", in.ID)
			s.respond(in, ephemeral(msgNotOpen))
			return
		default:
			defer release()
			qs, lookedUp = q, true
		}
	}
	if qs != nil && in.Message != nil {
		// A message posted before a restart, clicked before Ask found it,
		// or one whose post is not recorded yet.
		s.mu.Lock()
		late := s.messageKnownLocked(qs, in.Message.ChannelID, in.Message.ID, false)
		s.mu.Unlock()
		if late != nil {
			defer func() {
				ctx, cancel := context.WithTimeout(s.ctx, workTimeout)
				defer cancel()
				s.show(ctx, in.Message.ChannelID, in.Message.ID, qs.st.set, qs.idx, late)
			}()
		}
	}
	if qs == nil {
		s.respond(in, ephemeral(fmt.Sprintf(msgAnswered, doneBy)))
		return
	}

	if p.action == actText {
		s.respond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: modal(qs.q, qs.ref)})
		return
	}
	ans, ok, err := interactionAnswer(in, qs, p)
	if !ok {
		return
	}
	if err != nil {
		s.respond(in, ephemeral(msgNotTaken+clip(sanitize(err.Error(), true), 1800)))
		return
	}
	a := &answered{Answer: ans, By: c.by(), Name: c.name}
	var d surfaces.Decision
	if p.action == actAll {
		d, err = s.offerAll(octx, qs, a) // group.go
	} else {
		d, err = s.offer(octx, qs, a)
	}
	ocancel()
	switch {
	case err != nil:
		s.respond(in, ephemeral(msgNotRecorded))
		return
	case d.Taken:
		s.respond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
	case d.Invalid != nil:
		s.respond(in, ephemeral(msgNotTaken+clip(sanitize(d.Invalid.Error(), true), 1800)))
		return
	case lookedUp && d.Final != nil && sameAnswer(*d.Final, a):
		// This very answer was taken, by the process that watches the
		// set (it got the same click): acknowledge it as taken.
		s.respond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
		return
	default:
		s.respond(in, ephemeral(s.tooLate(qs, d)))
	}
	ctx, cancel := context.WithTimeout(s.ctx, workTimeout)
	defer cancel()
	s.decided(ctx, qs, a, d)
	if d.Taken {
		s.offerRemember(ctx, in, c, qs, d) // remember.go
	}
}

// interactionCustomID returns the custom ID of a click, a menu choice or a form
// submission. It returns false for any other kind of interaction.
func interactionCustomID(in *discordgo.Interaction) (string, bool) {
	var cid string
	switch in.Type {
	case discordgo.InteractionMessageComponent:
		if d, ok := in.Data.(discordgo.MessageComponentInteractionData); ok {
			cid = d.CustomID
		}
	case discordgo.InteractionModalSubmit:
		if d, ok := in.Data.(discordgo.ModalSubmitInteractionData); ok {
			cid = d.CustomID
		}
	default:
		return "", false
	}
	return cid, true
}

// interactionAnswer reads the answer to qs that interaction in gives: the
// option of a button (p.index), the options chosen in a menu, or the text
// of a form. ok is false when in is not an answer of the kind p names, to
// be ignored; err says why the answer could not be read.
func interactionAnswer(in *discordgo.Interaction, qs *qState, p parsedID) (ans questions.Answer, ok bool, err error) {
	switch p.action {
	case actButton, actAll:
		if in.Type != discordgo.InteractionMessageComponent || p.index >= len(qs.q.Options) || qs.q.MultiSelect {
			return ans, false, nil
		}
		ans = questions.Answer{QuestionID: qs.q.ID, Labels: []string{qs.q.Options[p.index].Label}}
	case actSelect:
		d, ok := in.Data.(discordgo.MessageComponentInteractionData)
		if !ok {
			return ans, false, nil
		}
		ans, err = selected(qs.q, d.Values)
	case actModal:
		d, ok := in.Data.(discordgo.ModalSubmitInteractionData)
		if !ok {
			return ans, false, nil
		}
		ans, err = questions.ParseQuestionAnswer(qs.q, modalText(d))
		ans.QuestionID = qs.q.ID
	}
	return ans, true, err
}

// selected turns a select menu's values (option indexes) into an answer.
func selected(q questions.Question, values []string) (questions.Answer, error) {
	picked := make([]bool, len(q.Options))
	n := 0
	for _, v := range values {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= len(q.Options) || strconv.Itoa(i) != v {
			return questions.Answer{}, &questions.InvalidAnswerError{QuestionID: q.ID, Message: fmt.Sprintf("unknown option %q", v)}
		}
		if !picked[i] {
			picked[i] = true
			n++
		}
	}
	if n == 0 || (!q.MultiSelect && n > 1) {
		return questions.Answer{}, &questions.InvalidAnswerError{QuestionID: q.ID, Message: "choose one option"}
	}
	a := questions.Answer{QuestionID: q.ID}
	for i, o := range q.Options {
		if picked[i] {
			a.Labels = append(a.Labels, o.Label)
		}
	}
	return a, nil
}

func modalText(d discordgo.ModalSubmitInteractionData) string {
	var text string
	var walk func([]discordgo.MessageComponent)
	walk = func(cs []discordgo.MessageComponent) {
		for _, c := range cs {
			switch c := c.(type) {
			case *discordgo.ActionsRow:
				walk(c.Components)
			case *discordgo.TextInput:
				if c.CustomID == textInputID {
					text = c.Value
				}
			}
		}
	}
	walk(d.Components)
	return text
}

func ephemeral(text string) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{
			Content:         text,
			Flags:           discordgo.MessageFlagsEphemeral,
			AllowedMentions: noMentions(),
		},
	}
}

// respond answers an interaction. It goes straight to the HTTP client, not
// through the Session's rate limiter: a global rate limit being waited out
// there must not hold back an acknowledgement (interaction callbacks are not
// subject to it, and Discord gives them three seconds).
func (s *Surface) respond(in *discordgo.Interaction, resp *discordgo.InteractionResponse) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if err := s.callback(ctx, in, resp); err != nil {
		if strings.Contains(err.Error(), "40060") {
			// Another process connected to the bot answered first.
			s.log.Debug("interaction answered elsewhere", "interaction", in.ID)
			return
		}
		s.log.Warn("answer interaction", "interaction", in.ID, "type", int(resp.Type), "err", s.redact(err))
	}
}

func (s *Surface) callback(ctx context.Context, in *discordgo.Interaction, resp *discordgo.InteractionResponse) error {
	return s.postJSON(ctx, discordgo.EndpointInteractionResponse(in.ID, in.Token), "interaction response", resp)
}

// postJSON posts v as JSON to url, an endpoint of an interaction (its path
// holds the interaction's token), straight through the HTTP client; what
// names the request in errors.
func (s *Surface) postJSON(ctx context.Context, url, what string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s request: %w", what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.dg.UserAgent)
	res, err := s.client.Do(req)
	if err != nil {
		// The URL holds the interaction's token: keep it out of the log.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap()
		}
		return fmt.Errorf("post %s: %w", what, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("post %s: HTTP %d: %s", what, res.StatusCode, strings.TrimSpace(string(msg)))
	}
	io.Copy(io.Discard, res.Body)
	return nil
}
