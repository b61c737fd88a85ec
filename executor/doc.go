// Package executor runs the agent CLI (Claude Code, or claw) and turns its
// output into typed events and one Outcome per run.
//
// Three layers, usable separately:
//
//   - Parser and Reader: the stream-json parser. Parser.ParseLine types one
//     line (seed 002: a lossless event model, error codes JsonParse /
//     TypedParse / Normalize with redacted messages, ParseJSON neutrality);
//     Reader is a pull iterator over a transcript with an explicit line cap
//     (64 MiB by default) that, following seed 000, reports and skips bad or
//     oversize lines and never stops on them.
//   - Tracker and Outcome: what a run came to — session id (latest wins),
//     final text, turns, cost, usage, status and error Category (seed 000's
//     classification, the real CLI's result shapes), advisory warnings.
//     Replay does it for a saved transcript (`orchestrator inspect`).
//   - Executor and Run: the process. Executor.Args builds the command line,
//     Executor.Start runs it in its own process group with a purpose-built
//     environment, stdin from /dev/null, timeouts, interrupt-then-kill,
//     bounded stderr and the raw output saved as it streams; Run is a pull
//     iterator of events ending in an Outcome.
//
// Where the real CLI (the recordings in testdata/claude-code-2.1.330)
// differs from a seed document, the real CLI wins and the seed's check is a
// Diagnostic: result subtypes "error_max_turns" / "error_during_execution",
// and subtype "success" with is_error true on API errors.
package executor
