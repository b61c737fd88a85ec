package config

import (
	"strings"
	"testing"
)

const sumA = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
const sumB = "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"

func TestWebParsesUsersProxiesAndAllow(t *testing.T) {
	in := "serve:\n  web:\n    enabled: true\n    users:\n      - {name: alice, token_sha256: " + sumA + "}\n      - name: bob\n        token_sha256: " + sumB + "\n        role: prompt\n" +
		"    trusted_proxies: [10.0.0.0/8, \"::1\", 127.0.0.1]\n    proxy_secret: ${PROXY_SECRET}\n    proxy_header: X-Forwarded-User\n    allow: [\"carol@example.com\"]\n"
	cfg, err := ParseEnv(strings.NewReader(in), "w.yaml", env("HOME", "/h", "XDG_STATE_HOME", "/s", "PROXY_SECRET", "0123456789abcdef0123"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	w := cfg.Serve.Web
	if !w.Enabled || len(w.Users) != 2 || w.Users[1].Name != "bob" || w.Users[1].TokenSHA256 != sumB || w.Users[1].Role != "prompt" || len(w.TrustedProxies) != 3 || w.Allow[0] != "carol@example.com" {
		t.Fatalf("web = %+v", w)
	}
	p, err := ParseWebProxy("127.0.0.1")
	if err != nil || p.String() != "127.0.0.1/32" {
		t.Fatalf("127.0.0.1 → %v %v", p, err)
	}
}

func TestWebUserWithAPlainTokenIsAnErrorThatHidesIt(t *testing.T) {
	in := "serve:\n  web:\n    users:\n      - {name: alice, token: orw_secret-value}\n"
	_, err := ParseEnv(strings.NewReader(in), "w.yaml", env("HOME", "/h"))
	if err == nil || !strings.Contains(err.Error(), `w.yaml:4: serve.web.users[0]: unknown key "token"`) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "orw_secret-value") {
		t.Fatal("the error shows the token")
	}
}

func TestWebValidateErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		web  Web
		want []string
	}{
		{"nobody could sign in", Web{Enabled: true}, []string{"serve.web.users: nobody could sign in"}},
		{"bad hash and name", Web{Users: []WebUser{{Name: "", TokenSHA256: "abc"}}},
			[]string{"serve.web.users[0].name: required", "serve.web.users[0].token_sha256: want the 64 hex digits"}},
		{"duplicates", Web{Users: []WebUser{{Name: "a", TokenSHA256: sumA}, {Name: "a", TokenSHA256: sumA}}},
			[]string{`serve.web.users[1].name: "a" duplicates users[0]`, "serve.web.users[1].token_sha256: the same token as users[0]"}},
		{"bad proxy", Web{TrustedProxies: []string{"10.0.0.0/33", "proxy.local"}, Allow: []string{"*"}},
			[]string{`serve.web.trusted_proxies[0]: want an IP address or a CIDR`, `serve.web.trusted_proxies[1]: want an IP address or a CIDR such as 10.0.0.0/8, got "proxy.local"`}},
		{"proxies without allow", Web{TrustedProxies: []string{"10.0.0.1"}}, []string{"serve.web.allow: required with trusted_proxies"}},
		{"unknown roles", Web{Users: []WebUser{{Name: "a", TokenSHA256: sumA, Role: "admin"}}, ProxyRole: "Run"},
			[]string{`serve.web.users[0].role: unknown role "admin" (want answer, run or prompt)`, `serve.web.proxy_role: unknown role "Run"`}},
		{"every address", Web{TrustedProxies: []string{"0.0.0.0/0", "::/0", "10.0.0.0/8"}, Allow: []string{"*"}},
			[]string{"serve.web.trusted_proxies[0]: 0.0.0.0/0 is every address", "serve.web.trusted_proxies[1]: ::/0 is every address"}},
		{"loopback without a secret", Web{TrustedProxies: []string{"127.0.0.1", "::1", "127.0.0.0/8"}, Allow: []string{"*"}},
			[]string{"serve.web.trusted_proxies[0]: this host's loopback", "serve.web.trusted_proxies[1]: this host's loopback", "serve.web.trusted_proxies[2]: this host's loopback"}},
		{"short secret, bad header", Web{TrustedProxies: []string{"127.0.0.1"}, ProxySecret: "short", ProxyHeader: "X Email", Allow: []string{"*"}},
			[]string{"serve.web.proxy_secret: too short", `serve.web.proxy_header: "X Email" is not a header name`}},
		{"empty allow item", Web{TrustedProxies: []string{"10.0.0.1"}, Allow: []string{" "}}, []string{"serve.web.allow[0]: must not be empty"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultEnv(env("HOME", "/h"))
			cfg.Serve.Web = tt.web
			err := cfg.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
