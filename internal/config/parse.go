package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
)

// MaxFileSize bounds the size of a configuration file.
const MaxFileSize = 4 << 20

// LoadEnv reads the configuration file at path over DefaultEnv(lookup),
// expanding ${VAR} with lookup. Relative paths set in the file (state_dir,
// agent.workdir, agent.mcp_config, surfaces.github.app.private_key_file,
// specs.dir) are taken relative to the file's directory, and a leading "~/"
// to $HOME; defaults stay as they are. It does not call Validate.
func LoadEnv(path string, lookup LookupFunc) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("open config: %w", err)
	}
	defer f.Close()
	cfg, err := ParseEnv(f, path, lookup)
	// The paths are resolved even when some key had a problem, so that a
	// caller that can do without the bad keys may use the rest.
	home, _ := lookup("HOME")
	cfg.resolvePaths(filepath.Dir(path), home)
	return cfg, err
}

// ParseEnv decodes the YAML document read from r over DefaultEnv(lookup).
// filename names r in errors. Every scalar value has ${VAR} and
// ${VAR:-default} replaced with lookup's values; $${ is a literal ${.
// A value that expands to nothing leaves its key at the default.
//
// The error, when not nil, joins one *Error per problem (unknown or
// duplicate key, wrong type, unset variable), each with the file, line and
// dotted key. The values of variables are never shown in errors.
// ParseEnv does not call Validate.
func ParseEnv(r io.Reader, filename string, lookup LookupFunc) (Config, error) {
	cfg := DefaultEnv(lookup)
	cfg.source = filename
	cfg.lines = map[string]int{}
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return cfg, &Error{File: filename, Err: fmt.Errorf("read: %w", err)}
	}
	if len(data) > MaxFileSize {
		return cfg, &Error{File: filename, Err: fmt.Errorf("file is larger than %d bytes", MaxFileSize)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return cfg, nil
		}
		return cfg, yamlfile.SyntaxError(filename, 0, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return cfg, yamlfile.SyntaxError(filename, 0, err)
		}
		return cfg, &Error{File: filename, Line: extra.Line, Err: errors.New("more than one YAML document")}
	}
	if len(doc.Content) == 0 {
		return cfg, nil
	}
	d := &expander{Decoder: yamlfile.Decoder{File: filename, Lines: cfg.lines, Hidden: map[*yaml.Node]bool{}}, lookup: lookup}
	root := doc.Content[0]
	d.expand(root, "")
	d.Decode(root, &cfg, "")
	return cfg, d.Errs.Err()
}

// expander replaces ${VAR} before decoding; the values it fills in are
// never shown in errors.
type expander struct {
	yamlfile.Decoder
	lookup LookupFunc
}

func joinKey(path, key string) string { return yamlfile.JoinKey(path, key) }

// expand replaces ${VAR} in every scalar value under n (not in keys, and not
// through aliases: their anchor is expanded where it stands).
func (d *expander) expand(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.expand(n.Content[i+1], joinKey(path, n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			d.expand(c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		v, err := Expand(n.Value, d.lookup)
		if err != nil {
			d.Errorf(n.Line, path, "%w", err)
			return
		}
		if v == n.Value {
			return
		}
		// A plain scalar's tag was resolved from its text: resolve it again
		// from the expanded text, so that ${PORT} can fill an integer.
		implicit := (&yaml.Node{Kind: yaml.ScalarNode, Value: n.Value}).ShortTag()
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 && n.ShortTag() == implicit {
			n.Tag = ""
		}
		n.Value = v
		d.Hidden[n] = true
	}
}

// UnsetError reports a ${VAR} whose variable is not set.
type UnsetError struct{ Name string }

func (e *UnsetError) Error() string {
	return fmt.Sprintf("environment variable %s is not set (write ${%s:-} to allow it to be empty)", e.Name, e.Name)
}

// Expand replaces ${VAR} and ${VAR:-default} in s with lookup's values; an
// unset (or, with :-, empty) variable takes the default. $${ is a literal
// ${, and any other $ is kept as it is. An unset variable without a default
// is an *UnsetError naming it.
func Expand(s string, lookup LookupFunc) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$${"):
			b.WriteString("${")
			s = s[3:]
		case strings.HasPrefix(s, "${"):
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return "", errors.New(`"${" without a closing "}" (write $${ for a literal ${)`)
			}
			expr := s[2:end]
			s = s[end+1:]
			name, def, hasDef := strings.Cut(expr, ":-")
			if !validEnvName(name) {
				return "", fmt.Errorf("invalid variable name %q in ${...}", name)
			}
			v, ok := lookup(name)
			switch {
			case hasDef && v == "":
				b.WriteString(def)
			case !ok:
				return "", &UnsetError{Name: name}
			default:
				b.WriteString(v)
			}
		default:
			b.WriteByte('$')
			s = s[1:]
		}
	}
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// pathKeys are the configuration's keys that hold a file or folder, each
// taken relative to the configuration file's folder when relative.
func (c *Config) pathKeys() map[string]*string {
	return map[string]*string{
		"state_dir":                            &c.StateDir,
		"agent.command":                        &c.Agent.Command, // when it is a path ("./bin/claude")
		"agent.workdir":                        &c.Agent.Workdir,
		"agent.mcp_config":                     &c.Agent.MCPConfig,
		"surfaces.github.app.private_key_file": &c.Surfaces.GitHub.App.PrivateKeyFile,
		"specs.dir":                            &c.Specs.Dir,
	}
}

// resolvePaths makes the relative paths set in the file relative to dir,
// and expands a leading "~/" to home.
func (c *Config) resolvePaths(dir, home string) {
	for key, p := range c.pathKeys() {
		if _, set := c.lines[key]; !set || *p == "" {
			continue
		}
		if key == "agent.command" && !strings.ContainsRune(filepath.ToSlash(*p), '/') && !strings.HasPrefix(*p, "~") {
			continue // a name looked up on PATH, not a path
		}
		switch {
		case (*p == "~" || strings.HasPrefix(*p, "~/")) && home != "":
			*p = filepath.Join(home, (*p)[1:])
		case !filepath.IsAbs(*p):
			*p = filepath.Join(dir, *p)
		}
	}
}
