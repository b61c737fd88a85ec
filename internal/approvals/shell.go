package approvals

import (
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A Bash call is judged by the simple commands it runs, as the shell reads
// it (mvdan.cc/sh): `a; b`, `a && b`, `a || b`, `a | b`, `a &` and newlines
// run each part, and a rule or the read-only list must allow every part.
// Anything that runs more than the words it shows — a substitution $(…) or
// `…`, a process substitution, a subshell or a block, a function, a loop, an
// assignment, a parameter or arithmetic expansion, a here-document, a
// redirection to a file — cannot be proved harmless by a rule about words,
// so such a command is never allowed by one: a person is asked.

// SimpleCommand is one simple command of a shell command line.
type SimpleCommand struct {
	// Words are the command's words as the shell passes them (quotes
	// removed); for a part that is not Literal, the words as written.
	Words []string
	// Literal: every word is plain text (no expansion but globs and
	// tildes), there is no assignment and no redirection but to
	// /dev/null or between descriptors.
	Literal bool
	// Expands: some word has an unquoted glob, tilde or brace.
	Expands bool
}

// ShellCommand is a command line split into its simple commands.
type ShellCommand struct {
	// Parts are the simple commands found, in order, including those
	// inside substitutions and compound commands (for deny and ask rules).
	Parts []SimpleCommand
	// Simple: the line parsed, and is only simple commands joined by
	// `;`, `&`, `&&`, `||`, `|`, `|&` or newlines, each Literal. Only a
	// Simple line is ever allowed by a rule.
	Simple bool
}

// SplitCommand splits a Bash command line into its simple commands.
func SplitCommand(cmd string) ShellCommand {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return ShellCommand{}
	}
	out := ShellCommand{Simple: len(f.Stmts) > 0}
	for _, st := range f.Stmts {
		if !splitStmt(st, &out) {
			out.Simple = false
		}
	}
	// Every simple command anywhere, for deny and ask rules: those in
	// substitutions, subshells, loops and functions too.
	if !out.Simple {
		out.Parts = nil
		syntax.Walk(f, func(n syntax.Node) bool {
			if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
				out.Parts = append(out.Parts, SimpleCommand{Words: writtenWords(c.Args)})
			}
			return true
		})
	}
	return out
}

// splitStmt adds the simple commands of st; false when st is not a list of
// literal simple commands.
func splitStmt(st *syntax.Stmt, out *ShellCommand) bool {
	if st == nil || st.Coprocess || st.Disown {
		return false
	}
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		sc := simpleCommand(c, st.Redirs)
		out.Parts = append(out.Parts, sc)
		return sc.Literal
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe, syntax.PipeAll:
		default:
			return false
		}
		if len(st.Redirs) > 0 {
			return false
		}
		x := splitStmt(c.X, out)
		y := splitStmt(c.Y, out)
		return x && y
	}
	return false
}

func simpleCommand(c *syntax.CallExpr, redirs []*syntax.Redirect) SimpleCommand {
	sc := SimpleCommand{Literal: len(c.Args) > 0 && len(c.Assigns) == 0}
	for _, w := range c.Args {
		v, expands, ok := wordValue(w)
		if !ok {
			sc.Literal = false
			sc.Words = writtenWords(c.Args)
			return sc
		}
		sc.Expands = sc.Expands || expands
		sc.Words = append(sc.Words, v)
	}
	for _, r := range redirs {
		if !harmlessRedirect(r) {
			sc.Literal = false
		}
	}
	return sc
}

// harmlessRedirect: a redirection between descriptors (2>&1, >&2, <&-) or
// to and from /dev/null. Anything else writes or reads a file the rule does
// not name (bash also opens sockets for /dev/tcp/…).
func harmlessRedirect(r *syntax.Redirect) bool {
	if r.Hdoc != nil || r.Word == nil {
		return false
	}
	target, _, ok := wordValue(r.Word)
	if !ok {
		return false
	}
	switch r.Op {
	case syntax.DplOut, syntax.DplIn:
		return target == "-" || isDigits(target)
	case syntax.RdrOut, syntax.AppOut, syntax.RdrIn, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
		return target == "/dev/null"
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// wordValue is the word as the shell passes it, when it is plain text:
// unquoted text, '…' and "…" without expansions. expands says whether an
// unquoted glob, tilde or brace may change it.
func wordValue(w *syntax.Word) (value string, expands, ok bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := unescape(p.Value, false)
			if strings.ContainsAny(stripEscaped(p.Value), "*?[]{}~") {
				expands = true
			}
			b.WriteString(v)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false, false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false, false
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false, false
				}
				b.WriteString(unescape(l.Value, true))
			}
		default:
			return "", false, false
		}
	}
	return b.String(), expands, true
}

// unescape removes the shell's backslashes: outside quotes every one
// escapes the next character (a backslash-newline joins lines); inside
// double quotes only before $ ` " \ and newline.
func unescape(s string, dquoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		next := s[i+1]
		switch {
		case next == '\n':
			i++
		case !dquoted || strings.IndexByte("$`\"\\", next) >= 0:
			b.WriteByte(next)
			i++
		default:
			b.WriteByte('\\')
		}
	}
	return b.String()
}

// stripEscaped drops each backslash and the character it escapes (an
// escaped * is no glob).
func stripEscaped(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// writtenWords are words as written in the command line (for deny and ask
// rules on parts that are not plain text).
func writtenWords(ws []*syntax.Word) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		if v, _, ok := wordValue(w); ok {
			out = append(out, v)
			continue
		}
		var b strings.Builder
		if err := syntax.NewPrinter().Print(&b, w); err != nil {
			out = append(out, "")
			continue
		}
		out = append(out, b.String())
	}
	return out
}

// commandPattern is the content of a Bash(…) rule read as words: "cmd args"
// (exactly those words), "prefix:*" (those words, then any), a word "*"
// (any words there, none included) or a word with "*" in it (any text within
// that one word).
type commandPattern struct {
	words  []string
	prefix bool // ":*": any words may follow
}

// parseCommandPattern reads a Bash rule's content; ok is false when it is
// not one simple command of plain words (such a rule matches nothing).
func parseCommandPattern(content string) (commandPattern, bool) {
	content = strings.TrimSpace(content)
	var p commandPattern
	if c, ok := strings.CutSuffix(content, ":*"); ok {
		content, p.prefix = strings.TrimSpace(c), true
	}
	sc := SplitCommand(content)
	if !sc.Simple || len(sc.Parts) != 1 {
		return commandPattern{}, false
	}
	p.words = sc.Parts[0].Words
	return p, true
}

// match says whether the pattern matches one simple command's words.
func (p commandPattern) match(words []string) bool {
	if p.prefix {
		if len(words) < len(p.words) {
			return false
		}
		return matchWords(p.words, words[:len(p.words)])
	}
	return matchWords(p.words, words)
}

// matchWords matches words against pattern words: "*" alone any run of
// words (none too), a word with "*" any text in place of each "*" within one
// word, any other word itself. A table over both positions keeps it linear
// in their product, however many "*" the pattern has.
func matchWords(pat, words []string) bool {
	// ok[i][j]: pat[i:] matches words[j:].
	ok := make([][]bool, len(pat)+1)
	for i := range ok {
		ok[i] = make([]bool, len(words)+1)
	}
	ok[len(pat)][len(words)] = true
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(words); j >= 0; j-- {
			if pat[i] == "*" {
				ok[i][j] = ok[i+1][j] || (j < len(words) && ok[i][j+1])
			} else {
				ok[i][j] = j < len(words) && ok[i+1][j+1] && matchWord(pat[i], words[j])
			}
		}
	}
	return ok[0][0]
}

func matchWord(pat, w string) bool {
	if !strings.Contains(pat, "*") {
		return pat == w
	}
	parts := strings.Split(pat, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	ok, _ := regexp.MatchString(`(?s)^`+strings.Join(parts, ".*")+`$`, w)
	return ok
}
