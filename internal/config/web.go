package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
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
	// 10.0.0.0/8) whose X-Forwarded-User / X-Forwarded-Email headers are
	// believed (oauth2-proxy); from any other address they are ignored.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Allow lists the users and emails a trusted proxy may let in; "*"
	// allows everyone the proxy authenticated.
	Allow []string `yaml:"allow"`
}

// WebUser is a person who signs in with a token.
type WebUser struct {
	Name        string `yaml:"name"`
	TokenSHA256 string `yaml:"token_sha256"`
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
		if _, err := ParseWebProxy(s); err != nil {
			v.add(fmt.Sprintf("%strusted_proxies[%d]", p, i), "%v", err)
		}
	}
	v.nonEmptyItems(p+"allow", w.Allow)
	if len(w.TrustedProxies) > 0 && len(w.Allow) == 0 {
		v.add(p+"allow", `required with trusted_proxies: the users or emails the proxy may let in ("*" for all)`)
	}
	if w.Enabled && len(w.Users) == 0 && len(w.TrustedProxies) == 0 {
		v.add(p+"users", "nobody could sign in: add users (orchestrator web token NAME) or trusted_proxies")
	}
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
		return errors.New("want a mapping with name and token_sha256")
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
		default:
			// The value is not shown: it may be a token.
			return fmt.Errorf("unknown key %q (a user has name and token_sha256)", k.Value)
		}
	}
	return nil
}
