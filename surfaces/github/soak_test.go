package github

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// soakAPI is the least of GitHub a run's question needs, keeping nothing:
// each run opens its issue, its question is posted, answered, shown
// answered and reacted to. Unlike githubtest it holds no history, so the
// heap measured is the client's.
type soakAPI struct {
	mu     sync.Mutex
	nextID int64
}

func (f *soakAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	var in map[string]any
	if r.Body != nil {
		json.NewDecoder(r.Body).Decode(&in)
		r.Body.Close()
	}
	f.mu.Lock()
	f.nextID++
	id := f.nextID
	f.mu.Unlock()
	now := time.Now().UTC().Format(time.RFC3339)
	p := strings.TrimPrefix(r.URL.Path, "/repos/acme/app/")
	var out any = map[string]any{}
	status := http.StatusOK
	bot := map[string]any{"login": "orchestrator-bot", "id": 1, "type": "User"}
	switch {
	case r.Method == "GET" && r.URL.Path == "/user":
		out = bot
	case r.Method == "GET" && (p == "issues" || strings.HasSuffix(p, "/comments")):
		out = []any{}
	case r.Method == "POST" && p == "issues":
		out, status = map[string]any{"number": id, "user": bot}, http.StatusCreated
	case r.Method == "POST" && strings.HasSuffix(p, "/comments"):
		out, status = map[string]any{"id": id, "body": in["body"], "user": bot, "created_at": now, "updated_at": now}, http.StatusCreated
	case r.Method == "PATCH":
		out = map[string]any{"id": id, "body": in["body"], "user": bot}
	case strings.HasSuffix(p, "/permission"):
		out = map[string]any{"permission": "write"}
	case strings.HasSuffix(p, "/reactions"):
		status = http.StatusCreated
	}
	data, _ := json.Marshal(out)
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(string(data))), Request: r}, nil
}

// The client's per-set and per-run state (locks, where sets were asked,
// run issues, status comments, the state of issues where sets wait) goes
// when sets are answered: asking and answering 10,000 questions leaves the
// heap where it was.
func TestSoakTenThousandQuestionsHeapFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test")
	}
	c, err := NewClient(ClientConfig{
		BaseURL: "http://github.invalid/", Token: "t", HTTPClient: &http.Client{Transport: &soakAPI{}},
		PollInterval: time.Hour, WriteInterval: -1, ProgressInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Surface(SurfaceConfig{Repo: "acme/app", Progress: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := c.poller("acme", "app")
	one := func(i int) {
		run := "soak-" + strconv.Itoa(i)
		set := surfacetest.NewSet(run).Run(run).Single().Set()
		s.Progress(ctx, surfaces.RunProgress{RunID: run, Step: "turn 1 running"})
		answers := pending(set)
		actx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Ask(actx, set, answers) }()
		// The answer, as the webhook brings it, until the Ask takes it.
		now := gh.Timestamp{Time: time.Now()}
		answer := &gh.IssueComment{ID: gh.Int64(1 << 40), Body: gh.String("2"),
			User: &gh.User{Login: gh.String("alice")}, CreatedAt: &now, UpdatedAt: &now}
		for {
			if a := c.askedInfo(s.key(set.ID)); a != nil {
				answer.ID = gh.Int64(a.partIDs[0] + 1)
				p.handle(ctx, a.issue, []*gh.IssueComment{answer})
			}
			if _, ok := answers.Final(set.ID); ok {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		if err := <-done; err != nil {
			t.Fatalf("Ask %d = %v", i, err)
		}
		cancel()
		if err := s.Resumed(ctx, set); err != nil {
			t.Fatalf("Resumed %d = %v", i, err)
		}
		s.Progress(ctx, surfaces.RunProgress{RunID: run, Step: "done", Final: true})
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const warm, n = 500, 10000
	for i := range warm {
		one(i)
	}
	start := heap()
	for i := warm; i < n; i++ {
		one(i)
	}
	end := heap()
	t.Logf("heap after %d questions: %d KiB; after %d: %d KiB", warm, start>>10, n, end>>10)
	// A set's state is a few KiB (its question comment alone is over
	// one): keeping it would grow the heap by tens of MiB.
	if end > start+4<<20 {
		t.Errorf("heap grew from %d KiB to %d KiB over %d questions", start>>10, end>>10, n-warm)
	}
	c.mu.Lock()
	sizes := fmt.Sprintf("locks %d, asked %d, progress %d, run issues %d", len(c.locks), len(c.asked), len(c.progress), len(c.runIssues))
	if len(c.locks) != 0 || len(c.asked) != 0 || len(c.progress) != 0 || len(c.runIssues) > maxCached {
		t.Errorf("state left after every set was answered: %s", sizes)
	}
	c.mu.Unlock()
	p.proc.Lock()
	if len(p.issues) != 0 {
		t.Errorf("%d issues' state left, want none", len(p.issues))
	}
	p.proc.Unlock()
	p.mu.Lock()
	if len(p.waiters) != 0 {
		t.Errorf("%d waiters left", len(p.waiters))
	}
	p.mu.Unlock()
}
