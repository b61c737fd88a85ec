package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSchedules is a Schedules in memory.
type fakeSchedules struct {
	mu   sync.Mutex
	list []Schedule
	by   []string
}

func (f *fakeSchedules) Schedules(context.Context) ([]Schedule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Schedule(nil), f.list...), nil
}

func (f *fakeSchedules) SetPaused(_ context.Context, spec string, paused bool, by string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.list {
		if f.list[i].Spec == spec {
			f.list[i].Paused = paused
			f.list[i].Reason, f.list[i].Detail, f.list[i].PausedAt = "by_hand", "paused by "+by, time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
			f.by = append(f.by, by)
			return nil
		}
	}
	return fmt.Errorf("spec %s: %w", spec, ErrNotFound)
}

// TestSchedulesPauseAndResumeButtons: the schedules page shows a Resume
// button on a paused spec (with why) and Pause on the others; the forms
// need the CSRF token; the API does the same; an unknown spec is 404.
func TestSchedulesPauseAndResumeButtons(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if r := f.do(nil, "GET", "/schedules", "", bearer(aliceToken)); r.status != http.StatusNotFound {
		t.Fatalf("schedules without Schedules: %d", r.status)
	}
	fs := &fakeSchedules{list: []Schedule{
		{Spec: "nightly", Schedule: "0 3 * * *", Paused: true, Reason: "failures", Detail: "its last 3 runs failed: <b>boom</b>", PausedAt: time.Now()},
		{Spec: "weekly", Schedule: "0 4 * * 1"},
	}}
	f = newFixture(t, func(c *Config) { c.Schedules = fs })
	page := f.do(nil, "GET", "/schedules", "", bearer(aliceToken))
	if page.status != 200 || !strings.Contains(page.body, `id="resume-nightly"`) || !strings.Contains(page.body, `id="pause-weekly"`) ||
		!strings.Contains(page.body, "after its runs failed") || strings.Contains(page.body, "<b>boom") || !strings.Contains(page.body, `href="/schedules"`) {
		t.Fatalf("schedules page: %d\n%s", page.status, page.body)
	}
	c, csrf := f.signIn(aliceToken)
	body, h := form(url.Values{"csrf": {"wrong"}})
	if r := f.do(c, "POST", "/schedules/nightly/resume", body, h); r.status != http.StatusForbidden {
		t.Fatalf("resume form without the token: %d", r.status)
	}
	body, h = form(url.Values{"csrf": {csrf}})
	if r := f.do(c, "POST", "/schedules/nightly/resume", body, h); r.status != 200 || !strings.Contains(r.body, "Schedule of nightly resumed") ||
		!strings.Contains(r.body, `id="pause-nightly"`) {
		t.Fatalf("resume form: %d\n%s", r.status, r.body)
	}
	r := f.do(nil, "POST", "/api/schedules/weekly/pause", "", bearer(aliceToken))
	got := decode[struct {
		V        int         `json:"v"`
		Schedule apiSchedule `json:"schedule"`
	}](t, r)
	if r.status != 200 || !got.Schedule.Paused || got.Schedule.Reason != "by_hand" || got.Schedule.PausedAt == nil {
		t.Fatalf("api pause: %d %s", r.status, r.body)
	}
	if r := f.do(nil, "POST", "/api/schedules/nope/pause", "", bearer(aliceToken)); r.status != http.StatusNotFound {
		t.Fatalf("pause unknown: %d", r.status)
	}
	list := decode[struct {
		Schedules []apiSchedule `json:"schedules"`
	}](t, f.do(nil, "GET", "/api/schedules", "", bearer(aliceToken)))
	if len(list.Schedules) != 2 || list.Schedules[0].Paused || !list.Schedules[1].Paused {
		t.Fatalf("api schedules = %+v", list)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if strings.Join(fs.by, ",") != "alice,alice" {
		t.Errorf("set by %v", fs.by)
	}
}
