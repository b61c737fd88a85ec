-- Feedback on a run (followups.go): a review comment on its pull request,
-- or `orchestrator followup`. Each is recorded once under the key of the
-- event that brought it, and handed to the model by exactly one turn
-- (turn: 0 while pending, then the turn that carries it).
CREATE TABLE follow_ups (
	id         TEXT PRIMARY KEY,
	run_id     TEXT NOT NULL REFERENCES runs(id),
	event_key  TEXT NOT NULL UNIQUE,
	who        TEXT NOT NULL DEFAULT '',
	surface    TEXT NOT NULL DEFAULT '',
	body       TEXT NOT NULL,
	at         INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	turn       INTEGER NOT NULL DEFAULT 0,
	claimed_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX follow_ups_run ON follow_ups(run_id, turn);
