// Package secretscan finds secrets in text the orchestrator is about to
// hand on (a run's work, before it is committed and pushed), and says where
// they are and what kind they are, never what they are: a Match and a
// Finding hold no part of the secret's value, so nothing made from them
// (a question, a log line, a store row, a pull request's body) can leak it.
//
// The rules are a compact table rather than a maintained rule set such as
// gitleaks': gitleaks v8 is a program first, its default rules are loaded
// through its configuration stack, and its module requires cobra, viper,
// zerolog, sprig, lipgloss, go-git and more, for what is here a few dozen
// lines of patterns (taken after its default rules). The table takes every shape the
// orchestrator already redacts from its output (questions.SecretShapes),
// then cloud keys, private keys and other well-known token shapes, after
// the patterns of gitleaks' default rules, and one generic rule for a
// high-entropy value assigned to a name such as "api_key" or "password".
package secretscan

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Rule is one kind of secret.
type Rule struct {
	// Kind is what people call it ("GitHub token"); questions show it.
	Kind string
	re   *regexp.Regexp
	// group is the submatch that holds the secret's value (0: the match).
	group int
	// minEntropy, when set, is the least Shannon entropy (bits per byte)
	// of a value that counts: below it the match reads as a placeholder.
	minEntropy float64
	// allow, when set, drops a value that is a documented example.
	allow func(value string) bool
	// keywords, when set, are lower-case strings one of which every match
	// holds on its line: only lines that hold one are matched, which keeps
	// a pattern without a literal prefix from costing its time everywhere.
	keywords []string
	// candidates, when set, does what keywords do for a shape no literal
	// marks: the offsets of the places a match may hold.
	candidates func(content []byte) []int
	// lineOK, when set, is a cheap test a line that holds a keyword must
	// pass too before the pattern is tried on it.
	lineOK func(line []byte) bool
}

// counts reports whether a value the rule's pattern matched is a secret:
// not a documented example, not a low-entropy placeholder.
func (r Rule) counts(v []byte) bool {
	return !(r.allow != nil && r.allow(string(v)) || r.minEntropy > 0 && entropy(v) < r.minEntropy)
}

func rule(kind, pattern string, keywords ...string) Rule {
	return Rule{Kind: kind, re: regexp.MustCompile(pattern), keywords: keywords}
}

func awsExample(v string) bool { return strings.Contains(v, "EXAMPLE") }

// shapeCandidates are the prefilters of the shapes of questions.SecretShapes
// (which carry none) that cost their time everywhere without one.
var shapeCandidates = map[string]func([]byte) []int{
	// user id, timestamp, HMAC: 23 or more token characters, then a dot.
	"Discord bot token": func(b []byte) []int {
		var out []int
		run := 0
		for i, c := range b {
			switch {
			case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-':
				run++
			case c == '.' && run >= 23:
				out = append(out, i)
				run = 0
			default:
				run = 0
			}
		}
		return out
	},
}

// rules are tried in order; a match that overlaps an earlier rule's on the
// same line is the earlier rule's (a specific rule before a generic one).
var rules = func() []Rule {
	out := []Rule{
		rule("GCP service account key", `"private_key"\s*:\s*"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY-----[^"]{64,}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY-----`),
		rule("private key", `-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{64,}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`),
	}
	for _, sh := range questions.SecretShapes() {
		out = append(out, Rule{Kind: sh.Kind, re: sh.Pattern, candidates: shapeCandidates[sh.Kind]})
	}
	out = append(out,
		Rule{Kind: "AWS access key ID", re: regexp.MustCompile(`\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`), allow: awsExample,
			keywords: []string{"a3t", "akia", "asia", "abia", "acca"}},
		Rule{Kind: "AWS secret access key", re: regexp.MustCompile(`(?im)aws_?secret_?(?:access_?)?key["']?\s*(?:=|:|:=|=>)\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`),
			group: 1, allow: awsExample, keywords: []string{"aws"}},
		rule("Google API key", `\bAIza[0-9A-Za-z_\-]{35}\b`, "aiza"),
		Rule{Kind: "Azure storage account key", re: regexp.MustCompile(`(?i)AccountKey=([A-Za-z0-9+/]{86}==)`), group: 1, keywords: []string{"accountkey="}},
		Rule{Kind: "Azure AD client secret", re: regexp.MustCompile("(?m)(?:^|[\\\\'\"`\\s>=:(,)])([a-zA-Z0-9_~.]{3}\\dQ~[a-zA-Z0-9_~.-]{31,34})(?:$|[\\\\'\"`\\s<),])"), group: 1, keywords: []string{"q~"}},
		rule("Slack token", `\bxox[abeoprs]-[0-9A-Za-z-]{10,}`, "xox"),
		rule("Slack webhook URL", `hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}`),
		rule("Stripe key", `\b(?:sk|rk)_(?:test|live|prod)_[0-9a-zA-Z]{10,99}\b`, "sk_", "rk_"),
		rule("GitLab token", `\bglpat-[0-9a-zA-Z_\-]{20}\b`, "glpat-"),
		rule("npm token", `\bnpm_[A-Za-z0-9]{36}\b`, "npm_"),
		rule("OpenAI API key", `\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}\b`, "t3blbkfj"),
		Rule{Kind: "password in a URL", re: regexp.MustCompile(`\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:@/'"]{1,100}:([^\s:@/'"$<{]{6,100})@[^\s/'"]+`),
			group: 1, minEntropy: 3, keywords: []string{"://"}},
		Rule{Kind: "secret assigned to a name such as key, token or password",
			re:    regexp.MustCompile(`(?i)(?:api[_.-]?key|access[_.-]?key|secret[_.-]?key|private[_.-]?key|secret|token|password|passwd|pwd|credentials?)["']?\s*(?:=|:|:=|=>)\s*["'` + "`" + `]?([A-Za-z0-9_\-+/=.~]{20,200})`),
			group: 1, minEntropy: 3.5, allow: func(v string) bool { return !strings.ContainsAny(v, "0123456789") || awsExample(v) },
			keywords: []string{"key", "secret", "token", "password", "passwd", "pwd", "credential"},
			lineOK:   func(line []byte) bool { return longestRun(line, "_-+/=.~") >= 20 }},
	)
	return out
}()

// Match is a secret found in a text: where and what kind, never its value.
type Match struct {
	Line int // 1-based
	Kind string
}

// String is "line N: KIND".
func (m Match) String() string { return fmt.Sprintf("line %d: %s", m.Line, m.Kind) }

// Binary reports whether content reads as binary (a NUL byte in its first
// 8000 bytes, git's own test): Scan leaves such content alone.
func Binary(content []byte) bool {
	return bytes.IndexByte(content[:min(len(content), 8000)], 0) >= 0
}

// Scan returns the secrets in content, in the order of their lines. Binary
// content has none.
func Scan(content []byte) []Match { return ScanChange(nil, content) }

// ScanChange returns the secrets in content that are not in old already:
// what a change from old to content adds (a secret a file held before is
// not the change's to leak). Binary content has none.
func ScanChange(old, content []byte) []Match {
	if len(content) == 0 || Binary(content) {
		return nil
	}
	nl := newlines(content)
	lower := asciiLower(content)
	type span struct{ start, end int }
	taken := map[int][]span{}
	var out []Match
	for _, r := range rules {
		for _, loc := range r.find(content, lower, nl) {
			vs, ve := loc[0], loc[1]
			v := content[vs:ve]
			if len(old) > 0 && bytes.Contains(old, v) {
				continue
			}
			line := lineOf(nl, vs)
			overlaps := false
			for _, s := range taken[line] {
				if vs < s.end && s.start < ve {
					overlaps = true
					break
				}
			}
			if overlaps {
				continue
			}
			taken[line] = append(taken[line], span{vs, ve})
			out = append(out, Match{Line: line, Kind: r.Kind})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

// Redact replaces every secret Scan finds in s with "[REDACTED]".
func Redact(s string) string {
	b := []byte(s)
	if Binary(b) {
		return s
	}
	type span struct{ start, end int }
	var spans []span
	nl, lower := newlines(b), asciiLower(b)
	for _, r := range rules {
		for _, loc := range r.find(b, lower, nl) {
			spans = append(spans, span{loc[0], loc[1]})
		}
	}
	if len(spans) == 0 {
		return s
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var out strings.Builder
	at := 0
	for _, sp := range spans {
		if sp.end <= at {
			continue
		}
		out.WriteString(s[at:max(at, sp.start)])
		out.WriteString("[REDACTED]")
		at = sp.end
	}
	out.WriteString(s[at:])
	return out.String()
}

// find returns the offsets of the secrets the rule finds in content
// (lower is content in ASCII lower case, nl its newlines' offsets): [start,
// end) of each value that counts.
func (r Rule) find(content, lower []byte, nl []int) [][2]int {
	var out [][2]int
	match := func(from, to int) {
		for _, loc := range r.re.FindAllSubmatchIndex(content[from:to], -1) {
			vs, ve := loc[2*r.group], loc[2*r.group+1]
			if vs >= 0 && r.counts(content[from+vs:from+ve]) {
				out = append(out, [2]int{from + vs, from + ve})
			}
		}
	}
	if len(r.keywords) == 0 && r.candidates == nil {
		match(0, len(content))
		return out
	}
	// The lines that hold a keyword or a candidate, each once, in order.
	lines := map[int]bool{}
	if r.candidates != nil {
		for _, off := range r.candidates(content) {
			lines[lineOf(nl, off)] = true
		}
	}
	for _, k := range r.keywords {
		for at := 0; ; {
			i := bytes.Index(lower[at:], []byte(k))
			if i < 0 {
				break
			}
			lines[lineOf(nl, at+i)] = true
			at += i + len(k)
		}
	}
	order := make([]int, 0, len(lines))
	for l := range lines {
		order = append(order, l)
	}
	sort.Ints(order)
	for _, l := range order {
		from, to := 0, len(content)
		if l > 1 {
			from = nl[l-2] + 1
		}
		if l <= len(nl) {
			to = nl[l-1]
		}
		if r.lineOK == nil || r.lineOK(content[from:to]) {
			match(from, to)
		}
	}
	return out
}

// longestRun is the length of the longest run of ASCII letters, digits and
// the given punctuation in b.
func longestRun(b []byte, punct string) int {
	best, run := 0, 0
	for _, c := range b {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(punct, c) >= 0 {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// asciiLower is b with ASCII letters in lower case, byte for byte (so
// offsets stay those of b).
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// newlines returns the offsets of content's newlines.
func newlines(content []byte) []int {
	var nl []int
	for i, b := range content {
		if b == '\n' {
			nl = append(nl, i)
		}
	}
	return nl
}

// lineOf is the 1-based line of offset off.
func lineOf(nl []int, off int) int { return sort.SearchInts(nl, off) + 1 }

// entropy is the Shannon entropy of b in bits per byte.
func entropy(b []byte) float64 {
	if len(b) == 0 {
		return 0
	}
	var counts [256]int
	for _, c := range b {
		counts[c]++
	}
	var h float64
	n := float64(len(b))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
