package main

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

func (m *Main) newAnswerCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "answer QID TEXT... [--all]",
		Short: "Answer a pending question, whatever surface it was asked on",
		Long: `answer gives the answer to a pending question: QID is the question's short ID
(as 'status' lists it) or a question set's ID. TEXT is read like an answer on
any surface: an option's number or label, several for a multi-select question
("1,3"), or free text where allowed ("other: ..." beside options). For a set of
several questions, answer each by its own QID, or the set at once by its ID
with one line per question ("1: 2").

The first answer wins: if another surface answered first, answer says so. A
process waiting on the question (run, resume, serve) resumes the session.

With --all, the same question waiting in other runs (the same text, options
and kind, or for an approval the same tool and input) is answered too, in one
transaction: each of those runs resumes with the answer, and each run's
decision log names the shared decision and the other runs it covered. Runs
answered meanwhile are skipped and listed.`,
		Annotations: noSurfacesAnnotation(),
		Args:        cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runAnswer(cmd.Context(), args[0], strings.Join(args[1:], " "), all)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "answer the same question in every other run waiting on it too")
	return cmd
}

func (m *Main) runAnswer(ctx context.Context, qid, text string, all bool) error {
	// An answer over the cap is refused, as on every surface, never cut.
	if max := m.Config.Run.AnswerMaxBytes.Int(); max > 0 && len(text) > max {
		return usageError(fmt.Errorf("the answer is %d bytes long; at most %d are accepted (run.answer_max_bytes)", len(text), max))
	}
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	rec, q, err := st.FindQuestion(ctx, qid)
	if err != nil {
		return err
	}
	if rec.State != store.SetPending && !all {
		return fmt.Errorf("question set %s is already %s (by %s on %s)", rec.Set.ID, rec.State, rec.Response.By, rec.Response.Surface)
	}
	var answers []questions.Answer
	if q != nil {
		a, err := questions.ParseQuestionAnswer(*q, text)
		if err != nil {
			return usageError(invalid(err))
		}
		answers = []questions.Answer{a}
	} else {
		answers, err = questions.ParseAnswer(rec.Set, text)
		if err != nil {
			return usageError(invalid(err))
		}
	}
	resp := questions.Response{SetID: rec.Set.ID, Answers: answers, By: whoami(), Surface: "cli", At: time.Now()}
	if all {
		return m.answerGroup(ctx, st, rec, resp)
	}
	d, err := st.Offer(ctx, resp) // the store decides, as for every surface
	switch {
	case err != nil:
		return err
	case d.Invalid != nil:
		return usageError(fmt.Errorf("question set %s: %w", rec.Set.ID, d.Invalid))
	case !d.Taken && d.Final != nil:
		return fmt.Errorf("too late: question set %s is already answered (by %s on %s)", rec.Set.ID, d.Final.By, d.Final.Surface)
	case !d.Taken:
		return fmt.Errorf("too late: question set %s is closed (expired, or its run ended)", rec.Set.ID)
	case !d.Closed:
		fmt.Fprintf(m.Stdout, "recorded; question set %s still waits for: %s\n", rec.Set.ID, strings.Join(d.Pending, ", "))
		return nil
	}
	fmt.Fprintf(m.Stdout, "answered question set %s of run %s.\n", rec.Set.ID, rec.Set.RunID)
	run, err := st.Run(ctx, rec.Set.RunID)
	if err == nil && run.Status == store.RunWaiting {
		fmt.Fprintf(m.Stdout, "A process waiting on it resumes the session now; if none does, run 'orchestrator resume %s'.\n", run.ID)
	}
	return nil
}

// answerGroup gives resp to rec's set and to the same question waiting in
// other runs (answer --all). Whoever may run answer on the store may
// answer in every run, so the whole group is answered.
func (m *Main) answerGroup(ctx context.Context, st *store.Store, rec store.SetRecord, resp questions.Response) error {
	group, err := st.Group(ctx, rec.Set.ID, 0)
	if err != nil {
		return err
	}
	others := make([]string, len(group))
	for i, g := range group {
		others[i] = g.SetID
	}
	res, err := st.AnswerGroup(ctx, resp, others)
	if err != nil {
		return err
	}
	var invalid error
	for _, o := range res.Sets {
		d, where := o.Decision, groupRunName(o.GroupRun)
		switch {
		case d.Invalid != nil:
			fmt.Fprintf(m.Stdout, "not answered: %s: %v\n", where, d.Invalid)
			if o.SetID == rec.Set.ID {
				invalid = d.Invalid
			}
		case !d.Taken && d.Final != nil:
			fmt.Fprintf(m.Stdout, "skipped: %s was already answered (by %s on %s)\n", where, d.Final.By, d.Final.Surface)
		case !d.Taken:
			fmt.Fprintf(m.Stdout, "skipped: %s is closed (expired, or its run ended)\n", where)
		case !d.Closed:
			fmt.Fprintf(m.Stdout, "recorded: %s still waits for: %s\n", where, strings.Join(d.Pending, ", "))
		default:
			fmt.Fprintf(m.Stdout, "answered: %s\n", where)
		}
	}
	if res.Taken() == 0 {
		if invalid != nil {
			return usageError(fmt.Errorf("question set %s: %w", rec.Set.ID, invalid))
		}
		return fmt.Errorf("too late: no run waits on question set %s's question any more", rec.Set.ID)
	}
	fmt.Fprintf(m.Stdout, "shared decision %s answered %d run(s). The processes waiting on them resume their sessions now; if none does, run 'orchestrator resume RUN'.\n",
		res.ID, res.Taken())
	return nil
}

// groupRunName names a run of a group: its set, run and spec.
func groupRunName(g store.GroupRun) string {
	s := fmt.Sprintf("question set %s of run %s", g.SetID, g.RunID)
	if g.Spec != "" {
		s += " (spec " + questions.Printable(g.Spec) + ")"
	}
	return s
}

// invalid returns the answer reader's error with the valid choices.
func invalid(err error) error {
	var ie *questions.InvalidAnswerError
	if errors.As(err, &ie) && len(ie.Valid) > 0 {
		return fmt.Errorf("%s\nvalid answers: %s", ie.Message, strings.Join(ie.Valid, "; "))
	}
	return err
}

func whoami() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "someone at the terminal"
}
