package specs

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
)

// frontmatter is a spec's YAML: a field a key, decoded by the decoder the
// configuration uses (internal/yamlfile), so that unknown and duplicate
// keys, wrong types and bad values read the same in both. The checks of a
// single value are in its type; fill does those that need more than one key
// or the file's path, and makes the Spec.
type frontmatter struct {
	Name            text             `yaml:"name"`
	Schedule        text             `yaml:"schedule"`
	Surfaces        surfaceList      `yaml:"surfaces"`
	WorkDir         text             `yaml:"workdir"`
	Model           text             `yaml:"model"`
	AllowedTools    []text           `yaml:"allowed_tools"`
	DisallowedTools []text           `yaml:"disallowed_tools"`
	MCPConfig       text             `yaml:"mcp_config"`
	PermissionMode  text             `yaml:"permission_mode"`
	MaxTurns        positiveInt      `yaml:"max_turns"`
	MaxCostUSD      positiveDollars  `yaml:"max_cost_usd"`
	MaxCostPerDay   positiveDollars  `yaml:"max_cost_usd_per_day"`
	Timeout         positiveDuration `yaml:"timeout"`
	IdleTimeout     positiveDuration `yaml:"idle_timeout"`
	Answers         answerList       `yaml:"answers"`
	QuestionTimeout positiveDuration `yaml:"question_timeout"`
	RemindEvery     positiveDuration `yaml:"remind_every"`
	EscalateTo      surface          `yaml:"escalate_to"`
	OnTimeout       onTimeout        `yaml:"on_timeout"`
	Sections        `yaml:",inline"`
}

// fill sets s from f, reporting through d what needs more than one value:
// a name, a schedule, paths, escalation against surfaces, reminders against
// the timeout, and each section's Check.
func (f *frontmatter) fill(s *Spec, d *yamlfile.Decoder) {
	bad := func(key, format string, args ...any) {
		d.Errs = append(d.Errs, problem(d.File, yamlfile.Line(s.lines, key), key, fmt.Sprintf(format, args...)))
	}
	switch name := string(f.Name); {
	case name != "" && !nameRE.MatchString(name):
		bad("name", "%q is not a valid name: use letters, digits, \".\", \"_\" and \"-\", starting with a letter or digit, at most 64 characters", name)
	case name != "":
		s.Name = name
	case !failed(d, "name"):
		base := strings.TrimSuffix(filepath.Base(s.Path), ".md")
		if !nameRE.MatchString(base) {
			d.Errorf(0, "name", "no name given and the file name %q is not a valid name: set name", base)
		} else {
			s.Name = base
		}
	}
	if f.Schedule != "" {
		if _, err := ParseSchedule(string(f.Schedule)); err != nil {
			bad("schedule", "%v", err)
		} else {
			s.Schedule = strings.TrimSpace(string(f.Schedule))
		}
	}
	s.Surfaces = f.Surfaces
	s.WorkDir = s.path(string(f.WorkDir), "workdir", bad)
	s.Agent = Agent{
		Model:           string(f.Model),
		AllowedTools:    strs(f.AllowedTools),
		DisallowedTools: strs(f.DisallowedTools),
		MCPConfig:       s.path(string(f.MCPConfig), "mcp_config", bad),
		MaxTurns:        int(f.MaxTurns),
		MaxCostUSD:      float64(f.MaxCostUSD),
		Timeout:         time.Duration(f.Timeout),
		IdleTimeout:     time.Duration(f.IdleTimeout),
	}
	if mode := string(f.PermissionMode); mode != "" && !slices.Contains(config.PermissionModes, mode) {
		bad("permission_mode", "want one of %s, got %q", strings.Join(config.PermissionModes, ", "), mode)
	} else {
		s.Agent.PermissionMode = mode
	}
	s.MaxCostUSDPerDay = float64(f.MaxCostPerDay)
	s.Answers = f.Answers
	s.QuestionTimeout = time.Duration(f.QuestionTimeout)
	s.RemindEvery = time.Duration(f.RemindEvery)
	if ref := SurfaceRef(f.EscalateTo); ref.Name != "" {
		if slices.ContainsFunc(s.Surfaces, func(r SurfaceRef) bool { return r.Name == ref.Name }) {
			bad("escalate_to", "%s is already one of surfaces: escalate to another surface", ref.Name)
		} else {
			s.Escalation, s.EscalateTo = &ref, ref.Name
		}
	}
	// Floors: every reminder is a post people get (and requests to the
	// service); a timeout below a second cannot be met by anyone.
	if s.RemindEvery > 0 && s.RemindEvery < MinRemindEvery {
		bad("remind_every", "must be at least %s (each reminder is a message people get), got %s", MinRemindEvery, s.RemindEvery)
	}
	if s.QuestionTimeout > 0 && s.QuestionTimeout < MinQuestionTimeout {
		bad("question_timeout", "must be at least %s, got %s", MinQuestionTimeout, s.QuestionTimeout)
	}
	if s.QuestionTimeout > 0 && s.RemindEvery >= s.QuestionTimeout {
		bad("remind_every", "must be shorter than question_timeout (%s), or no reminder is ever sent", s.QuestionTimeout)
	}
	s.OnTimeout = OnTimeout(f.OnTimeout)
	s.Sections = f.Sections
	s.checkSections(bad)
}

// sectionChecker is a section (a field of Sections) with checks its keys'
// types do not make, such as values that depend on each other. Check
// reports each problem at a key relative to the section ("branch", or ""
// for the section itself).
type sectionChecker interface{ Check(c *config.Checker) }

// checkSections runs the Check of every section set in the file.
func (s *Spec) checkSections(bad func(key, format string, args ...any)) {
	v := reflect.ValueOf(&s.Sections).Elem()
	for name, idx := range yamlfile.Fields(v.Type()) {
		field := v.FieldByIndex(idx)
		if field.Kind() == reflect.Pointer && field.IsNil() {
			continue
		}
		if field.Kind() != reflect.Pointer {
			field = field.Addr()
		}
		if sc, ok := field.Interface().(sectionChecker); ok {
			sc.Check(config.NewChecker(func(key, msg string) {
				if key != "" {
					key = yamlfile.JoinKey(name, key)
				} else {
					key = name
				}
				bad(key, "%s", msg)
			}))
		}
	}
}

// path resolves a file path set at key: a leading "~/" is the home
// directory, a relative path is relative to the spec file's directory.
func (s *Spec) path(p, key string, bad func(key, format string, args ...any)) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			bad(key, "cannot expand ~: %v", err)
			return ""
		}
		p = filepath.Join(home, p[1:])
	}
	if p != "" && !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(s.Path), p)
	}
	return p
}

// failed reports whether d has a problem at key.
func failed(d *yamlfile.Decoder, key string) bool {
	return slices.ContainsFunc(d.Errs, func(e *Error) bool { return e.Key == key })
}

// decodeOK decodes n into v and reports whether that found no problem.
func decodeOK(d *yamlfile.Decoder, n *yaml.Node, v any, path string) bool {
	before := len(d.Errs)
	d.Decode(n, v, path)
	return len(d.Errs) == before
}

// text is a string value that is not blank when set.
type text string

// UnmarshalYAML implements yaml.Unmarshaler.
func (t *text) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{"not a string"}} // worded by the decoder
	}
	if strings.TrimSpace(n.Value) == "" {
		return fmt.Errorf("must not be empty")
	}
	*t = text(n.Value)
	return nil
}

// strs returns l as strings; nil stays nil (not set), an empty list empty.
func strs(l []text) []string {
	if l == nil {
		return nil
	}
	out := make([]string, len(l))
	for i, t := range l {
		out[i] = string(t)
	}
	return out
}

// positiveInt is a whole number above zero.
type positiveInt int

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *positiveInt) UnmarshalYAML(n *yaml.Node) error {
	var i int
	if n.ShortTag() != "!!int" {
		return &yaml.TypeError{Errors: []string{"not an integer"}} // worded by the decoder
	}
	if err := n.Decode(&i); err != nil {
		return err
	}
	if i <= 0 {
		return fmt.Errorf("must be positive, not %d", i)
	}
	*p = positiveInt(i)
	return nil
}

// positiveDollars is an amount of US dollars above zero ("2", "0.50").
type positiveDollars float64

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *positiveDollars) UnmarshalYAML(n *yaml.Node) error {
	var f float64
	if t := n.ShortTag(); t != "!!int" && t != "!!float" {
		return &yaml.TypeError{Errors: []string{"not a number"}} // worded by the decoder
	}
	if err := n.Decode(&f); err != nil {
		return err
	}
	if !(f > 0) || math.IsInf(f, 0) {
		return fmt.Errorf("must be a positive amount of dollars, not %s", n.Value)
	}
	*p = positiveDollars(f)
	return nil
}

// positiveDuration is a duration above zero, written as the
// configuration's are ("90s", "12h").
type positiveDuration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *positiveDuration) UnmarshalYAML(n *yaml.Node) error {
	var d config.Duration
	if err := d.UnmarshalYAML(n); err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("must be positive, not %s (leave the key out to keep the config's value)", strings.TrimSpace(n.Value))
	}
	*p = positiveDuration(d)
	return nil
}

// surfaceList is surfaces: a list of surfaces, or a single one.
type surfaceList []SurfaceRef

// DecodeNode implements yamlfile.NodeDecoder.
func (l *surfaceList) DecodeNode(d *yamlfile.Decoder, n *yaml.Node, path string) {
	items, key := []*yaml.Node{n}, func(int) string { return path }
	switch n.Kind {
	case yaml.ScalarNode: // surfaces: github
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			d.Errorf(n.Line, path, "must name at least one surface (leave the key out to use the config's)")
			return
		}
		items, key = n.Content, func(i int) string { return fmt.Sprintf("%s[%d]", path, i) }
	default:
		d.Mismatch(n, "a list of surfaces", path)
		return
	}
	var out surfaceList
	firstLine := map[string]int{}
	for i, item := range items {
		item = yamlfile.Resolve(item)
		var ref surface
		if yamlfile.IsNull(item) {
			d.Errorf(item.Line, key(i), "must not be empty")
			continue
		}
		if ref.DecodeNode(d, item, key(i)); ref.Name == "" {
			continue
		}
		if line, dup := firstLine[ref.Name]; dup {
			d.Errorf(item.Line, key(i), "%s is listed twice (first on line %d)", ref.Name, line+d.Offset)
			continue
		}
		firstLine[ref.Name] = item.Line
		out = append(out, SurfaceRef(ref))
	}
	*l = out
}

// surface is an item of surfaces, or escalate_to: a surface name, or a
// one-key mapping from the name to its overrides. Name is empty after a
// problem.
type surface SurfaceRef

// DecodeNode implements yamlfile.NodeDecoder.
func (s *surface) DecodeNode(d *yamlfile.Decoder, n *yaml.Node, path string) {
	names := config.SurfaceNames()
	known := func(line int, key, name string) bool {
		if !slices.Contains(names, name) {
			d.Errorf(line, key, "unknown surface %q (known: %s)", name, strings.Join(names, ", "))
			return false
		}
		return true
	}
	switch n.Kind {
	case yaml.ScalarNode:
		var name text
		if decodeOK(d, n, &name, path) && known(n.Line, path, string(name)) {
			s.Name = string(name)
		}
	case yaml.MappingNode:
		var pairs [][2]*yaml.Node
		for k, v := range d.Pairs(n, path) {
			pairs = append(pairs, [2]*yaml.Node{k, v})
		}
		if len(n.Content) != 2 || len(pairs) != 1 {
			d.Errorf(n.Line, path, "a surface with overrides is a mapping of one key, its name (for example {github: {issue: 42}})")
			return
		}
		k, v := pairs[0][0], pairs[0][1]
		if !known(k.Line, path, k.Value) {
			return
		}
		okey := yamlfile.JoinKey(path, k.Value)
		switch {
		case yamlfile.IsNull(v):
		case v.Kind != yaml.MappingNode:
			d.Mismatch(v, "a mapping of keys", okey)
			return
		case len(config.OverrideKeys(k.Value)) == 0:
			if len(v.Content) > 0 {
				d.Errorf(v.Line, okey, "the %s has no overrides", k.Value)
				return
			}
		default:
			o, ok := config.DecodeOverride(d, k.Value, v, okey)
			if !ok {
				return
			}
			s.Override = o
		}
		s.Name = k.Value
	default:
		d.Mismatch(n, "a surface name or a mapping from a surface name to its overrides", path)
	}
}

// answerList is answers: a mapping from a question's header or text to the
// answer, a string or a list of labels (joined with ", ").
type answerList []PresetAnswer

// DecodeNode implements yamlfile.NodeDecoder.
func (l *answerList) DecodeNode(d *yamlfile.Decoder, n *yaml.Node, path string) {
	if n.Kind != yaml.MappingNode {
		d.Mismatch(n, "a mapping from a question's header or text to its answer", path)
		return
	}
	var out answerList
	firstLine := map[string]int{}
	for k, v := range d.Pairs(n, path) {
		match := strings.TrimSpace(k.Value)
		akey := fmt.Sprintf("%s[%q]", path, match)
		if match == "" {
			d.Errorf(k.Line, path, "a question's header or text must not be empty")
			continue
		}
		lower := strings.ToLower(match)
		if line, dup := firstLine[lower]; dup {
			d.Errorf(k.Line, akey, "answered twice (first on line %d)", line+d.Offset)
			continue
		}
		firstLine[lower] = k.Line
		var answer string
		switch {
		case yamlfile.IsNull(v):
			d.Errorf(k.Line, akey, "the answer must not be empty")
			continue
		case v.Kind == yaml.SequenceNode:
			var labels []text
			if !decodeOK(d, v, &labels, akey) {
				continue
			}
			if len(labels) == 0 {
				d.Errorf(v.Line, akey, "the list of labels must not be empty")
				continue
			}
			answer = strings.Join(strs(labels), ", ")
		default:
			var a text
			if !decodeOK(d, v, &a, akey) {
				continue
			}
			answer = strings.TrimSpace(string(a))
		}
		out = append(out, PresetAnswer{Match: match, Answer: answer})
	}
	*l = out
}

// onTimeout is on_timeout: an action, or {action: default, option: Label}.
type onTimeout OnTimeout

// DecodeNode implements yamlfile.NodeDecoder.
func (o *onTimeout) DecodeNode(d *yamlfile.Decoder, n *yaml.Node, key string) {
	actions := OnTimeoutFail + ", " + OnTimeoutDefault + ", " + OnTimeoutDecide + ", " + OnTimeoutSkip
	var (
		v struct {
			Action text `yaml:"action"`
			Option text `yaml:"option"`
		}
		actionNode, optNode  = n, (*yaml.Node)(nil)
		actionKey, optionKey = key, yamlfile.JoinKey(key, "option")
	)
	switch n.Kind {
	case yaml.ScalarNode:
		if !decodeOK(d, n, &v.Action, key) {
			return
		}
	case yaml.MappingNode:
		actionKey = yamlfile.JoinKey(key, "action")
		if !decodeOK(d, n, &v, key) {
			return
		}
		if v.Action == "" {
			d.Errorf(n.Line, actionKey, "missing: one of %s", actions)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch yamlfile.Resolve(n.Content[i]).Value {
			case "action":
				actionNode = yamlfile.Resolve(n.Content[i+1])
			case "option":
				optNode = yamlfile.Resolve(n.Content[i+1])
			}
		}
	default:
		d.Mismatch(n, "one of "+actions+", or {action: default, option: …}", key)
		return
	}
	switch action := string(v.Action); action {
	case OnTimeoutFail, OnTimeoutDecide, OnTimeoutSkip:
		if v.Option != "" {
			d.Errorf(optNode.Line, optionKey, "only on_timeout action default takes an option")
			return
		}
		o.Action = action
	case OnTimeoutDefault:
		if v.Option == "" {
			d.Errorf(actionNode.Line, key, "default needs the option to choose: on_timeout: {action: default, option: …}")
			return
		}
		o.Action, o.Option = action, strings.TrimSpace(string(v.Option))
	default:
		d.Errorf(actionNode.Line, actionKey, "unknown action %q (known: %s)", action, actions)
	}
}
