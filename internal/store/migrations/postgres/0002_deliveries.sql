-- Delivery of a run's work through git (delivery.go).
CREATE TABLE deliveries (
	run_id      TEXT PRIMARY KEY REFERENCES runs(id),
	repo_dir    TEXT NOT NULL,
	worktree    TEXT NOT NULL,
	branch      TEXT NOT NULL,
	base        TEXT NOT NULL DEFAULT '',
	base_commit TEXT NOT NULL DEFAULT '',
	state       TEXT NOT NULL,
	commit_sha  TEXT NOT NULL DEFAULT '',
	pushed      BIGINT NOT NULL DEFAULT 0,
	pr_number   BIGINT NOT NULL DEFAULT 0,
	pr_url      TEXT NOT NULL DEFAULT '',
	commented   BIGINT NOT NULL DEFAULT 0,
	note        TEXT NOT NULL DEFAULT '',
	removed_at  BIGINT NOT NULL DEFAULT 0,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
