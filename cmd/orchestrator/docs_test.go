package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
)

// The documentation checked by TestDocs: the README and every page under
// docs/, from the repository's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("found only %d pages under docs/", len(pages))
	}
	return append([]string{filepath.Join("..", "..", "README.md")}, pages...)
}

// mdLine is a line of a markdown file, and whether it is inside a fenced
// code block (the fences' own lines count as inside).
type mdLine struct {
	n      int
	text   string
	fenced bool
}

func mdLines(src string) []mdLine {
	var out []mdLine
	fence := ""
	for i, l := range strings.Split(src, "\n") {
		s := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && (strings.HasPrefix(s, "```") || strings.HasPrefix(s, "~~~")):
			fence = s[:3]
			out = append(out, mdLine{i + 1, l, true})
		case fence != "" && strings.HasPrefix(s, fence):
			fence = ""
			out = append(out, mdLine{i + 1, l, true})
		default:
			out = append(out, mdLine{i + 1, l, fence != ""})
		}
	}
	return out
}

var (
	headingRE    = regexp.MustCompile(`^#{1,6} +(.*?)#* *$`)
	inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\(([^)]*)\)`)
	codeSpanRE   = regexp.MustCompile("`([^`]+)`")
)

// anchors returns the anchors GitHub makes of a markdown file's headings:
// the text lowercased, without punctuation (letters, digits, marks, "_" and
// "-" stay), spaces made "-", a repeated one suffixed -1, -2, ….
func anchors(src string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range mdLines(src) {
		m := headingRE.FindStringSubmatch(l.text)
		if l.fenced || m == nil {
			continue
		}
		text := inlineLinkRE.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func TestDocsAnchors(t *testing.T) {
	t.Parallel()
	got := anchors("# Delivery: a branch and a pull request per run\n## When nobody answers: `on_timeout`\n" +
		"```\n## not a heading\n```\n### ❓ Add a login page\n## Run\n## Run\n## [Linked](x.md) text\n")
	for _, want := range []string{"delivery-a-branch-and-a-pull-request-per-run", "when-nobody-answers-on_timeout",
		"-add-a-login-page", "run", "run-1", "linked-text"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a heading in a code block made an anchor")
	}
}

// TestDocsLinks checks that every relative link of the README and docs/
// reaches a file of the repository, and its #anchor a heading there.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	for _, file := range docFiles(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range mdLines(string(src)) {
			if l.fenced {
				continue
			}
			text := codeSpanRE.ReplaceAllString(l.text, "")
			for _, m := range inlineLinkRE.FindAllStringSubmatch(text, -1) {
				target, _, _ := strings.Cut(strings.TrimSpace(m[2]), " ")
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				where := fmt.Sprintf("%s:%d: link %q", filepath.Base(file), l.n, target)
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s: no such file (%v)", where, err)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: an anchor in a file that is not markdown", where)
					continue
				}
				to, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(string(to))[anchor] {
					t.Errorf("%s: no heading makes the anchor #%s", where, anchor)
				}
			}
		}
	}
}

// docCommands returns every `orchestrator …` command line the file shows:
// the lines of its code blocks that start with one, and its inline code
// spans that do.
func docCommands(src string) []mdLine {
	var out []mdLine
	for _, l := range mdLines(src) {
		if l.fenced {
			s := strings.TrimPrefix(strings.TrimSpace(l.text), "$ ")
			if strings.HasPrefix(s, "orchestrator ") {
				out = append(out, mdLine{l.n, s, true})
			}
			continue
		}
		for _, m := range codeSpanRE.FindAllStringSubmatch(l.text, -1) {
			if strings.HasPrefix(m[1], "orchestrator ") {
				out = append(out, mdLine{l.n, m[1], false})
			}
		}
	}
	return out
}

// checkCommand walks a command line shown in the docs down the command
// tree: its words name commands (a placeholder such as <command> or …
// ends the check), then arguments, and every flag is one of the command's.
func checkCommand(root *cobra.Command, line string) error {
	line = strings.NewReplacer(`\|`, " ", "|", " ", "[", " ", "]", " ", "(", " ", ")", " ").Replace(line)
	words := strings.Fields(line)[1:]
	cmd, args, skip := root, 0, false
	// lookup reports whether cmd has the flag, and whether it takes a
	// value (the next word, without "=").
	lookup := func(name string) (found, takesValue bool) {
		fl := cmd.Flags().Lookup(name)
		if fl == nil {
			fl = cmd.PersistentFlags().Lookup(name)
		}
		if fl == nil {
			fl = cmd.InheritedFlags().Lookup(name)
		}
		return fl != nil, fl != nil && fl.NoOptDefVal == ""
	}
	for i, w := range words {
		if skip { // the value of the flag before
			skip = false
			continue
		}
		switch {
		case w == "#" || w == "--" || w == "&&" || w == ";" || w == "\\":
			return nil
		case strings.HasPrefix(w, "--"):
			name, _, value := strings.Cut(w[2:], "=")
			if name == "help" {
				continue
			}
			found, takesValue := lookup(name)
			if !found {
				return fmt.Errorf("%q has no flag --%s", cmd.CommandPath(), name)
			}
			skip = !value && takesValue
		case strings.HasPrefix(w, "-") && len(w) > 1:
			for _, r := range w[1:] {
				if r != 'h' && cmd.Flags().ShorthandLookup(string(r)) == nil && cmd.PersistentFlags().ShorthandLookup(string(r)) == nil && cmd.InheritedFlags().ShorthandLookup(string(r)) == nil {
					return fmt.Errorf("%q has no flag -%c", cmd.CommandPath(), r)
				}
			}
		case i == 0 && (strings.HasPrefix(w, "<") || strings.HasPrefix(w, "…") || strings.HasPrefix(w, "...")):
			return nil // a placeholder for any command
		case args == 0 && cmd.HasSubCommands():
			var sub *cobra.Command
			for _, c := range cmd.Commands() {
				if c.Name() == w || c.HasAlias(w) {
					sub = c
				}
			}
			if sub == nil {
				if w == "help" || w == "completion" {
					return nil
				}
				return fmt.Errorf("%q has no command %q", cmd.CommandPath(), w)
			}
			cmd = sub
		default:
			args++
		}
	}
	return nil
}

func TestDocsCheckCommand(t *testing.T) {
	t.Parallel()
	root := newTestMain(t).newRootCmd()
	for line, ok := range map[string]bool{
		"orchestrator run --prompt \"x\" --workdir ~/src # a comment --nope": true,
		"orchestrator status [--json] [--all] [--spec NAME]":                 true,
		"orchestrator submit (SPEC.md \\| --prompt TEXT)":                    true,
		"orchestrator web token alice":                                       true,
		"orchestrator <orchestrator@localhost>":                              true,
		"orchestrator --config x.yaml validate":                              true,
		"orchestrator runn x":                                                false,
		"orchestrator web tokens alice":                                      false,
		"orchestrator run --promt x":                                         false,
		"orchestrator gc -z":                                                 false,
	} {
		if err := checkCommand(root, line); (err == nil) != ok {
			t.Errorf("%s: %v, want ok %v", line, err, ok)
		}
	}
}

// TestDocsCommands checks that every `orchestrator …` command the README
// and docs/ show is a command of the tree, with flags it has.
func TestDocsCommands(t *testing.T) {
	t.Parallel()
	root := newTestMain(t).newRootCmd()
	n := 0
	for _, file := range docFiles(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range docCommands(string(src)) {
			n++
			if err := checkCommand(root, c.text); err != nil {
				t.Errorf("%s:%d: %s: %v", filepath.Base(file), c.n, c.text, err)
			}
		}
	}
	if n < 50 {
		t.Errorf("found only %d commands in the docs", n)
	}
}
