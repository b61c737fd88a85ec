package questions

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseQuestionAnswer(t *testing.T) {
	t.Parallel()
	single := Question{ID: "q1", Text: "Auth?", Options: []Option{{Label: "OAuth2"}, {Label: "JWT"}, {Label: "Session cookies"}}}
	multi := single
	multi.MultiSelect = true
	free := single
	free.FreeText = true
	multiFree := multi
	multiFree.FreeText = true
	open := Question{ID: "q2", Text: "Name?"}
	numeric := Question{ID: "q3", Text: "How many?", Options: []Option{{Label: "3"}, {Label: "1"}, {Label: "10 minutes"}}}
	commas := Question{ID: "q4", Text: "Ok?", MultiSelect: true, Options: []Option{{Label: "Yes, please"}, {Label: "No"}}}

	tests := []struct {
		name   string
		q      Question
		in     string
		labels []string
		text   string
		err    string // substring of the error, "" for none
	}{
		{"number", single, "2", []string{"JWT"}, "", ""},
		{"number with spaces", single, "  3 \n", []string{"Session cookies"}, "", ""},
		{"label any case", single, "oauth2", []string{"OAuth2"}, "", ""},
		{"unique prefix", single, "jw", []string{"JWT"}, "", ""},
		{"prefix with a space", single, "session", []string{"Session cookies"}, "", ""},
		{"out of range", single, "4", nil, "", `"4" is not one of the options`},
		{"unknown", single, "Kerberos", nil, "", "not one of the options"},
		{"empty", single, "  ", nil, "", "empty"},
		{"only zero-width characters", open, "\u200b\u200d\ufeff", nil, "", "empty once invisible characters"},
		{"only an HTML comment", free, "<!-- orchestrator:answered set=x comment=1 -->", nil, "", "empty once invisible characters"},
		{"only escapes", open, "\x1b[2J\x1b[H", nil, "", "empty once invisible characters"},
		{"several for single", single, "1,2", nil, "", "not one of the options"},
		{"other without freeText", single, "other: LDAP", nil, "", "not one of the options"},
		{"multi numbers commas", multi, "1,3", []string{"OAuth2", "Session cookies"}, "", ""},
		{"multi numbers spaces", multi, "3 1", []string{"OAuth2", "Session cookies"}, "", ""},
		{"multi labels", multi, "JWT, OAuth2", []string{"OAuth2", "JWT"}, "", ""},
		{"multi mixed and repeated", multi, "2; oauth2; 2", []string{"OAuth2", "JWT"}, "", ""},
		{"multi one", multi, "jwt", []string{"JWT"}, "", ""},
		{"multi label with space", multi, "Session cookies", []string{"Session cookies"}, "", ""},
		{"multi bad item", multi, "1, Kerberos", nil, "", `"Kerberos" is not one of the options`},
		{"free other", free, "other: LDAP please", nil, "LDAP please", ""},
		{"free Other any case", free, "OTHER:  LDAP", nil, "LDAP", ""},
		{"free unmatched is text", free, "Whatever you think is best", nil, "Whatever you think is best", ""},
		{"free still takes options", free, "2", []string{"JWT"}, "", ""},
		{"free empty other", free, "other:", nil, "", "needs your answer"},
		{"free option and other", free, "1, other: x", nil, "", "not both"},
		{"multi free both", multiFree, "1, 2, other: also LDAP", []string{"OAuth2", "JWT"}, "also LDAP", ""},
		{"multi free text", multiFree, "none of these", nil, "none of these", ""},
		{"open text", open, " Acme API \n", nil, "Acme API", ""},
		{"open empty", open, "", nil, "", "empty"},
		{"number beats numeric label", numeric, "1", []string{"3"}, "", ""},
		{"numeric label out of range", numeric, "10", []string{"10 minutes"}, "", ""},
		{"label with comma whole", commas, "Yes, please", []string{"Yes, please"}, "", ""},
		{"ambiguous prefix", Question{Text: "x", Options: []Option{{Label: "Postgres"}, {Label: "PostGIS"}}}, "post", nil, "", "matches several options (Postgres, PostGIS)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := ParseQuestionAnswer(tt.q, tt.in)
			if tt.err != "" {
				var ie *InvalidAnswerError
				if !errors.As(err, &ie) || !strings.Contains(ie.Message, tt.err) {
					t.Fatalf("ParseQuestionAnswer(%q) error = %v, want ~%q", tt.in, err, tt.err)
				}
				if len(ie.Valid) == 0 || ie.QuestionID != tt.q.ID {
					t.Errorf("error lists no valid answers or wrong question: %+v", ie)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseQuestionAnswer(%q): %v", tt.in, err)
			}
			if a.QuestionID != tt.q.ID || !reflect.DeepEqual(a.Labels, tt.labels) || a.Text != tt.text {
				t.Errorf("ParseQuestionAnswer(%q) = %+v, want labels %q text %q", tt.in, a, tt.labels, tt.text)
			}
		})
	}
}

func TestInvalidAnswerLists(t *testing.T) {
	t.Parallel()
	q := Question{ID: "q1", Text: "Auth?", FreeText: true, MultiSelect: true, Options: []Option{{Label: "OAuth2"}, {Label: "JWT"}}}
	q.FreeText = false
	_, err := ParseQuestionAnswer(q, "9")
	ie := err.(*InvalidAnswerError)
	want := []string{"1", "2", "OAuth2", "JWT", "1,2"}
	if !reflect.DeepEqual(ie.Valid, want) {
		t.Errorf("Valid = %q, want %q", ie.Valid, want)
	}
	if !strings.Contains(ie.Message, "1. OAuth2, 2. JWT") {
		t.Errorf("Message = %q", ie.Message)
	}
}

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	set := NewSet("run", 3, []Question{
		{Text: "Auth?", Header: "Auth", Options: []Option{{Label: "OAuth2"}, {Label: "JWT"}}},
		{Text: "Name?", Header: "Name"},
		{Text: "Deploy?", Options: []Option{{Label: "yes"}, {Label: "no"}}},
	})
	id := func(i int) string { return set.Questions[i].ID }
	one := NewSet("run", 4, []Question{{Text: "Auth?", Header: "Auth", Options: []Option{{Label: "OAuth2"}, {Label: "JWT"}}}})
	tests := []struct {
		name string
		set  Set
		in   string
		want []Answer
		err  string
	}{
		{"single bare", one, "2", []Answer{{QuestionID: one.Questions[0].ID, Labels: []string{"JWT"}}}, ""},
		{"single keyed by header", one, "auth: oauth2", []Answer{{QuestionID: one.Questions[0].ID, Labels: []string{"OAuth2"}}}, ""},
		{"single keyed by number", one, "1: 2", []Answer{{QuestionID: one.Questions[0].ID, Labels: []string{"JWT"}}}, ""},
		{"single keyed by id", one, one.Questions[0].ID + ": JWT", []Answer{{QuestionID: one.Questions[0].ID, Labels: []string{"JWT"}}}, ""},
		{"single invalid", one, "3", nil, "not one of the options"},
		{"keys of every kind", set, "1: 2\nName: Acme: the API\n" + id(2) + ": yes\n", []Answer{
			{QuestionID: id(0), Labels: []string{"JWT"}}, {QuestionID: id(1), Text: "Acme: the API"}, {QuestionID: id(2), Labels: []string{"yes"}}}, ""},
		{"any order, any case", set, strings.ToUpper(id(2)) + ": no\nAUTH: oauth2\n2: x", []Answer{
			{QuestionID: id(0), Labels: []string{"OAuth2"}}, {QuestionID: id(1), Text: "x"}, {QuestionID: id(2), Labels: []string{"no"}}}, ""},
		{"positional lines", set, "JWT\nAcme\nyes", []Answer{
			{QuestionID: id(0), Labels: []string{"JWT"}}, {QuestionID: id(1), Text: "Acme"}, {QuestionID: id(2), Labels: []string{"yes"}}}, ""},
		{"missing one", set, "1: 2\n2: x", nil, "no answer to question 3"},
		{"answered twice", set, "1: 2\n1: 1\n2: x\n3: yes", nil, "answered twice"},
		{"bad option names the question", set, "1: 7\n2: x\n3: yes", nil, "question 1 (" + id(0) + "): \"7\" is not one of the options"},
		{"too many lines", set, "1\nx\nyes\nmore", nil, "every question is already answered"},
		{"empty set", Set{}, "x", nil, "no question"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseAnswer(tt.set, tt.in)
			if tt.err != "" {
				var ie *InvalidAnswerError
				if !errors.As(err, &ie) || !strings.Contains(ie.Message, tt.err) {
					t.Fatalf("ParseAnswer(%q) error = %v, want ~%q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAnswer(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseAnswer(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestNewSet(t *testing.T) {
	t.Parallel()
	qs := []Question{{Text: "a"}, {Text: "b"}, {Text: "c", ID: "mine"}}
	s1 := NewSet("run-1", 2, qs)
	s2 := NewSet("run-1", 2, qs)
	if !reflect.DeepEqual(s1, s2) {
		t.Fatal("NewSet is not deterministic")
	}
	if qs[2].ID != "mine" {
		t.Fatal("NewSet changed its argument")
	}
	if err := s1.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, q := range s1.Questions {
		if len(q.ID) != 5 || q.ID[0] != 'q' || strings.Trim(q.ID[1:], "0123456789abcdef") != "" {
			t.Errorf("short ID %q, want q and 4 hex digits", q.ID)
		}
	}
	if s3 := NewSet("run-1", 3, qs); s3.ID == s1.ID || s3.Questions[0].ID == s1.Questions[0].ID {
		t.Error("another turn got the same IDs")
	}
	if s4 := NewSet("run-2", 2, qs); s4.ID == s1.ID {
		t.Error("another run got the same set ID")
	}
	if s1.ID != SetID("run-1", 2) || s1.RunID != "run-1" || s1.Turn != 2 {
		t.Errorf("set = %+v", s1)
	}
	// Unique within a set, even for the largest one.
	many := make([]Question, MaxQuestions)
	for i := range many {
		many[i].Text = "x"
	}
	for run := range 300 {
		s := NewSet(string(rune('a'+run%26))+strings.Repeat("r", run), run, many)
		if err := s.Validate(); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	bad := s1
	bad.Questions = append([]Question(nil), s1.Questions...)
	bad.Questions[1].ID = strings.ToUpper(bad.Questions[0].ID)
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "questions[1].id") {
		t.Errorf("Validate of duplicate IDs = %v", err)
	}
}

func TestFromAskUserQuestion(t *testing.T) {
	t.Parallel()
	// The input recorded in ask_tool.ndjson.
	in := `{"questions":[{"question":"Which auth method should I use?","header":"Auth","multiSelect":false,"options":[{"label":"OAuth2","description":"Use OAuth2"},{"label":"JWT","description":"Stateless tokens"}]}],"answers":{"x":"y"}}`
	qs, err := FromAskUserQuestion([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Question{{Text: "Which auth method should I use?", Header: "Auth", Options: []Option{{"OAuth2", "Use OAuth2"}, {"JWT", "Stateless tokens"}}}}
	if !reflect.DeepEqual(qs, want) {
		t.Errorf("got %+v, want %+v", qs, want)
	}
	// The same questions as a marker give the same result.
	if ms := Detect(EncodeMarker(qs)); !reflect.DeepEqual(ms[0].Questions, want) {
		t.Errorf("marker form differs: %+v", ms[0].Questions)
	}
	for _, bad := range []string{`{"questions":[]}`, `{"questions":[{"question":""}]}`, `not json`, `[]`} {
		if _, err := FromAskUserQuestion([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "AskUserQuestion input: ") {
			t.Errorf("FromAskUserQuestion(%s) = %v, want an error", bad, err)
		}
	}
}
