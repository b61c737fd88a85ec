// Package output is the one shape of each thing the orchestrator prints as
// JSON: a run, a question set with its questions and answers. The CLI's
// --json outputs (cmd/orchestrator) and the web inbox's API (internal/web)
// both use these types, so a run or a question set looks the same wherever
// it appears. docs/json.md is the contract: snake_case, "v": 1 at the top
// level (set by the printer), model and human text made printable, never a
// run's options (agent.env may hold secrets).
package output

import (
	"encoding/json"
	"math"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Run is a run. Its prompt and options (agent.env) are left out.
type Run struct {
	ID        string    `json:"id"`
	Spec      string    `json:"spec,omitempty"`
	Title     string    `json:"title"`
	Status    string    `json:"status"`
	WorkDir   string    `json:"workdir"`
	Surfaces  []string  `json:"surfaces"`
	SessionID string    `json:"session_id,omitempty"`
	CostUSD   float64   `json:"cost_usd"`
	Error     string    `json:"error,omitempty"`
	FinalText string    `json:"final_text,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Host is the machine whose working directory the run stays with, on
	// a database several instances share, when its work is not delivered
	// through git (only the instances there drive it).
	Host string `json:"host,omitempty"`
	// DrivenBy is the instance (host/pid/…) holding the run's lease now,
	// on a shared database; status fills it in.
	DrivenBy string `json:"driven_by,omitempty"`
}

func NewRun(r store.Run) Run {
	return Run{ID: r.ID, Spec: r.Spec, Title: questions.Printable(r.Title), Status: string(r.Status), WorkDir: r.WorkDir,
		Surfaces: nonNil(r.Surfaces), SessionID: r.SessionID, CostUSD: USD(r.CostUSD), Error: questions.Printable(r.Error),
		FinalText: questions.Printable(r.FinalText), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Host: questions.Printable(r.Host)}
}

// Set is a question set: the questions of one turn, where they were
// asked, and the answers given so far.
type Set struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	Turn  int    `json:"turn"`
	// Kind is how the model asked: marker, ask_tool or approval.
	Kind string `json:"kind"`
	// Tool is the tool call an ask_tool or approval set is about.
	Tool      *SetTool   `json:"tool,omitempty"`
	State     string     `json:"state,omitempty"`
	Surfaces  []string   `json:"surfaces,omitempty"`
	Questions []Question `json:"questions"`
	Response  *Response  `json:"response,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

type SetTool struct {
	ToolUseID   string          `json:"tool_use_id"`
	Name        string          `json:"name"`
	Input       json.RawMessage `json:"input,omitempty"`
	Description string          `json:"description,omitempty"`
}

type Question struct {
	ID          string   `json:"id,omitempty"` // none in inspect: a transcript has no run
	Header      string   `json:"header,omitempty"`
	Text        string   `json:"question"`
	Options     []Option `json:"options,omitempty"`
	MultiSelect bool     `json:"multi_select,omitempty"`
	FreeText    bool     `json:"free_text,omitempty"`
	Answered    bool     `json:"answered"`
}

type Option struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

type Response struct {
	By      string    `json:"by"`
	Surface string    `json:"surface"`
	At      time.Time `json:"at"`
	Answers []Answer  `json:"answers"`
}

type Answer struct {
	QuestionID string   `json:"question_id"`
	Labels     []string `json:"labels,omitempty"`
	Text       string   `json:"text,omitempty"`
}

func NewQuestion(q questions.Question) Question {
	out := Question{ID: q.ID, Header: questions.Printable(q.Header), Text: questions.Printable(q.Text),
		MultiSelect: q.MultiSelect, FreeText: q.AcceptsFreeText()}
	for _, o := range q.Options {
		out.Options = append(out.Options, Option{Label: questions.Printable(o.Label), Description: questions.Printable(o.Description)})
	}
	return out
}

// NewSet shapes a set; resp may be nil (nothing answered yet).
func NewSet(set questions.Set, resp *questions.Response) Set {
	out := Set{ID: set.ID, RunID: set.RunID, Turn: set.Turn, Kind: questions.KindOf(set), Questions: []Question{}}
	if c := set.Tool; c != nil {
		out.Tool = &SetTool{ToolUseID: c.ToolUseID, Name: questions.Printable(c.Tool), Description: questions.Printable(c.Description)}
		// The model's input, every string in it made printable: a
		// consumer that decodes and prints it gets no escape sequence.
		out.Tool.Input = questions.PrintableJSON(c.Input)
	}
	for _, q := range set.Questions {
		jq := NewQuestion(q)
		if resp != nil {
			_, jq.Answered = resp.Answer(q.ID)
		}
		out.Questions = append(out.Questions, jq)
	}
	if resp != nil && len(resp.Answers) > 0 {
		jr := &Response{By: questions.Printable(resp.By), Surface: resp.Surface, At: resp.At.UTC(), Answers: []Answer{}}
		for _, a := range resp.Answers {
			ja := Answer{QuestionID: a.QuestionID, Text: questions.Printable(a.Text)}
			for _, l := range a.Labels {
				ja.Labels = append(ja.Labels, questions.Printable(l))
			}
			jr.Answers = append(jr.Answers, ja)
		}
		out.Response = jr
	}
	return out
}

// NewSetRecord shapes a stored set.
func NewSetRecord(rec store.SetRecord) Set {
	out := NewSet(rec.Set, &rec.Response)
	out.State = string(rec.State)
	out.Surfaces = nonNil(rec.Surfaces)
	created := rec.CreatedAt.UTC()
	out.CreatedAt = &created
	return out
}

// USD rounds a cost to a millionth of a dollar (no float noise in JSON).
func USD(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
