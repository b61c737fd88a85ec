package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

const (
	msgNotAllowed        = "You are not allowed to answer this question."
	msgAnswered          = "This question was already answered by %s."
	msgAnsweredElsewhere = "This question was already answered elsewhere by %s (on %s)."
	msgClosed            = "This question is closed: it was answered, expired or its run was cancelled."
	msgNotRecorded       = "Your answer could not be recorded just now; please try again."
	msgNotChecked        = "Your permission to answer could not be checked just now; please try again."
	msgNotTaken          = "That answer was not taken: "
)

// where is the message an interaction is about, and who acted.
type where struct {
	user, userName string
	channel, ts    string
	thread         string
}

func (w where) by() string { return fmt.Sprintf("%s (slack %s)", w.userName, w.user) }

// otherMeta is the private metadata of an "Other…" modal.
type otherMeta struct {
	Set     string `json:"s"`
	Index   int    `json:"i"`
	Channel string `json:"c"`
	TS      string `json:"t"`
	Thread  string `json:"h,omitempty"`
}

// onInteraction handles a block action or a modal submission, after its
// envelope was acknowledged.
func (s *Surface) onInteraction(cb slack.InteractionCallback) {
	ctx, cancel := context.WithTimeout(s.ctx, workTimeout)
	defer cancel()
	w := where{user: cb.User.ID, userName: userName(cb.User)}
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		w.channel, w.ts, w.thread = cb.Container.ChannelID, cb.Container.MessageTs, cb.Container.ThreadTs
		if w.channel == "" {
			w.channel = cb.Channel.ID
		}
		for _, act := range cb.ActionCallback.BlockActions {
			if setID, ok := parseRememberBlock(act.BlockID); ok && act.ActionID == actRemember {
				s.onRemember(ctx, w, setID) // remember.go
				continue
			}
			setID, idx, ok := parseBlockID(act.BlockID)
			if !ok {
				continue
			}
			s.onAction(ctx, w, cb.TriggerID, setID, idx, act)
		}
	case slack.InteractionTypeViewSubmission:
		if cb.View.CallbackID != callbackID {
			return
		}
		var m otherMeta
		if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &m); err != nil {
			return
		}
		w.channel, w.ts, w.thread = m.Channel, m.TS, m.Thread
		text := ""
		if cb.View.State != nil {
			text = cb.View.State.Values[inputBlock][inputAction].Value
		}
		s.onText(ctx, w, m.Set, m.Index, text)
	}
}

func userName(u slack.User) string {
	for _, n := range []string{u.Name, u.Profile.DisplayName, u.Profile.RealName, u.ID} {
		if n = plain(n, 64); n != "" {
			return n
		}
	}
	return "someone"
}

// allowed reports whether user may answer: listed in allow_users, or a
// member of one of allow_groups.
func (s *Surface) allowed(ctx context.Context, user string) (bool, error) {
	if user == "" {
		return false, nil
	}
	if s.allow[user] {
		return true, nil
	}
	for _, g := range s.cfg.AllowGroups {
		s.mu.Lock()
		gm, ok := s.groups[g]
		s.mu.Unlock()
		if !ok || time.Since(gm.at) > groupTTL {
			var users []string
			// Someone waits for the answer: a rate limit longer than
			// this fails the check at once.
			gctx, cancel := context.WithTimeout(ctx, groupCheckTimeout)
			err := s.call(gctx, "list the members of user group "+g, func(ctx context.Context) error {
				var err error
				users, err = s.api.GetUserGroupMembersContext(ctx, g)
				return err
			})
			cancel()
			if err != nil {
				return false, err
			}
			gm = groupMembers{users: map[string]bool{}, at: time.Now()}
			for _, u := range users {
				gm.users[u] = true
			}
			s.mu.Lock()
			s.groups[g] = gm
			s.mu.Unlock()
		}
		if gm.users[user] {
			return true, nil
		}
	}
	return false, nil
}

// tell posts an ephemeral message to the person who acted.
func (s *Surface) tell(ctx context.Context, w where, text string) {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if w.thread != "" {
		opts = append(opts, slack.MsgOptionTS(w.thread))
	}
	err := s.call(ctx, "answer privately", func(ctx context.Context) error {
		_, err := s.api.PostEphemeralContext(ctx, w.channel, w.user, opts...)
		return err
	})
	if err != nil {
		s.log.Warn("post an ephemeral message", "user", w.user, "err", err)
	}
}

// gate checks who acted and finds the set: st is nil when the
// interaction was answered already (refused, closed).
func (s *Surface) gate(ctx context.Context, w where, setID string, idx int) (st *setState, release func()) {
	ok, err := s.allowed(ctx, w.user)
	if err != nil {
		// Nothing is offered; they are told to try again, without the
		// error (the log has it).
		s.log.Error("check who may answer", "user", w.user, "err", err)
		tctx, cancel := context.WithTimeout(s.ctx, workTimeout)
		defer cancel()
		s.tell(tctx, w, msgNotChecked)
		return nil, nil
	}
	if !ok {
		s.log.Info("refused an answer from someone not allowed", "user", w.user)
		s.tell(ctx, w, msgNotAllowed)
		return nil, nil
	}
	s.mu.Lock()
	st = s.sets[setID]
	if st != nil {
		st.waiters++ // held for this interaction
	}
	s.mu.Unlock()
	if st == nil {
		if s.cfg.Lookup == nil {
			s.tell(ctx, w, msgClosed)
			return nil, nil
		}
		set, answers, pending, err := s.cfg.Lookup(ctx, setID)
		switch {
		case err != nil:
			s.log.Error("look up the set of a question not watched here", "set", setID, "err", err)
			s.tell(ctx, w, msgNotRecorded)
			return nil, nil
		case !pending || answers == nil || set.ID != setID || checkSet(set) != nil:
			s.tell(ctx, w, msgClosed)
			return nil, nil
		}
		st = s.join(set, answers, false)
	}
	release = func() { s.leave(st, false) }
	s.mu.Lock()
	if st.ts == "" && w.ts != "" {
		st.channel, st.ts = w.channel, w.ts
	}
	bad := idx >= len(st.set.Questions)
	var prior *answered
	if !bad {
		prior = st.ans[st.set.Questions[idx].ID]
	}
	s.mu.Unlock()
	switch {
	case bad:
		release()
		return nil, nil
	case prior != nil:
		s.tell(ctx, w, fmt.Sprintf(msgAnswered, escape(prior.Name, 100)))
		release()
		return nil, nil
	}
	return st, release
}

// onAction handles a click or a menu choice on question idx of set setID.
func (s *Surface) onAction(ctx context.Context, w where, trigger, setID string, idx int, act *slack.BlockAction) {
	st, release := s.gate(ctx, w, setID, idx)
	if st == nil {
		return
	}
	defer release()
	q := st.set.Questions[idx]
	var ans questions.Answer
	switch {
	case act.ActionID == actOther:
		meta, _ := json.Marshal(otherMeta{Set: setID, Index: idx, Channel: w.channel, TS: w.ts, Thread: w.thread})
		err := s.call(ctx, "open the answer form", func(ctx context.Context) error {
			_, err := s.api.OpenViewContext(ctx, trigger, modal(st.set, idx, string(meta)))
			return err
		})
		if err != nil {
			s.log.Error("open the answer form", "set", setID, "err", err)
			s.tell(ctx, w, msgNotRecorded)
		}
		return
	case strings.HasPrefix(act.ActionID, actButton+"|"):
		i, err := strconv.Atoi(strings.TrimPrefix(act.ActionID, actButton+"|"))
		if err != nil || i < 0 || i >= len(q.Options) || q.MultiSelect {
			return
		}
		ans = questions.Answer{QuestionID: q.ID, Labels: []string{q.Options[i].Label}}
	case strings.HasPrefix(act.ActionID, actAll+"|"):
		i, err := strconv.Atoi(strings.TrimPrefix(act.ActionID, actAll+"|"))
		if err != nil || i < 0 || i >= len(q.Options) || q.MultiSelect || len(st.set.Questions) != 1 {
			return
		}
		s.takeAll(ctx, w, st, questions.Answer{QuestionID: q.ID, Labels: []string{q.Options[i].Label}}) // group.go
		return
	case act.ActionID == actSelect:
		var values []string
		if act.SelectedOption.Value != "" {
			values = []string{act.SelectedOption.Value}
		}
		for _, o := range act.SelectedOptions {
			values = append(values, o.Value)
		}
		var err error
		if ans, err = selected(q, values); err != nil {
			s.tell(ctx, w, msgNotTaken+plain(err.Error(), 500))
			return
		}
	default:
		return
	}
	s.take(ctx, w, st, idx, ans)
}

// onText handles the text of an "Other…" form.
func (s *Surface) onText(ctx context.Context, w where, setID string, idx int, text string) {
	st, release := s.gate(ctx, w, setID, idx)
	if st == nil {
		return
	}
	defer release()
	q := st.set.Questions[idx]
	text = strings.TrimSpace(text)
	var ans questions.Answer
	if len(q.Options) > 0 && q.FreeText && text != "" {
		ans = questions.Answer{QuestionID: q.ID, Text: text}
	} else {
		var err error
		if ans, err = questions.ParseQuestionAnswer(q, text); err != nil {
			s.tell(ctx, w, msgNotTaken+plain(err.Error(), 500))
			return
		}
	}
	ans.QuestionID = q.ID
	s.take(ctx, w, st, idx, ans)
}

// take offers ans to the store and acts on the decision: a taken answer is
// remembered and shown on the message (edited once); a refused one is said
// privately; a closed set shows its final answer and ends its Asks.
func (s *Surface) take(ctx context.Context, w where, st *setState, idx int, ans questions.Answer) {
	s.mu.Lock()
	answers, set := st.answers, st.set
	s.mu.Unlock()
	a := &answered{Answer: ans, By: w.by(), Name: w.userName}
	d, err := answers.Offer(ctx, questions.Response{SetID: set.ID, Answers: []questions.Answer{ans}, By: a.By, Surface: name, At: time.Now()})
	s.decided(ctx, w, st, idx, a, d, err)
}

// decided acts on the decision d (or the error err) about a, w's answer to
// question idx of st.
func (s *Surface) decided(ctx context.Context, w where, st *setState, idx int, a *answered, d surfaces.Decision, err error) {
	s.mu.Lock()
	answers, set := st.answers, st.set
	s.mu.Unlock()
	q := set.Questions[idx]
	switch {
	case err != nil:
		s.log.Error("offer an answer", "set", set.ID, "question", q.ID, "err", err)
		s.tell(ctx, w, msgNotRecorded)
		return
	case d.Invalid != nil:
		s.tell(ctx, w, msgNotTaken+plain(d.Invalid.Error(), 500))
		return
	case d.Taken:
		s.mu.Lock()
		if st.ans[q.ID] == nil {
			st.ans[q.ID] = a
		}
		s.mu.Unlock()
		if b, err := json.Marshal(a); err == nil {
			if err := surfaces.SetRunRef(ctx, s.refs, set.RunID, s.answerKey(set.ID, q.ID), string(b)); err != nil {
				s.log.Error("remember an answer", "set", set.ID, "err", err)
			}
		}
		s.log.Info("answered", "set", set.ID, "question", q.ID, "by", a.By)
	default:
		s.tell(ctx, w, s.tooLate(d))
	}
	if d.Closed && !d.Taken && d.Final != nil {
		s.mu.Lock()
		for _, x := range set.Questions {
			if st.ans[x.ID] == nil {
				fa := &answered{By: d.Final.By, Name: d.Final.By, Via: d.Final.Surface}
				fa.Answer, _ = d.Final.Answer(x.ID)
				st.ans[x.ID] = fa
			}
		}
		s.mu.Unlock()
	}
	s.refresh(ctx, st)
	if d.Closed {
		s.finish(st)
	}
	s.offerRemember(ctx, w, set.RunID, set.ID, answers, d) // remember.go
}

func (s *Surface) tooLate(d surfaces.Decision) string {
	switch {
	case d.Final != nil && d.Final.Surface == name:
		return fmt.Sprintf(msgAnswered, escape(d.Final.By, 100))
	case d.Final != nil:
		return fmt.Sprintf(msgAnsweredElsewhere, escape(d.Final.By, 100), escape(d.Final.Surface, 40))
	default:
		return msgClosed
	}
}

// selected turns a menu's values (option indexes) into an answer.
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
