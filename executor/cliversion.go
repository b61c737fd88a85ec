package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The Claude Code CLI versions this program is tested with, oldest and
// newest: the real-CLI tests pass with both (`make test` installs the
// oldest, the Makefile's CLAUDE_VERSION; `make test CLAUDE_VERSION=` the
// newest). `orchestrator doctor` and every run warn about a CLI outside
// this range. Widen it only after the real-CLI tests pass with the new
// version, and say so in docs/claude-cli.md.
const (
	TestedCLIOldest = "2.1.330"
	TestedCLINewest = "2.1.332"
)

// TestedCLIRange is the tested range as people read it.
func TestedCLIRange() string { return TestedCLIOldest + " to " + TestedCLINewest }

// CLIVersion is a Claude Code CLI's version: major, minor, patch.
type CLIVersion [3]int

func (v CLIVersion) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// Compare is -1, 0 or 1 as v is older than, the same as or newer than w.
func (v CLIVersion) Compare(w CLIVersion) int {
	for i := range v {
		switch {
		case v[i] < w[i]:
			return -1
		case v[i] > w[i]:
			return 1
		}
	}
	return 0
}

// Tested reports whether v is in the tested range.
func (v CLIVersion) Tested() bool {
	lo, _ := ParseCLIVersion(TestedCLIOldest)
	hi, _ := ParseCLIVersion(TestedCLINewest)
	return v.Compare(lo) >= 0 && v.Compare(hi) <= 0
}

// ParseCLIVersion reads what `claude --version` prints, such as
// "2.1.330 (Claude Code)": the first word, MAJOR.MINOR.PATCH (a
// pre-release or build suffix after - or + is ignored).
func ParseCLIVersion(out string) (CLIVersion, error) {
	var v CLIVersion
	f := strings.Fields(out)
	if len(f) == 0 {
		return v, errors.New("no version printed")
	}
	word := strings.TrimPrefix(f[0], "v")
	if i := strings.IndexAny(word, "-+"); i >= 0 {
		word = word[:i]
	}
	parts := strings.Split(word, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("%q is not a version (MAJOR.MINOR.PATCH)", firstLine(out))
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("%q is not a version (MAJOR.MINOR.PATCH)", firstLine(out))
		}
		v[i] = n
	}
	return v, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// versionTimeout bounds `claude --version`.
const versionTimeout = 30 * time.Second

// ReadCLIVersion runs path --version with the environment env (nil: the
// process's) and parses what it prints. A CLI that does not answer within
// 30 seconds, fails, or prints no version is an error saying so.
func ReadCLIVersion(ctx context.Context, path string, env []string) (CLIVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = env
	cmd.WaitDelay = time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return CLIVersion{}, fmt.Errorf("%s --version: no answer in %s", path, versionTimeout)
		}
		if msg := firstLine(errb.String()); msg != "" {
			return CLIVersion{}, fmt.Errorf("%s --version: %w: %s", path, err, msg)
		}
		return CLIVersion{}, fmt.Errorf("%s --version: %w", path, err)
	}
	v, err := ParseCLIVersion(out.String())
	if err != nil {
		return CLIVersion{}, fmt.Errorf("%s --version: %w", path, err)
	}
	return v, nil
}
