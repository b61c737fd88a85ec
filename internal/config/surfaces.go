package config

import (
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
)

// SurfaceConfig is the configuration block of one surface: the value of
// surfaces.NAME in the configuration file, and what a spec's override of
// that surface decodes into. Every field of Surfaces is one; its yaml key
// is the surface's name everywhere (specs, --surface, the store).
//
// The fields a spec may set are tagged `spec:"override"`.
type SurfaceConfig interface {
	// On reports whether the block turns the surface on.
	On() bool
	// Check reports the problems of a block that is on, each at its key
	// relative to the block ("repo", "allow_users[1]").
	Check(c *Checker)
}

// Checker collects the problems SurfaceConfig.Check finds.
type Checker struct{ add func(key, msg string) }

// NewChecker returns a Checker that hands each problem to add.
func NewChecker(add func(key, msg string)) *Checker { return &Checker{add: add} }

// Add reports a problem at key.
func (c *Checker) Add(key, format string, args ...any) { c.add(key, fmt.Sprintf(format, args...)) }

// URL reports a problem at key unless raw is an absolute URL with one of
// the schemes. The value is not shown: a URL may carry credentials.
func (c *Checker) URL(key, raw string, schemes ...string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !slices.Contains(schemes, u.Scheme) {
		c.Add(key, "want an absolute %s URL", strings.Join(schemes, " or "))
	}
}

// NonEmptyItems reports every blank item of a list.
func (c *Checker) NonEmptyItems(key string, items []string) {
	for i, s := range items {
		if strings.TrimSpace(s) == "" {
			c.Add(fmt.Sprintf("%s[%d]", key, i), "must not be empty")
		}
	}
}

var (
	_ SurfaceConfig = Terminal{}
	_ SurfaceConfig = GitHub{}
	_ SurfaceConfig = Discord{}
	_ SurfaceConfig = Slack{}
)

// SurfaceNames returns the names of the surfaces, the keys of the
// surfaces block, in their order there.
func SurfaceNames() []string {
	t := reflect.TypeFor[Surfaces]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		names = append(names, name)
	}
	return names
}

// Surface returns the block of the named surface, a pointer into s; nil
// for a name that is not one of SurfaceNames.
func (s *Surfaces) Surface(name string) SurfaceConfig {
	v := reflect.ValueOf(s).Elem()
	idx, ok := yamlfile.Fields(v.Type())[name]
	if !ok {
		return nil
	}
	return v.FieldByIndex(idx).Addr().Interface().(SurfaceConfig)
}

// OverrideKeys returns the keys of the named surface's block that a spec
// may set, in the block's order.
func OverrideKeys(name string) []string {
	sc := (&Surfaces{}).Surface(name)
	if sc == nil {
		return nil
	}
	t := reflect.TypeOf(sc).Elem()
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("spec") == "override" {
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			keys = append(keys, key)
		}
	}
	return keys
}

// Override is a spec's override of a surface's configuration.
type Override struct {
	// Value holds the keys the spec sets, in a block of the surface's type
	// (such as *GitHub); the other fields are zero.
	Value SurfaceConfig
	// Keys are the keys the spec sets, in file order.
	Keys []string
}

// Apply sets the keys of o on block, a pointer to a block of the same type.
func (o Override) Apply(block SurfaceConfig) {
	if o.Value == nil {
		return
	}
	dst, src := reflect.ValueOf(block).Elem(), reflect.ValueOf(o.Value).Elem()
	fields := yamlfile.Fields(dst.Type())
	for _, key := range o.Keys {
		dst.FieldByIndex(fields[key]).Set(src.FieldByIndex(fields[key]))
	}
}

// DecodeOverride decodes n, the mapping a spec gives for the named surface,
// into an Override, reporting its problems through d with keys under path:
// a key the spec may not set, and the problems Check finds in the keys
// set (with the configuration's defaults for the rest). ok is false when
// there was any problem.
func DecodeOverride(d *yamlfile.Decoder, name string, n *yaml.Node, path string) (o Override, ok bool) {
	before := len(d.Errs)
	allowed := OverrideKeys(name)
	defaults := DefaultEnv(func(string) (string, bool) { return "", false }).Surfaces
	block := defaults.Surface(name)
	typ := reflect.TypeOf(block).Elem()
	known := yamlfile.Fields(typ)

	// Keys a spec may not set are refused here, the rest decoded into a
	// zero block.
	kept := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if _, isField := known[k.Value]; isField && k.Kind == yaml.ScalarNode && !slices.Contains(allowed, k.Value) {
			d.Errorf(k.Line, yamlfile.JoinKey(path, k.Value), "cannot be set in a spec (a spec may set %s)", keyList(allowed))
			continue
		}
		if _, dup := lines[k.Value]; !dup && k.Kind == yaml.ScalarNode {
			lines[k.Value] = k.Line
			o.Keys = append(o.Keys, k.Value)
		}
		kept.Content = append(kept.Content, k, n.Content[i+1])
	}
	value := reflect.New(typ)
	d.Decode(kept, value.Interface(), path)
	o.Value = value.Interface().(SurfaceConfig)
	o.Keys = slices.DeleteFunc(o.Keys, func(k string) bool { _, isField := known[k]; return !isField })

	// Check the keys set that decoded, over the defaults.
	bad := map[string]bool{}
	for _, e := range d.Errs[before:] {
		rel := strings.TrimPrefix(e.Key, path+".")
		if i := strings.IndexAny(rel, ".["); i >= 0 {
			rel = rel[:i]
		}
		bad[rel] = true
	}
	good := slices.DeleteFunc(slices.Clone(o.Keys), func(k string) bool { return bad[k] })
	Override{Value: o.Value, Keys: good}.Apply(block)
	block.Check(&Checker{add: func(key, msg string) {
		for _, set := range good {
			if key == set || strings.HasPrefix(key, set+"[") || strings.HasPrefix(key, set+".") {
				d.Errorf(lines[set], yamlfile.JoinKey(path, key), "%s", msg)
				return
			}
		}
	}})
	if len(d.Errs) > before {
		return Override{}, false
	}
	if len(o.Keys) == 0 {
		o.Value = nil
	}
	return o, true
}

func keyList(keys []string) string {
	if len(keys) == 0 {
		return "none of its keys"
	}
	return strings.Join(keys, ", ")
}

// On implements SurfaceConfig.
func (t Terminal) On() bool { return t.Enabled }

// Check implements SurfaceConfig: the terminal has nothing to check.
func (Terminal) Check(*Checker) {}

// On implements SurfaceConfig.
func (g GitHub) On() bool { return g.Enabled }

var repoRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$`)

// Check implements SurfaceConfig.
func (g GitHub) Check(c *Checker) {
	if g.Repo == "" {
		c.Add("repo", "required when the GitHub surface is enabled")
	} else if !repoRE.MatchString(g.Repo) {
		c.Add("repo", `want "owner/name", got %q, which is not owner/name`, g.Repo)
	}
	switch {
	case g.Token == "" && !g.App.Configured():
		c.Add("token", "set token or app (one of them) when the GitHub surface is enabled")
	case g.Token != "" && g.App.Configured():
		c.Add("app", "set token or app, not both")
	case g.App.Configured():
		if g.App.ID <= 0 {
			c.Add("app.id", "required (a positive number) when app is used")
		}
		if g.App.InstallationID <= 0 {
			c.Add("app.installation_id", "required (a positive number) when app is used")
		}
		if g.App.PrivateKeyFile == "" {
			c.Add("app.private_key_file", "required when app is used")
		}
	}
	c.URL("base_url", g.BaseURL, "http", "https")
	if g.Issue < 0 {
		c.Add("issue", "must be positive, or 0 to open one issue per run; got %d", g.Issue)
	}
	if floor := pollFloor(g.BaseURL); g.PollInterval <= 0 {
		c.Add("poll_interval", "must be above zero, got %s", g.PollInterval)
	} else if g.PollInterval < floor {
		c.Add("poll_interval", "must be at least %s, got %s (the floor is %s, %s for a base_url on this machine)",
			floor, g.PollInterval, MinPollInterval, MinLocalPollInterval)
	}
	if g.RequestTimeout <= 0 {
		c.Add("request_timeout", "must be above zero, got %s", g.RequestTimeout)
	}
	c.NonEmptyItems("labels", g.Labels)
	c.NonEmptyItems("allow", g.Allow)
	if g.AllowOnly && len(g.Allow) == 0 {
		c.Add("allow", "empty while allow_only is true: nobody could answer")
	}
}

// On implements SurfaceConfig.
func (d Discord) On() bool { return d.Enabled }

// Check implements SurfaceConfig.
func (d Discord) Check(c *Checker) {
	switch tok := strings.TrimPrefix(strings.TrimSpace(d.Token), "Bot "); {
	case tok == "":
		c.Add("token", "required when the Discord surface is enabled (set it to ${DISCORD_BOT_TOKEN} and export that variable)")
	case strings.ContainsAny(tok, " \t\r\n"):
		c.Add("token", "contains white space")
	}
	if d.RequestTimeout <= 0 {
		c.Add("request_timeout", "must be above zero, got %s", d.RequestTimeout)
	}
	if d.ChannelID == "" {
		c.Add("channel_id", "required when the Discord surface is enabled")
	} else if !snowflake(d.ChannelID) {
		c.Add("channel_id", "want a numeric Discord ID (a Discord channel ID is digits), got %q", d.ChannelID)
	}
	if len(d.AllowUsers) == 0 && len(d.AllowRoles) == 0 {
		c.Add("allow_users", "allow_users and allow_roles are both empty: nobody could answer")
	}
	for i, id := range d.AllowUsers {
		if !snowflake(id) {
			c.Add(fmt.Sprintf("allow_users[%d]", i), "want a numeric Discord user ID, got %q", id)
		}
	}
	for i, id := range d.AllowRoles {
		if !snowflake(id) {
			c.Add(fmt.Sprintf("allow_roles[%d]", i), "want a numeric Discord role ID, got %q", id)
		}
	}
	if d.APIURL != "" {
		c.URL("api_url", d.APIURL, "http", "https")
	}
	if d.GatewayURL != "" {
		c.URL("gateway_url", d.GatewayURL, "ws", "wss")
	}
}

// DefaultGitHubRequestTimeout and DefaultDiscordRequestTimeout bound one
// request to the service (surfaces.*.request_timeout).
const (
	DefaultGitHubRequestTimeout  = Duration(30 * time.Second)
	DefaultDiscordRequestTimeout = Duration(20 * time.Second)
)
