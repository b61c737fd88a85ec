package runner

import (
	"context"
	"fmt"
	"strconv"

	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// A delivery that finds secrets or files over the size limit in the run's
// work pushes nothing (a *secretscan.Error from Delivery.Deliver): the run
// asks its surfaces, as one question set of kind questions.KindSecrets,
// whether to deliver without those files or to stop. The set is stored and
// asked like any other (presets, reminders, timeouts, every surface), and
// names each file, line and kind of secret, never a value. "Deliver without
// them" delivers with those files left out (Withholder); "Stop" ends the run
// stopped, nothing pushed; so does a timeout, whatever on_timeout says
// (pushing a secret is not the model's to decide). The answer is in the
// run's decision log, and so in the pull request's body.
const (
	secretsHeader  = "Secrets"
	secretsWithout = "Deliver without them"
	secretsStop    = limitStop
)

// Withholder is a Delivery whose Deliver may hold the run's work back with a
// *secretscan.Error.
type Withholder interface {
	// DeliverWithout delivers as Deliver does, leaving out of the commit
	// every file Deliver held back.
	DeliverWithout(ctx context.Context, run store.Run, failpoint func(string)) (string, error)
}

// secretsSet is the question a delivery held back by findings asks. Its ID
// comes from the run and the last turn (no tool_use id looks like its key).
func secretsSet(run store.Run, seq int, fs []secretscan.Finding) questions.Set {
	files := len(secretscan.Paths(fs))
	q := questions.Question{
		Header: secretsHeader,
		Text: fmt.Sprintf("The run's work holds what must not be pushed: %s. Nothing was pushed. Deliver without %s, or stop?",
			secretscan.Summary(fs, 20), map[bool]string{true: "this file", false: strconv.Itoa(files) + " files"}[files == 1]),
		Options: []questions.Option{
			{Label: secretsWithout, Description: "Commit and push the rest of the work; the files named stay out of the branch"},
			{Label: secretsStop, Description: "End the run as stopped, with nothing pushed"},
		},
	}
	key := "delivery-screen:" + strconv.Itoa(seq)
	set := questions.NewSet(run.ID+"\x00"+key, seq, []questions.Question{q})
	set.ID, set.RunID, set.Kind = questions.ToolSetID(run.ID, key), run.ID, questions.KindSecrets
	set.Title = run.Title
	set.Context = "The delivery is held back, nothing pushed: the run's changes hold secrets or files over git.max_file_size (" +
		secretscan.Summary(fs, 5) + ")"
	return set
}

// askWithheld stores the question a delivery held back by held asks; the
// loop then waits for its answer.
func (r *Runner) askWithheld(ctx context.Context, d *drive, run store.Run, last store.Turn, held *secretscan.Error) error {
	set := secretsSet(run, last.Seq, held.Findings)
	markDefault(&set, d.Policy)
	if _, err := r.cfg.Store.AskRun(context.WithoutCancel(ctx), set, run.Surfaces); err != nil {
		return err
	}
	r.log.Warn("delivery held back", "run", run.ID, "set", set.ID, "findings", secretscan.Summary(held.Findings, 20))
	return nil
}

// deliverWork delivers the run's work: without the files held back once a
// person chose so.
func (r *Runner) deliverWork(ctx context.Context, dv Delivery, run store.Run) (string, error) {
	if w, ok := dv.(Withholder); ok {
		sets, err := r.cfg.Store.QuestionSets(ctx, store.SetFilter{RunID: run.ID, State: []store.SetState{store.SetAnswered}})
		if err != nil {
			return "", err
		}
		for _, rec := range sets {
			if questions.KindOf(rec.Set) == questions.KindSecrets && choiceOf(rec) == secretsWithout {
				return w.DeliverWithout(ctx, run, r.cfg.Failpoint)
			}
		}
	}
	return dv.Deliver(ctx, run, r.cfg.Failpoint)
}

// afterSecrets carries out the answer to a secrets set: deliver without
// the files held back, or stop.
func (r *Runner) afterSecrets(ctx context.Context, d *drive, run store.Run, rec store.SetRecord) error {
	choice := choiceOf(rec)
	if choice == secretsWithout {
		last, _, err := r.cfg.Store.LastTurn(ctx, run.ID)
		if err != nil {
			return err
		}
		return r.done(ctx, d, run, last) // deliverWork finds the answer
	}
	msg := fmt.Sprintf("%s chose %s at the question whether to deliver work that holds secrets or oversized files (question set %s): nothing was pushed",
		questions.Printable(rec.Response.By), orUnknown(choice), rec.Set.ID)
	return r.cfg.Store.UpdateRun(context.WithoutCancel(ctx), run.ID, store.RunUpdate{Status: store.RunStopped, Error: &msg})
}

// choiceOf is the label chosen for a one-question set ("" if none).
func choiceOf(rec store.SetRecord) string {
	if len(rec.Response.Answers) > 0 && len(rec.Response.Answers[0].Labels) > 0 {
		return rec.Response.Answers[0].Labels[0]
	}
	return ""
}

// runAsks reports whether a set is the run's own question (a limit stop's or
// a delivery held back), not the model's: its context says why the run asks,
// and nobody answering it stops the run.
func (r *Runner) runAsks(ctx context.Context, set questions.Set) (bool, error) {
	if k := questions.KindOf(set); k == questions.KindSecrets || k == questions.KindCap {
		return true, nil
	}
	return r.isLimitSet(ctx, set)
}
