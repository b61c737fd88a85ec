package surfaces

import (
	"context"
	"strings"
)

// Remembered decisions (docs/rules.md). A person who answers on a surface
// may keep the answer as a rule: the same question asked later in the
// rule's scope is answered by it at once and asked nowhere. A surface
// offers that as a choice beside the answer — GitHub's
// `/answer QID 1 --remember spec:7d`, a Discord or Slack button or select
// "Remember for this spec 7d" — and, once its Offer was taken and closed
// the set, calls Remember on the Answers it was given, when they implement
// Rememberer (a type assertion, as for the other optional capabilities).
//
// Who may: on a surface only spec rules are made. The people a surface
// lets answer are allowed in the runs of the specs that ask there; a repo
// or all rule would answer runs asked on other surfaces, to other people,
// so it is made with `orchestrator answer --remember` (the operator) or
// the web inbox. Remember refuses another scope with an error that says so.

// Rememberer is implemented by Answers that can keep an answer as a rule.
// Remember is called after the set's answer was taken, with the same By and
// Surface as the answer: the store checks that By gave the whole answer,
// and decides in one transaction. An error is a refusal to tell the person
// (its text is short and plain) or a failure of the store.
type Rememberer interface {
	Remember(ctx context.Context, req RememberRequest) (Remembered, error)
}

// RememberRequest asks to keep the answer to a set as a rule.
type RememberRequest struct {
	SetID   string
	By      string
	Surface string
	// Remember is the scope and lifetime as the person wrote or chose them,
	// "spec:7d" ("spec", "repo" or "all"; days or a duration; no lifetime:
	// the longest allowed, rules.max_lifetime). Surfaces make "spec" ones.
	Remember string
	// Pattern widens an approval's grant to a tool rule ("Bash(go test:*)");
	// "" keeps the very call.
	Pattern string
}

// Remembered is the rule kept.
type Remembered struct {
	RuleID string
	// Text says what was kept, for the person ("kept as rule r3fa9c1d2:
	// JWT for spec nightly until 2026-12-03"); plain text.
	Text string
}

// CutRemember splits a trailing "--remember VALUE" (and "--rule RULE",
// the rest of the line) off an answer's text, as a surface reads a typed answer such as
// "/answer q7f3a 2 --remember spec:7d". value is "" when there is none;
// ok is false when the flag is there without a value.
func CutRemember(text string) (answer, value, pattern string, ok bool) {
	i := strings.Index(text, "--remember")
	if i < 0 {
		return text, "", "", true
	}
	answer = strings.TrimSpace(text[:i])
	rest := text[i+len("--remember"):]
	if j := strings.Index(rest, "--rule"); j >= 0 {
		pattern, rest = strings.TrimSpace(rest[j+len("--rule"):]), rest[:j]
		if pattern == "" {
			return answer, "", "", false
		}
	}
	if f := strings.Fields(rest); len(f) == 1 {
		return answer, f[0], pattern, true
	}
	return answer, "", "", false
}
