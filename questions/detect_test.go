package questions

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const authJSON = `{"questions":[{"question":"Which auth method?","header":"Auth","options":[{"label":"OAuth2","description":"Use OAuth2"},{"label":"JWT","description":"Stateless"}]}]}`

var authQuestion = Question{Text: "Which auth method?", Header: "Auth",
	Options: []Option{{"OAuth2", "Use OAuth2"}, {"JWT", "Stateless"}}}

func texts(ms []Marker) []string {
	var out []string
	for _, m := range ms {
		for _, q := range m.Questions {
			out = append(out, q.Text)
		}
	}
	return out
}

func TestDetectFinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string // question texts, in order
	}{
		{"fixture form", "I need a decision.\n<!--QUESTION:" + authJSON + "-->", []string{"Which auth method?"}},
		{"whole text", "<!--QUESTION:" + authJSON + "-->", []string{"Which auth method?"}},
		{"arrow inside a JSON string", `<!--QUESTION:{"questions":[{"question":"a --> b?"}]}-->`, []string{"a --> b?"}},
		{"braces inside strings", `<!--QUESTION:{"questions":[{"question":"use {x} or }{?"}]}-->`, []string{"use {x} or }{?"}},
		{"escaped quote", `<!--QUESTION:{"questions":[{"question":"say \"hi\" \\ -->?"}]}-->`, []string{`say "hi" \ -->?`}},
		{"whitespace and newlines", "<!--  QUESTION :\n{\n  \"questions\": [\n    {\"question\": \"x?\"}\n  ]\n}\n\n-->", []string{"x?"}},
		{"single question shorthand", `<!--QUESTION:{"question":"x?","options":["a","b"]}-->`, []string{"x?"}},
		{"two markers in order", `a <!--QUESTION:{"question":"1?"}--> b <!--QUESTION:{"question":"2?"}-->`, []string{"1?", "2?"}},
		{"unknown fields tolerated", `<!--QUESTION:{"v":2,"questions":[{"question":"x?","color":"red","options":[{"label":"a","icon":"*"}]}]}-->`, []string{"x?"}},
		{"after a closed fence", "```go\n<!--QUESTION:{\"question\":\"no\"}-->\n```\n<!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
		{"after a closed tilde fence", "~~~~\n<!--QUESTION:{\"question\":\"no\"}-->\n~~~~~\ntext <!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
		{"after inline code", "use `x` then <!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
		{"unclosed backtick is text", "a ` b <!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
		{"span closes on its line only", "a `b\n<!--QUESTION:{\"question\":\"yes\"}--> c`", []string{"yes"}},
		{"backticks inside the block open nothing", "<!--QUESTION:{\"question\":\"use `a\"}--> and <!--QUESTION:{\"question\":\"b` ok\"}-->", []string{"use `a", "b` ok"}},
		{"backtick fence with backtick in info is no fence", "``` a`b\n<!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
		{"mismatched run lengths", "``a` <!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
		{"ordinary comment before", "<!-- note --> <!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
		{"nested comment opener", "<!--<!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
		{"html-escaped arrow in JSON", "<!--QUESTION:{\"question\":\"a \\u003e b\"}-->", []string{"a > b"}},
		{"indented block in a list", "1. item\n   <!--QUESTION:{\"question\":\"yes\"}-->", []string{"yes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ms := Detect(tt.in)
			for _, m := range ms {
				if m.Err != nil {
					t.Fatalf("Detect(%q): unexpected error %v", tt.in, m.Err)
				}
				if !strings.HasPrefix(tt.in[m.Start:], "<!--") || !strings.HasSuffix(tt.in[:m.End], "-->") {
					t.Errorf("block [%d,%d) = %q, want <!--…-->", m.Start, m.End, tt.in[m.Start:m.End])
				}
			}
			if got := texts(ms); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Detect(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDetectIgnores(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in string }{
		{"plain prose", "Nothing to ask here."},
		{"inline code span", "The format is `<!--QUESTION:{\"question\":\"x?\"}-->`."},
		{"double backtick span", "Use ``<!--QUESTION:{\"question\":\"a`b\"}-->`` like this."},
		{"fenced block", "Example:\n```\n<!--QUESTION:{\"question\":\"x?\"}-->\n```\n"},
		{"fenced block with info", "```html\n<!--QUESTION:{\"question\":\"x?\"}-->\n```"},
		{"tilde fence", "~~~\n<!--QUESTION:{\"question\":\"x?\"}-->\n~~~"},
		{"indented fence", "  ```\n  <!--QUESTION:{\"question\":\"x?\"}-->\n  ```"},
		{"fence in a blockquote", "> ```\n> <!--QUESTION:{\"question\":\"x?\"}-->\n> ```"},
		{"unclosed fence runs to the end", "```\n<!--QUESTION:{\"question\":\"x?\"}-->"},
		{"short closer does not close", "````\n```\n<!--QUESTION:{\"question\":\"x?\"}-->\n````"},
		{"fence info line", "~~~ <!--QUESTION:{\"question\":\"x?\"}-->\n~~~"},
		{"no JSON", "<!--QUESTION-->"},
		{"no JSON after colon", "<!--QUESTION:-->"},
		{"prose after colon", "Emit <!--QUESTION: {your JSON} --> at the end."},
		{"ellipsis object", "I would write <!--QUESTION:{…}--> here."},
		{"dots object", "<!--QUESTION:{...}-->"},
		{"mention of the format", "I can ask with a QUESTION marker, the <!--QUESTION block, if needed."},
		{"lower case", "<!--question:{\"question\":\"x?\"}-->"},
		{"other comment", "<!-- QUESTIONS:{\"question\":\"x?\"} -->"},
		{"no comment opener", "QUESTION:{\"question\":\"x?\"}-->"},
		{"array not object", "<!--QUESTION:[{\"question\":\"x?\"}]-->"},
		{"empty text", ""},
		{"opener at the end", "bye <!--QUES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if ms := Detect(tt.in); len(ms) != 0 {
				t.Errorf("Detect(%q) = %+v, want nothing", tt.in, ms)
			}
			if got := Strip(tt.in); got != tt.in {
				t.Errorf("Strip(%q) = %q, want it unchanged", tt.in, got)
			}
		})
	}
}

func TestDetectErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in  string
		offset    int
		field     string
		reason    string // substring
		wantBlock string // the text the block covers
	}{
		{"empty object", "ab <!--QUESTION:{}-->", 3, "questions", "missing", "<!--QUESTION:{}-->"},
		{"no questions", `<!--QUESTION:{"questions":[]}-->`, 0, "questions", "no questions", ""},
		{"empty text", `<!--QUESTION:{"questions":[{"question":"  "}]}-->`, 0, "questions[0].question", "empty", ""},
		{"missing text", `<!--QUESTION:{"questions":[{"header":"h"}]}-->`, 0, "questions[0].question", "missing", ""},
		{"empty label", `xx<!--QUESTION:{"questions":[{"question":"q","options":[{"label":"a"},{"label":""}]}]}-->`, 2, "questions[0].options[1].label", "empty", ""},
		{"duplicate label", `<!--QUESTION:{"questions":[{"question":"q"},{"question":"r","options":[{"label":"JWT"},{"label":" jwt"}]}]}-->`, 0, "questions[1].options[1].label", "duplicates options[0]", ""},
		{"too many questions", `<!--QUESTION:{"questions":[` + strings.Repeat(`{"question":"q"},`, 10) + `{"question":"q"}]}-->`, 0, "questions", "11 questions", ""},
		{"too many options", `<!--QUESTION:{"questions":[{"question":"q","options":[` + strings.Repeat(`"a",`, 25) + `"z"]}]}-->`, 0, "questions[0].options", "26 options", ""},
		{"wrong type", `<!--QUESTION:{"questions":[{"question":"q","multiSelect":"maybe"}]}-->`, 0, "questions[0].multiSelect", "want true or false", ""},
		{"wrong type for questions", `<!--QUESTION:{"questions":"q"}-->`, 0, "questions", "want an array", ""},
		{"option not object", `<!--QUESTION:{"questions":[{"question":"q","options":[1]}]}-->`, 0, "questions[0].options[0]", "want an object", ""},
		{"trailing comma", `<!--QUESTION:{"questions":[{"question":"q",}]}-->`, 0, "", "invalid JSON at byte", ""},
		{"single quotes", `<!--QUESTION:{"questions":[{'question':'q'}]}-->`, 0, "", "invalid JSON", ""},
		{"never closed", `<!--QUESTION:{"questions":[{"question":"q"}]-->` + "\nmore text", 0, "", "never closed", `<!--QUESTION:{"questions":[{"question":"q"}]-->`},
		{"unterminated string", `<!--QUESTION:{"question":"q`, 0, "", "never closed", ""},
		{"junk before arrow", `<!--QUESTION:{"question":"q"} oops --> after`, 0, "", "expected -->", `<!--QUESTION:{"question":"q"} oops -->`},
		{"no arrow at all", `<!--QUESTION:{"question":"q"} and then prose`, 0, "", "expected -->", `<!--QUESTION:{"question":"q"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ms := Detect(tt.in)
			if len(ms) != 1 {
				t.Fatalf("Detect(%q) = %+v, want one block", tt.in, ms)
			}
			m := ms[0]
			var me *MarkerError
			if !errors.As(m.Err, &me) {
				t.Fatalf("Err = %v, want a *MarkerError", m.Err)
			}
			if me.Offset != tt.offset || me.Field != tt.field || !strings.Contains(me.Reason, tt.reason) {
				t.Errorf("error = %+v, want offset %d field %q reason ~%q", me, tt.offset, tt.field, tt.reason)
			}
			if m.Questions != nil {
				t.Errorf("Questions = %+v, want nil with an error", m.Questions)
			}
			want := tt.wantBlock
			if want == "" {
				want = tt.in[tt.offset:]
			}
			if got := tt.in[m.Start:m.End]; got != want {
				t.Errorf("block = %q, want %q", got, want)
			}
		})
	}
}

func TestMarkerErrorMessage(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("x", 120) + `<!--QUESTION:{"questions":[{"question":"q","options":[{"label":"a"},{"label":""}]}]}-->`
	ms := Detect(in)
	if len(ms) != 1 || ms[0].Err == nil {
		t.Fatalf("Detect = %+v", ms)
	}
	const want = "QUESTION block at byte 120: questions[0].options[1].label: empty"
	if got := ms[0].Err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var me *MarkerError
	errors.As(ms[0].Err, &me)
	in2 := `<!--QUESTION:{"questions":[{"question":"q",}]}-->`
	me2 := Detect(in2)[0].Err.(*MarkerError)
	if in2[me2.At] != '}' {
		t.Errorf("At = %d (%q), want the offending '}'", me2.At, in2[me2.At:])
	}
}

func TestDetectDecodesFields(t *testing.T) {
	t.Parallel()
	in := `<!--QUESTION:{"questions":[{"question":"Pick","header":"H","options":[{"label":"a","description":"d"},"b"],"multi_select":true,"FreeText":"true","id":null}]}-->`
	ms := Detect(in)
	if len(ms) != 1 || ms[0].Err != nil {
		t.Fatalf("Detect = %+v", ms)
	}
	want := []Question{{Text: "Pick", Header: "H", Options: []Option{{"a", "d"}, {Label: "b"}}, MultiSelect: true, FreeText: true}}
	if !reflect.DeepEqual(ms[0].Questions, want) {
		t.Errorf("questions = %+v, want %+v", ms[0].Questions, want)
	}
}

func TestStrip(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"I need a decision.\n<!--QUESTION:" + authJSON + "-->", "I need a decision."},
		{"a <!--QUESTION:{\"question\":\"q\"}--> b", "a  b"},
		{"a <!--QUESTION:{}--> b\n\n", "a  b"},
		{"no marker  \n", "no marker  \n"},
		{"`<!--QUESTION:{\"question\":\"q\"}-->`", "`<!--QUESTION:{\"question\":\"q\"}-->`"},
	}
	for _, tt := range tests {
		if got := Strip(tt.in); got != tt.want {
			t.Errorf("Strip(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEncodeMarkerRoundTrip(t *testing.T) {
	t.Parallel()
	sets := [][]Question{
		{authQuestion},
		{{Text: "Name? -->", Header: "<!--x-->"}, {Text: "Both?", Options: []Option{{Label: "a`b"}, {Label: "}{"}}, MultiSelect: true, FreeText: true}},
		{{ID: "q1234", Text: "ünïcödé \u2028 \"quoted\" \\"}},
	}
	for _, qs := range sets {
		enc := EncodeMarker(qs)
		for _, wrap := range []string{"%s", "Some text\n\n%s", "a `b` c %s\n\ntrailer"} {
			in := strings.Replace(wrap, "%s", enc, 1)
			ms := Detect(in)
			if len(ms) != 1 || ms[0].Err != nil {
				t.Fatalf("Detect(%q) = %+v", in, ms)
			}
			if !reflect.DeepEqual(ms[0].Questions, qs) {
				t.Errorf("round trip of %+v gave %+v", qs, ms[0].Questions)
			}
		}
	}
}

// TestRoundTripProperty: random valid sets, encoded as a marker and put in
// random surroundings, are detected back equal.
func TestRoundTripProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	alphabet := []rune("aZ09 _-:,.\"\\/<>!{}[]`~\n\t\u2028\u00e9\u65e5\U0001F642")
	str := func(n int) string {
		rs := make([]rune, r.IntN(n+1))
		for i := range rs {
			rs[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(rs)
	}
	// Not "` x " before the block: a backtick inside its JSON would close
	// that span over the block's start, as in CommonMark.
	surround := []string{"", "text ", "a `b` c\n", "```\nx\n```\n", "<!-- c --> ", "` x\n", "~~~\n~~~\n"}
	for range 2000 {
		qs := make([]Question, 1+r.IntN(MaxQuestions))
		for i := range qs {
			q := Question{Text: "Q" + str(30), Header: str(8), MultiSelect: r.IntN(2) == 0, FreeText: r.IntN(2) == 0}
			seen := map[string]bool{}
			for range r.IntN(6) {
				l := "L" + str(10)
				if seen[labelKey(l)] {
					continue
				}
				seen[labelKey(l)] = true
				q.Options = append(q.Options, Option{Label: l, Description: str(20)})
			}
			qs[i] = q
		}
		if err := ValidateQuestions(qs); err != nil {
			t.Fatalf("generator made an invalid set: %v", err)
		}
		in := surround[r.IntN(len(surround))] + EncodeMarker(qs) + surround[r.IntN(len(surround))]
		ms := Detect(in)
		if len(ms) != 1 || ms[0].Err != nil || !reflect.DeepEqual(ms[0].Questions, qs) {
			t.Fatalf("round trip of %q: %+v", in, ms)
		}
	}
}

// TestOversizeSetIsAnInvalidBlock: a block whose text is over MaxSetBytes,
// in one question or spread over several blocks of a turn, is invalid; the
// error names the limit.
func TestOversizeSetIsAnInvalidBlock(t *testing.T) {
	big := strings.Repeat("x", MaxSetBytes+1)
	for name, text := range map[string]string{
		"one question": `<!--QUESTION:{"questions":[{"question":"` + big + `"}]}-->`,
		"huge block":   `<!--QUESTION:{"questions":[{"question":"` + strings.Repeat("y", 10<<20) + `"}]}-->`,
		"options":      `<!--QUESTION:{"questions":[{"question":"Q","options":[{"label":"a","description":"` + big + `"}]}]}-->`,
	} {
		ms := Detect(text)
		if len(ms) != 1 || ms[0].Err == nil || !strings.Contains(ms[0].Err.Error(), strconv.Itoa(MaxSetBytes)) {
			t.Errorf("%s: %d markers, want one invalid block naming the limit", name, len(ms))
		}
	}
	half := strings.Repeat("z", MaxSetBytes/2+1)
	var c TurnCollector
	c.AddAssistantText(`<!--QUESTION:{"questions":[{"question":"` + half + `"}]}-->`)
	c.AddAssistantText(`<!--QUESTION:{"questions":[{"question":"` + half + `"}]}-->`)
	if _, err := c.Questions(); err == nil || !strings.Contains(err.Error(), "bytes of text") {
		t.Errorf("two halves over the cap: err = %v", err)
	}
	ok := strings.Repeat("w", MaxSetBytes)
	if ms := Detect(`<!--QUESTION:{"questions":[{"question":"` + ok + `"}]}-->`); len(ms) != 1 || ms[0].Err != nil {
		t.Errorf("a set just under the cap is valid: %+v", ms[0].Err)
	}
}

// EncodeMarker (tests only) renders questions as a marker the detector
// reads back:
// `<!--QUESTION:{"questions":[…]}-->`. encoding/json escapes '<' and '>', so
// no text inside can end the block early.
func EncodeMarker(qs []Question) string {
	if qs == nil {
		qs = []Question{}
	}
	b, err := json.Marshal(struct {
		Questions []Question `json:"questions"`
	}{qs})
	if err != nil { // cannot happen: only strings and bools
		panic(fmt.Sprintf("questions: encode marker: %v", err))
	}
	return markerPrefix + string(b) + markerSuffix
}
