package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxFileSize bounds the size of a configuration file.
const MaxFileSize = 4 << 20

// Load reads the configuration file at path over the defaults, expanding
// ${VAR} from the process environment. See LoadEnv.
func Load(path string) (Config, error) { return LoadEnv(path, os.LookupEnv) }

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

// Parse decodes the YAML document read from r over the defaults, expanding
// ${VAR} from the process environment. See ParseEnv.
func Parse(r io.Reader, filename string) (Config, error) {
	return ParseEnv(r, filename, os.LookupEnv)
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
		return cfg, syntaxError(filename, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return cfg, syntaxError(filename, err)
		}
		return cfg, &Error{File: filename, Line: extra.Line, Err: errors.New("more than one YAML document")}
	}
	if len(doc.Content) == 0 {
		return cfg, nil
	}
	d := &decoder{file: filename, lookup: lookup, lines: cfg.lines, expanded: map[*yaml.Node]bool{}}
	root := doc.Content[0]
	d.expand(root, "")
	d.decode(root, reflect.ValueOf(&cfg).Elem(), "")
	return cfg, errors.Join(d.errs...)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

func syntaxError(file string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Err: errors.New("invalid YAML: " + msg[len(m[0]):])}
	}
	return &Error{File: file, Err: fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))}
}

type decoder struct {
	file     string
	lookup   LookupFunc
	lines    map[string]int
	expanded map[*yaml.Node]bool
	errs     []error
}

func (d *decoder) errorf(line int, key, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Key: key, Err: fmt.Errorf(format, args...)})
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expand replaces ${VAR} in every scalar value under n (not in keys, and not
// through aliases: their anchor is expanded where it stands).
func (d *decoder) expand(n *yaml.Node, path string) {
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
			d.errorf(n.Line, path, "%w", err)
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
		d.expanded[n] = true
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

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decode sets v from n, rejecting unknown keys of structs.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	t := v.Type()
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		d.decodeLeaf(n, v, path)
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // "github:" with nothing under it: the defaults stay
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "want a mapping of keys, found %s", describe(n))
		return
	}
	fields := yamlFields(t)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k.Line, path, "keys must be plain names, found %s", describe(k))
			continue
		}
		key := joinKey(path, k.Value)
		if seen[k.Value] {
			d.errorf(k.Line, key, "duplicate key (first set on line %d)", d.lines[key])
			continue
		}
		seen[k.Value] = true
		idx, ok := fields[k.Value]
		if !ok {
			d.errorf(k.Line, key, "unknown key%s", suggest(k.Value, fields))
			continue
		}
		d.lines[key] = k.Line
		d.decode(val, v.Field(idx), key)
	}
}

var typeErrorLine = regexp.MustCompile(`^line (\d+): `)

var typeErrorText = regexp.MustCompile("^(?:line \\d+: )?cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")

func (d *decoder) decodeLeaf(n *yaml.Node, v reflect.Value, path string) {
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	if err := n.Decode(p.Interface()); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			d.errorf(n.Line, path, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			return
		}
		for _, msg := range te.Errors {
			line := n.Line
			if m := typeErrorLine.FindStringSubmatch(msg); m != nil {
				line, _ = strconv.Atoi(m[1])
			}
			if m := typeErrorText.FindStringSubmatch(msg); m != nil {
				found := "a " + yamlKindName(m[1])
				if m[2] != "" && !d.expanded[n] {
					found += " " + strconv.Quote(m[2])
				}
				msg = fmt.Sprintf("want %s, found %s", goKindName(m[3]), found)
			}
			d.errorf(line, path, "%s", msg)
		}
		return
	}
	v.Set(p.Elem())
}

// yamlFields maps the yaml keys of struct type t to field indexes.
func yamlFields(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		m[name] = i
	}
	return m
}

// suggest returns " (did you mean "x"?)" for the known key closest to key,
// or the list of known keys when none is close.
func suggest(key string, fields map[string]int) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	best, bestDist := "", 3
	for _, name := range names {
		if dist := editDistance(strings.ToLower(key), name); dist < bestDist {
			best, bestDist = name, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (known keys: " + strings.Join(names, ", ") + ")"
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a " + yamlKindName(strings.TrimPrefix(n.ShortTag(), "!!"))
}

func yamlKindName(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "int":
		return "number"
	case "float":
		return "number"
	case "bool":
		return "boolean"
	case "null":
		return "null"
	case "map":
		return "mapping"
	case "seq":
		return "list"
	}
	return tag
}

func goKindName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	}
	return goType
}

// resolvePaths makes the relative paths set in the file relative to dir,
// and expands a leading "~/" to home.
func (c *Config) resolvePaths(dir, home string) {
	for key, p := range map[string]*string{
		"state_dir":                            &c.StateDir,
		"agent.workdir":                        &c.Agent.Workdir,
		"agent.mcp_config":                     &c.Agent.MCPConfig,
		"surfaces.github.app.private_key_file": &c.Surfaces.GitHub.App.PrivateKeyFile,
		"specs.dir":                            &c.Specs.Dir,
	} {
		if _, set := c.lines[key]; !set || *p == "" {
			continue
		}
		switch {
		case (*p == "~" || strings.HasPrefix(*p, "~/")) && home != "":
			*p = filepath.Join(home, (*p)[1:])
		case !filepath.IsAbs(*p):
			*p = filepath.Join(dir, *p)
		}
	}
}
