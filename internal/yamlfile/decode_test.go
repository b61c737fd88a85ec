package yamlfile

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type sample struct {
	Name  string            `yaml:"name"`
	Count int               `yaml:"count"`
	On    bool              `yaml:"on"`
	Tags  []string          `yaml:"tags"`
	Env   map[string]string `yaml:"env"`
	Inner *struct {
		Port int `yaml:"port"`
	} `yaml:"inner"`
}

// TestDecodeReportsEveryProblem: each problem has its own line and key,
// lists and mappings element by element, with no line read out of yaml.v3's
// messages.
func TestDecodeReportsEveryProblem(t *testing.T) {
	t.Parallel()
	const in = "name: [x]\ncount: many\non: yes\ntags:\n  - a\n  - [b]\nenv:\n  A: x\n  A: y\ninner:\n  port: p\n  prot: 1\nnmae: z\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	d := &Decoder{File: "s.yaml", Offset: 1}
	var v sample
	d.Decode(doc.Content[0], &v, "")
	want := []string{
		`s.yaml:2: name: want a string, found a list`,
		`s.yaml:3: count: want an integer, found a string "many" (a whole number)`,
		`s.yaml:4: on: want true or false, found a string "yes"`,
		`s.yaml:7: tags[1]: want a string, found a list`,
		`s.yaml:10: env.A: duplicate key (first set on line 9)`,
		`s.yaml:12: inner.port: want an integer, found a string "p" (a whole number)`,
		`s.yaml:13: inner.prot: unknown key (did you mean "port"?)`,
		`s.yaml:14: nmae: unknown key (did you mean "name"?)`,
	}
	if len(d.Errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(d.Errs), len(want), d.Errs)
	}
	for i, w := range want {
		if got := d.Errs[i].Error(); got != w {
			t.Errorf("error %d = %q, want %q", i, got, w)
		}
	}
	if v.Tags[0] != "a" || v.Env["A"] != "x" || v.Inner == nil {
		t.Errorf("decoded %+v", v)
	}
}

func TestSyntaxError(t *testing.T) {
	t.Parallel()
	var doc yaml.Node
	err := yaml.Unmarshal([]byte("a: 1\nb: : x\n"), &doc)
	if e := SyntaxError("f.md", 1, err); e.Line != 3 || !strings.HasPrefix(e.Err.Error(), "invalid YAML: ") {
		t.Errorf("SyntaxError = %#v (%v)", e, e)
	}
}

// shape decodes itself: a name, or a mapping from the name to a count.
type shape struct {
	Name  string
	Count int
}

func (s *shape) DecodeNode(d *Decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode {
		s.Name = n.Value
		return
	}
	for k, v := range d.Pairs(n, path) {
		s.Name = k.Value
		d.Decode(v, &s.Count, JoinKey(path, s.Name))
	}
}

type common struct {
	Level string `yaml:"level"`
}

type withShapes struct {
	One     shape    `yaml:"one"`
	Many    []shape  `yaml:"many"`
	Tools   []string `yaml:"tools"`
	Count   int      `yaml:"count"`
	Section *struct {
		Draft bool `yaml:"draft"`
	} `yaml:"section"`
	Absent *struct {
		Draft bool `yaml:"draft"`
	} `yaml:"absent"`
	Common common `yaml:",inline"`
}

func decodeString(t *testing.T, d *Decoder, in string, v any) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	d.Decode(doc.Content[0], v, "")
}

// TestDecodeNodeDecoderInlineAndScalarLists: a NodeDecoder decodes its own
// shapes with the decoder's checks and keys; an inline struct's keys are
// the parent's; ScalarLists takes one value as a list of one; a section
// (a pointer to a struct) set with nothing under it is present.
func TestDecodeNodeDecoderInlineAndScalarLists(t *testing.T) {
	t.Parallel()
	d := &Decoder{File: "s.yaml", ScalarLists: true, Lines: map[string]int{}}
	var v withShapes
	decodeString(t, d, "one: a\nmany:\n  - b\n  - {c: 3}\n  - {d: x}\ntools: Read\nlevel: debug\nsection:\nabsent: ~\nlevle: x\n", &v)
	want := []string{
		`s.yaml:5: many[2].d: want an integer, found a string "x" (a whole number)`,
		`s.yaml:10: levle: unknown key (did you mean "level"?)`,
	}
	if got := d.Errs.Error(); got != strings.Join(want, "\n") {
		t.Errorf("errors =\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if v.One.Name != "a" || len(v.Many) != 3 || v.Many[1] != (shape{"c", 3}) || len(v.Tools) != 1 || v.Tools[0] != "Read" ||
		v.Common.Level != "debug" || v.Section == nil || v.Absent == nil {
		t.Errorf("decoded %+v", v)
	}
	if d.Lines["level"] != 7 || d.Lines["section"] != 8 {
		t.Errorf("lines = %v", d.Lines)
	}

	d = &Decoder{File: "s.yaml"}
	v = withShapes{}
	decodeString(t, d, "tools: Read\n", &v)
	if got := d.Errs.Error(); got != `s.yaml:1: tools: want a list, found a string "Read"` {
		t.Errorf("without ScalarLists: %s", got)
	}
}

// TestDecodeRefusesMergeKeysAndFractions: "<<" is refused by name (not
// as an unknown key), and a number with a fraction is not truncated into
// an integer.
func TestDecodeRefusesMergeKeysAndFractions(t *testing.T) {
	t.Parallel()
	d := &Decoder{File: "s.yaml"}
	var v withShapes
	decodeString(t, d, "base: &b {level: x}\n<<: *b\ncount: 1.5\n", &v)
	want := []string{
		`s.yaml:1: base: unknown key (known keys: absent, count, level, many, one, section, tools)`,
		`s.yaml:2: <<: merge keys are not supported`,
		`s.yaml:3: count: want an integer, found a number "1.5" (a whole number)`,
	}
	if got := d.Errs.Error(); got != strings.Join(want, "\n") {
		t.Errorf("errors =\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if v.Count != 0 {
		t.Errorf("count = %d", v.Count)
	}
}
