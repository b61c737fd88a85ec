// Package questions is the protocol between the model and people: finding the
// questions the model asks in its text, reading the answers people give, and
// handing those answers back to the model safely.
//
// It depends on nothing but the standard library.
package questions

import "time"

// Option is one choice offered to a person.
type Option struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Question is one question the model asked. It mirrors the input of Claude
// Code's AskUserQuestion tool, plus FreeText.
type Question struct {
	// ID is a short, human-typable identifier such as "q7f3a",
	// deterministic from the run, the turn and the question's position.
	ID          string   `json:"id,omitempty"`
	Text        string   `json:"question"`
	Header      string   `json:"header,omitempty"`
	Options     []Option `json:"options,omitempty"`
	MultiSelect bool     `json:"multiSelect,omitempty"`
	FreeText    bool     `json:"freeText,omitempty"`
}

// AcceptsFreeText reports whether a person may answer q in their own words:
// a question without options always does, one with options only when FreeText
// is set.
func (q Question) AcceptsFreeText() bool { return q.FreeText || len(q.Options) == 0 }

// Set is the questions of one model turn, asked and answered together. A turn
// that carries several markers yields one Set with all their questions, in order.
type Set struct {
	// ID is deterministic from RunID and Turn.
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	Turn  int    `json:"turn"`
	// Title says what the run is about (the spec's name or the prompt's
	// first line), for surfaces that show it.
	Title string `json:"title,omitempty"`
	// Context is the model's text of the turn with the markers removed.
	// It is model output: surfaces clean it before showing it.
	Context   string     `json:"context,omitempty"`
	Questions []Question `json:"questions"`
	// Kind is how the model asked: KindMarker (also when empty),
	// KindAskTool or KindApproval (native.go).
	Kind string `json:"kind,omitempty"`
	// Tool is the tool call an ask_tool or approval set is about.
	Tool *ToolCall `json:"tool,omitempty"`
	// Group lists the other runs the same question waits in (Fingerprint),
	// as the run loop found them when it showed the set: surfaces say so
	// and offer to answer them all (surfaces.GroupAnswers). It is not part
	// of what the model asked, and is never stored.
	Group []GroupRun `json:"group,omitempty"`
	// GroupMore: the question waits in more runs than Group lists (at
	// most GroupShown).
	GroupMore bool `json:"group_more,omitempty"`
}

// Question returns the question of s with the given short ID.
func (s Set) Question(id string) (Question, bool) {
	for _, q := range s.Questions {
		if q.ID == id {
			return q, true
		}
	}
	return Question{}, false
}

// Answer is a person's answer to one question.
type Answer struct {
	QuestionID string `json:"question_id"`
	// Labels are the chosen options' labels, in the options' order.
	Labels []string `json:"labels,omitempty"`
	// Text is the free text given, if any.
	Text string `json:"text,omitempty"`
}

// Response is a complete answer to a Set: one Answer per question.
type Response struct {
	SetID   string   `json:"set_id"`
	Answers []Answer `json:"answers"`
	// By names who answered, the way the surface knows them
	// (for example "@octocat", "alice (discord 80351110224678912)", "terminal").
	By string `json:"by"`
	// Surface names where the answer came from ("github", "discord",
	// "terminal", "cli", "spec").
	Surface string    `json:"surface"`
	At      time.Time `json:"at"`
}

// Answer returns the answer to the question with the given short ID.
func (r Response) Answer(questionID string) (Answer, bool) {
	for _, a := range r.Answers {
		if a.QuestionID == questionID {
			return a, true
		}
	}
	return Answer{}, false
}
