package runner

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

type progressSink struct {
	mu   sync.Mutex
	seen []surfaces.RunProgress
}

func (s *progressSink) Progress(_ context.Context, p surfaces.RunProgress) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, p)
	return nil
}

func newTestPump(sink *progressSink) *progressPump {
	pp := &progressPump{reps: []surfaces.ProgressReporter{sink}, start: time.Now(), log: slog.New(slog.DiscardHandler),
		p:    surfaces.RunProgress{RunID: "r1", Step: "starting"},
		wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go pp.loop()
	return pp
}

// TestPumpListsRefusedCalls: the progress pump fills the refused tool calls
// from a recorded turn of the real CLI (a system permission_denied line and
// the result's permission_denials name the same call once), with the call's
// input.
func TestPumpListsRefusedCalls(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../executor/testdata/claude-code-2.1.330/tool_bash_denied.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sink := &progressSink{}
	pp := newTestPump(sink)
	if _, err := executor.Replay(f, executor.ReaderOptions{}, func(ev executor.Event) { pp.observe(1, ev) }); err != nil {
		t.Fatal(err)
	}
	pp.finish(store.Run{ID: "r1", Status: store.RunDone}, "", nil, time.Now())
	last := sink.seen[len(sink.seen)-1]
	if !last.Final || len(last.Refused) != 1 || last.RefusedMore != 0 {
		t.Fatalf("final progress refused = %+v, more %d", last.Refused, last.RefusedMore)
	}
	if c := last.Refused[0]; c.Turn != 1 || c.Tool != "Bash" || !strings.HasPrefix(c.Summary, "touch ") {
		t.Fatalf("refused call = %+v", c)
	}
}

// TestPumpBoundsRefusedCalls: over surfaces.MaxRefused refused calls across
// turns are counted, not listed; the model's text is made printable and
// secrets in it redacted.
func TestPumpBoundsRefusedCalls(t *testing.T) {
	t.Parallel()
	sink := &progressSink{}
	pp := newTestPump(sink)
	for turn := 1; turn <= 3; turn++ {
		var lines []string
		for i := 0; i < 5; i++ {
			id := `"toolu_` + string(rune('a'+turn)) + string(rune('a'+i)) + `"`
			lines = append(lines,
				`{"type":"assistant","session_id":"s","message":{"id":"m","content":[{"type":"tool_use","id":`+id+`,"name":"Bash\u001b[2J","input":{"command":"curl -H 'x: ghp_abcdefghijklmnopqrstuvwxyz0123456789' \u001b]0;t\u0007 example.test"}}]}}`,
				`{"type":"system","subtype":"permission_denied","session_id":"s","tool_name":"Bash","tool_use_id":`+id+`}`)
		}
		lines = append(lines, `{"type":"result","subtype":"success","session_id":"s","is_error":false,"result":"ok","permission_denials":[]}`)
		if _, err := executor.Replay(strings.NewReader(strings.Join(lines, "\n")+"\n"), executor.ReaderOptions{}, func(ev executor.Event) { pp.observe(turn, ev) }); err != nil {
			t.Fatal(err)
		}
	}
	pp.finish(store.Run{ID: "r1", Status: store.RunDone}, "", nil, time.Now())
	last := sink.seen[len(sink.seen)-1]
	if len(last.Refused) != surfaces.MaxRefused || last.RefusedMore != 5 {
		t.Fatalf("refused %d listed, %d more; want %d and 5", len(last.Refused), last.RefusedMore, surfaces.MaxRefused)
	}
	if last.Refused[0].Turn != 1 || last.Refused[9].Turn != 2 {
		t.Fatalf("refused turns = %+v", last.Refused)
	}
	for _, c := range last.Refused {
		if strings.ContainsAny(c.Tool+c.Summary, "\x1b\x07") || strings.Contains(c.Summary, "ghp_") || c.Tool != "Bash" {
			t.Fatalf("refused call not cleaned: %+q", []string{c.Tool, c.Summary})
		}
	}
}

// TestPumpStartsWithEarlierRefusals: a drive's progress starts with the
// calls the CLI refused in the run's turns of earlier drives, read from
// their transcripts, so the final status lists the whole run's.
func TestPumpStartsWithEarlierRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateRun(ctx, store.Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	turn, err := st.BeginTurn(ctx, store.Turn{RunID: "r1", Kind: store.TurnStart, Prompt: "p",
		TranscriptPath: "../../executor/testdata/claude-code-2.1.330/tool_bash_denied.ndjson"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.FinishTurn(ctx, "r1", turn.Seq, store.TurnResult{Status: "success"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// A turn whose transcript is gone is left out.
	gone, err := st.BeginTurn(ctx, store.Turn{RunID: "r1", Kind: store.TurnContinue, Prompt: "p", TranscriptPath: t.TempDir() + "/gone.ndjson"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.FinishTurn(ctx, "r1", gone.Seq, store.TurnResult{Status: "success"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	r := &Runner{cfg: Config{Store: st}, log: slog.New(slog.DiscardHandler)}
	list, more := r.refusedBefore("r1")
	if len(list) != 1 || more != 0 || list[0].Turn != 1 || list[0].Tool != "Bash" || !strings.HasPrefix(list[0].Summary, "touch ") {
		t.Fatalf("refused before the drive = %+v, %d more", list, more)
	}
}
