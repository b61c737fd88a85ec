package yamlfile

import (
	"errors"
	"fmt"
	"iter"
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
// A type whose pointer is a NodeDecoder decodes itself. The zero Decoder
// is usable.
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
	// ScalarLists takes a single value where a list is wanted as a list of
	// one ("allowed_tools: Read"), as a spec's frontmatter does.
	ScalarLists bool
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

// Line returns the line lines (a Decoder's Lines) has for key, or for its
// closest parent set in the file (for allow_users[2], the line of
// allow_users); 0 when none was set.
func Line(lines map[string]int, key string) int {
	for key != "" {
		if n := lines[key]; n > 0 {
			return n
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
	return 0
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

// NodeDecoder is a value that decodes itself from a node, reporting its
// problems through d with keys under path (a value of several shapes, such
// as a name or a mapping from a name to its settings). It is not called
// for a null value, which leaves the value as it is.
type NodeDecoder interface {
	DecodeNode(d *Decoder, n *yaml.Node, path string)
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	nodeDecoderType = reflect.TypeFor[NodeDecoder]()
)

// Resolve follows aliases.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is an empty value ("key:" or "key: null").
func IsNull(n *yaml.Node) bool {
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func (d *Decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	n = Resolve(n)
	t := v.Type()
	if reflect.PointerTo(t).Implements(nodeDecoderType) {
		if !IsNull(n) {
			v.Addr().Interface().(NodeDecoder).DecodeNode(d, n, path)
		}
		return
	}
	if t.Kind() == reflect.Pointer {
		if IsNull(n) {
			// A key with an empty value: nil, but a section (a struct)
			// that is present with its defaults ("pull_request:").
			if t.Elem().Kind() == reflect.Struct {
				v.Set(reflect.New(t.Elem()))
			} else {
				v.SetZero()
			}
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
	if IsNull(n) {
		return // "github:" with nothing under it: the defaults stay
	}
	if n.Kind != yaml.MappingNode {
		d.Mismatch(n, "a mapping of keys", path)
		return
	}
	fields := Fields(t)
	for k, val := range d.Pairs(n, path) {
		key := JoinKey(path, k.Value)
		idx, ok := fields[k.Value]
		if !ok {
			d.Errorf(k.Line, key, "unknown key%s", Suggest(k.Value, slices.Collect(maps.Keys(fields))))
			continue
		}
		if d.Lines != nil {
			d.Lines[key] = k.Line + d.Offset
		}
		d.decode(val, v.FieldByIndex(idx), key)
	}
}

// Pairs yields the key and value nodes of mapping n (aliases followed) in
// order, reporting under path, as it comes to them, the keys that are not
// plain names, merge keys ("<<") and duplicate keys, which it leaves out.
func (d *Decoder) Pairs(n *yaml.Node, path string) iter.Seq2[*yaml.Node, *yaml.Node] {
	return func(yield func(k, v *yaml.Node) bool) {
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := Resolve(n.Content[i]), Resolve(n.Content[i+1])
			if k.Kind != yaml.ScalarNode {
				d.Errorf(k.Line, path, "keys must be plain names, found %s", Describe(k))
				continue
			}
			key := JoinKey(path, k.Value)
			if k.ShortTag() == "!!merge" {
				d.Errorf(k.Line, key, "merge keys are not supported")
				continue
			}
			if first, dup := seen[k.Value]; dup {
				d.Errorf(k.Line, key, "duplicate key (first set on line %d)", first+d.Offset)
				continue
			}
			seen[k.Value] = k.Line
			if !yield(k, val) {
				return
			}
		}
	}
}

// decodeLeaf decodes a value that is not a struct of keys: lists and
// mappings element by element (so that each problem has its element's line
// and key), scalars and yaml.Unmarshalers through yaml.v3.
func (d *Decoder) decodeLeaf(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	custom := reflect.PointerTo(t).Implements(unmarshalerType)
	isNull := IsNull(n)
	switch {
	case custom, isNull, t.Kind() == reflect.Interface:
	case t.Kind() == reflect.Slice:
		items, key := n.Content, func(i int) string { return fmt.Sprintf("%s[%d]", path, i) }
		if n.Kind == yaml.ScalarNode && d.ScalarLists {
			items, key = []*yaml.Node{n}, func(int) string { return path }
		} else if n.Kind != yaml.SequenceNode {
			d.Mismatch(n, "a list", path)
			return
		}
		out := reflect.MakeSlice(t, len(items), len(items))
		for i, item := range items {
			d.decode(item, out.Index(i), key(i))
		}
		v.Set(out)
		return
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.Mismatch(n, "a mapping", path)
			return
		}
		out := reflect.MakeMapWithSize(t, len(n.Content)/2)
		for key, val := range d.Pairs(n, path) {
			k := reflect.New(t.Key()).Elem()
			d.decodeLeaf(key, k, path)
			e := reflect.New(t.Elem()).Elem()
			if d.Lines != nil {
				d.Lines[JoinKey(path, key.Value)] = key.Line + d.Offset
			}
			d.decode(val, e, JoinKey(path, key.Value))
			out.SetMapIndex(k, e)
		}
		v.Set(out)
		return
	case kindWanted(t) == "an integer" && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!int":
		// yaml.v3 would truncate 1.5 to 1.
		d.Mismatch(n, kindWanted(t), path)
		return
	case t.Kind() == reflect.Bool && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!bool":
		// yaml.v3 takes yes, no, on and off as booleans here; they are
		// strings everywhere else in YAML 1.2, so they are refused.
		d.Mismatch(n, kindWanted(t), path)
		return
	case n.Kind != yaml.ScalarNode:
		d.Mismatch(n, kindWanted(t), path)
		return
	}
	p := reflect.New(t)
	p.Elem().Set(v)
	if err := n.Decode(p.Interface()); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			d.Mismatch(n, kindWanted(t), path)
		} else {
			d.Errorf(n.Line, path, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return
	}
	v.Set(p.Elem())
}

// Mismatch reports a value of the wrong kind: "want WANT, found a list".
func (d *Decoder) Mismatch(n *yaml.Node, want, path string) {
	msg := "want " + want + ", found " + Describe(n)
	if n.Kind == yaml.ScalarNode && n.Value != "" && !d.Hidden[n] {
		msg += " " + strconv.Quote(n.Value)
	}
	if want == "an integer" {
		msg += " (a whole number)"
	}
	d.Errorf(n.Line, path, "%s", msg)
}

// Fields maps the yaml keys of struct type t to field indexes (for
// reflect.Value.FieldByIndex). The keys of a field tagged `yaml:",inline"`
// are keys of t.
func Fields(t reflect.Type) map[string][]int {
	m := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() {
			continue
		}
		if name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct {
			for key, idx := range Fields(f.Type) {
				m[key] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		m[name] = []int{i}
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
