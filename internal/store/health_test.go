package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSchedulePauseAndFailureStreak: three failed runs in a row make a
// streak; a pause holds for another open of the store (another instance);
// a resume forgives the failures before it.
func TestSchedulePauseAndFailureStreak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	clock := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	s.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	mk := func(id string, st RunStatus) {
		t.Helper()
		if _, err := s.CreateRun(ctx, Run{ID: id, Spec: "nightly", Prompt: "p", Surfaces: []string{"terminal"}}); err != nil {
			t.Fatal(err)
		}
		why := "boom " + id
		if err := s.UpdateRun(ctx, id, RunUpdate{Status: st, Error: &why}); err != nil {
			t.Fatal(err)
		}
	}
	mk("r1", RunFailed)
	mk("r2", RunDone)
	mk("r3", RunFailed)
	mk("r4", RunFailed)
	if got, err := s.FailureStreak(ctx, "nightly", 3); err != nil || got != nil {
		t.Fatalf("streak after a done run = %v, %v", got, err)
	}
	mk("r5", RunFailed)
	got, err := s.FailureStreak(ctx, "nightly", 3)
	if err != nil || len(got) != 3 || got[0].ID != "r5" || got[2].ID != "r3" || got[0].Error != "boom r5" {
		t.Fatalf("streak = %+v, %v", got, err)
	}
	if ok, err := s.PauseSchedule(ctx, SchedulePause{Spec: "nightly", Reason: PauseFailures, Detail: "3 failed"}); err != nil || !ok {
		t.Fatalf("pause = %v, %v", ok, err)
	}
	if ok, err := s.PauseSchedule(ctx, SchedulePause{Spec: "nightly", Reason: PauseByHand}); err != nil || ok {
		t.Fatalf("second pause = %v, %v", ok, err)
	}
	other := open(t, dir) // another instance
	other.now = s.now
	if p, err := other.ScheduleIsPaused(ctx, "nightly"); err != nil || !p {
		t.Fatalf("paused at the other = %v, %v", p, err)
	}
	list, err := other.PausedSchedules(ctx)
	if err != nil || len(list) != 1 || list[0].Reason != PauseFailures || list[0].Detail != "3 failed" {
		t.Fatalf("paused list = %+v, %v", list, err)
	}
	if ok, err := other.ResumeSchedule(ctx, "nightly"); err != nil || !ok {
		t.Fatalf("resume = %v, %v", ok, err)
	}
	if ok, err := other.ResumeSchedule(ctx, "nightly"); err != nil || ok {
		t.Fatalf("second resume = %v, %v", ok, err)
	}
	if p, err := s.ScheduleIsPaused(ctx, "nightly"); err != nil || p {
		t.Fatalf("paused after resume = %v, %v", p, err)
	}
	if got, err := s.FailureStreak(ctx, "nightly", 3); err != nil || got != nil {
		t.Fatalf("streak after resume = %v, %v", got, err)
	}
	if ok, err := s.ResumeSchedule(ctx, "never-paused"); err != nil || ok {
		t.Fatalf("resume of a spec never paused = %v, %v", ok, err)
	}
}

// TestScheduleSkipsCountAndNoticeOncePerDay: skipped ticks add up by
// reason; a notice is due once a day per spec, taken by one instance.
func TestScheduleSkipsCountAndNoticeOncePerDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	now := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	due, err := s.RecordSkips(ctx, "nightly", SkipMissed, 5, now.Add(-time.Minute))
	if err != nil || !due {
		t.Fatalf("first skips: due %v, %v", due, err)
	}
	if ok, err := s.SkipsNoticed(ctx, "nightly", now); err != nil || !ok {
		t.Fatalf("noticed = %v, %v", ok, err)
	}
	if ok, err := s.SkipsNoticed(ctx, "nightly", now); err != nil || ok {
		t.Fatalf("noticed twice = %v, %v", ok, err)
	}
	if due, err := s.RecordSkips(ctx, "nightly", SkipBusy, 1, now); err != nil || due {
		t.Fatalf("skips in the same day: due %v, %v", due, err)
	}
	if _, err := s.RecordSkips(ctx, "nightly", SkipBusy, 2, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	list, err := s.ScheduleSkips(ctx)
	if err != nil || len(list) != 2 || list[0].Reason != SkipBusy || list[0].Count != 3 || !list[0].LastTick.Equal(now) ||
		list[1].Reason != SkipMissed || list[1].Count != 5 {
		t.Fatalf("skips = %+v, %v", list, err)
	}
	now = now.Add(25 * time.Hour)
	if due, err := s.RecordSkips(ctx, "nightly", SkipBusy, 1, now); err != nil || !due {
		t.Fatalf("skips a day later: due %v, %v", due, err)
	}
}

// TestNotificationOutbox: one notification per key; a failed attempt waits
// for its next time; a delivered one is due no more.
func TestNotificationOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	now := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	for i := range 2 {
		added, err := s.AddNotification(ctx, Notification{ID: fmt.Sprintf("d%d", i), Key: "r1/done/hook0", URL: "https://example.com/h", Body: []byte(`{"a":1}`)})
		if err != nil || added != (i == 0) {
			t.Fatalf("add %d: %v, %v", i, added, err)
		}
	}
	due, err := s.DueNotifications(ctx, now, 10)
	if err != nil || len(due) != 1 || due[0].ID != "d0" || string(due[0].Body) != `{"a":1}` {
		t.Fatalf("due = %+v, %v", due, err)
	}
	if err := s.NotificationFailed(ctx, "d0", "500", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if due, err := s.DueNotifications(ctx, now, 10); err != nil || len(due) != 0 {
		t.Fatalf("due before the retry = %+v, %v", due, err)
	}
	due, err = s.DueNotifications(ctx, now.Add(time.Minute), 10)
	if err != nil || len(due) != 1 || due[0].Attempts != 1 || due[0].LastError != "500" {
		t.Fatalf("due at the retry = %+v, %v", due, err)
	}
	// One instance takes it for an attempt; another that read it too
	// does not, and it is due to nobody meanwhile.
	if ok, err := s.ClaimNotification(ctx, due[0], now.Add(3*time.Minute)); err != nil || !ok {
		t.Fatalf("claim = %v, %v", ok, err)
	}
	if ok, err := s.ClaimNotification(ctx, due[0], now.Add(3*time.Minute)); err != nil || ok {
		t.Fatalf("second claim = %v, %v", ok, err)
	}
	if again, err := s.DueNotifications(ctx, now.Add(2*time.Minute), 10); err != nil || len(again) != 0 {
		t.Fatalf("due while claimed = %+v, %v", again, err)
	}
	if err := s.NotificationDelivered(ctx, "d0", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if due, err := s.DueNotifications(ctx, now.Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("due after delivery = %+v, %v", due, err)
	}
	// Given up: never due again; gc removes it and the delivered one.
	if _, err := s.AddNotification(ctx, Notification{ID: "d9", Key: "r2/failed/hook0", URL: "https://example.com/h", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.NotificationFailed(ctx, "d9", "410", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if due, err := s.DueNotifications(ctx, now.AddDate(10, 0, 0), 10); err != nil || len(due) != 0 {
		t.Fatalf("due after giving up = %+v, %v", due, err)
	}
	if n, err := s.PurgeNotifications(ctx, now); err != nil || n != 0 {
		t.Fatalf("purge before they ended = %d, %v", n, err)
	}
	if n, err := s.PurgeNotifications(ctx, now.Add(2*time.Minute)); err != nil || n != 2 {
		t.Fatalf("purge = %d, %v", n, err)
	}
}
