-- What a run's worktree was when it was added (gitguard.go): the
-- repository it belongs to, the remote's URLs, the checkout's git
-- configuration and hooks, checked before the orchestrator's own git
-- commands commit and push.
CREATE TABLE git_guards (
	run_id     TEXT PRIMARY KEY REFERENCES runs(id),
	common_dir TEXT NOT NULL,
	git_dir    TEXT NOT NULL,
	dot_git    TEXT NOT NULL,
	fetch_url  TEXT NOT NULL DEFAULT '',
	push_url   TEXT NOT NULL DEFAULT '',
	snapshot   BLOB NOT NULL,
	checked    INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER NOT NULL
);
