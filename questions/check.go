package questions

import (
	"cmp"
	"fmt"
	"slices"
)

// Whether an answer fits its set is decided here, once, for every surface and
// the store (store.Offer): pure functions of the set and the answer.

// CheckPartial reports whether resp is a valid answer to some questions of
// set: the set's ID, at least one answer, each to a question of set, in the
// set's order, each with only offered labels (one at most unless the
// question is multiSelect), free text only where accepted, and not empty.
// A response with one answer per question that passes is complete.
func CheckPartial(set Set, resp Response) error {
	if resp.SetID != set.ID {
		return fmt.Errorf("answer is to set %q, not %q", resp.SetID, set.ID)
	}
	if len(resp.Answers) == 0 {
		return fmt.Errorf("answer to set %s answers no question", set.ID)
	}
	next := 0 // answers must follow the set's order
	for i, a := range resp.Answers {
		j := slices.IndexFunc(set.Questions, func(q Question) bool { return q.ID == a.QuestionID })
		if j < 0 {
			return fmt.Errorf("answer %d of set %s is to question %q, which the set does not have", i+1, set.ID, a.QuestionID)
		}
		if j < next {
			return fmt.Errorf("answer %d of set %s is to question %q, out of order or twice", i+1, set.ID, a.QuestionID)
		}
		next = j + 1
		if err := checkAnswer(set, i, set.Questions[j], a); err != nil {
			return err
		}
	}
	return nil
}

func checkAnswer(set Set, i int, q Question, a Answer) error {
	if a.QuestionID != q.ID {
		return fmt.Errorf("answer %d of set %s is to question %q, not %q", i+1, set.ID, a.QuestionID, q.ID)
	}
	if len(a.Labels) == 0 && a.Text == "" {
		return fmt.Errorf("answer to question %s is empty", q.ID)
	}
	if len(a.Labels) > 1 && !q.MultiSelect {
		return fmt.Errorf("answer to question %s chooses %d options; it takes one", q.ID, len(a.Labels))
	}
	for _, l := range a.Labels {
		if !slices.ContainsFunc(q.Options, func(o Option) bool { return o.Label == l }) {
			return fmt.Errorf("answer to question %s chooses %q, which is not an option", q.ID, l)
		}
	}
	if a.Text != "" && !q.AcceptsFreeText() {
		return fmt.Errorf("answer to question %s has free text; it takes options only", q.ID)
	}
	return nil
}

// InSetOrder puts resp's answers in the order of the set's questions (a web
// form's fields come in any order); answers to questions the set does not
// have stay last, for CheckPartial to name.
func InSetOrder(set Set, resp Response) Response {
	pos := func(a Answer) int {
		if i := slices.IndexFunc(set.Questions, func(q Question) bool { return q.ID == a.QuestionID }); i >= 0 {
			return i
		}
		return len(set.Questions)
	}
	out := resp
	out.Answers = slices.Clone(resp.Answers)
	slices.SortStableFunc(out.Answers, func(a, b Answer) int { return cmp.Compare(pos(a), pos(b)) })
	return out
}

// Unanswered is set less the questions already answered in resp.
func Unanswered(set Set, resp Response) Set {
	out := set
	out.Questions = nil
	for _, q := range set.Questions {
		if _, ok := resp.Answer(q.ID); !ok {
			out.Questions = append(out.Questions, q)
		}
	}
	return out
}

// Decision is what became of an answer offered for a set (the store's
// Offer decides; surfaces.Decision is this type).
type Decision struct {
	// Taken: resp was stored (for a multi-question set, perhaps only some
	// of its questions; Pending then lists what is still open).
	Taken bool
	// Invalid says why resp was refused (show it to the person); nil
	// otherwise.
	Invalid error
	// Final is the set's complete answer once it has one (taken now or
	// earlier); nil while the set is pending.
	Final *Response
	// Closed: the set can take no answer any more (answered, expired,
	// cancelled); with Final nil it expired or its run was cancelled.
	Closed bool
	// Pending lists the IDs of the questions still waiting for an answer
	// while the set is pending.
	Pending []string
}
