package questions

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Limits of a question set.
const (
	MaxQuestions = 10 // questions in one set (one turn)
	MaxOptions   = 25 // options of one question
	// MaxSetBytes caps the text of one set: its questions, headers,
	// option labels and descriptions together, in bytes. A set is posted
	// whole on every surface; a larger one is an invalid block, and the
	// model is asked to shorten it.
	MaxSetBytes = 16 << 10
)

// maxBlockBytes caps a QUESTION block's JSON before it is decoded: the set's
// text, with room for JSON escapes and keys.
const maxBlockBytes = 4 * MaxSetBytes

// setBytes is the size of the text of qs, as MaxSetBytes counts it.
func setBytes(qs []Question) int {
	n := 0
	for _, q := range qs {
		n += len(q.Text) + len(q.Header)
		for _, o := range q.Options {
			n += len(o.Label) + len(o.Description)
		}
	}
	return n
}

// FieldError says which field of a question set is wrong and why. Field is a
// path such as "questions[0].options[1].label".
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// ValidateQuestions checks the questions of one set and returns the first
// problem found as a *FieldError, or nil. The rules: at least one and at most
// MaxQuestions questions, of at most MaxSetBytes of text together; each has a
// non-blank text; at most MaxOptions options, each with a non-blank label, labels unique ignoring case and
// surrounding spaces. A question without options is a free-text question.
// IDs are not checked here (markers carry none; see Set.Validate).
func ValidateQuestions(qs []Question) error {
	if len(qs) == 0 {
		return &FieldError{Field: "questions", Reason: "no questions"}
	}
	if len(qs) > MaxQuestions {
		return &FieldError{Field: "questions", Reason: fmt.Sprintf("%d questions; at most %d in one turn", len(qs), MaxQuestions)}
	}
	if n := setBytes(qs); n > MaxSetBytes {
		return &FieldError{Field: "questions", Reason: fmt.Sprintf("%d bytes of text; at most %d in one turn: shorten the questions, options and descriptions", n, MaxSetBytes)}
	}
	for i, q := range qs {
		p := fmt.Sprintf("questions[%d]", i)
		if strings.TrimSpace(q.Text) == "" {
			return &FieldError{Field: p + ".question", Reason: "empty"}
		}
		if len(q.Options) > MaxOptions {
			return &FieldError{Field: p + ".options", Reason: fmt.Sprintf("%d options; at most %d", len(q.Options), MaxOptions)}
		}
		seen := make(map[string]int, len(q.Options))
		for j, o := range q.Options {
			key := labelKey(o.Label)
			if key == "" {
				return &FieldError{Field: fmt.Sprintf("%s.options[%d].label", p, j), Reason: "empty"}
			}
			if k, dup := seen[key]; dup {
				return &FieldError{Field: fmt.Sprintf("%s.options[%d].label", p, j),
					Reason: fmt.Sprintf("%q duplicates options[%d] (labels must differ ignoring case)", o.Label, k)}
			}
			seen[key] = j
		}
	}
	return nil
}

// labelKey is the form in which labels are compared.
func labelKey(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// Validate checks the set's questions (ValidateQuestions) and that every
// question has a short ID, unique within the set.
func (s Set) Validate() error {
	if err := ValidateQuestions(s.Questions); err != nil {
		return err
	}
	seen := make(map[string]int, len(s.Questions))
	for i, q := range s.Questions {
		f := fmt.Sprintf("questions[%d].id", i)
		if q.ID == "" {
			return &FieldError{Field: f, Reason: "empty"}
		}
		key := strings.ToLower(q.ID)
		if j, dup := seen[key]; dup {
			return &FieldError{Field: f, Reason: fmt.Sprintf("%q duplicates questions[%d].id", q.ID, j)}
		}
		seen[key] = i
	}
	return nil
}

// NewSet builds the set of one turn. The set's ID and each question's short
// ID ("q" and four hex digits, such as "q7f3a") are derived from runID, turn
// and the question's position, so the same turn always gets the same IDs;
// short IDs are unique within the set. The questions are copied; their IDs
// are replaced.
func NewSet(runID string, turn int, qs []Question) Set {
	s := Set{ID: SetID(runID, turn), RunID: runID, Turn: turn}
	s.Questions = make([]Question, len(qs))
	used := make(map[string]bool, len(qs))
	for i, q := range qs {
		q.Options = append([]Option(nil), q.Options...)
		if len(q.Options) == 0 {
			q.Options = nil
		}
		for salt := 0; ; salt++ {
			id := "q" + idHash(runID, turn, i, salt)[:4]
			if !used[id] {
				used[id] = true
				q.ID = id
				break
			}
		}
		s.Questions[i] = q
	}
	return s
}

// SetID is the ID NewSet gives the set of a run's turn: "s" and 11 hex digits.
func SetID(runID string, turn int) string { return "s" + idHash(runID, turn, -1, 0)[:11] }

func idHash(runID string, turn, pos, salt int) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(runID)))
	h.Write(n[:])
	h.Write([]byte(runID))
	for _, v := range []int{turn, pos, salt} {
		binary.BigEndian.PutUint64(n[:], uint64(int64(v)))
		h.Write(n[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FromAskUserQuestion converts the input of Claude Code's AskUserQuestion tool
// ({"questions":[…]}, the marker's schema; other fields such as "answers" are
// ignored) to questions, validated like a marker's.
func FromAskUserQuestion(input []byte) ([]Question, error) {
	if !json.Valid(input) {
		var v any
		err := json.Unmarshal(input, &v)
		return nil, fmt.Errorf("AskUserQuestion input: %w", err)
	}
	qs, err := decodeQuestions(input)
	if err != nil {
		return nil, fmt.Errorf("AskUserQuestion input: %w", err)
	}
	if err := ValidateQuestions(qs); err != nil {
		return nil, fmt.Errorf("AskUserQuestion input: %w", err)
	}
	return qs, nil
}

// decodeQuestions reads a marker payload that is known to be valid JSON. It
// accepts {"questions":[…]} and, leniently, a single question object
// {"question":…}. Keys match ignoring case, '_' and '-' ("multi_select");
// unknown keys are ignored; null is the zero value; an option may be a bare
// string (its label). Wrong types give a *FieldError naming the field.
func decodeQuestions(data []byte) ([]Question, error) {
	top, err := decodeObject(data, "")
	if err != nil {
		return nil, err
	}
	raw, ok := top["questions"]
	if !ok {
		if _, single := top["question"]; single {
			q, err := decodeQuestion(data, "")
			if err != nil {
				return nil, err
			}
			return []Question{q}, nil
		}
		return nil, &FieldError{Field: "questions", Reason: "missing"}
	}
	items, err := decodeArray(raw, "questions")
	if err != nil {
		return nil, err
	}
	if len(items) > MaxQuestions {
		return nil, &FieldError{Field: "questions", Reason: fmt.Sprintf("%d questions; at most %d in one turn", len(items), MaxQuestions)}
	}
	qs := make([]Question, 0, len(items))
	for i, it := range items {
		q, err := decodeQuestion(it, fmt.Sprintf("questions[%d]", i))
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

func decodeQuestion(data []byte, path string) (Question, error) {
	var q Question
	obj, err := decodeObject(data, path)
	if err != nil {
		return q, err
	}
	dot := func(f string) string {
		if path == "" {
			return f
		}
		return path + "." + f
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"id", &q.ID}, {"question", &q.Text}, {"header", &q.Header}} {
		if f.key == "question" {
			if _, ok := obj[f.key]; !ok {
				return q, &FieldError{Field: dot("question"), Reason: "missing"}
			}
		}
		if err := decodeString(obj[f.key], dot(f.key), f.dst); err != nil {
			return q, err
		}
	}
	if err := decodeBool(obj["multiselect"], dot("multiSelect"), &q.MultiSelect); err != nil {
		return q, err
	}
	if err := decodeBool(obj["freetext"], dot("freeText"), &q.FreeText); err != nil {
		return q, err
	}
	items, err := decodeArray(obj["options"], dot("options"))
	if err != nil {
		return q, err
	}
	if len(items) > MaxOptions {
		return q, &FieldError{Field: dot("options"), Reason: fmt.Sprintf("%d options; at most %d", len(items), MaxOptions)}
	}
	for j, it := range items {
		p := fmt.Sprintf("%s[%d]", dot("options"), j)
		var o Option
		if t := firstByte(it); t == '"' {
			if err := decodeString(it, p, &o.Label); err != nil {
				return q, err
			}
		} else {
			oo, err := decodeObject(it, p)
			if err != nil {
				return q, err
			}
			if err := decodeString(oo["label"], p+".label", &o.Label); err != nil {
				return q, err
			}
			if err := decodeString(oo["description"], p+".description", &o.Description); err != nil {
				return q, err
			}
		}
		q.Options = append(q.Options, o)
	}
	return q, nil
}

// normKey folds a JSON key: lower case, without '_' and '-'.
func normKey(k string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, k)
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func isNull(b []byte) bool { return b == nil || string(bytes.TrimSpace(b)) == "null" }

func kind(b []byte) string {
	switch firstByte(b) {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func decodeObject(b []byte, path string) (map[string]json.RawMessage, error) {
	field := path
	if firstByte(b) != '{' {
		if field == "" {
			field = "(top level)"
		}
		return nil, &FieldError{Field: field, Reason: "want an object, got " + kind(b)}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, &FieldError{Field: field, Reason: err.Error()}
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		nk := normKey(k)
		if _, dup := out[nk]; dup && isNull(v) {
			continue
		}
		out[nk] = v
	}
	return out, nil
}

func decodeArray(b []byte, path string) ([]json.RawMessage, error) {
	if isNull(b) {
		return nil, nil
	}
	if firstByte(b) != '[' {
		return nil, &FieldError{Field: path, Reason: "want an array, got " + kind(b)}
	}
	var a []json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, &FieldError{Field: path, Reason: err.Error()}
	}
	return a, nil
}

func decodeString(b []byte, path string, dst *string) error {
	if isNull(b) {
		return nil
	}
	if firstByte(b) != '"' {
		return &FieldError{Field: path, Reason: "want a string, got " + kind(b)}
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return &FieldError{Field: path, Reason: err.Error()}
	}
	return nil
}

func decodeBool(b []byte, path string, dst *bool) error {
	if isNull(b) {
		return nil
	}
	s := string(bytes.TrimSpace(b))
	if s == "true" || s == "false" {
		*dst = s == "true"
		return nil
	}
	if firstByte(b) == '"' { // "true" / "false" as strings, leniently
		var str string
		if json.Unmarshal(b, &str) == nil {
			if v, err := strconv.ParseBool(strings.TrimSpace(str)); err == nil {
				*dst = v
				return nil
			}
		}
	}
	return &FieldError{Field: path, Reason: "want true or false, got " + kind(b)}
}
