package secretscan

import (
	"fmt"
	"strings"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// KindOversized is the Kind of a Finding for a file over the size limit.
const KindOversized = "file over the size limit"

// Finding is what holds a file back from delivery: a secret at a line of
// it, or its size. It holds no part of a secret's value.
type Finding struct {
	// Path is the file's path in the repository (slash-separated).
	Path string
	// Line is the secret's line (1-based); 0 for an oversized file.
	Line int
	// Kind is the kind of secret ("GitHub token"), or KindOversized.
	Kind string
	// Size and Limit are an oversized file's size and the limit, in bytes.
	Size, Limit int64
}

// String is "PATH line N: KIND", or "PATH: file over the size limit (SIZE,
// limit LIMIT)". The path is made printable, on one line, and redacted
// (Redact): a file may be named after a secret.
func (f Finding) String() string {
	p := Redact(strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(questions.Printable(f.Path)))
	if f.Kind == KindOversized {
		return fmt.Sprintf("%s: %s (%s, limit %s)", p, f.Kind, Size(f.Size), Size(f.Limit))
	}
	return fmt.Sprintf("%s line %d: %s", p, f.Line, f.Kind)
}

// Size formats n bytes for people: "512 B", "1.5 KiB", "120 MiB".
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/float64(div)), "0"), ".") + " " + string("KMGT"[exp]) + "iB"
}

// Paths are the findings' files, each once, in order.
func Paths(fs []Finding) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range fs {
		if !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, f.Path)
		}
	}
	return out
}

// Error is a delivery held back by findings: nothing was committed or
// pushed. Its text names the files, lines and kinds, never a value.
type Error struct {
	Findings []Finding
}

func (e *Error) Error() string {
	return "the run's work holds what must not leave this machine: " + Summary(e.Findings, 10)
}

// Summary lists up to n findings ("a line 1: GitHub token; b: file over …"),
// then how many more there are.
func Summary(fs []Finding, n int) string {
	var parts []string
	for i, f := range fs {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(fs)-n))
			break
		}
		parts = append(parts, f.String())
	}
	return strings.Join(parts, "; ")
}
