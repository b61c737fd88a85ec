package questions

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
)

// Fingerprint is what makes question sets of different runs the same
// question, for answering them together (issue 28): a hex SHA-256 of the
// set's kind and, for an approval, its tool and input (the input's JSON
// compacted, its keys in order); for the other kinds, of each question's
// text, its options' labels (in order: "2" names the same choice in every
// set) and whether it takes several choices or free text. Text is compared
// after folding case and collapsing whitespace. Headers, descriptions, the
// model's context and the IDs do not count.
//
// The run's own questions (KindSecrets, KindLimit) are about that run alone
// and have no fingerprint (""), nor has a set without questions.
func Fingerprint(s Set) string {
	kind := KindOf(s)
	if kind == KindSecrets || kind == KindLimit || len(s.Questions) == 0 {
		return ""
	}
	// Length-prefixed fields: no two different sets write the same bytes.
	h := sha256.New()
	field := func(v string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	field("v1")
	field(kind)
	if kind == KindApproval {
		if s.Tool == nil {
			return ""
		}
		field(s.Tool.Tool)
		field(canonicalJSON(s.Tool.Input))
		return hex.EncodeToString(h.Sum(nil))
	}
	for _, q := range s.Questions {
		field(normalize(q.Text))
		field(flags(q))
		field(strings.Repeat("o", len(q.Options)))
		for _, o := range q.Options {
			field(normalize(o.Label))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func flags(q Question) string {
	f := []byte("--")
	if q.MultiSelect {
		f[0] = 'm'
	}
	if q.AcceptsFreeText() {
		f[1] = 'f'
	}
	return string(f)
}

// normalize folds case and collapses every run of whitespace to a space.
func normalize(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// canonicalJSON is raw's value with its object keys in order and no
// whitespace (encoding/json sorts map keys); raw itself, compacted, when it
// is not valid JSON.
func canonicalJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err == nil {
		if b, err := json.Marshal(v); err == nil {
			return string(b)
		}
	}
	return string(bytes.TrimSpace(raw))
}

// ForSet is resp, an answer to the set from, as the answer to the set to of
// the same fingerprint: each answer goes to the question at the same
// position in to. Answers to questions from does not have are dropped.
func ForSet(from, to Set, resp Response) Response {
	out := resp
	out.SetID, out.Answers = to.ID, nil
	for _, a := range resp.Answers {
		for i, q := range from.Questions {
			if q.ID == a.QuestionID && i < len(to.Questions) {
				a.QuestionID = to.Questions[i].ID
				out.Answers = append(out.Answers, a)
				break
			}
		}
	}
	return out
}

// GroupRun is another run a question waits in: its pending set of the
// same fingerprint.
type GroupRun struct {
	SetID string `json:"set_id"`
	RunID string `json:"run_id"`
	Spec  string `json:"spec,omitempty"` // the run's spec ("" for a prompt)
	Title string `json:"title,omitempty"`
}

// Name names the run for people: its spec (or title) and its ID.
func (g GroupRun) Name() string {
	switch {
	case g.Spec != "":
		return g.Spec + " (run " + g.RunID + ")"
	case g.Title != "":
		return g.Title + " (run " + g.RunID + ")"
	}
	return "run " + g.RunID
}

// GroupShown is how many of the other runs a question waits in a set
// shown to people lists (Set.Group); Set.GroupMore says there are more.
const GroupShown = 10

// GroupNote says that s also waits in other runs, in one line of plain
// text (surfaces clean it for their markup), or "" when it does not:
// "This question also waits in 2 other runs: nightly-b (run r2), r3 (run r3)."
// At most five runs are named; with GroupMore, "in 10 or more other runs".
func GroupNote(s Set) string {
	if len(s.Group) == 0 {
		return ""
	}
	more := ""
	if s.GroupMore {
		more = " or more"
	}
	var names []string
	for i, g := range s.Group {
		if i == 5 {
			names = append(names, "…")
			break
		}
		names = append(names, Printable(g.Name()))
	}
	runs := "runs"
	if len(s.Group) == 1 {
		runs = "run"
	}
	if s.GroupMore {
		runs = "runs"
	}
	return "This question also waits in " + strconv.Itoa(len(s.Group)) + more + " other " + runs + ": " + strings.Join(names, ", ") + "."
}

// GroupOutcome is what became of an answer given for a group (answer
// --all) in one of its sets.
type GroupOutcome struct {
	GroupRun
	// Decision is the store's, as for an answer offered to that set alone:
	// Taken, or Closed (answered before: Final says by whom), or Invalid
	// (not a set of the group any more, or the person may not answer it).
	Decision Decision
}

// GroupDecision is what became of an answer given for a group.
type GroupDecision struct {
	// ID names the shared decision ("" when no set took the answer).
	ID string
	// Sets are the outcomes, the answered set's first.
	Sets []GroupOutcome
}

// Taken counts the sets that took the answer.
func (g GroupDecision) Taken() int {
	n := 0
	for _, o := range g.Sets {
		if o.Decision.Taken {
			n++
		}
	}
	return n
}
