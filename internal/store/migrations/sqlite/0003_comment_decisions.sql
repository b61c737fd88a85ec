-- What became of each comment read as a possible answer (GitHub).
CREATE TABLE comment_decisions (
	key        TEXT PRIMARY KEY,
	decision   TEXT NOT NULL,
	decided_at INTEGER NOT NULL
);
