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
