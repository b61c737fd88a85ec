package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectNativeQuestions: inspect --json lists the questions asked
// without a marker, by kind: an AskUserQuestion call, a permission request,
// a call a hook deferred.
func TestInspectNativeQuestions(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"ask_tool_streamjson_answered.ndjson": "ask_tool AskUserQuestion",
		"bash_perm_streamjson_ppt.ndjson":     "approval Bash",
		"defer_bash_deferred.ndjson":          "approval Bash",
		"turn1.ndjson":                        "",
	} {
		tm := newTestMain(t)
		path, _ := filepath.Abs(filepath.Join("..", "..", "executor", "testdata", "claude-code-2.1.330", file))
		if code := tm.exec("inspect", "--json", path); code != 0 {
			t.Fatalf("%s: exit %d: %s", file, code, tm.stderr.String())
		}
		var rep inspectReport
		if err := json.Unmarshal(tm.stdout.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range rep.Native {
			name := ""
			if s.Tool != nil {
				name = s.Tool.Name
			}
			got = append(got, s.Kind+" "+name)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s: native questions %v, want %q", file, got, want)
		}
	}
}
