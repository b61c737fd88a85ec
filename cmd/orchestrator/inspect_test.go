package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/executor"
)

// TestInspectShowsOversizeLine: inspect says which line was skipped for its
// size, how long it was and how it begins, cleaned of escape sequences.
func TestInspectShowsOversizeLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	printInspection(&buf, inspection{Outcome: executor.Outcome{Status: executor.StatusSuccess, OversizeLines: 1,
		FirstOversize: &executor.Diagnostic{Line: 3, Kind: executor.DiagOversize, Bytes: 100 << 20, Prefix: "{\"type\":\"assistant\"\x1b[2J,\"x\":"}}})
	out := buf.String()
	if !strings.Contains(out, `oversize:   line 3, 104857600 bytes, begins {"type":"assistant"`) || strings.Contains(out, "\x1b") {
		t.Errorf("output %q", out)
	}
}
