package web

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// secretsOfFixture is text only a signed-in user may see.
var secretsOfFixture = []string{"Which auth method?", "Implement spec X", "nightly", "r1-s9f3e2d1c0ab", "Libraries"}

func assertNothingLeaked(t *testing.T, what string, r result) {
	t.Helper()
	for _, s := range secretsOfFixture {
		if strings.Contains(r.body, s) {
			t.Errorf("%s: the body shows %q to someone not signed in:\n%s", what, s, r.body)
		}
	}
}

func TestNoTokenRedirectsPagesToSignInAndRefusesTheAPI(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/", "/runs", "/runs/r1", "/runs/r1/events", "/runs/r1/transcripts/1"} {
		r := f.do(nil, "GET", path, "", nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/signin?next="+url.QueryEscape(path) {
			t.Errorf("GET %s: %d Location %q, want 303 to the sign-in form", path, r.status, r.header.Get("Location"))
		}
		assertNothingLeaked(t, "GET "+path, r)
	}
	for _, path := range []string{"/api/pending", "/api/runs", "/api/runs/r1"} {
		r := f.do(nil, "GET", path, "", nil)
		if r.status != http.StatusUnauthorized || !strings.Contains(r.body, `"v":1`) || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s: %d %s, want 401 JSON with WWW-Authenticate", path, r.status, r.body)
		}
		assertNothingLeaked(t, "GET "+path, r)
	}
	for _, path := range []string{"/api/answer", "/api/runs/r1/cancel", "/answer", "/runs/r1/cancel"} {
		r := f.do(nil, "POST", path, `{"set_id":"r1-s9f3e2d1c0ab","answers":[{"question_id":"qa1","labels":["JWT"]}]}`, map[string]string{"Content-Type": "application/json"})
		if r.status != http.StatusUnauthorized {
			t.Errorf("POST %s: %d, want 401", path, r.status)
		}
		assertNothingLeaked(t, "POST "+path, r)
	}
	if f.be.offers != 0 || f.be.final("r1-s9f3e2d1c0ab") != nil {
		t.Fatal("an answer without credentials reached the backend")
	}
	// The sign-in form and the static files are public, and show nothing.
	r := f.do(nil, "GET", "/signin", "", nil)
	if r.status != 200 || !strings.Contains(r.body, `<label for="token">`) {
		t.Fatalf("sign-in form: %d", r.status)
	}
	assertNothingLeaked(t, "sign-in form", r)
	if r := f.do(nil, "GET", "/static/app.js", "", nil); r.status != 200 {
		t.Fatalf("static: %d", r.status)
	}
}

func TestWrongTokenIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	for _, h := range []map[string]string{bearer("orw_wrong"), bearer(""), {"Authorization": "Basic YWxpY2U6eA=="}} {
		for _, path := range []string{"/", "/api/pending"} {
			r := f.do(nil, "GET", path, "", h)
			if r.status != http.StatusUnauthorized {
				t.Errorf("GET %s with %q: %d, want 401", path, h["Authorization"], r.status)
			}
			assertNothingLeaked(t, "GET "+path, r)
		}
	}
	c := f.client()
	body, h := form(url.Values{"token": {"orw_wrong"}})
	r := f.do(c, "POST", "/signin", body, h)
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "not valid") {
		t.Fatalf("sign in with a wrong token: %d", r.status)
	}
	if len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatal("a wrong token got a session cookie")
	}
	// A right token next to a forged session cookie still works, and a
	// forged cookie alone does not.
	r = f.do(nil, "GET", "/api/pending", "", map[string]string{"Cookie": SessionCookie + "=forged"})
	if r.status != http.StatusUnauthorized {
		t.Fatalf("forged session cookie: %d", r.status)
	}
	if r := f.do(nil, "GET", "/api/pending", "", bearer(aliceToken)); r.status != 200 {
		t.Fatalf("right token: %d", r.status)
	}
}

func TestForgedForwardedUserFromUntrustedAddressIsIgnored(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.TrustedProxies = []netip.Prefix{mustPrefix(t, "10.0.0.0/8")}
		c.Allow = []string{"*"}
	})
	for _, hdr := range []string{"X-Forwarded-User", "X-Forwarded-Email"} {
		r := f.do(nil, "GET", "/api/pending", "", map[string]string{hdr: "alice"})
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s from 127.0.0.1 (not trusted): %d, want 401", hdr, r.status)
		}
		assertNothingLeaked(t, hdr, r)
	}
}

func TestTrustedProxyUserMustBeAllowed(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.TrustedProxies = []netip.Prefix{mustPrefix(t, "127.0.0.1/32")}
		c.Allow = []string{"carol@example.com", "dave@example.com"}
	})
	if r := f.do(nil, "GET", "/api/pending", "", map[string]string{"X-Forwarded-Email": "carol@example.com"}); r.status != 200 {
		t.Fatalf("allowed email through the proxy: %d", r.status)
	}
	if r := f.do(nil, "GET", "/", "", map[string]string{"X-Forwarded-Email": "dave@example.com"}); r.status != 200 || !strings.Contains(r.body, "Signed in as <strong>dave@example.com</strong>") {
		t.Fatalf("allowed user through the proxy: %d", r.status)
	}
	r := f.do(nil, "GET", "/api/pending", "", map[string]string{"X-Forwarded-Email": "mallory@example.com"})
	if r.status != http.StatusForbidden {
		t.Fatalf("email not in allow: %d, want 403", r.status)
	}
	assertNothingLeaked(t, "not allowed", r)
	// Only X-Forwarded-Email says who it is: X-Forwarded-User, allowed or
	// not, neither lets anyone in nor names the answerer.
	for _, h := range []map[string]string{
		{"X-Forwarded-User": "dave@example.com"},
		{"X-Forwarded-User": "carol@example.com", "X-Forwarded-Email": "mallory@example.com"},
	} {
		if r := f.do(nil, "GET", "/api/pending", "", h); r.status == 200 {
			t.Errorf("%v: let in, want refused", h)
		}
	}
	// Sent twice (the browser's and the proxy's): refused.
	req, _ := http.NewRequest("GET", f.ts.URL+"/api/pending", nil)
	req.Header.Add("X-Forwarded-Email", "carol@example.com")
	req.Header.Add("X-Forwarded-Email", "mallory@example.com")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode == 200 {
		t.Errorf("two X-Forwarded-Email headers: %v %v, want refused", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	// An allowed person's email with X-Forwarded-User: mallory answers as
	// the allowed person, the one who was let in — never as mallory.
	page := f.do(nil, "GET", "/", "", map[string]string{"X-Forwarded-Email": "dave@example.com", "X-Forwarded-User": "mallory"})
	if page.status != 200 || strings.Contains(page.body, "mallory") {
		t.Fatalf("page for dave's email with X-Forwarded-User mallory: %d, mentions mallory %v", page.status, strings.Contains(page.body, "mallory"))
	}
	body, h := form(url.Values{"csrf": {csrfOf(t, page.body)}, "run": {"r1"}, "question": {"qa1"}, "a:qa1": {"JWT"}})
	h["X-Forwarded-Email"] = "dave@example.com"
	h["X-Forwarded-User"] = "mallory"
	if r := f.do(nil, "POST", "/answer", body, h); r.status != 200 {
		t.Fatalf("answer through the proxy: %d %s", r.status, r.body)
	}
	if got := f.be.final("r1-s9f3e2d1c0ab"); got == nil || got.By != "dave@example.com" || got.Surface != "web" {
		t.Fatalf("answer recorded as %+v, want by dave@example.com on web", got)
	}
}

// With a proxy secret, the proxy's address alone is not enough: a process
// on the proxy's host (the agent's tools) does not know the secret.
func TestTrustedProxyNeedsTheSecret(t *testing.T) {
	const secret = "proxy-s3cret-value"
	f := newFixture(t, func(c *Config) {
		c.TrustedProxies = []netip.Prefix{mustPrefix(t, "127.0.0.1/32")}
		c.ProxySecret = secret
		c.Allow = []string{"*"}
	})
	for name, h := range map[string]map[string]string{
		"no secret":    {"X-Forwarded-Email": "carol@example.com"},
		"wrong secret": {"X-Forwarded-Email": "carol@example.com", DefaultProxySecretHeader: "guess"},
	} {
		if r := f.do(nil, "GET", "/api/pending", "", h); r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, r.status)
		}
	}
	if r := f.do(nil, "GET", "/api/pending", "", map[string]string{"X-Forwarded-Email": "carol@example.com", DefaultProxySecretHeader: secret}); r.status != 200 {
		t.Errorf("with the secret: %d, want 200", r.status)
	}
}

func TestCrossSitePostWithoutCSRFTokenIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	c, csrf := f.signIn(aliceToken)
	// No token, a wrong token, a token in a cross-site request: refused.
	for name, v := range map[string]url.Values{
		"no token":    {"run": {"r1"}, "question": {"qa1"}, "a:qa1": {"JWT"}},
		"wrong token": {"csrf": {"forged"}, "run": {"r1"}, "question": {"qa1"}, "a:qa1": {"JWT"}},
	} {
		body, h := form(v)
		if r := f.do(c, "POST", "/answer", body, h); r.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, r.status)
		}
	}
	body, h := form(url.Values{"csrf": {csrf}, "run": {"r1"}, "question": {"qa1"}, "a:qa1": {"JWT"}})
	h["Sec-Fetch-Site"] = "cross-site"
	if r := f.do(c, "POST", "/answer", body, h); r.status != http.StatusForbidden {
		t.Errorf("cross-site with the token: %d, want 403", r.status)
	}
	h = map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"}
	if r := f.do(c, "POST", "/answer", body, h); r.status != http.StatusForbidden {
		t.Errorf("another Origin: %d, want 403", r.status)
	}
	// The API with the session cookie needs the token in a header.
	js := `{"set_id":"r1-s9f3e2d1c0ab","answers":[{"question_id":"qa1","labels":["JWT"]}]}`
	if r := f.do(c, "POST", "/api/answer", js, map[string]string{"Content-Type": "application/json"}); r.status != http.StatusForbidden {
		t.Errorf("API with a cookie and no X-CSRF-Token: %d, want 403", r.status)
	}
	if r := f.do(c, "POST", "/runs/r2/cancel", "", nil); r.status != http.StatusForbidden {
		t.Errorf("cancel without the token: %d, want 403", r.status)
	}
	if f.be.offers != 0 || f.be.final("r1-s9f3e2d1c0ab") != nil {
		t.Fatal("a refused POST reached the backend")
	}
	// Same site, with the token: taken.
	body, h = form(url.Values{"csrf": {csrf}, "run": {"r1"}, "question": {"qa1"}, "a:qa1": {"JWT"}})
	h["Sec-Fetch-Site"] = "same-origin"
	if r := f.do(c, "POST", "/answer", body, h); r.status != 200 || !strings.Contains(r.body, "Answer recorded") {
		t.Fatalf("with the token: %d", r.status)
	}
}

func TestScriptInQuestionRendersInert(t *testing.T) {
	f := newFixture(t, nil)
	evil := "<script>alert(\"q\")</script><img src=x onerror=alert(1)>\x1b[31m\u202e"
	f.be.ask(questions.Set{ID: "r1-2", RunID: "r1", Turn: 2, Title: evil,
		Context: evil + "\n\n[click](javascript:alert(2)) <iframe src=//evil.example>",
		Questions: []questions.Question{{ID: "qx", Header: evil, Text: evil,
			Options: []questions.Option{{Label: `"><script>alert(3)</script>`, Description: evil}}}}}, f.base.Add(4*time.Minute))
	f.be.runs["r1"].Items = append(f.be.runs["r1"].Items, Item{Kind: ItemText, Turn: 2, Text: evil + "\n\nSome **bold** [x](javascript:alert(4))"},
		Item{Kind: ItemTool, Turn: 2, Tool: evil, Text: evil})
	for _, path := range []string{"/", "/runs/r1", "/runs"} {
		r := f.do(nil, "GET", path, "", bearer(aliceToken))
		if r.status != 200 {
			t.Fatalf("GET %s: %d", path, r.status)
		}
		low := strings.ToLower(r.body)
		for _, bad := range []string{"<script>alert", "<img", `href="javascript:`, "<iframe", "\x1b", "\u202e"} {
			if strings.Contains(low, bad) {
				t.Errorf("GET %s: %q is live in the page", path, bad)
			}
		}
		if path != "/runs" && !strings.Contains(r.body, "&lt;script&gt;") {
			t.Errorf("GET %s: the text is not shown escaped", path)
		}
	}
	r := f.do(nil, "GET", "/runs/r1", "", bearer(aliceToken))
	if !strings.Contains(r.body, "<strong>bold</strong>") {
		t.Error("the model's markdown is not rendered")
	}
	r = f.do(nil, "GET", "/api/pending", "", bearer(aliceToken))
	if strings.Contains(r.body, "<script>") {
		t.Error("the API serves raw <script>")
	}
}

func TestSessionCookieFlags(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.TrustedProxies = []netip.Prefix{mustPrefix(t, "127.0.0.1/32")}
		c.Allow = []string{"nobody"}
	})
	check := func(name string, h map[string]string, wantSecure bool) {
		body, hd := form(url.Values{"token": {aliceToken}})
		for k, v := range h {
			hd[k] = v
		}
		r := f.do(nil, "POST", "/signin", body, hd)
		resp := http.Response{Header: r.header}
		var c *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == SessionCookie {
				c = ck
			}
		}
		if c == nil {
			t.Fatalf("%s: no session cookie", name)
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure != wantSecure || c.MaxAge <= 0 || len(c.Value) < 40 {
			t.Errorf("%s: cookie %+v: want HttpOnly, SameSite=Strict, Path=/, Secure=%v, a max age and a long random value", name, c, wantSecure)
		}
	}
	check("plain http", nil, false)
	check("behind a TLS proxy", map[string]string{"X-Forwarded-Proto": "https"}, true)

	// Served over TLS directly.
	srv, _ := New(Config{Backend: newFakeBackend(), Users: []User{{Name: "alice", TokenSHA256: HashToken(aliceToken)}}})
	ts := httptest.NewTLSServer(srv.Handler())
	defer ts.Close()
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.PostForm(ts.URL+"/signin", url.Values{"token": {aliceToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("over TLS: cookies %+v, want one Secure HttpOnly SameSite=Strict", cs)
	}
}

func TestSignOutEndsTheSession(t *testing.T) {
	f := newFixture(t, nil)
	c, csrf := f.signIn(aliceToken)
	body, h := form(url.Values{"csrf": {csrf}})
	if r := f.do(c, "POST", "/signout", body, h); r.status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", r.status)
	}
	if r := f.do(c, "GET", "/api/pending", "", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("after sign out: %d", r.status)
	}
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/signin", "/", "/api/runs"} {
		r := f.do(nil, "GET", path, "", bearer(aliceToken))
		csp := r.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v", path, r.header)
		}
		if strings.Contains(r.body, "<script>") {
			t.Errorf("GET %s: inline script", path)
		}
	}
}

func TestSignInRedirectStaysOnThisSite(t *testing.T) {
	f := newFixture(t, nil)
	cases := map[string]string{
		"/runs/r1": "/runs/r1", "/runs/r1?x=1#y": "/runs/r1?x=1#y",
		"//evil.example/": "/", "https://evil.example/": "/", "/\\evil.example": "/",
		"/\t/evil.example/phish": "/", "/\n/evil.example": "/", "/\r//evil.example": "/", " //evil.example": "/",
		"/\x00/evil.example": "/", "/\u200b/evil.example": "/", "\\\\evil.example": "/", "javascript:alert(1)": "/",
		"/%09/evil.example": "/%09/evil.example", // escaped: a path on this site
		"":                  "/", "evil.example": "/", "/a\\b": "/",
	}
	for next, want := range cases {
		body, h := form(url.Values{"token": {aliceToken}, "next": {next}})
		r := f.do(nil, "POST", "/signin", body, h)
		if r.header.Get("Location") != want {
			t.Errorf("POST next=%q: Location %q, want %q", next, r.header.Get("Location"), want)
		}
	}
	// Signed in, GET /signin?next=… redirects at once: the same rule. The
	// query is decoded, so %09 is a tab there.
	c, _ := f.signIn(aliceToken)
	for _, q := range []string{"/%09/evil.example/phish", "//evil", "/%5Cevil", "https://evil", "/%0A/evil.example", "%2F%2Fevil"} {
		r := f.do(c, "GET", "/signin?next="+q, "", nil)
		if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || loc != "/" {
			t.Errorf("GET /signin?next=%s signed in: %d Location %q, want 303 to /", q, r.status, loc)
		}
	}
}
