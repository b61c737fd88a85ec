package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

func (m *Main) newFollowUpCmd() *cobra.Command {
	var asJSON, queue bool
	var key string
	cmd := &cobra.Command{
		Use:   "followup RUN TEXT",
		Short: "Give feedback on a finished run: the same session goes on with it, on the same branch and pull request",
		Long: `followup hands feedback to a run whose model was done ("please also add a
test"): the run's own agent CLI session is resumed with TEXT as its next
prompt (quoted as untrusted data, as answers are), in the run's worktree,
which is added again from its branch when it was removed. The new work is
committed and pushed to the same branch, and the pull request's decision log
lists the feedback. A done, failed or stopped run takes feedback; a
cancelled one does not; one still working takes it once its current work is
over. The feedback is recorded once under --key (by default a new key each
time): the same key again hands nothing over again. followup drives the run
here, as resume does, unless --queue leaves it to serve. RUN may be a unique
prefix.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runFollowUp(cmd.Context(), args[0], args[1], key, queue, asJSON)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the feedback's idempotency key: the same key again records nothing (default: a new one)")
	cmd.Flags().BoolVar(&queue, "queue", false, "only record the feedback and queue the run: serve drives it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print progress as NDJSON events on stdout, see docs/json.md (questions go to stderr)")
	return cmd
}

func (m *Main) runFollowUp(ctx context.Context, id, text, key string, queue, asJSON bool) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("followup %s: TEXT is empty", id)
	}
	if key == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		key = "cli:" + hex.EncodeToString(b[:])
	} else {
		key = "cli:" + key
	}
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	run, err := st.Run(ctx, id)
	if err != nil {
		return err
	}
	f, created, err := st.QueueFollowUp(ctx, run.ID, key, whoami(), "cli", text, time.Now())
	if err != nil {
		return err
	}
	out := m.Stdout
	if asJSON {
		out = m.Stderr
	}
	if !created {
		fmt.Fprintf(out, "follow-up %s of run %s was already given (key %s)\n", f.ID, run.ID, strings.TrimPrefix(key, "cli:"))
	} else {
		fmt.Fprintf(out, "follow-up %s recorded for run %s\n", f.ID, run.ID)
	}
	if queue {
		return nil
	}
	if run, err = st.Run(ctx, run.ID); err != nil {
		return err
	}
	if run.Status.Final() {
		return nil // handed over already, or nothing to go on with
	}
	return m.runResume(ctx, run.ID, asJSON)
}

// showFollowUp is a follow-up in `show --json` (docs/json.md): feedback
// given after the run's model was done, and the turn that handed it over.
type showFollowUp struct {
	ID      string    `json:"id"`
	Key     string    `json:"key"`
	By      string    `json:"by"`
	Surface string    `json:"surface"`
	Text    string    `json:"text"`
	At      time.Time `json:"at"`
	// Turn is the turn that handed it to the model; 0 while pending.
	Turn int `json:"turn"`
}

// showFollowUps lists the run's follow-ups for show.
func showFollowUps(ctx context.Context, st *store.Store, runID string) ([]showFollowUp, error) {
	fus, err := st.FollowUps(ctx, runID)
	if err != nil {
		return nil, err
	}
	var out []showFollowUp
	for _, f := range fus {
		out = append(out, showFollowUp{ID: f.ID, Key: questions.Printable(f.EventKey), By: questions.Printable(f.Who), Surface: f.Surface,
			Text: questions.Printable(f.Text), At: f.At.UTC(), Turn: f.Turn})
	}
	return out, nil
}

// printFollowUps is show's text of the run's follow-ups.
func printFollowUps(w io.Writer, fus []showFollowUp) {
	if len(fus) == 0 {
		return
	}
	fmt.Fprintln(w, "\nfollow-ups:")
	for _, f := range fus {
		state := "pending"
		if f.Turn > 0 {
			state = fmt.Sprintf("handed over in turn %d", f.Turn)
		}
		fmt.Fprintf(w, "  %s  %s via %s (%s): %s\n", f.At.Format(time.RFC3339), safe(f.By, 60), f.Surface, state, safe(f.Text, 300))
	}
}
