-- Events taken over HTTP and acknowledged before their work is done
-- (inbox.go): a Slack Events API app_mention is kept here before Slack is
-- answered 200, and dropped once its work ran; serve hands what is left
-- (a crash, a shutdown mid-work) to the surface again when it starts. The
-- work is keyed by the event (triggers), so doing it twice starts one run.
CREATE TABLE inbox (
	key        TEXT PRIMARY KEY,
	source     TEXT NOT NULL,
	body       TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX inbox_source_time ON inbox (source, created_at);
