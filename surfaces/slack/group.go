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

// The same question answered in several runs at once (issue 28), as on
// Discord: a question that also waits in other runs says so, and offers
// beside its options "All N runs: <option>" buttons, which answer it here
// and in each of those runs this surface shows too (the same channel and
// the same allowed people: whoever may click here may answer there). The
// runs it does not show are left waiting, and the person is told.

// withGroup is set with the other runs its question waits in, for its
// message to say so; set as it is when the store cannot tell.
func (s *Surface) withGroup(ctx context.Context, set questions.Set, answers surfaces.Answers) questions.Set {
	g, err := surfaces.WithGroup(ctx, set, answers)
	if err != nil {
		s.log.Warn("find the runs the same question waits in", "set", set.ID, "err", err)
	}
	return g
}

// groupButtons adds to a pending question's actions the "All N runs"
// buttons: for a single-question set that other runs wait on too,
// answered with buttons (a single choice among at most maxButtons
// options).
func groupButtons(ab *slack.ActionBlock, set questions.Set, q questions.Question) *slack.ActionBlock {
	if len(set.Group) == 0 || len(set.Questions) != 1 || q.MultiSelect || len(q.Options) == 0 || len(q.Options) > maxButtons {
		return ab
	}
	n := len(set.Group) + 1
	if set.GroupMore {
		return ab // more runs than the message names: answer them with --all
	}
	prefix := fmt.Sprintf("All %d runs: ", n)
	for i, o := range q.Options {
		ab.Elements.ElementSet = append(ab.Elements.ElementSet, slack.NewButtonBlockElement(actAll+"|"+strconv.Itoa(i), strconv.Itoa(i),
			slack.NewTextBlockObject(slack.PlainTextType, prefix+plain(o.Label, maxButtonText-len([]rune(prefix))), false, false)))
	}
	return ab
}

// takeAll offers ans, w's answer to st's only question, to its set and to
// the same question in the other runs this surface shows, in one decision
// of the store; the others' messages show the answer.
func (s *Surface) takeAll(ctx context.Context, w where, st *setState, ans questions.Answer) {
	s.mu.Lock()
	answers, set := st.answers, st.set
	s.mu.Unlock()
	ga, ok := answers.(surfaces.GroupAnswers)
	if !ok {
		s.take(ctx, w, st, 0, ans)
		return
	}
	group, err := ga.Group(ctx, set.ID, 0)
	if err != nil {
		s.log.Error("find the runs the same question waits in", "set", set.ID, "err", err)
		s.tell(ctx, w, msgNotRecorded)
		return
	}
	var others, left []string
	shown := map[string]*setState{}
	s.mu.Lock()
	for _, g := range group {
		if o := s.sets[g.SetID]; o != nil && len(o.set.Questions) == 1 && !isDone(o) {
			others = append(others, g.SetID)
			shown[g.SetID] = o
			o.waiters++ // held until its message shows the answer
		} else {
			left = append(left, g.Name())
		}
	}
	s.mu.Unlock()
	defer func() {
		for _, o := range shown {
			s.leave(o, false)
		}
	}()
	a := &answered{Answer: ans, By: w.by(), Name: w.userName}
	res, err := ga.OfferGroup(ctx, questions.Response{SetID: set.ID, Answers: []questions.Answer{ans}, By: a.By, Surface: name, At: time.Now()}, others)
	if err == nil && len(res.Sets) == 0 {
		err = fmt.Errorf("the group answer to %s decided nothing", set.ID)
	}
	if err != nil {
		s.decided(ctx, w, st, 0, a, surfaces.Decision{}, err)
		return
	}
	var taken []string
	for _, o := range res.Sets[1:] {
		ost, ok := shown[o.SetID]
		if !o.Decision.Taken || !ok {
			continue
		}
		taken = append(taken, o.Name())
		// The runner shows the answer on every surface but the one that
		// took it: this one shows it on the other runs' messages itself.
		oa := &answered{Answer: ans, By: a.By, Name: a.Name}
		oa.Answer.QuestionID = ost.set.Questions[0].ID
		s.showTaken(ctx, ost, oa, o.Decision)
	}
	s.log.Info("answered the runs of a question", "set", set.ID, "shared", res.ID, "also", strings.Join(taken, ", "), "left", strings.Join(left, ", "))
	s.decided(ctx, w, st, 0, a, res.Sets[0].Decision, nil)
	if len(left) > 0 && res.Sets[0].Decision.Taken {
		s.tell(ctx, w, "Answered here and in "+strconv.Itoa(len(taken))+" other runs; still waiting, not shown here: "+plain(strings.Join(left, ", "), 1500)+".")
	}
}

// showTaken records a, an answer taken (d) for the only question of st,
// another run's set answered with a group, and shows it on its message.
func (s *Surface) showTaken(ctx context.Context, st *setState, a *answered, d surfaces.Decision) {
	s.mu.Lock()
	set := st.set
	q := set.Questions[0]
	if st.ans[q.ID] == nil {
		st.ans[q.ID] = a
	}
	s.mu.Unlock()
	if b, err := json.Marshal(a); err == nil {
		if err := surfaces.SetRunRef(ctx, s.refs, set.RunID, s.answerKey(set.ID, q.ID), string(b)); err != nil {
			s.log.Error("remember an answer", "set", set.ID, "err", err)
		}
	}
	s.refresh(ctx, st)
	if d.Closed {
		s.finish(st)
	}
}
