// Package executor runs the agent CLI (Claude Code, or claw) and turns its
// output into typed events and one Outcome per run.
//
// Three layers, usable separately:
//
//   - Parser and Reader: the stream-json parser. Parser.ParseLine types one
//     line with a stock JSON decoder (a lossless event model, error codes
//     JsonParse / TypedParse / Normalize with redacted messages, ParseJSON
//     giving the same events); Reader is a pull iterator over a transcript
//     with an explicit line cap (64 MiB by default) that reports and skips
//     bad or oversize lines and never stops on them.
//   - Tracker and Outcome: what a run came to — session id (latest wins),
//     final text, turns, cost, usage, status and error Category (keyword
//     rules and the real CLI's result shapes), advisory warnings.
//     Replay does it for a saved transcript (`orchestrator inspect`).
//   - Executor and Process: the CLI process. Executor.Args builds the command line,
//     Executor.Start runs it in its own process group with a purpose-built
//     environment, stdin from /dev/null, timeouts, interrupt-then-kill,
//     bounded stderr and the raw output saved as it streams; Process is a pull
//     iterator of events ending in an Outcome.
//
// The rules, and the facts measured on the real CLI they rest on, are in
// docs/claude-cli.md; the recordings are in testdata/claude-code-2.1.330.
// Where the real CLI departs from the strict stream shape (result subtypes
// "error_max_turns" / "error_during_execution", subtype "success" with
// is_error true on API errors), the real CLI wins and the failed check is a
// Diagnostic.
package executor
