-- The events outside the orchestrator that started runs, or were refused
-- (triggers.go): a GitHub issue comment, a label put on an issue. Its key
-- names the event whatever delivered it (a webhook, a redelivery, a poll,
-- another instance), so one event starts one run: the row and the run are
-- made in one transaction. started_run is not run_id: the row outlives the
-- run's purge (retention), so an old event redelivered starts nothing.
CREATE TABLE triggers (
	key         TEXT PRIMARY KEY,
	repo        TEXT NOT NULL,
	origin      TEXT NOT NULL,
	outcome     TEXT NOT NULL,
	started_run TEXT NOT NULL DEFAULT '',
	created_at  BIGINT NOT NULL
);
CREATE INDEX triggers_repo_time ON triggers (repo, created_at);
CREATE INDEX triggers_started_run ON triggers (started_run);
