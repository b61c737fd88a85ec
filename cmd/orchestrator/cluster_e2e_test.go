package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// These tests run several real `orchestrator serve` processes (instances)
// on one PostgreSQL database, with the real CLI and the fake Messages API:
// each instance has a state directory and a HOME of its own, as it would
// on a machine of its own.

// cluster is a few instances sharing a database.
type cluster struct {
	e     *e2e
	dbURL string
	specs string // the specs folder every instance follows
	extra string // config every instance gets (YAML, top level)
	nodes []*instance
}

// instance is one `serve` process and its files.
type instance struct {
	name   string
	config string
	state  string
	cmd    *exec.Cmd
	out    *lockedBuffer
}

// leaseTTL is the instances' serve.lease_ttl: short, so that a killed
// instance's run moves on quickly.
const leaseTTL = 3 * time.Second

func newCluster(t testing.TB, n int, extra string, rules ...fakeapi.Rule) *cluster {
	t.Helper()
	e := newE2E(t, rules...)
	c := &cluster{e: e, dbURL: pgtest.Schema(t), specs: filepath.Join(e.dir, "specs"), extra: extra}
	if err := os.MkdirAll(c.specs, 0o700); err != nil {
		t.Fatal(err)
	}
	c.add(n)
	return c
}

// add makes n more instances (not started). Config written to c.e.base
// before (such as more surfaces) is theirs too.
func (c *cluster) add(n int) {
	for i := 0; i < n; i++ {
		c.nodes = append(c.nodes, c.newInstance(fmt.Sprintf("i%d", len(c.nodes)+1)))
	}
}

// newInstance writes the config of an instance (its state directory; the
// shared database, specs folder and settings).
func (c *cluster) newInstance(name string) *instance {
	e := c.e
	in := &instance{name: name, state: filepath.Join(e.dir, name, "state"), config: filepath.Join(e.dir, name+".yaml")}
	cfg := strings.Replace(e.base, fmt.Sprintf("%q", e.state), fmt.Sprintf("%q", in.state), 1)
	// A HOME of its own: the CLI's sessions of one instance are not on
	// another's disk (the store carries them over).
	home := filepath.Join(e.dir, name, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		e.t.Fatal(err)
	}
	cfg = homeLine.ReplaceAllString(cfg, fmt.Sprintf("    HOME: %q", home))
	cfg += fmt.Sprintf("\ndatabase_url: %q\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n  lease_ttl: %s\n%s",
		c.instanceURL(name), c.specs, leaseTTL, c.extra)
	if err := os.WriteFile(in.config, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return in
}

// instanceURL is the shared database's URL with the instance's name in
// application_name, so that pg_stat_activity tells whose each connection
// is (the connections of the cluster's schema all start with its name).
func (c *cluster) instanceURL(name string) string {
	u, err := neturl.Parse(c.dbURL)
	if err != nil {
		c.e.t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", q.Get("application_name")+"/"+name)
	u.RawQuery = q.Encode()
	return u.String()
}

// start starts instance in's serve.
func (c *cluster) start(in *instance) {
	c.e.t.Helper()
	in.cmd = c.e.child("", "", "serve")
	in.cmd.Args[2] = in.config // --config
	in.out = in.cmd.Stdout.(*lockedBuffer)
	if err := in.cmd.Start(); err != nil {
		c.e.t.Fatal(err)
	}
}

// kill kills instance in with SIGKILL and waits for it.
func (c *cluster) kill(in *instance) {
	in.cmd.Process.Kill()
	in.cmd.Wait()
}

// command runs an orchestrator command as another process (a fourth
// machine: its own state directory) and returns its output.
func (c *cluster) command(args ...string) string {
	c.e.t.Helper()
	other := c.newInstance("cli")
	cmd := c.e.child("", "", args...)
	cmd.Args[2] = other.config
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		c.e.t.Fatalf("orchestrator %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// store opens the shared database.
func (c *cluster) store() *store.Store {
	c.e.t.Helper()
	st, err := store.OpenDatabase(context.Background(), c.e.t.TempDir(), c.dbURL)
	if err != nil {
		c.e.t.Fatal(err)
	}
	c.e.t.Cleanup(func() { st.Close() })
	return st
}

var homeLine = regexp.MustCompile(`(?m)^    HOME: .*$`)

var servingAddr = regexp.MustCompile(`"serving".*?addr=(127\.0\.0\.1:\d+)|msg=serving addr=(127\.0\.0\.1:\d+)`)

// addr is an instance's HTTP address once it serves, or "".
func (in *instance) addr() string {
	m := servingAddr.FindStringSubmatch(in.out.String())
	if m == nil {
		return ""
	}
	return m[1] + m[2]
}

// health reads an instance's /healthz.
func (c *cluster) health(in *instance) (h struct {
	Status string `json:"status"`
	Leader bool   `json:"leader"`
}, ok bool) {
	addr := in.addr()
	if addr == "" {
		return h, false
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return h, false
	}
	defer resp.Body.Close()
	return h, json.NewDecoder(resp.Body).Decode(&h) == nil
}

// leader waits for the one instance that leads and returns it.
func (c *cluster) leader(among ...*instance) *instance {
	c.e.t.Helper()
	var found *instance
	waitFor(c.e.t, "one instance leading", func() bool {
		found = nil
		n := 0
		for _, in := range among {
			if h, ok := c.health(in); ok && h.Leader {
				found = in
				n++
			}
		}
		return n == 1
	})
	return found
}

// driver returns the instance whose process holds run's lease, or nil.
func (c *cluster) driver(st *store.Store, runID string) *instance {
	l, ok, err := st.RunLease(context.Background(), runID)
	if err != nil || !ok {
		return nil
	}
	for _, in := range c.nodes {
		if in.cmd != nil && in.cmd.ProcessState == nil && strings.Contains(l.Owner, "/"+strconv.Itoa(in.cmd.Process.Pid)+"/") {
			return in
		}
	}
	return nil
}

func (c *cluster) writeSpec(name, body string) {
	c.e.t.Helper()
	if err := os.WriteFile(filepath.Join(c.specs, name+".md"), []byte(body), 0o600); err != nil {
		c.e.t.Fatal(err)
	}
}

// TestClusterTickOnceAnswerFromAnywhere: three instances run a spec that
// ticks every second. Its run waits on a question: every later tick, on
// every instance, is skipped, so there is exactly one run. `orchestrator
// answer` from a fourth process resumes it exactly once, on some instance.
func TestClusterTickOnceAnswerFromAnywhere(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "", standardRules(0)...)
	c.writeSpec("asks", "---\nname: asks\nschedule: \"@every 1s\"\nsurfaces: [terminal]\n---\nImplement spec X\n")
	for _, in := range c.nodes {
		c.start(in)
	}
	st := c.store()
	ctx := context.Background()
	var set store.SetRecord
	waitFor(t, "the run's question pending", func() bool {
		sets, _ := st.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
		if len(sets) == 1 {
			set = sets[0]
		}
		return len(sets) == 1
	})
	// A few more ticks on every instance: all skipped.
	time.Sleep(4 * time.Second)
	runs, err := st.ListRuns(ctx, store.RunFilter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs = %d (%v), want exactly 1 while its question waits", len(runs), err)
	}
	if runs[0].Status != store.RunWaiting {
		t.Fatalf("run %s, want waiting", runs[0].Status)
	}
	if l, ok, _ := st.RunLease(ctx, runs[0].ID); ok {
		t.Errorf("the waiting run holds a lease (%s): a waiting run holds none", l.Owner)
	}
	// status, from another machine, lists the three instances, one leading.
	var rep statusReport
	if err := json.Unmarshal([]byte(c.command("status", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	leaders := 0
	for _, in := range rep.Instances {
		if in.Leader {
			leaders++
		}
	}
	if len(rep.Instances) != 3 || leaders != 1 {
		t.Errorf("status lists %d instances with %d leading; want 3 and 1: %+v", len(rep.Instances), leaders, rep.Instances)
	}
	c.command("answer", set.Set.Questions[0].ID, "2")
	waitFor(t, "the run done", func() bool {
		r, err := st.Run(ctx, runs[0].ID)
		return err == nil && r.Status == store.RunDone
	})
	if n := c.e.answerRequests(); n != 1 {
		t.Fatalf("the answer reached the model %d times, want 1", n)
	}
	// The daemon logs "run ended" once Drive has returned (the lease given
	// back, the session saved): a moment after the store says done.
	ended := regexp.MustCompile(`msg="run ended" run=` + runs[0].ID)
	drivers := func() int {
		n := 0
		for _, in := range c.nodes {
			if ended.MatchString(in.out.String()) {
				n++
			}
		}
		return n
	}
	waitFor(t, "an instance saying it ended the run", func() bool { return drivers() > 0 })
	time.Sleep(time.Second) // a second instance saying so would say it by now
	if n := drivers(); n != 1 {
		t.Errorf("%d instances say they ended the run, want 1", n)
	}
}

// TestClusterKillTheInstanceRunningATurn: the instance running a run's turn
// is killed (SIGKILL) in the middle of it. Once its lease expires another
// instance takes the run up and finishes it; the answer the turn carried
// reaches the model exactly once (the interrupted turn is continued, not
// sent again).
func TestClusterKillTheInstanceRunningATurn(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "", standardRules(time.Second)...) // the answer's turn streams for ~4s
	for _, in := range c.nodes {
		c.start(in)
	}
	st := c.store()
	ctx := context.Background()
	runID := strings.TrimSpace(c.command("submit", "--prompt", "Implement spec X", "--surface", "terminal"))
	var set store.SetRecord
	waitFor(t, "the submitted run's question pending", func() bool {
		sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runID, State: []store.SetState{store.SetPending}})
		if len(sets) == 1 {
			set = sets[0]
		}
		return len(sets) == 1
	})
	c.command("answer", set.Set.Questions[0].ID, "2")
	var victim *instance
	waitFor(t, "the answer's turn streaming on an instance", func() bool {
		victim = c.driver(st, runID)
		streaming := false
		for _, r := range c.e.fake.Requests() {
			streaming = streaming || strings.Contains(r.LastUserText, answerRule)
		}
		return victim != nil && streaming
	})
	killed := time.Now()
	c.kill(victim)
	waitFor(t, "another instance driving the run", func() bool {
		in := c.driver(st, runID)
		return in != nil && in != victim
	})
	t.Logf("killed %s; another instance took the run up %s later (lease TTL %s)", victim.name, time.Since(killed).Round(100*time.Millisecond), leaseTTL)
	waitFor(t, "the run done on another instance", func() bool {
		r, err := st.Run(ctx, runID)
		return err == nil && r.Status == store.RunDone
	})
	t.Logf("killed %s; the run was done %s later (lease TTL %s)", victim.name, time.Since(killed).Round(100*time.Millisecond), leaseTTL)
	// The killed instance's turn never finished, so its session was not
	// saved: the other instance re-runs the turn in the conversation as
	// stored, and the model sees the answer once in every conversation.
	for i, r := range c.e.fake.Requests() {
		n := 0
		for _, m := range r.Messages {
			if m.Role == "user" {
				n += strings.Count(m.Text(), answerRule)
			}
		}
		if n > 1 {
			t.Errorf("request %d carries the answer %d times in its conversation", i, n)
		}
	}
	if n := c.e.answerRequests(); n < 1 || n > 2 {
		t.Errorf("the answer's turn was sent %d times, want once, or twice when the killed turn is re-run", n)
	}
	r, _ := st.Run(ctx, runID)
	if !strings.Contains(r.FinalText, "Implemented with JWT") && !strings.Contains(r.FinalText, "Finished after the interruption") {
		t.Errorf("final text %q", r.FinalText)
	}
	if rec, err := st.QuestionSet(ctx, set.Set.ID); err != nil || rec.State != store.SetResumed {
		t.Errorf("the set is %s (%v), want resumed", rec.State, err)
	}
}

// repo is the repository of the GitHub cluster tests.
const repo = "acme/app"

// newGitHubCluster starts three instances that ask on an issue of repo on a
// fake GitHub (alice may answer), with more settings of the github block
// (YAML lines indented under it).
func newGitHubCluster(t *testing.T, more string) (*cluster, *githubtest.Server, int) {
	t.Helper()
	c := newCluster(t, 0, "", standardRules(0)...)
	gh := githubtest.NewServer(t)
	gh.RequireToken("test-token")
	gh.SetPermission("alice", "write")
	issue := gh.CreateIssue(repo, "Cluster questions")
	c.e.base += fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    issue: %d\n%s",
		gh.URL()+"/", repo, issue, more)
	c.add(3)
	for _, in := range c.nodes {
		c.start(in)
	}
	return c, gh, issue
}

// TestClusterLeaderKilledGitHubPollingMovesOn: three instances ask on a
// (fake) GitHub issue. The leader, which alone asks and polls GitHub, posts
// a run's question and polls for its answer; it is killed (SIGKILL).
// Another instance takes the lead, finds the question comment already
// there (it does not post it again) and polls in its turn: the answer,
// commented after the kill, resumes the run exactly once.
func TestClusterLeaderKilledGitHubPollingMovesOn(t *testing.T) {
	t.Parallel()
	c, gh, issue := newGitHubCluster(t, "    poll_interval: 1s\n")
	st := c.store()
	ctx := context.Background()
	defer func() {
		if t.Failed() {
			for _, cm := range gh.Comments(repo, issue) {
				t.Logf("comment %d by %s:\n%s", cm.ID, cm.Login, cm.Body)
			}
		}
	}()

	runID := strings.TrimSpace(c.command("submit", "--prompt", "Implement spec X", "--surface", "github"))
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	leader := c.leader(c.nodes...)
	// polls counts the listings of the repository's comments (the poller's
	// request; an Ask's look at its issue is another path) made after t.
	polls := func(after time.Time) int {
		n := 0
		for _, r := range gh.Requests() {
			if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/repos/"+repo+"/issues/comments") && r.At.After(after) {
				n++
			}
		}
		return n
	}
	waitFor(t, "the leader polling GitHub", func() bool { return polls(time.Time{}) > 0 })

	killed := time.Now()
	c.kill(leader)
	// The killed process sends nothing any more: every listing from now on
	// comes from another instance.
	dead := time.Now()
	var rest []*instance
	for _, in := range c.nodes {
		if in != leader {
			rest = append(rest, in)
		}
	}
	next := c.leader(rest...)
	took := time.Since(killed)
	t.Logf("killed the leader %s; %s leads %s later", leader.name, next.name, took.Round(100*time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("%s to take the lead after the leader died, want a few seconds", took)
	}
	waitFor(t, "GitHub polled again, by another instance", func() bool { return polls(dead) >= 2 })
	if r, err := st.Run(ctx, runID); err != nil || r.Status != store.RunWaiting {
		t.Fatalf("run %+v (%v), want still waiting before the answer", r.Status, err)
	}

	gh.AddComment(repo, issue, "alice", "2")
	waitFor(t, "the run done", func() bool {
		r, err := st.Run(ctx, runID)
		return err == nil && r.Status == store.RunDone
	})
	if n := c.e.answerRequests(); n != 1 {
		t.Fatalf("the answer reached the model %d times, want 1", n)
	}
	if qs := gh.Questions(repo); len(qs) != 1 || qs[0].ID != q.ID {
		t.Errorf("question comments %d, want the first one only (not posted again by the new leader)", len(qs))
	}
	sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runID})
	if len(sets) != 1 || sets[0].Response.By != "@alice" || sets[0].Response.Surface != "github" {
		t.Fatalf("stored answer: %+v", sets)
	}
	r, _ := st.Run(ctx, runID)
	if !strings.Contains(r.FinalText, "Implemented with JWT") {
		t.Errorf("final text %q, want the answer's", r.FinalText)
	}
	// The new leader's poller took the answer (a webhook is not set up:
	// polling is the only way in).
	for _, in := range rest {
		if took := strings.Contains(in.out.String(), "github: answer taken"); took != (in == next) {
			t.Errorf("%s took the answer from GitHub: %v, want only the new leader %s", in.name, took, next.name)
		}
	}
}

// TestClusterWebhookAtANonLeader: the leader asks on GitHub and polls only
// every hour; the answer's webhook delivery reaches another instance (as a
// load balancer may send it), where nothing waits for it. That instance
// nudges the others through PostgreSQL, the leader polls at once and takes
// the answer: the run resumes within seconds, the answer delivered once.
func TestClusterWebhookAtANonLeader(t *testing.T) {
	t.Parallel()
	const secret = "hook-secret"
	c, gh, issue := newGitHubCluster(t, "    poll_interval: 1h\n    webhook_secret: "+secret+"\n")
	st := c.store()
	ctx := context.Background()
	defer func() {
		if t.Failed() {
			for _, in := range c.nodes {
				t.Logf("%s:\n%s", in.name, in.out.String())
			}
		}
	}()

	runID := strings.TrimSpace(c.command("submit", "--prompt", "Implement spec X", "--surface", "github"))
	gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	leader := c.leader(c.nodes...)
	var other *instance
	for _, in := range c.nodes {
		if in != leader {
			other = in
			break
		}
	}
	addr := other.addr()

	answer := gh.AddComment(repo, issue, "alice", "2")
	payload := gh.IssueCommentEvent(repo, answer, "created")
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/github", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "delivery-1")
	req.Header.Set("X-Hub-Signature-256", githubtest.Signature(secret, payload))
	delivered := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery to %s (not the leader %s): status %d, want 202", other.name, leader.name, resp.StatusCode)
	}
	waitFor(t, "the answer taken", func() bool {
		sets, err := st.QuestionSets(ctx, store.SetFilter{RunID: runID})
		return err == nil && len(sets) == 1 && sets[0].State != store.SetPending
	})
	took := time.Since(delivered)
	t.Logf("answer taken %v after the delivery to %s (leader %s)", took.Round(time.Millisecond), other.name, leader.name)
	if took > 10*time.Second {
		t.Errorf("answer taken %v after the delivery, want within seconds (the next poll is an hour away)", took)
	}
	waitFor(t, "the run done", func() bool {
		r, err := st.Run(ctx, runID)
		return err == nil && r.Status == store.RunDone
	})
	if n := c.e.answerRequests(); n != 1 {
		t.Fatalf("the answer reached the model %d times, want 1", n)
	}
	sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runID})
	if len(sets) != 1 || sets[0].Response.By != "@alice" || sets[0].Response.Surface != "github" {
		t.Fatalf("stored answer: %+v", sets)
	}
	r, _ := st.Run(ctx, runID)
	if !strings.Contains(r.FinalText, "Implemented with JWT") {
		t.Errorf("final text %q, want the answer's", r.FinalText)
	}
	// The leader's poller took it: the instance the delivery reached has
	// no Ask waiting, and the third one was not involved.
	for _, in := range c.nodes {
		if took := strings.Contains(in.out.String(), "github: answer taken"); took != (in == leader) {
			t.Errorf("%s took the answer from GitHub: %v, want only the leader %s", in.name, took, leader.name)
		}
	}
}

// TestClusterInstancesMigrateOnce: two instances started at the same moment
// on an empty database both come up, and the schema is migrated once:
// schema_migrations holds each version 1..n once (the migrations run under
// an advisory lock; the second instance finds them applied).
func TestClusterInstancesMigrateOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "", standardRules(0)...)
	// Both processes are started before either has opened the database
	// (a process takes far longer to start than this loop).
	for _, in := range c.nodes {
		c.start(in)
	}
	for _, in := range c.nodes {
		waitFor(t, in.name+" serving", func() bool {
			if out := in.out.String(); strings.Contains(out, "migrat") {
				t.Fatalf("%s:\n%s", in.name, out) // it failed to start
			}
			h, ok := c.health(in)
			return ok && h.Status == "ok"
		})
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, distinct, lowest, highest int
	if err := conn.QueryRow(ctx, `SELECT COUNT(*), COUNT(DISTINCT version), MIN(version), MAX(version) FROM schema_migrations`).
		Scan(&rows, &distinct, &lowest, &highest); err != nil {
		t.Fatal(err)
	}
	// 5 is the migration of the cluster's tables (leases, instances, ticks,
	// sessions): at least that many.
	if rows != highest || distinct != rows || lowest != 1 || highest < 5 {
		t.Fatalf("schema_migrations: %d rows (%d versions) from %d to %d, want each version 1..n once", rows, distinct, lowest, highest)
	}
	for _, in := range c.nodes {
		if h, ok := c.health(in); !ok || h.Status != "ok" {
			t.Errorf("%s: healthz %+v (answered: %v), want ok", in.name, h, ok)
		}
		if out := in.out.String(); strings.Contains(out, "migrat") || strings.Contains(out, "level=ERROR") {
			t.Errorf("%s logged a migration problem or an error:\n%s", in.name, out)
		}
	}
	// Both use the schema: a run submitted now is taken and asks.
	runID := strings.TrimSpace(c.command("submit", "--prompt", "Implement spec X", "--surface", "terminal"))
	st := c.store()
	waitFor(t, "the submitted run's question pending", func() bool {
		sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runID, State: []store.SetState{store.SetPending}})
		return len(sets) == 1
	})
}
