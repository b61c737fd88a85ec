package discord

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// The same question answered in several runs at once (issue 28): a
// question that also waits in other runs says so, and offers a second row
// of buttons, "All N runs: <option>", that answers it here and in each of
// those runs this surface shows too (the same channel and the same allowed
// users and roles: whoever may click here may answer there). The runs it
// does not show are left waiting, and the person is told.

// withGroup is set with the other runs its question waits in, for its
// message to say so; set as it is when the store cannot tell.
func (s *Surface) withGroup(ctx context.Context, set questions.Set, answers surfaces.Answers) questions.Set {
	g, err := surfaces.WithGroup(ctx, set, answers)
	if err != nil {
		s.log.Warn("find the runs the same question waits in", "set", set.ID, "err", err)
	}
	return g
}

// groupField adds to a pending question's embed the runs its question also
// waits in.
func groupField(e *discordgo.MessageEmbed, set questions.Set, a *answered) {
	if a != nil || len(e.Fields) >= 25 {
		return
	}
	if note := questions.GroupNote(set); note != "" {
		e.Fields = append(e.Fields, &discordgo.MessageEmbedField{Name: "Also waiting", Value: escape(note, 900, false)})
	}
}

// groupRow adds the "All N runs" buttons to rows: for a pending question of
// a single-question set that other runs wait on too, answered with a
// button (a single choice among at most five options).
func groupRow(rows []discordgo.MessageComponent, set questions.Set, q questions.Question, r string, a *answered) []discordgo.MessageComponent {
	if a != nil || len(set.Group) == 0 || len(set.Questions) != 1 || q.MultiSelect || len(q.Options) == 0 ||
		len(q.Options) > maxButtonsPerRow || len(rows) >= 5 {
		return rows
	}
	n := len(set.Group) + 1
	var row []discordgo.MessageComponent
	for i, o := range q.Options {
		prefix := fmt.Sprintf("All %d runs: ", n)
		row = append(row, discordgo.Button{
			Label:    prefix + optionLabel(o, i, maxButtonLabel-len(prefix)),
			Style:    discordgo.SecondaryButton,
			CustomID: customID(r, actAll, strconv.Itoa(i)),
		})
	}
	return append(rows, discordgo.ActionsRow{Components: row})
}

// offerAll offers a, an answer to qs, to its set and to the same question
// in the other runs this surface shows, in one decision of the store; the
// others' messages show the answer. It returns the decision about qs's set.
func (s *Surface) offerAll(ctx context.Context, qs *qState, a *answered) (surfaces.Decision, error) {
	s.mu.Lock()
	answers, set := qs.st.answers, qs.st.set
	s.mu.Unlock()
	ga, ok := answers.(surfaces.GroupAnswers)
	if !ok {
		return s.offer(ctx, qs, a)
	}
	group, err := ga.Group(ctx, set.ID, 0)
	if err != nil {
		s.log.Error("find the runs the same question waits in", "set", set.ID, "err", err)
		return surfaces.Decision{}, err
	}
	var others []string
	var left []string
	shown := map[string]*qState{}
	s.mu.Lock()
	for _, g := range group {
		if st := s.sets[g.SetID]; st != nil && len(st.qs) == 1 {
			others = append(others, g.SetID)
			shown[g.SetID] = st.qs[0]
		} else {
			left = append(left, g.Name())
		}
	}
	s.mu.Unlock()
	ans := a.Answer
	ans.QuestionID = qs.q.ID
	res, err := ga.OfferGroup(ctx, questions.Response{SetID: set.ID, Answers: []questions.Answer{ans}, By: a.By, Surface: name, At: time.Now()}, others)
	if err != nil {
		s.log.Error("offer an answer to the runs of a question", "set", set.ID, "err", err)
		return surfaces.Decision{}, err
	}
	if len(res.Sets) == 0 {
		return surfaces.Decision{}, fmt.Errorf("the group answer to %s decided nothing", set.ID)
	}
	var taken []string
	for _, o := range res.Sets[1:] {
		oq, ok := shown[o.SetID]
		if !o.Decision.Taken || !ok {
			continue
		}
		taken = append(taken, o.Name())
		// The runner shows the answer on every surface but the one that
		// took it: this one shows it on the other runs' messages itself,
		// as it does for the answer clicked (which ends their Asks).
		oa := &answered{Answer: a.Answer, By: a.By, Name: a.Name}
		oa.Answer.QuestionID = oq.q.ID
		go func(oq *qState, d surfaces.Decision) {
			ctx, cancel := context.WithTimeout(s.ctx, workTimeout)
			defer cancel()
			s.decided(ctx, oq, oa, d)
		}(oq, o.Decision)
	}
	s.log.Info("answered the runs of a question", "set", set.ID, "shared", res.ID, "also", strings.Join(taken, ", "), "left", strings.Join(left, ", "))
	return res.Sets[0].Decision, nil
}
