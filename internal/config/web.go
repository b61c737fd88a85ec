package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Web configures the web inbox and run pages that serve adds next to
// /healthz and /metrics (serve.web). It is off unless enabled, and denies
// everyone who is not a named user or allowed through a trusted proxy.
type Web struct {
	// Enabled serves the inbox (/), /runs and the JSON API (/api/...).
	Enabled bool `yaml:"enabled"`
	// Users may sign in with a bearer token; only its SHA-256 is kept
	// here (`orchestrator web token NAME` prints a new one).
	Users []WebUser `yaml:"users"`
	// TrustedProxies are the addresses (an IP or a CIDR such as
	// 10.0.0.0/8) whose ProxyHeader is believed (oauth2-proxy); from any
	// other address it is ignored. Never every address, and never this
	// host's loopback without ProxySecret: the agent's tools run here.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ProxyHeader is the one header that names the person a trusted proxy
	// let in, which must be one the proxy sets itself (overwriting what
	// the browser sent). Default X-Forwarded-Email.
	ProxyHeader string `yaml:"proxy_header"`
	// ProxySecret, when set, must come in ProxySecretHeader (default
	// X-Orchestrator-Proxy-Secret) for the proxy to be believed: the proxy
	// adds it (nginx proxy_set_header, Caddy header_up), a local process
	// does not know it. Write it as ${VAR}.
	ProxySecretHeader string `yaml:"proxy_secret_header"`
	ProxySecret       string `yaml:"proxy_secret"`
	// Allow lists the values of ProxyHeader (emails, by default) a trusted
	// proxy may let in; "*" allows everyone the proxy authenticated.
	Allow []string `yaml:"allow"`
	// ProxyRole is what the people a trusted proxy lets in may do beyond
	// answering: answer (the default), run (start runs of specs) or
	// prompt (start runs of prompts too), as a user's role.
	ProxyRole string `yaml:"proxy_role"`
}

// WebUser is a person who signs in with a token.
type WebUser struct {
	Name        string `yaml:"name"`
	TokenSHA256 string `yaml:"token_sha256"`
	// Role is what they may do beyond answering questions and cancelling
	// or resuming runs: answer (the default), run (also start a run of a
	// spec of specs.dir from the inbox or POST /api/runs) or prompt (also
	// a run of a prompt of their own).
	Role string `yaml:"role"`
}

// WebRoles are the roles of serve.web users (internal/web's).
var WebRoles = []string{"answer", "run", "prompt"}

func (v *validator) webRole(key, role string) {
	if r := strings.TrimSpace(role); r != "" && !slices.Contains(WebRoles, r) {
		v.add(key, "unknown role %q (want answer, run or prompt)", r)
	}
}

// web checks serve.web; called by Validate.
func (v *validator) web(w Web) {
	const p = "serve.web."
	seen := map[string]int{}
	hashes := map[string]int{}
	for i, u := range w.Users {
		k := fmt.Sprintf("%susers[%d]", p, i)
		name := strings.TrimSpace(u.Name)
		switch {
		case name == "":
			v.add(k+".name", "required")
		case strings.ContainsAny(name, "\r\n\t"):
			v.add(k+".name", "must be one line without tabs")
		default:
			if j, dup := seen[name]; dup {
				v.add(k+".name", "%q duplicates users[%d]", name, j)
			}
			seen[name] = i
		}
		v.webRole(k+".role", u.Role)
		h := strings.ToLower(strings.TrimSpace(u.TokenSHA256))
		if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
			// The value is not shown: it is a hash of a secret.
			v.add(k+".token_sha256", "want the 64 hex digits `orchestrator web token %s` prints", name)
		} else if j, dup := hashes[h]; dup {
			v.add(k+".token_sha256", "the same token as users[%d]", j)
		} else {
			hashes[h] = i
		}
	}
	for i, s := range w.TrustedProxies {
		k := fmt.Sprintf("%strusted_proxies[%d]", p, i)
		pfx, err := ParseWebProxy(s)
		switch {
		case err != nil:
			v.add(k, "%v", err)
		case pfx.Bits() == 0:
			v.add(k, "%s is every address: anyone could name themselves in %s", pfx, proxyHeaderOf(w))
		case w.ProxySecret == "" && (pfx.Contains(netip.MustParseAddr("127.0.0.1")) || pfx.Contains(netip.IPv6Loopback())):
			v.add(k, "this host's loopback: any local process, the agent's tools included, could pose as the proxy and answer as anyone; set proxy_secret (a header only the proxy adds) or run the proxy elsewhere")
		}
	}
	if h := strings.TrimSpace(w.ProxyHeader); h != "" && !validHeaderName(h) {
		v.add(p+"proxy_header", "%q is not a header name", h)
	}
	if h := strings.TrimSpace(w.ProxySecretHeader); h != "" && !validHeaderName(h) {
		v.add(p+"proxy_secret_header", "%q is not a header name", h)
	}
	if w.ProxySecret != "" && len(w.ProxySecret) < 16 {
		// The value is not shown: it is a secret.
		v.add(p+"proxy_secret", "too short: at least 16 characters (a random value, written as ${VAR})")
	}
	if w.ProxySecret != "" && len(w.TrustedProxies) == 0 {
		v.add(p+"proxy_secret", "set without trusted_proxies: no proxy is believed")
	}
	v.webRole(p+"proxy_role", w.ProxyRole)
	v.nonEmptyItems(p+"allow", w.Allow)
	if len(w.TrustedProxies) > 0 && len(w.Allow) == 0 {
		v.add(p+"allow", `required with trusted_proxies: the users or emails the proxy may let in ("*" for all)`)
	}
	if w.Enabled && len(w.Users) == 0 && len(w.TrustedProxies) == 0 {
		v.add(p+"users", "nobody could sign in: add users (orchestrator web token NAME) or trusted_proxies")
	}
}

// Defaults of serve.web.proxy_header and proxy_secret_header (those of
// internal/web).
const (
	DefaultProxyHeader       = "X-Forwarded-Email"
	DefaultProxySecretHeader = "X-Orchestrator-Proxy-Secret"
)

// proxyHeaderOf is the header that names the person behind the proxy.
func proxyHeaderOf(w Web) string {
	if h := strings.TrimSpace(w.ProxyHeader); h != "" {
		return h
	}
	return DefaultProxyHeader
}

// validHeaderName reports whether s is an HTTP header name (a token).
func validHeaderName(s string) bool {
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return s != ""
}

// ParseWebProxy reads a serve.web.trusted_proxies entry: an IP address or
// a CIDR prefix.
func ParseWebProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("want an IP address or a CIDR such as 10.0.0.0/8, got %q", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("want an IP address or a CIDR such as 10.0.0.0/8, got %q", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// UnmarshalYAML implements yaml.Unmarshaler: a user is a mapping of name and
// token_sha256, and any other key (a pasted plain "token", a typo) is an
// error rather than ignored.
func (u *WebUser) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return errors.New("want a mapping with name, token_sha256 and, optionally, role")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if val.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: want a string", k.Value)
		}
		switch k.Value {
		case "name":
			u.Name = val.Value
		case "token_sha256":
			u.TokenSHA256 = val.Value
		case "role":
			u.Role = val.Value
		default:
			// The value is not shown: it may be a token.
			return fmt.Errorf("unknown key %q (a user has name, token_sha256 and role)", k.Value)
		}
	}
	return nil
}
