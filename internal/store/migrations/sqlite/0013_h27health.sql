-- Schedule health and notifications (health.go, outbox.go).
-- schedule_pauses: a spec whose schedule is paused (by hand, or after
-- its last runs failed) has a row with paused = 1; its ticks start no
-- run. Resuming keeps the row with paused = 0 and resumed_at, so only the
-- failures after it count towards the next pause.
CREATE TABLE schedule_pauses (
	spec       TEXT PRIMARY KEY,
	paused     INTEGER NOT NULL,
	reason     TEXT NOT NULL,
	detail     TEXT NOT NULL,
	by_who     TEXT NOT NULL,
	paused_at  INTEGER NOT NULL,
	resumed_at INTEGER NOT NULL DEFAULT 0
);
-- schedule_skips: ticks that started no run, by spec and reason
-- ("missed": no serve ran; "busy": the previous run still ran or waited).
-- noticed_at is when the last notice about them went out (once a day).
CREATE TABLE schedule_skips (
	spec       TEXT NOT NULL,
	reason     TEXT NOT NULL,
	count      INTEGER NOT NULL,
	last_tick  INTEGER NOT NULL,
	noticed_at INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (spec, reason)
);
-- notify_outbox: one row per event and webhook; id is the delivery ID
-- the receiver sees, event_key makes an event's delivery unique.
CREATE TABLE notify_outbox (
	id           TEXT PRIMARY KEY,
	event_key    TEXT NOT NULL UNIQUE,
	url          TEXT NOT NULL,
	body         TEXT NOT NULL,
	attempts     INTEGER NOT NULL DEFAULT 0,
	next_at      INTEGER NOT NULL,
	delivered_at INTEGER NOT NULL DEFAULT 0,
	last_error   TEXT NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL
);
CREATE INDEX notify_outbox_due ON notify_outbox(delivered_at, next_at);
