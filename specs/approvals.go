package specs

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
)

// Approvals is a spec's approvals section: the policy for the model's tool
// calls (internal/approvals; README "Approvals"). Rules use the CLI's own
// syntax. A nil *Approvals in a Spec means the section is absent (the
// configuration's applies).
//
//	approvals:
//	  allow: ["Bash(go test:*)"]     # answered at once: runs
//	  deny: ["Bash(git push:*)"]     # answered at once: refused, the model is told
//	  ask: ["Bash(rm:*)"]            # a person decides (also the default)
//	  approval_hold: 10m             # how long a live call waits; 0 parks at once
type Approvals struct {
	Allow []string
	Deny  []string
	Ask   []string
	// Hold is approval_hold; nil when not set.
	Hold *time.Duration
}

var approvalKeys = []string{"allow", "deny", "ask", "approval_hold"}

// parseApprovals reads an approvals section. Like parseGit it depends on
// nothing but yaml.v3.
func parseApprovals(n *yaml.Node, key string) (*Approvals, []gitProblem) {
	var probs []gitProblem
	add := func(n *yaml.Node, key, format string, args ...any) {
		probs = append(probs, gitProblem{n.Line, key, fmt.Sprintf(format, args...)})
	}
	n = resolve(n)
	if isNull(n) {
		return &Approvals{}, nil
	}
	if n.Kind != yaml.MappingNode {
		add(n, key, "must be a mapping (%s), not %s", strings.Join(approvalKeys, ", "), kindName(n))
		return nil, probs
	}
	a := &Approvals{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		kk := join(key, k.Value)
		switch {
		case k.Kind != yaml.ScalarNode:
			add(k, key, "a key must be a string, not %s", kindName(k))
			continue
		case seen[k.Value]:
			add(k, kk, "duplicate key")
			continue
		case !slices.Contains(approvalKeys, k.Value):
			add(k, kk, "unknown key (known: %s)", strings.Join(approvalKeys, ", "))
			continue
		}
		seen[k.Value] = true
		if k.Value == "approval_hold" {
			d, err := time.ParseDuration(strings.TrimSpace(v.Value))
			if v.Kind == yaml.ScalarNode && strings.TrimSpace(v.Value) == "0" {
				d, err = 0, nil
			}
			if v.Kind != yaml.ScalarNode || err != nil || d < 0 {
				add(v, kk, `must be a duration such as "10m" (0 parks at once), not %q`, v.Value)
				continue
			}
			a.Hold = &d
			continue
		}
		var rules []string
		switch {
		case isNull(v):
		case v.Kind == yaml.SequenceNode:
			for j, it := range v.Content {
				it = resolve(it)
				ik := fmt.Sprintf("%s[%d]", kk, j)
				if it.Kind != yaml.ScalarNode {
					add(it, ik, "must be a rule such as \"Bash(git push:*)\", not %s", kindName(it))
					continue
				}
				if err := approvals.Validate(it.Value); err != nil {
					add(it, ik, "%v", err)
					continue
				}
				rules = append(rules, strings.TrimSpace(it.Value))
			}
		default:
			add(v, kk, "must be a list of rules such as [\"Bash(git push:*)\"], not %s", kindName(v))
			continue
		}
		switch k.Value {
		case "allow":
			a.Allow = rules
		case "deny":
			a.Deny = rules
		case "ask":
			a.Ask = rules
		}
	}
	return a, probs
}
