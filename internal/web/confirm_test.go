package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// "Cancel this run" asks first: the run page's form posts without confirm
// and gets a confirmation page (a plain form, no JavaScript needed); only
// its own form, posting confirm=yes with the CSRF token, cancels.
func TestCancelFromThePageAsksToConfirm(t *testing.T) {
	f := newFixture(t, nil)
	c, csrf := f.signIn(aliceToken)
	post := func(v url.Values) result {
		body, h := form(v)
		h["Sec-Fetch-Site"] = "same-origin"
		return f.do(c, "POST", "/runs/r1/cancel", body, h)
	}
	status := func() string {
		f.be.mu.Lock()
		defer f.be.mu.Unlock()
		return f.be.runs["r1"].Status
	}

	page := f.do(c, "GET", "/runs/r1", "", nil)
	if !strings.Contains(page.body, `id="cancel"`) || strings.Contains(page.body, `name="confirm"`) {
		t.Fatalf("run page: want the cancel button without confirm:\n%s", page.body)
	}
	r := post(url.Values{"csrf": {csrf}})
	if r.status != http.StatusOK || !strings.Contains(r.body, "Cancel this run?") || !strings.Contains(r.body, `id="confirm-cancel"`) ||
		!strings.Contains(r.body, `name="confirm" value="yes"`) || !strings.Contains(r.body, `href="/runs/r1"`) {
		t.Fatalf("first post: %d, want the confirmation page:\n%s", r.status, r.body)
	}
	if csrfOf(t, r.body) != csrf {
		t.Errorf("the confirmation form does not carry the CSRF token")
	}
	if st := status(); st != "waiting" {
		t.Fatalf("after the first post the run is %q, want it still waiting", st)
	}

	// The confirmation without the CSRF token is refused.
	if r := post(url.Values{"confirm": {"yes"}}); r.status != http.StatusForbidden {
		t.Errorf("confirm without the CSRF token: %d, want 403", r.status)
	}
	if r := post(url.Values{"csrf": {"forged"}, "confirm": {"yes"}}); r.status != http.StatusForbidden {
		t.Errorf("confirm with a forged CSRF token: %d, want 403", r.status)
	}
	if st := status(); st != "waiting" {
		t.Fatalf("after refused posts the run is %q, want it still waiting", st)
	}

	r = post(url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if r.status != http.StatusOK || !strings.Contains(r.body, "Run cancelled.") {
		t.Fatalf("confirmed: %d\n%s", r.status, r.body)
	}
	if st := status(); st != "cancelled" {
		t.Fatalf("after the confirmation the run is %q, want cancelled", st)
	}
	// A finished run asks nothing: it says there is nothing to cancel.
	if r := post(url.Values{"csrf": {csrf}}); r.status != http.StatusConflict || !strings.Contains(r.body, "nothing to cancel") {
		t.Errorf("cancel a cancelled run: %d\n%s", r.status, r.body)
	}
	if r := post(url.Values{"csrf": {csrf}, "confirm": {"yes"}}); r.status != http.StatusConflict {
		t.Errorf("confirm on a cancelled run: %d, want 409", r.status)
	}
}

// The web pages name question sets as people see them (run ID and question
// ID), never by the store's internal set ID: not in the inbox's anchors and
// forms, the run page's links, flashes nor errors.
func TestPagesShowNoInternalSetID(t *testing.T) {
	f := newFixture(t, nil)
	c, csrf := f.signIn(aliceToken)
	internal := []string{"s9f3e2d1c0ab", "s1b2c3d4e5f6"}
	check := func(what string, r result) {
		t.Helper()
		for _, id := range internal {
			if strings.Contains(r.body, id) {
				t.Errorf("%s shows the internal set ID %s:\n%s", what, id, r.body)
			}
		}
	}
	inbox := f.do(c, "GET", "/", "", nil)
	check("the inbox", inbox)
	for _, want := range []string{`id="ask-r1-qa1"`, `id="ask-r2-qb1"`, `name="run" value="r1"`, `name="question" value="qa1"`} {
		if !strings.Contains(inbox.body, want) {
			t.Errorf("the inbox lacks %s", want)
		}
	}
	run := f.do(c, "GET", "/runs/r1", "", nil)
	check("the run page", run)
	if !strings.Contains(run.body, `href="/#ask-r1-qa1"`) {
		t.Errorf("the run page does not link its waiting question in the inbox:\n%s", run.body)
	}
	post := func(v url.Values) result {
		body, h := form(v)
		h["Sec-Fetch-Site"] = "same-origin"
		return f.do(c, "POST", "/answer", body, h)
	}
	for name, tc := range map[string]struct {
		v      url.Values
		status int
		msg    string
	}{
		"invalid answer":   {url.Values{"csrf": {csrf}, "run": {"r2"}, "question": {"qb1"}, "a:qb1": {"chi"}, "t:qb2": {""}}, 422, "is empty"},
		"unknown question": {url.Values{"csrf": {csrf}, "run": {"r1"}, "question": {"qzz"}, "a:qzz": {"JWT"}}, 404, "run r1, question qzz: not found"},
		"unknown run":      {url.Values{"csrf": {csrf}, "run": {"nope"}, "question": {"qa1"}, "a:qa1": {"JWT"}}, 404, "run nope, question qa1: not found"},
		"no question":      {url.Values{"csrf": {csrf}, "a:qa1": {"JWT"}}, 400, "run and question are required"},
	} {
		r := post(tc.v)
		if r.status != tc.status || !strings.Contains(r.body, tc.msg) {
			t.Errorf("%s: %d, want %d with %q:\n%s", name, r.status, tc.status, tc.msg, r.body)
		}
		check(name, r)
	}
	ok := post(url.Values{"csrf": {csrf}, "run": {"r1"}, "question": {"qa1"}, "a:qa1": {"JWT"}})
	if ok.status != 200 || !strings.Contains(ok.body, "Answer recorded") {
		t.Fatalf("answer: %d\n%s", ok.status, ok.body)
	}
	check("the answer's flash", ok)
	// Answered already: told it is too late, by the run's names.
	late := post(url.Values{"csrf": {csrf}, "run": {"r1"}, "question": {"qa1"}, "a:qa1": {"OAuth2"}})
	if late.status != http.StatusConflict || !strings.Contains(late.body, "too late") {
		t.Errorf("a second answer: %d, want 409 too late:\n%s", late.status, late.body)
	}
	check("the too-late error", late)
}
