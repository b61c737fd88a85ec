package specs

// Sections are the frontmatter keys whose value is decoded into a struct by
// the decoder the configuration uses (internal/yamlfile): unknown keys with a
// "did you mean", wrong types and bad values, each with its line and key
// under the section's ("git.branch"). A new section is a field here with its
// yaml tag (its type in a file of its own); Parse needs nothing else. A
// section's keys have no defaults here: zero means not set in the spec. A
// section whose pointer has a method Check(*config.Checker) is checked
// after decoding (see Git.Check); a pointer to a section is nil when the
// key is absent, and a zero section when the key has nothing under it.
type Sections struct {
	// Git delivers the run's work as a branch and a pull request (git.go).
	Git *Git `yaml:"git"`
	// Approvals is the policy for the model's tool calls (approvals.go).
	Approvals *Approvals `yaml:"approvals"`
	// Notify routes the spec's events (notify.go).
	Notify *Notify `yaml:"notify"`
	// PauseAfterFailures pauses the spec's schedule after that many failed
	// runs in a row (notify.go).
	PauseAfterFailures *PauseAfter `yaml:"pause_after_failures"`
}
