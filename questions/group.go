package questions

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
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
