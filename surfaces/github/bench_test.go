package github

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// fakeClock is a clock whose time moves only by Advance; Sleep blocks until
// the clock has moved past its end.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	sleepers []*sleeper
	changed  chan struct{}
}

type sleeper struct {
	until time.Time
	done  chan struct{}
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_700_000_000, 0), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	s := &sleeper{until: c.now.Add(d), done: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		for i, x := range c.sleepers {
			if x == s {
				c.sleepers = append(c.sleepers[:i], c.sleepers[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return ctx.Err()
	}
}

// BlockUntil waits until n goroutines sleep.
func (c *fakeClock) BlockUntil(n int) {
	for {
		c.mu.Lock()
		k, ch := len(c.sleepers), c.changed
		c.mu.Unlock()
		if k >= n {
			return
		}
		<-ch
	}
}

// Advance moves the clock and wakes the sleepers whose time has come.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.sleepers[:0]
	for _, s := range c.sleepers {
		if !s.until.After(c.now) {
			close(s.done)
		} else {
			kept = append(kept, s)
		}
	}
	c.sleepers = kept
}

// BenchmarkPollingRequestsPerHour asks 100 questions over 5 repositories
// (20 runs per repository, each with its own issue) and lets an hour pass on
// a fake clock at the default poll interval with nobody answering. It
// reports the API requests of that hour, how many of them were 304 Not
// Modified (which GitHub does not count against the rate limit), and the
// requests asking took.
func BenchmarkPollingRequestsPerHour(b *testing.B) {
	const repos, perRepo = 5, 20
	var perHour, notModified, asking int
	for b.Loop() {
		srv := githubtest.NewServer(b)
		clock := newFakeClock()
		srv.SetNow(clock.Now)
		cfg := ClientConfig{BaseURL: srv.URL(), Token: "t", now: clock.Now, sleep: clock.Sleep, WriteInterval: -1}
		c, err := NewClient(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for r := range repos {
			s, err := c.Surface(SurfaceConfig{Repo: fmt.Sprintf("acme/repo%d", r)})
			if err != nil {
				b.Fatal(err)
			}
			for i := range perRepo {
				set := surfacetest.NewSet(fmt.Sprintf("bench-%d-%d", r, i)).Single().Set()
				wg.Go(func() { s.Ask(ctx, set, pending(set)) })
			}
		}
		// Every Ask has posted and waits once each repository's poller
		// sleeps and all 100 questions are there.
		srv.WaitFor(b, time.Minute, "100 questions", func() bool {
			n := 0
			for r := range repos {
				for _, is := range srv.Issues(fmt.Sprintf("acme/repo%d", r)) {
					n += len(srv.Comments(fmt.Sprintf("acme/repo%d", r), is.Number))
				}
			}
			return n == repos*perRepo
		})
		for waiting := 0; waiting < repos*perRepo; {
			time.Sleep(time.Millisecond)
			waiting = 0
			c.mu.Lock()
			for _, p := range c.pollers {
				p.mu.Lock()
				waiting += len(p.waiters)
				p.mu.Unlock()
			}
			c.mu.Unlock()
		}
		clock.BlockUntil(repos)
		asking = len(srv.Requests())
		srv.ResetRequests()

		for range time.Hour / DefaultPollInterval {
			clock.BlockUntil(repos)
			clock.Advance(DefaultPollInterval)
		}
		clock.BlockUntil(repos) // the hour's last polls are done

		reqs := srv.Requests()
		perHour, notModified = len(reqs), 0
		for _, r := range reqs {
			if r.Status == http.StatusNotModified {
				notModified++
			} else if testing.Verbose() {
				b.Logf("%s %s?%s %d (If-None-Match %q)", r.Method, r.Path, r.RawQuery, r.Status, r.IfNoneMatch)
			}
		}
		cancel()
		wg.Wait()
		c.Close()
	}
	b.ReportMetric(float64(perHour), "requests/hour")
	b.ReportMetric(float64(notModified), "304s/hour")
	b.ReportMetric(float64(perHour-notModified), "rate-limited-requests/hour")
	b.ReportMetric(float64(asking), "requests-to-ask-100")
}
