package web

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestAnswerFlashShowsNoSetID: the message after an answer names no
// internal question-set ID.
func TestAnswerFlashShowsNoSetID(t *testing.T) {
	f := newFixture(t, nil)
	c, csrf := f.signIn(aliceToken)
	flash := regexp.MustCompile(`<p class="flash ok"[^>]*>([^<]*)</p>`)
	for _, tc := range []struct {
		v    url.Values
		want string
	}{
		{url.Values{"csrf": {csrf}, "run": {"r1"}, "question": {"qa1"}, "a:qa1": {"JWT"}}, "Answer recorded: the run resumes."},
	} {
		body, h := form(tc.v)
		h["Sec-Fetch-Site"] = "same-origin"
		r := f.do(c, "POST", "/answer", body, h)
		m := flash.FindStringSubmatch(r.body)
		if r.status != 200 || m == nil || !strings.Contains(m[1], tc.want) {
			t.Fatalf("answer %v: %d, flash %q, want %q\n%s", tc.v, r.status, m, tc.want, r.body)
		}
		if strings.Contains(m[1], "s9f3e2d1c0ab") {
			t.Errorf("the flash names the set ID: %q", m[1])
		}
	}
}
