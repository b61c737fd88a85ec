package main

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/output"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// The JSON every --json output prints (docs/json.md is its contract). Each
// thing has one shape wherever it appears: a run (jsonRun) looks the same in
// `status` and in the NDJSON of `run`, a question set (jsonSet) the same in
// a question event and in `status`. Internal structs are never marshalled
// directly: these types choose what leaves the process. A run's options
// (which hold agent.env, and so API keys) never do. Model and human text is
// made printable (questions.Printable) before it goes out.

// jsonVersion is the "v" of every JSON object printed. It changes only
// when a field changes meaning or goes away; new fields keep it.
const jsonVersion = 1

// eventKind names an NDJSON event of run, resume and rehearse --json.
type eventKind string

// The NDJSON event kinds, in the order a run produces them.
const (
	evRunStarted   eventKind = "run_started"   // run: a new run was created
	evRunResumed   eventKind = "run_resumed"   // run: resume took up a run
	evTurnStarted  eventKind = "turn_started"  // turn: seq and kind
	evText         eventKind = "text"          // text: the model's text, QUESTION blocks removed
	evToolUse      eventKind = "tool_use"      // tool, text: a one-line summary of its input
	evCost         eventKind = "cost"          // cost_usd: the turn's cost so far
	evTurnFinished eventKind = "turn_finished" // turn: with its outcome
	evQuestion     eventKind = "question"      // question_set asked on surfaces; text: why the run asks, at a budget or turn limit
	evAnswer       eventKind = "answer"        // question_set with its response
	evReminder     eventKind = "reminder"      // question_set reminded on surfaces
	evEscalated    eventKind = "escalated"     // question_set also asked on surfaces
	evRetry        eventKind = "retry"         // text: why and when
	evCorrection   eventKind = "correction"    // text: what was wrong with the QUESTION block
	evDone         eventKind = "done"          // the model finished the task
	evRunEnded     eventKind = "run_ended"     // run as it stands; error: why it stopped, if it did not finish
)

// eventKinds maps the runner's events to the NDJSON kinds. The runner's
// run_ended is not among them: drive prints run_ended itself, once, with
// the error Drive returned.
var eventKinds = map[runner.EventKind]eventKind{
	runner.EventTurnStarted:  evTurnStarted,
	runner.EventText:         evText,
	runner.EventToolUse:      evToolUse,
	runner.EventCost:         evCost,
	runner.EventTurnFinished: evTurnFinished,
	runner.EventQuestion:     evQuestion,
	runner.EventAnswer:       evAnswer,
	runner.EventReminder:     evReminder,
	runner.EventEscalated:    evEscalated,
	runner.EventRetry:        evRetry,
	runner.EventCorrection:   evCorrection,
	runner.EventDone:         evDone,
}

// jsonEvent is one NDJSON line.
type jsonEvent struct {
	V        int       `json:"v"`
	Kind     eventKind `json:"kind"`
	RunID    string    `json:"run_id"`
	Time     time.Time `json:"time"`
	Turn     *jsonTurn `json:"turn,omitempty"`
	Text     string    `json:"text,omitempty"`
	Tool     string    `json:"tool,omitempty"`
	CostUSD  float64   `json:"cost_usd,omitempty"`
	Set      *jsonSet  `json:"question_set,omitempty"`
	Surfaces []string  `json:"surfaces,omitempty"`
	Run      *jsonRun  `json:"run,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// A run and a question set have one shape wherever they are printed, here
// and in the web inbox's API: internal/output.
type (
	jsonRun      = output.Run
	jsonSet      = output.Set
	jsonSetTool  = output.SetTool
	jsonQuestion = output.Question
)

var (
	newJSONRun       = output.NewRun
	newJSONSet       = output.NewSet
	newJSONSetRecord = output.NewSetRecord
	newJSONQuestion  = output.NewQuestion
)

// jsonTurn is one turn: one process of the agent CLI. Outcome is set once
// it finished.
type jsonTurn struct {
	Seq  int    `json:"seq"`
	Kind string `json:"kind"`
	// SetID is the question set whose answers an answer turn carried.
	SetID string `json:"set_id,omitempty"`
	// The times and QuestionError are set for a stored turn (newJSONStoredTurn).
	StartedAt     *time.Time   `json:"started_at,omitempty"`
	FinishedAt    *time.Time   `json:"finished_at,omitempty"`
	QuestionError string       `json:"question_error,omitempty"`
	Outcome       *jsonOutcome `json:"outcome,omitempty"`
	// Tools and AskedSet are set by show, from the turn's transcript and
	// the decision log: the tool calls of the turn's model (in the NDJSON
	// they are tool_use events) and the question set the turn ended with.
	Tools    []jsonTool `json:"tools,omitempty"`
	AskedSet string     `json:"asked_set,omitempty"`
}

// jsonTool is one tool call of the model: its tool, a one-line summary of
// its input (redacted), and whether the CLI refused it.
type jsonTool struct {
	Name    string `json:"name"`
	Summary string `json:"summary,omitempty"`
	Refused bool   `json:"refused,omitempty"`
}

// newJSONStoredTurn shapes a turn as the store keeps it: its outcome holds
// what was stored (no exit code, warnings or skipped lines: see the turn's
// transcript for those).
func newJSONStoredTurn(t store.Turn) jsonTurn {
	out := jsonTurn{Seq: t.Seq, Kind: string(t.Kind), SetID: t.SetID, QuestionError: questions.Printable(t.Result.QuestionError)}
	if !t.StartedAt.IsZero() {
		started := t.StartedAt.UTC()
		out.StartedAt = &started
	}
	if !t.Finished {
		return out
	}
	r := t.Result
	o := &jsonOutcome{Status: string(r.Status), ErrorCategory: string(r.Category), Error: questions.Printable(r.Error), SessionID: r.SessionID,
		NumTurns: r.NumTurns, CostUSD: usd(r.CostUSD), InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, Warnings: []string{}}
	if !t.FinishedAt.IsZero() {
		finished := t.FinishedAt.UTC()
		out.FinishedAt = &finished
		if !t.StartedAt.IsZero() {
			o.DurationMS = unknownInt{n: t.FinishedAt.Sub(t.StartedAt).Milliseconds(), known: true}
		}
	}
	out.Outcome = o
	return out
}

// jsonOutcome is how a turn (or a transcript, for inspect) ended.
type jsonOutcome struct {
	Status            string      `json:"status"`
	ErrorCategory     string      `json:"error_category,omitempty"`
	Error             string      `json:"error,omitempty"`
	Hint              string      `json:"hint,omitempty"`
	SessionID         string      `json:"session_id,omitempty"`
	Model             string      `json:"model,omitempty"`
	NumTurns          int         `json:"num_turns"`
	CostUSD           float64     `json:"cost_usd"`
	InputTokens       int64       `json:"input_tokens"`
	OutputTokens      int64       `json:"output_tokens"`
	TerminalReason    string      `json:"terminal_reason,omitempty"`
	PermissionDenials []string    `json:"permission_denials,omitempty"`
	ExitCode          unknownInt  `json:"exit_code"`
	Signal            string      `json:"signal,omitempty"`
	DurationMS        unknownInt  `json:"duration_ms"`
	SkippedLines      jsonSkipped `json:"skipped_lines"`
	Warnings          []string    `json:"warnings"`
	FinalText         string      `json:"final_text,omitempty"`
}

// jsonSkipped counts the lines of the CLI's output that were not read: not
// JSON, or longer than the reader's cap. Oversize lists the first few
// oversize ones (line number and what the reader said of it).
type jsonSkipped struct {
	Malformed int      `json:"malformed"`
	Oversize  int      `json:"oversize"`
	Details   []string `json:"details,omitempty"`
	// FirstOversize is the first oversize line: where, how long, and its
	// first bytes (made printable), so that one can tell what it was.
	FirstOversize *jsonOversize `json:"first_oversize,omitempty"`
}

type jsonOversize struct {
	Line   int    `json:"line"`
	Bytes  int64  `json:"bytes"`
	Prefix string `json:"prefix"`
}

// unknownInt is a number, or the string "unknown" when the transcript does
// not say (inspect reads a file: no process, no exit code, no duration).
type unknownInt struct {
	n     int64
	known bool
}

func (u unknownInt) MarshalJSON() ([]byte, error) {
	if !u.known {
		return []byte(`"unknown"`), nil
	}
	return strconv.AppendInt(nil, u.n, 10), nil
}

func (u *unknownInt) UnmarshalJSON(b []byte) error {
	if string(b) == `"unknown"` {
		*u = unknownInt{}
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New(`want a number or "unknown"`)
	}
	*u = unknownInt{n: n, known: true}
	return nil
}

func newJSONOutcome(o executor.Outcome) *jsonOutcome {
	out := &jsonOutcome{Status: string(o.Status), ErrorCategory: string(o.Category), Error: questions.Printable(o.Error),
		Hint: questions.Printable(o.Hint), SessionID: o.SessionID, Model: o.Model, NumTurns: o.NumTurns, CostUSD: usd(o.CostUSD),
		InputTokens: o.Usage.InputTokens, OutputTokens: o.Usage.OutputTokens, TerminalReason: o.TerminalReason,
		PermissionDenials: o.PermissionDenials, Signal: o.Signal, Warnings: []string{},
		FinalText:    questions.Printable(o.FinalText),
		SkippedLines: newJSONSkipped(o),
	}
	if o.ExitCode >= 0 && o.Signal == "" && o.Duration > 0 {
		out.ExitCode = unknownInt{n: int64(o.ExitCode), known: true}
	}
	if o.Duration > 0 {
		out.DurationMS = unknownInt{n: o.Duration.Milliseconds(), known: true}
	}
	for _, w := range o.Warnings {
		out.Warnings = append(out.Warnings, questions.Printable(w))
	}
	return out
}

// maxSkippedDetails bounds the skipped lines an outcome lists.
const maxSkippedDetails = 5

func newJSONSkipped(o executor.Outcome) jsonSkipped {
	out := jsonSkipped{Malformed: o.MalformedLines, Oversize: o.OversizeLines, Details: skippedDetails(o)}
	if d := o.FirstOversize; d != nil {
		out.FirstOversize = &jsonOversize{Line: d.Line, Bytes: d.Bytes, Prefix: questions.Printable(d.Prefix)}
	}
	return out
}

// skippedDetails lists the first oversize lines of an outcome, the first
// one (Outcome.FirstOversize, kept even when the diagnostics are full) with
// its first bytes.
func skippedDetails(o executor.Outcome) []string {
	var out []string
	first := -1
	if d := o.FirstOversize; d != nil {
		first = d.Line
		out = append(out, oversizeDetail(*d))
	}
	for _, d := range o.Diagnostics {
		if d.Kind != executor.DiagOversize || d.Line == first {
			continue
		}
		if len(out) == maxSkippedDetails {
			break
		}
		out = append(out, oversizeDetail(d))
	}
	return out
}

// oversizeDetail says which oversize line was skipped and how it began:
// its prefix is the CLI's output, untrusted, and made printable on one line.
func oversizeDetail(d executor.Diagnostic) string {
	s := questions.Printable(d.String())
	if d.Prefix == "" {
		return s
	}
	p := strings.Join(strings.Fields(questions.Printable(d.Prefix)), " ")
	if int64(len(d.Prefix)) < d.Bytes {
		p += "…"
	}
	return s + "; it began: " + p
}

func newJSONEvent(kind eventKind, runID string, now time.Time) jsonEvent {
	return jsonEvent{V: jsonVersion, Kind: kind, RunID: runID, Time: now.UTC()}
}

// newJSONEventOf shapes a runner event; ok is false for events not printed.
func newJSONEventOf(ev runner.Event, now time.Time) (jsonEvent, bool) {
	kind, ok := eventKinds[ev.Kind]
	if !ok {
		return jsonEvent{}, false
	}
	out := newJSONEvent(kind, ev.RunID, now)
	out.Text = questions.Printable(ev.Text)
	out.Tool = questions.Printable(ev.Tool)
	out.CostUSD = ev.CostUSD
	out.Surfaces = ev.Surfaces
	if ev.Turn > 0 && (kind == evTurnStarted || kind == evTurnFinished) {
		out.Turn = &jsonTurn{Seq: ev.Turn, Kind: string(ev.TurnKind)}
		if ev.Outcome != nil {
			out.Turn.Outcome = newJSONOutcome(*ev.Outcome)
		}
	}
	if ev.Set != nil {
		s := newJSONSet(*ev.Set, ev.Response)
		out.Set = &s
	}
	if ev.Run != nil {
		r := newJSONRun(*ev.Run)
		out.Run = &r
	}
	return out, true
}

// writeJSON prints v as indented JSON (status, inspect).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
