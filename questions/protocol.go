package questions

import (
	_ "embed"
)

//go:embed protocol.md
var protocol string

// ProtocolPrompt is the text the executor appends to the system prompt
// (--append-system-prompt) to teach the model the QUESTION block: when to ask,
// the exact schema with an example, one block at the end of the message, and
// to stop and wait after asking.
func ProtocolPrompt() string { return protocol }
