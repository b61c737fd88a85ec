package yamlfile

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Decoder decodes nodes into Go values, collecting every problem in Errs.
// Structs are decoded key by key through their yaml tags: an unknown key
// is an error with a "did you mean" for the closest known one, a
// duplicate key an error naming the first; other values go through
// yaml.v3 (and a type's yaml.Unmarshaler), with its type errors reworded.
// The zero Decoder is usable.
type Decoder struct {
	// File names the file in errors.
	File string
	// Offset is added to every node's line: a spec's frontmatter starts
	// on the file's second line.
	Offset int
	// Lines, when not nil, is filled with the line (Offset added) each
	// dotted key was set on.
	Lines map[string]int
	// Hidden are nodes whose values must not be shown in errors (values
	// read from the environment).
	Hidden map[*yaml.Node]bool
	// Errs are the problems found, in the order found.
	Errs Errors
}

// Errorf records a problem at a node's line (0: no line).
func (d *Decoder) Errorf(line int, key, format string, args ...any) {
	if line > 0 {
		line += d.Offset
	}
	d.Errs = append(d.Errs, &Error{File: d.File, Line: line, Key: key, Err: fmt.Errorf(format, args...)})
}

// JoinKey appends key to a dotted path.
func JoinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Decode sets *v from n; path is the dotted key of n, "" for the root.
func (d *Decoder) Decode(n *yaml.Node, v any, path string) {
	d.decode(n, reflect.ValueOf(v).Elem(), path)
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func (d *Decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			v.SetZero()
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		d.decodeLeaf(n, v, path)
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // "github:" with nothing under it: the defaults stay
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n.Line, path, "want a mapping of keys, found %s", Describe(n))
		return
	}
	fields := Fields(t)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.Errorf(k.Line, path, "keys must be plain names, found %s", Describe(k))
			continue
		}
		key := JoinKey(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.Errorf(k.Line, key, "duplicate key (first set on line %d)", first+d.Offset)
			continue
		}
		seen[k.Value] = k.Line
		idx, ok := fields[k.Value]
		if !ok {
			d.Errorf(k.Line, key, "unknown key%s", Suggest(k.Value, slices.Collect(maps.Keys(fields))))
			continue
		}
		if d.Lines != nil {
			d.Lines[key] = k.Line + d.Offset
		}
		d.decode(val, v.Field(idx), key)
	}
}

// decodeLeaf decodes a value that is not a struct of keys: lists and
// mappings element by element (so that each problem has its element's line
// and key), scalars and yaml.Unmarshalers through yaml.v3.
func (d *Decoder) decodeLeaf(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	custom := reflect.PointerTo(t).Implements(unmarshalerType)
	isNull := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	switch {
	case custom, isNull, t.Kind() == reflect.Interface:
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.mismatch(n, "a list", path)
			return
		}
		out := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, out.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(out)
		return
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.mismatch(n, "a mapping", path)
			return
		}
		out := reflect.MakeMapWithSize(t, len(n.Content)/2)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if first, dup := seen[n.Content[i].Value]; dup {
				d.Errorf(n.Content[i].Line, JoinKey(path, n.Content[i].Value), "duplicate key (first set on line %d)", first+d.Offset)
				continue
			}
			seen[n.Content[i].Value] = n.Content[i].Line
			k := reflect.New(t.Key()).Elem()
			d.decodeLeaf(n.Content[i], k, path)
			e := reflect.New(t.Elem()).Elem()
			d.decode(n.Content[i+1], e, JoinKey(path, n.Content[i].Value))
			out.SetMapIndex(k, e)
		}
		v.Set(out)
		return
	case t.Kind() == reflect.Bool && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!bool":
		// yaml.v3 takes yes, no, on and off as booleans here; they are
		// strings everywhere else in YAML 1.2, so they are refused.
		d.mismatch(n, kindWanted(t), path)
		return
	case n.Kind != yaml.ScalarNode:
		d.mismatch(n, kindWanted(t), path)
		return
	}
	p := reflect.New(t)
	p.Elem().Set(v)
	if err := n.Decode(p.Interface()); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			d.mismatch(n, kindWanted(t), path)
		} else {
			d.Errorf(n.Line, path, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return
	}
	v.Set(p.Elem())
}

// mismatch reports a value of the wrong kind.
func (d *Decoder) mismatch(n *yaml.Node, want, path string) {
	msg := "want " + want + ", found " + Describe(n)
	if n.Kind == yaml.ScalarNode && n.Value != "" && !d.Hidden[n] {
		msg += " " + strconv.Quote(n.Value)
	}
	if want == "an integer" {
		msg += " (a whole number)"
	}
	d.Errorf(n.Line, path, "%s", msg)
}

// Fields maps the yaml keys of struct type t to field indexes.
func Fields(t reflect.Type) map[string]int {
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

// Suggest returns ` (did you mean "x"?)` for the known key closest to key,
// or the list of known keys when none is close.
func Suggest(key string, known []string) string {
	names := slices.Clone(known)
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

// Describe names the kind of n for errors: "a mapping", "a list", "a
// string"...
func Describe(n *yaml.Node) string {
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
	case "int", "float":
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

// kindWanted names what a value of type t is written as.
func kindWanted(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		return "a mapping"
	}
	return t.String()
}
