package fakeapi

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// markerPrefix starts a question marker in the model's text.
const markerPrefix = "<!--QUESTION:"

// RehearsalQuestion is the one question the [Rehearsal] script asks.
func RehearsalQuestion() questions.Question {
	return questions.Question{
		Text:   "Which login approach should I use?",
		Header: "Approach",
		Options: []questions.Option{
			{Label: "Server-side sessions", Description: "A session cookie backed by the app's store; simple, and easy to revoke."},
			{Label: "Signed JWT", Description: "Stateless signed tokens; no session store, but harder to revoke."},
			{Label: "GitHub OAuth", Description: "Sign in with GitHub; no passwords for the app to keep."},
		},
	}
}

// Rehearsal is a scripted model for a rehearsal of the whole loop: it asks
// one question, then finishes.
//
// To the first prompt of a conversation it replies with a short plan and one
// question marker, <!--QUESTION:{"questions":[…]}--> with
// [RehearsalQuestion]. To any later user message (the answer, sent on with
// --resume) it replies "Done. Implemented using <label>." with the label of
// the option the message names; when it names several, the one named last
// wins, and when it names none, the reply quotes the message's first line.
func Rehearsal() []Rule {
	return []Rule{{Respond: rehearse}}
}

// NewRehearsal returns a server that runs the [Rehearsal] script.
func NewRehearsal() *Server { return New(Rehearsal()...) }

func rehearse(req Request) Reply {
	q := RehearsalQuestion()
	if !askedBefore(req.Messages) {
		return Reply{Text: rehearsalPlan(q), Chunks: 4}
	}
	if label := namedOption(req.LastUserText, q.Options); label != "" {
		return Reply{Text: "Done. Implemented using " + label + "."}
	}
	answer, _, _ := strings.Cut(strings.TrimSpace(req.LastUserText), "\n")
	if r := []rune(answer); len(r) > 80 {
		answer = string(r[:80]) + "…"
	}
	return Reply{Text: "Done. Implemented as you said: “" + answer + "”."}
}

// askedBefore reports whether an assistant message of msgs asked a question.
func askedBefore(msgs []Message) bool {
	for _, m := range msgs {
		if m.Role == "assistant" && strings.Contains(m.Text(), markerPrefix) {
			return true
		}
	}
	return false
}

// namedOption returns the label of the option that text names last
// (case-insensitively), or "" when it names none.
func namedOption(text string, opts []questions.Option) string {
	lower := strings.ToLower(text)
	best, bestAt := "", -1
	for _, o := range opts {
		if at := strings.LastIndex(lower, strings.ToLower(o.Label)); at > bestAt {
			best, bestAt = o.Label, at
		}
	}
	return best
}

// rehearsalPlan is the first reply: a plan and a marker asking q.
func rehearsalPlan(q questions.Question) string {
	var marker bytes.Buffer
	enc := json.NewEncoder(&marker)
	enc.SetEscapeHTML(false)
	// Encoding plain strings and slices cannot fail.
	_ = enc.Encode(map[string]any{"questions": []questions.Question{q}})
	return "Here is my plan:\n\n" +
		"1. Add a /login page with a username and password form.\n" +
		"2. Check the credentials and remember the signed-in user.\n" +
		"3. Send signed-out visitors to /login.\n\n" +
		"One decision before I start: how should people sign in?\n\n" +
		markerPrefix + strings.TrimSpace(marker.String()) + "-->"
}
