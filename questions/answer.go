package questions

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// InvalidAnswerError is a person's answer that could not be read. Message is
// for people and says what would be accepted; Valid lists the accepted forms
// ("1", "OAuth2", "1,2", "other: <your answer>", …) for surfaces that show
// them as buttons or hints.
type InvalidAnswerError struct {
	QuestionID string // the question concerned, if one
	Message    string
	Valid      []string
}

func (e *InvalidAnswerError) Error() string { return e.Message }

// ParseQuestionAnswer reads a person's answer to q from text.
//
// For a question with options, in this order: the whole text as an option
// number ("2") or a label (ignoring case), then "other: …" for free text when
// q.FreeText, then for q.MultiSelect a list ("1,3", "1 3", "OAuth2, JWT"),
// then a unique label prefix ("oa"). A number wins over a label that looks
// like a number of another option. Whatever else is free text when q.FreeText
// and an error otherwise. A question without options takes any non-blank
// text. Answer.Labels follow the options' order.
func ParseQuestionAnswer(q Question, text string) (Answer, error) {
	a := Answer{QuestionID: q.ID}
	text = strings.TrimSpace(text)
	if text == "" {
		return a, invalidAnswer(q, "the answer is empty")
	}
	if strings.TrimSpace(Printable(text)) == "" {
		// What the model would get is cleaned: nothing would be left.
		return a, invalidAnswer(q, "the answer is empty once invisible characters, control characters and HTML comments are removed")
	}
	if len(q.Options) == 0 {
		a.Text = text
		return a, nil
	}
	if i, ok := optionExact(q, text); ok {
		a.Labels = []string{q.Options[i].Label}
		return a, nil
	}
	list, other, hasOther := splitOther(text)
	if hasOther && q.FreeText {
		if other == "" {
			return a, invalidAnswer(q, `"other:" needs your answer after it`)
		}
		a.Text = other
		if list == "" {
			return a, nil
		}
		if !q.MultiSelect {
			return a, invalidAnswer(q, "choose one option or give your own answer with \"other: …\", not both")
		}
		idx, err := parseList(q, list)
		if err != nil {
			return a, err
		}
		a.Labels = labelsOf(q, idx)
		return a, nil
	}
	if q.MultiSelect {
		if idx, err := parseList(q, text); err == nil {
			a.Labels = labelsOf(q, idx)
			return a, nil
		} else if !q.FreeText {
			return a, err
		}
	} else if i, ambiguous := optionPrefix(q, text); i >= 0 {
		a.Labels = []string{q.Options[i].Label}
		return a, nil
	} else if len(ambiguous) > 1 && !q.FreeText {
		return a, invalidAnswer(q, fmt.Sprintf("%q matches several options (%s)", text, strings.Join(ambiguous, ", ")))
	}
	if q.FreeText {
		a.Text = text
		return a, nil
	}
	return a, invalidAnswer(q, fmt.Sprintf("%q is not one of the options", clip(text, 60)))
}

// optionExact resolves a whole token: an option number or a label.
func optionExact(q Question, tok string) (int, bool) {
	if n, err := strconv.Atoi(tok); err == nil && n >= 1 && n <= len(q.Options) {
		return n - 1, true
	}
	key := labelKey(tok)
	for i, o := range q.Options {
		if labelKey(o.Label) == key {
			return i, true
		}
	}
	return -1, false
}

// optionPrefix resolves a unique label prefix; on no match it returns -1 and
// the labels matched (several when ambiguous).
func optionPrefix(q Question, tok string) (int, []string) {
	key := labelKey(tok)
	if key == "" {
		return -1, nil
	}
	found := -1
	var matched []string
	for i, o := range q.Options {
		if strings.HasPrefix(labelKey(o.Label), key) {
			found = i
			matched = append(matched, o.Label)
		}
	}
	if len(matched) == 1 {
		return found, matched
	}
	return -1, matched
}

func resolve(q Question, tok string) (int, error) {
	if i, ok := optionExact(q, tok); ok {
		return i, nil
	}
	i, matched := optionPrefix(q, tok)
	if i >= 0 {
		return i, nil
	}
	if len(matched) > 1 {
		return -1, invalidAnswer(q, fmt.Sprintf("%q matches several options (%s)", tok, strings.Join(matched, ", ")))
	}
	return -1, invalidAnswer(q, fmt.Sprintf("%q is not one of the options", clip(tok, 60)))
}

// parseList reads several choices: separated by ',' or ';' when there are
// any, else by spaces.
func parseList(q Question, text string) ([]bool, error) {
	var parts []string
	if strings.ContainsAny(text, ",;") {
		parts = strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ';' })
	} else {
		parts = strings.Fields(text)
	}
	chosen := make([]bool, len(q.Options))
	n := 0
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		i, err := resolve(q, p)
		if err != nil {
			return nil, err
		}
		chosen[i] = true
		n++
	}
	if n == 0 {
		return nil, invalidAnswer(q, "no option chosen")
	}
	if !q.MultiSelect && n > 1 {
		return nil, invalidAnswer(q, "choose only one option")
	}
	return chosen, nil
}

func labelsOf(q Question, chosen []bool) []string {
	var out []string
	for i, c := range chosen {
		if c {
			out = append(out, q.Options[i].Label)
		}
	}
	return out
}

// splitOther finds "other:" (any case) at the start of text or after a
// separator, and returns what is before (trimmed of separators) and after.
func splitOther(text string) (before, after string, ok bool) {
	low := strings.ToLower(text)
	for from := 0; ; {
		i := strings.Index(low[from:], "other:")
		if i < 0 {
			return "", "", false
		}
		i += from
		if i == 0 || strings.ContainsRune(" \t\n,;", rune(low[i-1])) {
			before = strings.TrimRight(text[:i], " \t\n,;")
			return before, strings.TrimSpace(text[i+len("other:"):]), true
		}
		from = i + 1
	}
}

func invalidAnswer(q Question, why string) *InvalidAnswerError {
	valid := validForms(q)
	var hint string
	switch {
	case len(q.Options) == 0:
		hint = "answer in your own words"
	case q.MultiSelect:
		hint = fmt.Sprintf("answer with one or more option numbers (1-%d) or labels, separated by commas", len(q.Options))
	default:
		hint = fmt.Sprintf("answer with an option number (1-%d) or label", len(q.Options))
	}
	if len(q.Options) > 0 {
		labels := make([]string, len(q.Options))
		for i, o := range q.Options {
			labels[i] = fmt.Sprintf("%d. %s", i+1, o.Label)
		}
		hint += ": " + strings.Join(labels, ", ")
		if q.FreeText {
			hint += `; or "other: <your answer>"`
		}
	}
	return &InvalidAnswerError{QuestionID: q.ID, Message: why + "; " + hint, Valid: valid}
}

func validForms(q Question) []string {
	if len(q.Options) == 0 {
		return []string{"<your answer>"}
	}
	var v []string
	for i := range q.Options {
		v = append(v, strconv.Itoa(i+1))
	}
	for _, o := range q.Options {
		v = append(v, o.Label)
	}
	if q.MultiSelect && len(q.Options) > 1 {
		v = append(v, "1,2")
	}
	if q.FreeText {
		v = append(v, "other: <your answer>")
	}
	return v
}

// ParseAnswer reads a person's answers to a whole set from text. A set of
// one question takes the bare answer (or "key: answer" with the key below).
// A set of several takes one line per question, "key: answer", where key is
// the question's number ("1"), short ID ("q7f3a") or header ("Auth"), all
// ignoring case; a line without a known key answers the next unanswered
// question in order. Every question must be answered exactly once. The
// answers come in the set's order.
func ParseAnswer(set Set, text string) ([]Answer, error) {
	if len(set.Questions) == 0 {
		return nil, &InvalidAnswerError{Message: "there is no question to answer"}
	}
	if len(set.Questions) == 1 {
		q := set.Questions[0]
		t := strings.TrimSpace(text)
		if k, rest, ok := cutKey(set, t); ok && k == 0 && rest != "" {
			if a, err := ParseQuestionAnswer(q, rest); err == nil {
				return []Answer{a}, nil
			}
		}
		a, err := ParseQuestionAnswer(q, t)
		if err != nil {
			return nil, err
		}
		return []Answer{a}, nil
	}
	answers := make([]Answer, len(set.Questions))
	done := make([]bool, len(set.Questions))
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, rest, ok := cutKey(set, line)
		if !ok {
			k, rest = -1, line
			for i, d := range done {
				if !d {
					k = i
					break
				}
			}
			if k < 0 {
				return nil, &InvalidAnswerError{Message: fmt.Sprintf("%q: every question is already answered; %s", clip(line, 60), keyHint(set)), Valid: keyForms(set)}
			}
		}
		if done[k] {
			return nil, &InvalidAnswerError{QuestionID: set.Questions[k].ID,
				Message: fmt.Sprintf("question %d (%s) is answered twice", k+1, set.Questions[k].ID), Valid: keyForms(set)}
		}
		a, err := ParseQuestionAnswer(set.Questions[k], rest)
		if err != nil {
			e := err.(*InvalidAnswerError)
			e.Message = fmt.Sprintf("question %d (%s): %s", k+1, set.Questions[k].ID, e.Message)
			return nil, e
		}
		answers[k], done[k] = a, true
	}
	var missing []string
	for i, d := range done {
		if !d {
			missing = append(missing, fmt.Sprintf("%d (%s)", i+1, set.Questions[i].ID))
		}
	}
	if len(missing) > 0 {
		return nil, &InvalidAnswerError{Message: fmt.Sprintf("no answer to question %s; %s", strings.Join(missing, ", "), keyHint(set)), Valid: keyForms(set)}
	}
	return answers, nil
}

// cutKey splits "key: rest" when key names a question of set.
func cutKey(set Set, line string) (int, string, bool) {
	key, rest, ok := strings.Cut(line, ":")
	if !ok {
		return 0, "", false
	}
	key = strings.TrimSpace(key)
	rest = strings.TrimSpace(rest)
	if key == "" {
		return 0, "", false
	}
	if n, err := strconv.Atoi(key); err == nil {
		if n >= 1 && n <= len(set.Questions) {
			return n - 1, rest, true
		}
		return 0, "", false
	}
	for i, q := range set.Questions {
		if q.ID != "" && strings.EqualFold(q.ID, key) {
			return i, rest, true
		}
	}
	found := -1
	for i, q := range set.Questions {
		if q.Header != "" && strings.EqualFold(strings.TrimSpace(q.Header), key) {
			if found >= 0 {
				return 0, "", false // ambiguous header
			}
			found = i
		}
	}
	if found >= 0 {
		return found, rest, true
	}
	return 0, "", false
}

func keyHint(set Set) string {
	return "answer one line per question, such as " + strings.Join(keyForms(set), " / ")
}

func keyForms(set Set) []string {
	var v []string
	for i, q := range set.Questions {
		k := strconv.Itoa(i + 1)
		if q.ID != "" {
			k = q.ID
		}
		v = append(v, k+": <answer>")
	}
	return v
}

// clip shortens s to at most n runes for messages.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
