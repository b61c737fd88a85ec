package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// pgProxy stands between the store and the test's PostgreSQL server, on a
// unix socket of its own: down, it takes each connection and closes it at
// once (the server is unreachable), counting them; up, it passes them on.
type pgProxy struct {
	target string // the server's socket
	ln     net.Listener
	down   atomic.Bool
	tries  atomic.Int64 // connections refused while down
	mu     sync.Mutex
	conns  []net.Conn
}

// newPGProxy serves a proxy for the PostgreSQL URL u and returns the URL
// that goes through it.
func newPGProxy(t *testing.T, u string) (*pgProxy, string) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := parsed.Query()
	dir, err := os.MkdirTemp("", "pgp") // short: a socket's path is at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &pgProxy{target: filepath.Join(q.Get("host"), ".s.PGSQL.5432")}
	p.ln, err = net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.ln.Close(); p.cut() })
	go p.serve()
	q.Set("host", dir)
	parsed.RawQuery = q.Encode()
	return p, parsed.String()
}

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			p.tries.Add(1)
			c.Close()
			continue
		}
		s, err := net.Dial("unix", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

// cut closes every connection passed on.
func (p *pgProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// lockedLog is a log the test reads while the daemon writes it.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count is how many lines of the log from offset contain s.
func (l *lockedLog) count(from int, s string) int {
	return strings.Count(l.String()[from:], s)
}

// TestStoreOutageBacksOff: PostgreSQL unreachable for a while under a
// daemon: one error line for the outage (then one a minute), the store
// tried again with an exponential backoff rather than in a loop, /healthz
// degraded saying the store is unreachable; once it is back, the daemon
// says so and /healthz is ok again.
func TestStoreOutageBacksOff(t *testing.T) {
	t.Parallel()
	proxy, u := newPGProxy(t, pgtest.Schema(t))
	ctx := context.Background()
	st, err := store.OpenDatabase(ctx, t.TempDir(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &lockedLog{}
	d, err := New(Config{Runs: newFakeRuns(st, store.RunRunning), Asks: noAsks{}, Store: st, Listen: "127.0.0.1:0",
		AdoptEvery: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
		if t.Failed() {
			t.Logf("log:\n%s", logs.String())
		}
	}()
	<-d.Ready()
	waitFor(t, "healthz ok and leading", func() bool {
		code, h := health(t, d)
		return code == 200 && h.Status == "ok" && h.Leader
	})

	from := len(logs.String())
	proxy.down.Store(true)
	proxy.cut()
	waitFor(t, "healthz to say the store is unreachable", func() bool {
		_, h := health(t, d)
		return h.Status == "degraded" && strings.Contains(h.Error, "store unreachable")
	})
	// The outage lasts a few seconds: long enough for a loop without a
	// backoff to try thousands of times.
	time.Sleep(4 * time.Second)
	code, h := health(t, d)
	if code != 503 || h.Status != "degraded" || !strings.Contains(h.Error, "store unreachable") {
		t.Errorf("healthz during the outage = %d %+v, want 503 degraded: store unreachable", code, h)
	}
	errorLines, warnLines := logs.count(from, "level=ERROR"), logs.count(from, "level=WARN")
	tries := proxy.tries.Load()
	t.Logf("during the outage: %d error lines, %d warnings, %d connection attempts", errorLines, warnLines, tries)
	if errorLines != 1 {
		t.Errorf("%d error lines during the outage, want 1", errorLines)
	}
	if warnLines > 2 {
		t.Errorf("%d warnings during the outage, want at most 2 (losing the lead)", warnLines)
	}
	if tries > 200 {
		t.Errorf("%d connection attempts in about 5s: the store is hammered, not backed off", tries)
	}

	proxy.down.Store(false)
	waitFor(t, "healthz ok again", func() bool {
		code, h := health(t, d)
		return code == 200 && h.Status == "ok"
	})
	waitFor(t, "the log to say the store is back", func() bool { return logs.count(from, "store reachable again") >= 1 })
}

// waitFor polls cond until it holds, failing the test after wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
