-- Remembered decisions (rules.go): an answer or approval a person kept
-- for a scope (a spec, a repository, everything) until it expires or is
-- revoked, and every use of one. A rule answers a question set whose
-- fingerprint is its own (an approval's: the tool, matched by pattern)
-- when the set is stored, before anyone is asked.
CREATE TABLE rules (
	id          TEXT PRIMARY KEY,
	scope       TEXT NOT NULL,
	scope_value TEXT NOT NULL DEFAULT '',
	kind        TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	pattern     TEXT NOT NULL DEFAULT '',
	answers     TEXT NOT NULL,
	summary     TEXT NOT NULL DEFAULT '',
	made_by     TEXT NOT NULL,
	surface     TEXT NOT NULL DEFAULT '',
	from_run    TEXT NOT NULL DEFAULT '',
	from_set    TEXT NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	revoked_at  INTEGER NOT NULL DEFAULT 0,
	revoked_by  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX rules_fingerprint ON rules(fingerprint);
CREATE TABLE rule_uses (
	rule_id TEXT NOT NULL REFERENCES rules(id),
	run_id  TEXT NOT NULL,
	set_id  TEXT NOT NULL,
	at      INTEGER NOT NULL,
	PRIMARY KEY (rule_id, set_id)
);
CREATE INDEX rule_uses_run ON rule_uses(run_id);
