package specs

// Sections are the frontmatter keys whose value is decoded into a struct by
// the decoder the configuration uses (internal/yamlfile): unknown keys with a
// "did you mean", wrong types and bad values, each with its line and key
// under the section's ("git.branch"). A new section is a field here with its
// yaml tag (its type in a file of its own); Parse needs nothing else. A
// section's keys have no defaults here: zero means not set in the spec.
type Sections struct{}
