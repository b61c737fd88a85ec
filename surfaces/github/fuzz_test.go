package github

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

func FuzzSplitBody(f *testing.F) {
	f.Add("hello\nworld\n", 3)
	f.Add(strings.Repeat("a", 100), 7)
	f.Add("é\nü\n日本語\n", 2)
	f.Add("", 5)
	f.Fuzz(func(t *testing.T, body string, limit int) {
		if !utf8.ValidString(body) {
			t.Skip()
		}
		limit = 1 + abs(limit)%200
		parts := splitBody(body, limit)
		if got := strings.Join(parts, ""); got != body {
			t.Fatalf("parts do not join back to the body:\n%q\n%q", got, body)
		}
		for i, p := range parts {
			if n := utf8.RuneCountInString(p); n > limit {
				t.Errorf("part %d has %d runes, limit %d", i, n, limit)
			}
			if p == "" && len(parts) > 1 {
				t.Errorf("part %d is empty", i)
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if -n < 0 {
			return 0
		}
		return -n
	}
	return n
}

// liveMention is an @mention GitHub would notify.
var liveMention = regexp.MustCompile(`(^|[^A-Za-z0-9_])@[A-Za-z0-9]`)

func FuzzClean(f *testing.F) {
	f.Add("@octocat please look")
	f.Add("<!-- orchestrator:question set=x -->")
	f.Add("<!<!---->-- nested -->")
	f.Add("a@b.c @@x (@y) `@z`")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{clean(s), cleanLine(s)} {
			if strings.Contains(out, "<!--") || strings.Contains(out, "-->") {
				t.Errorf("clean(%q) = %q keeps an HTML comment", s, out)
			}
			if isOwn(out) {
				t.Errorf("clean(%q) = %q looks like the orchestrator's comment", s, out)
			}
			if liveMention.MatchString(out) {
				t.Errorf("clean(%q) = %q keeps a mention", s, out)
			}
		}
		if strings.Contains(cleanLine(s), "\n") {
			t.Errorf("cleanLine(%q) keeps a newline", s)
		}
	})
}

// FuzzRenderedQuestion checks that whatever the model writes, the question
// comment carries exactly its own marker, fits GitHub, and pings nobody.
func FuzzRenderedQuestion(f *testing.F) {
	f.Add("title @x", "context <!-- y -->", "header", "text", "label", "desc")
	f.Fuzz(func(t *testing.T, title, context, header, text, label, desc string) {
		set := surfacetest.NewSet("fuzz").Title(title).Context(context).Question(questions.Question{
			Header: header, Text: text, Options: []questions.Option{{Label: label, Description: desc}},
		}).Set()
		parts := renderParts(set)
		for i, p := range parts {
			if strings.Count(p, "<!--") != 1 {
				t.Errorf("part %d has %d HTML comments, want its marker only", i, strings.Count(p, "<!--"))
			}
			qp, ok := parseQuestionMarker(p)
			if !ok || qp.setID != markerValue(set.ID) || qp.part != i+1 || qp.parts != len(parts) {
				t.Errorf("part %d marker = %+v, %v", i, qp, ok)
			}
			if utf8.RuneCountInString(p) > maxCommentRunes {
				t.Errorf("part %d too long", i)
			}
			if liveMention.MatchString(strings.ReplaceAll(p, "`"+set.Questions[0].ID+"`", "")) {
				t.Errorf("part %d has a live mention", i)
			}
		}
	})
}

func FuzzAnswerText(f *testing.F) {
	f.Add("/answer q1 2\n> quoted\nplain")
	f.Add("/answer")
	f.Add("/answer  \n/answerx y")
	f.Fuzz(func(t *testing.T, body string) {
		out := answerText(body)
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), ">") {
				t.Errorf("answerText(%q) keeps a quoted line %q", body, line)
			}
		}
		set := surfacetest.TwoQuestions("fuzz")
		questions.ParseAnswer(set, out) // must not panic
		keyedLinesIDs(questionIDs(set), out)
	})
}

func FuzzWebhook(f *testing.F) {
	const secret = "fuzz-secret"
	valid := []byte(`{"action":"created","issue":{"number":1},"comment":{"id":5,"body":"1","user":{"login":"alice"}},"repository":{"full_name":"acme/app"}}`)
	f.Add(valid, githubtest.Signature(secret, valid), "issue_comment")
	f.Add(valid, "sha256=", "issue_comment")
	f.Add([]byte("payload=%7B%7D"), githubtest.Signature(secret, []byte("payload=%7B%7D")), "issue_comment")
	// A pull request's comments and reviews (review.go).
	for event, body := range map[string]string{
		"issue_comment":               `{"action":"created","issue":{"number":9,"pull_request":{}},"comment":{"id":6,"body":"@orchestrator go","user":{"login":"alice"}},"repository":{"full_name":"acme/app"}}`,
		"pull_request_review_comment": `{"action":"created","pull_request":{"number":9},"comment":{"id":7,"body":"@orchestrator go"},"repository":{"full_name":"acme/app"}}`,
		"pull_request_review":         `{"action":"submitted","pull_request":{"number":9},"review":{"id":8,"state":"changes_requested"},"repository":{"full_name":"acme/app"}}`,
	} {
		f.Add([]byte(body), githubtest.Signature(secret, []byte(body)), event)
		f.Add([]byte(`not json`), githubtest.Signature(secret, []byte(`not json`)), event)
	}
	c, err := NewClient(ClientConfig{Token: "x", WebhookSecret: secret, BaseURL: "http://127.0.0.1:1/"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	h, err := c.WebhookHandler()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, sig, event string) {
		req := httptest.NewRequest("POST", "/", strings.NewReader(string(body)))
		req.Header.Set("X-Hub-Signature-256", sig)
		req.Header.Set("X-GitHub-Event", event)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		// Hex digits may come in either case: the MAC is the same.
		signed := strings.HasPrefix(sig, "sha256=") && strings.EqualFold(sig, githubtest.Signature(secret, body))
		if !signed && rec.Code != http.StatusUnauthorized {
			t.Errorf("unsigned delivery answered %d, want 401", rec.Code)
		}
		if signed && rec.Code == http.StatusUnauthorized {
			t.Errorf("signed delivery refused")
		}
	})
}
