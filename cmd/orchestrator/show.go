package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

func (m *Main) newShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: its timeline, decision log, branch, commit and pull request",
		Long: `show prints one run: its turns with the tools the model used, every question
it asked with the answer, who gave it, on which surface and when (the decision
log), its cost, and where its work went (branch, commit, pull request, worktree).
RUN may be a unique prefix. --json prints the same as data (docs/json.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runShow(cmd.Context(), args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// The output of `show --json`: dedicated types, snake_case, versioned by
// "v". Never internal structs, never the agent's environment.

type showOutput struct {
	V         int            `json:"v"`
	Run       showRun        `json:"run"`
	Timeline  []showTurn     `json:"timeline"`
	Decisions []showDecision `json:"decisions"`
	Delivery  *showDelivery  `json:"delivery"`
}

type showRun struct {
	ID        string    `json:"id"`
	Spec      string    `json:"spec,omitempty"`
	Title     string    `json:"title"`
	Status    string    `json:"status"`
	Error     string    `json:"error,omitempty"`
	Summary   string    `json:"summary,omitempty"`
	CostUSD   float64   `json:"cost_usd"`
	Turns     int       `json:"turns"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

type showTurn struct {
	Seq        int        `json:"seq"`
	Kind       string     `json:"kind"`
	Status     string     `json:"status,omitempty"`
	Category   string     `json:"category,omitempty"`
	Error      string     `json:"error,omitempty"`
	CostUSD    float64    `json:"cost_usd"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Tools      []showTool `json:"tools"`
	// AskedSet is the question set the turn ended with, if any.
	AskedSet string `json:"asked_set,omitempty"`
}

type showTool struct {
	Name    string `json:"name"`
	Summary string `json:"summary,omitempty"`
}

type showDecision struct {
	SetID      string     `json:"set_id"`
	QuestionID string     `json:"question_id"`
	Turn       int        `json:"turn"`
	Header     string     `json:"header,omitempty"`
	Question   string     `json:"question"`
	Options    []string   `json:"options"`
	Answer     string     `json:"answer,omitempty"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	Surface    string     `json:"surface,omitempty"`
	State      string     `json:"state"`
	AskedAt    time.Time  `json:"asked_at"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
}

type showDelivery struct {
	State           string `json:"state"`
	Branch          string `json:"branch"`
	Base            string `json:"base"`
	Commit          string `json:"commit,omitempty"`
	Pushed          bool   `json:"pushed"`
	PullRequest     int    `json:"pull_request,omitempty"`
	PullRequestURL  string `json:"pull_request_url,omitempty"`
	Worktree        string `json:"worktree"`
	WorktreeRemoved bool   `json:"worktree_removed"`
	Note            string `json:"note,omitempty"`
}

// usd rounds a cost to a millionth of a dollar (no float noise in JSON).
func usd(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// buildShow gathers what show prints about a run.
func buildShow(ctx context.Context, st *store.Store, id string) (showOutput, error) {
	run, err := st.Run(ctx, id)
	if err != nil {
		return showOutput{}, err
	}
	turns, err := st.Turns(ctx, run.ID)
	if err != nil {
		return showOutput{}, err
	}
	decisions, err := st.DecisionLog(ctx, run.ID)
	if err != nil {
		return showOutput{}, err
	}
	out := showOutput{V: 1, Timeline: []showTurn{}, Decisions: []showDecision{},
		Run: showRun{ID: run.ID, Spec: run.Spec, Title: run.Title, Status: string(run.Status), Error: run.Error,
			Summary: run.FinalText, CostUSD: usd(run.CostUSD), Turns: len(turns), CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt}}
	asked := map[int]string{}
	for _, d := range decisions {
		asked[d.Turn] = d.SetID
		out.Decisions = append(out.Decisions, showDecision{SetID: d.SetID, QuestionID: d.QuestionID, Turn: d.Turn, Header: d.Header,
			Question: d.Question, Options: append([]string{}, d.Options...), Answer: d.Answer, AnsweredBy: d.By, Surface: d.Surface,
			State: string(d.State), AskedAt: d.AskedAt, AnsweredAt: timePtr(d.AnsweredAt)})
	}
	for _, t := range turns {
		st := showTurn{Seq: t.Seq, Kind: string(t.Kind), Status: string(t.Result.Status), Category: string(t.Result.Category), Error: t.Result.Error,
			CostUSD: usd(t.Result.CostUSD), StartedAt: t.StartedAt, FinishedAt: timePtr(t.FinishedAt), Tools: toolsOf(t.TranscriptPath),
			AskedSet: asked[t.Seq]}
		out.Timeline = append(out.Timeline, st)
	}
	if dl, ok, err := st.Delivery(ctx, run.ID); err != nil {
		return showOutput{}, err
	} else if ok {
		out.Delivery = &showDelivery{State: string(dl.State), Branch: dl.Branch, Base: dl.Base, Commit: dl.CommitSHA, Pushed: dl.Pushed,
			PullRequest: dl.PRNumber, PullRequestURL: dl.PRURL, Worktree: dl.Worktree, WorktreeRemoved: !dl.RemovedAt.IsZero(), Note: dl.Note}
	}
	return out, nil
}

// toolsOf lists the tools a turn's model used, from its saved transcript.
// Their one-line summaries are redacted: a command may hold a secret.
func toolsOf(path string) []showTool {
	tools := []showTool{}
	if path == "" {
		return tools
	}
	f, err := os.Open(path)
	if err != nil {
		return tools
	}
	defer f.Close()
	rd := executor.NewReader(f, executor.ReaderOptions{})
	for rd.Next() {
		msg, ok := rd.Event().(*executor.AssistantMessage)
		if !ok || msg.ParentToolUseID != "" {
			continue
		}
		for _, b := range msg.ToolUses() {
			tools = append(tools, showTool{Name: b.ToolName, Summary: questions.Redact(toolLine(b.Input))})
		}
	}
	return tools
}

// toolLine gives a one-line view of a tool call's input.
func toolLine(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "query", "description"} {
		if v, ok := m[k].(string); ok {
			return clip(v, 100)
		}
	}
	return ""
}

func (m *Main) runShow(ctx context.Context, id string, asJSON bool) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	out, err := buildShow(ctx, st, id)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printShow(m.Stdout, out)
	return nil
}

// safe makes model or human text fit for one terminal line.
func safe(s string, n int) string { return clip(questions.Clean(s), n) }

func printShow(w io.Writer, o showOutput) {
	r := o.Run
	fmt.Fprintf(w, "run %s: %s (%s)\n", r.ID, safe(r.Title, 80), r.Status)
	if r.Spec != "" {
		fmt.Fprintf(w, "  spec %s\n", r.Spec)
	}
	fmt.Fprintf(w, "  %d turns, $%.4f, created %s, updated %s\n", r.Turns, r.CostUSD, r.CreatedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339))
	if r.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", safe(r.Error, 300))
	}
	fmt.Fprintln(w, "\ntimeline:")
	bySet := map[string][]showDecision{}
	for _, d := range o.Decisions {
		bySet[d.SetID] = append(bySet[d.SetID], d)
	}
	for _, t := range o.Timeline {
		state := t.Status
		if t.Category != "" {
			state += " (" + t.Category + ")"
		}
		if t.FinishedAt == nil {
			state = "unfinished"
		}
		fmt.Fprintf(w, "  %s  turn %d (%s) %s, $%.4f\n", t.StartedAt.Format(time.RFC3339), t.Seq, t.Kind, state, t.CostUSD)
		for _, tool := range t.Tools {
			if tool.Summary != "" {
				fmt.Fprintf(w, "      ⚙ %s: %s\n", tool.Name, safe(tool.Summary, 100))
			} else {
				fmt.Fprintf(w, "      ⚙ %s\n", tool.Name)
			}
		}
		if n := len(bySet[t.AskedSet]); n > 0 {
			fmt.Fprintf(w, "      ? asked %d question(s), set %s (decision log below)\n", n, t.AskedSet)
		}
	}
	fmt.Fprintln(w, "\ndecision log:")
	if len(o.Decisions) == 0 {
		fmt.Fprintln(w, "  no questions were asked")
	}
	for _, d := range o.Decisions {
		printDecision(w, d)
	}
	if d := o.Delivery; d != nil {
		fmt.Fprintln(w, "\ndelivery:")
		fmt.Fprintf(w, "  branch %s (from %s), %s\n", d.Branch, d.Base, d.State)
		if d.Commit != "" {
			fmt.Fprintf(w, "  commit %s, pushed: %t\n", d.Commit, d.Pushed)
		}
		if d.PullRequestURL != "" {
			fmt.Fprintf(w, "  pull request #%d %s\n", d.PullRequest, d.PullRequestURL)
		}
		if d.Note != "" {
			fmt.Fprintf(w, "  %s\n", d.Note)
		}
		if d.WorktreeRemoved {
			fmt.Fprintf(w, "  worktree %s (removed)\n", d.Worktree)
		} else {
			fmt.Fprintf(w, "  worktree %s (kept)\n", d.Worktree)
		}
	}
}

func printDecision(w io.Writer, d showDecision) {
	q := d.Question
	if d.Header != "" {
		q = d.Header + ": " + q
	}
	line := fmt.Sprintf("    ? %s %s", d.QuestionID, safe(q, 120))
	if len(d.Options) > 0 {
		line += " [" + safe(strings.Join(d.Options, " / "), 120) + "]"
	}
	fmt.Fprintln(w, line)
	if d.AnsweredAt != nil {
		fmt.Fprintf(w, "      → %s, by %s on %s at %s\n", safe(d.Answer, 200), safe(d.AnsweredBy, 60), d.Surface, d.AnsweredAt.Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "      → (%s)\n", d.State)
	}
}
