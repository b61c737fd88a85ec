package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/notify"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// capSpec writes a spec whose runs may spend perDay together in a day.
func (e *e2e) capSpec(name, perDay string) string {
	e.t.Helper()
	spec := filepath.Join(e.dir, "work", name+".md")
	if err := os.WriteFile(spec, []byte("---\nname: "+name+"\nsurfaces: [terminal]\nmax_cost_usd_per_day: "+perDay+"\n---\nDo the nightly work\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return spec
}

// pendingCapSet is the one pending cap question of run.
func pendingCapSet(t *testing.T, st *store.Store, runID string) store.SetRecord {
	t.Helper()
	sets, err := st.OpenSets(context.Background(), runID)
	if err != nil || len(sets) != 1 || sets[0].State != store.SetPending || sets[0].Set.Kind != questions.KindCap {
		t.Fatalf("open sets of run %s = %+v, %v; want one pending cap question", runID, sets, err)
	}
	return sets[0]
}

// TestSpecDailyCapAsksBeforeTheThirdRun: with max_cost_usd_per_day below
// two runs' cost, two runs spend it; the third starts no agent CLI, waits
// with the cap question (listed by status), and Stop ends it stopped;
// Continue raises the spec's cap for the day once and the run goes on.
func TestSpecDailyCapAsksBeforeTheThirdRun(t *testing.T) {
	t.Parallel()
	for _, choice := range []string{"Stop", "Continue"} {
		t.Run(choice, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, fakeapi.Rule{Reply: fakeapi.Reply{Text: "Nightly work done."}})
			e.writeConfig(fmt.Sprintf("\nspecs:\n  dir: %q\n", filepath.Join(e.dir, "work"))) // status shows the caps of the specs there
			spec := e.capSpec("nightly-deps", "0.001")                                        // each call of the fake costs $0.0008
			for i := range 2 {
				if code, _, _ := e.run("", "run", spec); code != exitOK {
					t.Fatalf("run %d exit %d, want done", i+1, code)
				}
			}
			calls := len(e.fake.Requests())
			// The third run: its terminal has no input, so the run is left
			// waiting on its question (exit 3).
			code, out, _ := e.run("", "run", spec)
			if code != exitWaiting {
				t.Fatalf("third run exit %d, want %d (waiting)", code, exitWaiting)
			}
			if !strings.Contains(out, "the spec nightly-deps has spent $0.0016 of its $0.0010 today: continue?") ||
				!strings.Contains(out, "Raise today's cap by $0.0010, once, and go on") {
				t.Errorf("the terminal was not asked the cap question:\n%s", out)
			}
			if n := len(e.fake.Requests()); n != calls {
				t.Fatalf("the third run called the model %d times: no agent may start past the cap", n-calls)
			}
			st := e.store()
			runs, err := st.ListRuns(context.Background(), store.RunFilter{Spec: "nightly-deps", Status: []store.RunStatus{store.RunWaiting}})
			if err != nil || len(runs) != 1 {
				t.Fatalf("waiting runs = %+v, %v; want the third", runs, err)
			}
			third := runs[0]
			if turns, err := st.Turns(context.Background(), third.ID); err != nil || len(turns) != 0 {
				t.Fatalf("the third run has %d turns (%v); want none", len(turns), err)
			}
			rec := pendingCapSet(t, st, third.ID)
			code, out, _ = e.run("", "status", "--json")
			if code != 0 || !strings.Contains(out, third.ID) || !strings.Contains(out, rec.Set.Questions[0].ID) {
				t.Fatalf("status --json exit %d does not list the waiting run and its cap question:\n%s", code, out)
			}
			var sj struct {
				Spend []spendRow `json:"spend"`
			}
			if err := json.Unmarshal([]byte(out), &sj); err != nil {
				t.Fatal(err)
			}
			if !hasSpend(sj.Spend, "nightly-deps", "day", 0.0016, 0.001) {
				t.Errorf("status --json spend = %+v; want nightly-deps's day at $0.0016 of $0.001", sj.Spend)
			}

			if code, _, _ := e.run("", "answer", rec.Set.Questions[0].ID, choice); code != 0 {
				t.Fatalf("answer exit %d", code)
			}
			code, _, _ = e.run("", "resume", third.ID)
			run, err := st.Run(context.Background(), third.ID)
			if err != nil {
				t.Fatal(err)
			}
			raised, n, err := st.CapRaises(context.Background(), "nightly-deps", "day", startOfDay(time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			if choice == "Stop" {
				if code != exitStopped || run.Status != store.RunStopped || len(e.fake.Requests()) != calls || n != 0 {
					t.Fatalf("after Stop: exit %d, run %s, %d more calls, %d raises; want stopped, none, none", code, run.Status, len(e.fake.Requests())-calls, n)
				}
				return
			}
			if code != exitOK || run.Status != store.RunDone || run.FinalText != "Nightly work done." {
				t.Fatalf("after Continue: exit %d, run %s %q; want done", code, run.Status, run.Error)
			}
			if n != 1 || raised != 0.001 {
				t.Fatalf("after Continue the day's cap was raised %d times by $%v; want once by $0.001", n, raised)
			}
			if sets, _ := st.OpenSets(context.Background(), third.ID); len(sets) != 0 {
				t.Fatalf("the cap question is still open after Continue: %+v", sets)
			}
			// Resuming again (nothing to resume) raises nothing more.
			e.run("", "resume", third.ID)
			if _, n, _ := st.CapRaises(context.Background(), "nightly-deps", "day", startOfDay(time.Now())); n != 1 {
				t.Fatalf("the cap was raised %d times; want once", n)
			}
		})
	}
}

func startOfDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func hasSpend(rows []spendRow, scope, period string, spent, limit float64) bool {
	for _, r := range rows {
		if r.Spec == scope && r.Period == period && abs(r.SpentUSD-spent) < 1e-9 && abs(r.CapUSD-limit) < 1e-9 {
			return true
		}
	}
	return false
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestScheduledSpecOverItsCapAsksOncePerDay: a spec scheduled every second
// with max_cost_usd_per_day below two runs' cost, under serve: two runs
// spend the day's cap, the third asks about it before any CLI starts; the
// ticks while it waits start nothing, and once a person chose Stop every
// later tick of the day is skipped by the cap: one question for the day,
// however many ticks.
func TestScheduledSpecOverItsCapAsksOncePerDay(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeapi.Rule{Reply: fakeapi.Reply{Text: "Nightly work done."}})
	specDir := filepath.Join(e.dir, "specs")
	if err := os.MkdirAll(specDir, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := "---\nname: nightly-deps\nschedule: \"@every 1s\"\nsurfaces: [terminal]\nmax_cost_usd_per_day: 0.001\n---\nDo the nightly work\n"
	if err := os.WriteFile(filepath.Join(specDir, "nightly-deps.md"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := newHookReceiver(t) // the cap question is told once, as cap_reached
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n"+
		"notify:\n  secret: %s\n  webhooks:\n    - url: %s\n      events: [cap_reached]\n", specDir, notifySecret, hook.url))

	srv := startServe(t, e) // specsdir_e2e_test.go; its terminal: nobody types
	base, out := srv.base, srv.out
	st := e.store()
	bg := context.Background()
	var asked store.SetRecord
	waitFor(t, "a run to ask about the cap", func() bool {
		sets, err := st.CapSets(bg, "nightly-deps", startOfDay(time.Now()))
		if err != nil || len(sets) == 0 {
			return false
		}
		asked = sets[0]
		return true
	})
	calls := len(e.fake.Requests())
	if code, _, _ := e.run("", "answer", asked.Set.Questions[0].ID, "Stop"); code != 0 {
		t.Fatalf("answer exit %d", code)
	}
	waitFor(t, "the run to stop", func() bool {
		run, err := st.Run(bg, asked.Set.RunID)
		return err == nil && run.Status == store.RunStopped
	})
	waitFor(t, "three ticks skipped by the cap", func() bool {
		return strings.Count(out.String(), "tick skipped by a spend cap") >= 3
	})
	runs, err := st.ListRuns(bg, store.RunFilter{Spec: "nightly-deps"})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[store.RunStatus]int{}
	for _, r := range runs {
		counts[r.Status]++
	}
	if len(runs) != 3 || counts[store.RunDone] != 2 || counts[store.RunStopped] != 1 {
		t.Fatalf("runs of the spec: %v; want two done and the one that asked, stopped", counts)
	}
	if sets, err := st.CapSets(bg, "nightly-deps", startOfDay(time.Now())); err != nil || len(sets) != 1 {
		t.Fatalf("%d cap questions today (%v); want one", len(sets), err)
	}
	if n := len(e.fake.Requests()); n != calls {
		t.Fatalf("the model was called %d times after the cap was reached", n-calls)
	}
	if code, text, _ := e.run("", "status", "--json"); code != 0 || !strings.Contains(text, `"reason": "spend_cap"`) {
		t.Errorf("status --json exit %d does not count the ticks skipped by the cap:\n%s", code, text)
	}
	waitFor(t, "the cap_reached event", func() bool { return len(hook.of(notify.CapReached)) > 0 })
	if got := hook.of(notify.CapReached); len(got) != 1 || got[0].Spec != "nightly-deps" || got[0].RunID != asked.Set.RunID || len(hook.problems()) > 0 {
		t.Errorf("cap_reached events %+v (problems %v); want one for run %s of nightly-deps", got, hook.problems(), asked.Set.RunID)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`orchestrator_spend_usd{period="day"} 0.0016`, `orchestrator_spend_cap_usd{period="day"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	code, text, _ := e.run("", "status")
	shown := false
	for _, l := range strings.Split(text, "\n") {
		shown = shown || strings.Join(strings.Fields(l), " ") == "nightly-deps today $0.0016 $0.0010"
	}
	if code != 0 || !strings.Contains(text, "SPEND") || !shown {
		t.Errorf("status exit %d does not show the spec's spend against its cap:\n%s", code, text)
	}
}
