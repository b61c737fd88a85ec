package executor

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// Category says why a run did not succeed. It is "" on success.
type Category string

const (
	CategoryRateLimit       Category = "rate_limit"        // HTTP 429 / "rate limit" in the error
	CategoryAuth            Category = "auth"              // 401/403, authentication, ANTHROPIC_API_KEY
	CategoryAPI             Category = "api"               // any other error result
	CategoryMaxTurns        Category = "max_turns"         // --max-turns reached
	CategoryMaxBudget       Category = "max_budget"        // --max-budget-usd reached (subtype error_max_budget_usd)
	CategorySessionNotFound Category = "session_not_found" // --resume of a session the CLI does not have
	CategoryTimeout         Category = "timeout"           // Config.Timeout or the context's deadline
	CategoryIdleTimeout     Category = "idle_timeout"      // no output for Config.IdleTimeout
	CategoryCancelled       Category = "cancelled"         // the context was cancelled
	CategoryCLINotFound     Category = "cli_not_found"     // the CLI could not be started
	CategoryCrashed         Category = "crashed"           // non-zero exit without a result line
	CategoryNoResult        Category = "no_result"         // the stream ended without a result line
	// CategoryToolDeferred goes with StatusDeferred: a PreToolUse hook
	// deferred the turn's tool call (terminal_reason "tool_deferred").
	CategoryToolDeferred Category = "tool_deferred"
	// CategoryToolDeferredUnavailable: a resumed session's deferred tool
	// call cannot run because the tool does not exist in this mode
	// (terminal_reason "tool_deferred_unavailable", is_error true).
	CategoryToolDeferredUnavailable Category = "tool_deferred_unavailable"
)

// Status is the overall state of a run.
type Status string

const (
	StatusSuccess    Status = "success"    // a result line without is_error
	StatusError      Status = "error"      // an error result, or the process failed
	StatusIncomplete Status = "incomplete" // no result line and no known failure (CategoryNoResult)
	// StatusDeferred: the turn ended on a tool call a PreToolUse hook
	// deferred; Outcome.DeferredToolUse holds it (CategoryToolDeferred).
	StatusDeferred Status = "deferred"
)

// terminalToolDeferred is the result's terminal_reason when a PreToolUse hook
// deferred the turn's tool call; the CLI then exits 0 (docs/claude-cli.md).
const terminalToolDeferred = "tool_deferred"

// MaxErrorBytes bounds Outcome.Error: 4 KiB, enough for any CLI error
// message, small enough to post on a surface.
const MaxErrorBytes = 4096

// truncatedSuffix marks a truncated Outcome.Error.
const truncatedSuffix = " ... (truncated)"

// Outcome is what a run came to. The JSON names are the ones of
// `orchestrator inspect --json`.
type Outcome struct {
	SessionID string   `json:"session_id"`
	Status    Status   `json:"status"`
	Category  Category `json:"error_category"`
	// Error is the error text, at most MaxErrorBytes plus a
	// " ... (truncated)" suffix; FullError is all of it.
	Error     string `json:"error,omitempty"`
	FullError string `json:"full_error,omitempty"`
	// Hint is a claw error envelope's hint.
	Hint      string  `json:"hint,omitempty"`
	FinalText string  `json:"final_text"`
	NumTurns  int     `json:"num_turns"`
	CostUSD   float64 `json:"cost_usd"`
	// TurnCostUSD is what this call of the CLI cost (Result.CostUSD);
	// CostUSD is the session's total so far, which on a resumed session
	// counts earlier calls again.
	TurnCostUSD float64 `json:"-"`
	Usage       Usage   `json:"usage"`
	// TerminalReason and APIErrorStatus come from the result line.
	TerminalReason string `json:"terminal_reason,omitempty"`
	APIErrorStatus int    `json:"api_error_status,omitempty"`
	// DeferredToolUse is the tool call the turn ended on when a hook
	// deferred it (StatusDeferred, CategoryToolDeferredUnavailable).
	DeferredToolUse *DeferredToolUse `json:"deferred_tool_use,omitempty"`
	// Model, APIKeySource and MCPServers come from the first init line.
	Model        string      `json:"model,omitempty"`
	APIKeySource string      `json:"api_key_source,omitempty"`
	MCPServers   []MCPServer `json:"mcp_servers,omitempty"`
	// PermissionDenials names tools the CLI refused (bounded).
	PermissionDenials []string `json:"permission_denials,omitempty"`
	// ExitCode is the CLI's exit code, -1 when unknown or killed by a
	// signal (then Signal names it).
	ExitCode       int           `json:"exit_code"`
	Signal         string        `json:"signal,omitempty"`
	Duration       time.Duration `json:"duration_ns"`
	MalformedLines int           `json:"malformed_lines"`
	OversizeLines  int           `json:"oversize_lines"`
	// FirstOversize is the first line skipped for being over the line cap:
	// its number, length and first bytes (Prefix: model output, untrusted),
	// so that callers can show what was skipped. Nil when none was.
	FirstOversize *Diagnostic `json:"first_oversize,omitempty"`
	// Warnings are advisory: the heuristics of Tracker.heuristics
	// (prefixes "interactive-hang:" and "background-task:"), failed MCP servers,
	// skipped lines, a process killed after its result, … Never nil.
	Warnings []string `json:"warnings"`
	// Diagnostics are the skipped lines and failed checks (bounded).
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	// Stderr is the CLI's standard error, bounded (head and tail kept).
	Stderr         string `json:"stderr,omitempty"`
	TranscriptPath string `json:"transcript_path,omitempty"`
	// Result is the last result event, nil when there was none.
	Result *Result `json:"-"`
}

// Exit is what the process side knows at the end of a run; Tracker.Outcome
// combines it with the events. The zero value means "nothing known" (a
// transcript replayed from a file).
type Exit struct {
	// Known is true when the process ran and was waited for.
	Known  bool
	Code   int    // exit code; -1 when killed by a signal
	Signal string // the signal that ended the process, if any
	// Stop is set when the run was ended from outside: CategoryCancelled,
	// CategoryTimeout, CategoryIdleTimeout, or CategoryCLINotFound when
	// the CLI could not be started. StopDetail says more.
	Stop       Category
	StopDetail string
	// ResultBeforeStop is true when the result line had arrived before the
	// run was stopped (a CLI hanging after its result): the result decides.
	ResultBeforeStop bool
	Stderr           string
	Duration         time.Duration
	// Stats, Diagnostics and FirstOversize come from the Reader.
	Stats         ReaderStats
	Diagnostics   []Diagnostic
	FirstOversize *Diagnostic
	// Warnings from the process side (killed after result, …).
	Warnings []string
	// TranscriptPath is where the raw stream was saved.
	TranscriptPath string
}

// maxListed bounds the lists an Outcome carries from a long transcript.
const maxListed = 50

// Tracker accumulates a run's events into an Outcome with bounded memory:
// it keeps the first init line, the last result, the last top-level
// assistant message and a few counters, never the transcript. The zero
// value is ready to use. It is not safe for concurrent use.
type Tracker struct {
	sessionID     string
	init          *SystemInit
	result        *Result
	lastAssistant *AssistantMessage
	// bgLaunches counts Task tool_uses with input.run_in_background true.
	bgLaunches  int
	denials     []string
	apiRetries  int
	assistantsN int
}

// Observe takes one event into account.
func (t *Tracker) Observe(ev Event) {
	if ev == nil {
		return
	}
	if sid := ev.SessionID(); sid != "" {
		t.sessionID = sid // latest wins
	}
	switch ev := ev.(type) {
	case *SystemInit:
		if t.init == nil {
			t.init = ev // first init wins: later ones (resumed sessions, sub-agents) do not change the run's model
		}
	case *SystemOther:
		switch ev.Subtype {
		case "api_retry":
			t.apiRetries++
		case "permission_denied":
			if ev.ToolName != "" && len(t.denials) < maxListed {
				t.denials = append(t.denials, ev.ToolName)
			}
		}
	case *AssistantMessage:
		if ev.ParentToolUseID != "" {
			return // a sub-agent's message
		}
		t.assistantsN++
		t.lastAssistant = ev
		for _, tu := range ev.ToolUses() {
			if tu.ToolName == "Task" && runInBackground(tu.Input) {
				t.bgLaunches++
			}
		}
	case *Result:
		t.result = ev // latest wins
	}
}

// SessionID returns the latest session id seen.
func (t *Tracker) SessionID() string { return t.sessionID }

// Result returns the last result event, or nil.
func (t *Tracker) Result() *Result { return t.result }

func runInBackground(input json.RawMessage) bool {
	var in struct {
		RunInBackground any `json:"run_in_background"`
	}
	if json.Unmarshal(input, &in) != nil {
		return false
	}
	b, ok := in.RunInBackground.(bool)
	return ok && b // strict `is True`
}

// Outcome turns what was observed plus the process side into an Outcome.
// What decides the status, in order: a stop from outside (unless the result
// line had arrived before it), the result line, a failed exit, else the
// stream simply ended.
func (t *Tracker) Outcome(x Exit) Outcome {
	o := t.observed(x)
	lastText := ""
	if t.lastAssistant != nil {
		lastText = strings.Join(t.lastAssistant.Texts(), "\n")
	}
	r := t.result
	switch {
	case x.Stop != "" && !(r != nil && x.ResultBeforeStop):
		o.Status = StatusError
		o.Category = x.Stop
		detail := x.StopDetail
		if detail == "" {
			detail = string(x.Stop)
		}
		o.setError(detail)
		o.FinalText = lastText
	case r != nil:
		t.decideByResult(&o, x, lastText)
	case x.Known && (x.Code != 0 || x.Signal != ""):
		o.Status = StatusError
		o.FinalText = lastText
		if sessionNotFound(x.Stderr) {
			o.Category = CategorySessionNotFound
		} else {
			o.Category = CategoryCrashed
		}
		o.setError(crashMessage(x))
	default:
		o.Status = StatusIncomplete
		o.Category = CategoryNoResult
		o.FinalText = lastText
		o.setError("the stream ended without a result line")
		o.Warnings = append(o.Warnings, "stream-json ended without a 'result' message; token usage unavailable")
	}
	return o
}

// observed is the part of the Outcome that does not depend on how the run
// ended: the process side's facts, the init line's model and MCP servers,
// the result's counters and usage when there is one, and the warnings
// (MCP servers not connected, skipped lines, the process side's).
func (t *Tracker) observed(x Exit) Outcome {
	o := Outcome{
		SessionID:      t.sessionID,
		ExitCode:       -1,
		Signal:         x.Signal,
		Duration:       x.Duration,
		MalformedLines: x.Stats.MalformedLines,
		OversizeLines:  x.Stats.OversizeLines,
		FirstOversize:  x.FirstOversize,
		Diagnostics:    x.Diagnostics,
		Stderr:         x.Stderr,
		TranscriptPath: x.TranscriptPath,
		Result:         t.result,
		Warnings:       []string{},
	}
	if x.Known {
		o.ExitCode = x.Code
	}
	if t.init != nil {
		o.Model = t.init.Model
		o.APIKeySource = t.init.APIKeySource
		o.MCPServers = t.init.MCPServers
		for _, s := range t.init.MCPServers {
			if s.Status != "connected" {
				o.Warnings = append(o.Warnings, fmt.Sprintf("mcp: server %q is %s", s.Name, s.Status))
			}
		}
	}
	o.PermissionDenials = t.denials
	o.Warnings = appendSkipped(o.Warnings, x)
	o.Warnings = append(o.Warnings, x.Warnings...)
	if r := t.result; r != nil {
		o.NumTurns = r.NumTurns
		o.CostUSD, o.TurnCostUSD = r.TotalCostUSD, r.CostUSD
		o.Usage = r.Usage
	}
	return o
}

// appendSkipped appends a warning for each line the Reader skipped (while
// warnings has fewer than maxListed), then how many more were skipped than
// the diagnostics list.
func appendSkipped(warnings []string, x Exit) []string {
	for _, d := range x.Diagnostics {
		if d.Kind != DiagCheck && len(warnings) < maxListed {
			warnings = append(warnings, "skipped "+d.String())
		}
	}
	if n := x.Stats.MalformedLines + x.Stats.OversizeLines; n > 0 {
		listed := 0
		for _, d := range x.Diagnostics {
			if d.Kind != DiagCheck {
				listed++
			}
		}
		if n > listed {
			warnings = append(warnings, fmt.Sprintf("%d more skipped lines not listed", n-listed))
		}
	}
	return warnings
}

// decideByResult completes o from the result line: an error result is
// classified, a deferred tool call gives StatusDeferred, anything else is a
// success checked by the heuristics. lastText is the last top-level
// assistant message's text, the final text when the result has none.
func (t *Tracker) decideByResult(o *Outcome, x Exit, lastText string) {
	r := t.result
	o.NumTurns = r.NumTurns
	o.CostUSD, o.TurnCostUSD = r.TotalCostUSD, r.CostUSD
	o.Usage = r.Usage
	o.TerminalReason = r.TerminalReason
	o.APIErrorStatus = r.APIErrorStatus
	o.Hint = r.Hint
	o.DeferredToolUse = r.DeferredToolUse
	if len(r.PermissionDenials) > 0 && len(o.PermissionDenials) == 0 {
		o.PermissionDenials = r.PermissionDenials
	}
	switch {
	case r.IsError:
		o.Status = StatusError
		text := r.Text
		if text == "" {
			text = strings.Join(r.Errors, "\n")
		}
		o.Category = classifyResult(r, text)
		if text == "" {
			text = "API error (no detail)"
		}
		o.setError(text)
		o.FinalText = lastText
	case r.TerminalReason == terminalToolDeferred:
		o.Status = StatusDeferred
		o.Category = CategoryToolDeferred
		o.FinalText = r.Text
		if r.Text == "" {
			o.FinalText = lastText
		}
	default:
		o.Status = StatusSuccess
		o.FinalText = r.Text
		if !r.HasText {
			o.FinalText = lastText
		}
		o.Warnings = append(o.Warnings, t.heuristics(r, o.FinalText)...)
		if x.Known && x.Code > 0 && x.Stop == "" {
			o.Warnings = append(o.Warnings, fmt.Sprintf("the CLI exited with code %d after a successful result", x.Code))
		}
	}
}

// crashMessage says how a CLI that failed without a result line ended, with
// the last lines of its stderr.
func crashMessage(x Exit) string {
	how := fmt.Sprintf("exit code %d", x.Code)
	if x.Signal != "" {
		how = "signal " + x.Signal
	}
	msg := "the CLI ended with " + how + " and no result line"
	if tail := lastLines(x.Stderr, 5); tail != "" {
		msg += ": " + tail
	}
	return msg
}

func (o *Outcome) setError(text string) {
	o.FullError = text
	o.Error = TruncateError(text)
}

// TruncateError cuts text to MaxErrorBytes (on a rune boundary) and marks
// the cut with " ... (truncated)".
func TruncateError(text string) string {
	if len(text) <= MaxErrorBytes {
		return text
	}
	n := MaxErrorBytes
	for n > 0 && text[n]&0xC0 == 0x80 {
		n--
	}
	return text[:n] + truncatedSuffix
}

func classifyResult(r *Result, text string) Category {
	if r.Kind != "" {
		if c := classifyClawKind(r.Kind); c != "" {
			return c
		}
	}
	if sessionNotFound(text) {
		return CategorySessionNotFound
	}
	if r.TerminalReason == string(CategoryToolDeferredUnavailable) {
		return CategoryToolDeferredUnavailable
	}
	switch r.APIErrorStatus {
	case 429:
		return CategoryRateLimit
	case 401, 403:
		return CategoryAuth
	}
	// The keywords decide whatever the subtype: an error_max_turns result
	// whose text is a 429 is a rate limit.
	if c := ClassifyError(text); c != CategoryAPI {
		return c
	}
	if r.Subtype == "error_max_turns" || r.TerminalReason == "max_turns" {
		return CategoryMaxTurns
	}
	if r.Subtype == "error_max_budget_usd" || r.TerminalReason == "budget_exhausted" {
		return CategoryMaxBudget
	}
	return CategoryAPI
}

// ClassifyError applies the keyword rules to an error text, case
// insensitively: "429" / "rate limit" / "rate-limit" → rate_limit, checked
// before "401" / "403" / "unauthorized" / "authentication" / "auth error" /
// "ANTHROPIC_API_KEY" → auth; anything else → api. Only the first
// MaxErrorBytes are looked at.
func ClassifyError(text string) Category {
	if len(text) > MaxErrorBytes {
		text = text[:MaxErrorBytes]
	}
	l := strings.ToLower(text)
	for _, k := range []string{"429", "rate limit", "rate-limit"} {
		if strings.Contains(l, k) {
			return CategoryRateLimit
		}
	}
	for _, k := range []string{"401", "403", "unauthorized", "authentication", "auth error", "anthropic_api_key"} {
		if strings.Contains(l, k) {
			return CategoryAuth
		}
	}
	return CategoryAPI
}

// sessionNotFound recognises the CLI's "no such session" errors: an unknown
// UUID, or a --resume value that is neither a UUID nor a session title.
func sessionNotFound(text string) bool {
	return strings.Contains(text, "No conversation found with session ID") ||
		strings.Contains(text, "does not match any session")
}

var backgroundWords = regexp.MustCompile(`(?i)\b(waiting on|still waiting|continuing|in progress|in the background)\b`)

// heuristics are advisory detectors, run on a successful result.
// They only warn: interactive-hang wins over background-task.
func (t *Tracker) heuristics(r *Result, finalText string) []string {
	if a := t.lastAssistant; a != nil && r.NumTurns == 1 {
		stop := a.StopReason
		if stop == "" {
			stop = r.StopReason // the real CLI puts it on the result only
		}
		if stop == "end_turn" {
			text := strings.TrimSpace(strings.Join(a.Texts(), "\n"))
			asked := false
			for _, tu := range a.ToolUses() {
				if tu.ToolName == "AskUserQuestion" {
					asked = true
				}
			}
			if strings.HasSuffix(text, "?") || asked {
				return []string{"interactive-hang: a single-turn run ended by asking the user for input"}
			}
		}
	}
	if t.bgLaunches > 0 && (backgroundWords.MatchString(finalText) || r.NumTurns < t.bgLaunches+2) {
		return []string{fmt.Sprintf("background-task: %d background Task launch(es) may not have completed", t.bgLaunches)}
	}
	return nil
}

func lastLines(s string, n int) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Replay reads a saved stream-json transcript (a turn's file, or stdin for
// `orchestrator inspect -`) and returns its Outcome with the skipped-line
// counts; observe, when not nil, sees every event in order (to collect the
// model's questions, say). Without a process, a transcript that has no
// result line is StatusIncomplete / CategoryNoResult and Outcome.Result is
// nil. The error is a read error only; the Outcome is still what was read.
func Replay(r io.Reader, opts ReaderOptions, observe func(Event)) (Outcome, error) {
	rd := NewReader(r, opts)
	var t Tracker
	for rd.Next() {
		ev := rd.Event()
		t.Observe(ev)
		if observe != nil {
			observe(ev)
		}
	}
	o := t.Outcome(Exit{Stats: rd.Stats(), Diagnostics: rd.Diagnostics(), FirstOversize: rd.FirstOversize()})
	if err := rd.Err(); err != nil {
		return o, fmt.Errorf("read transcript: %w", err)
	}
	return o, nil
}
