-- The same question answered together (groups.go, issue 28): a set's
-- fingerprint (questions.Fingerprint; '' for a set that is never grouped,
-- and for the sets made before it) and the index that finds the pending
-- sets of a fingerprint in one look; and the shared decisions, each set an
-- answer given for a whole group was stored in, by the decision's ID.
ALTER TABLE question_sets ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
CREATE INDEX question_sets_fingerprint ON question_sets(fingerprint, state, created_at, id) WHERE fingerprint <> '';
CREATE TABLE group_answers (
	group_id    TEXT NOT NULL,
	set_id      TEXT NOT NULL REFERENCES question_sets(id),
	answered_by TEXT NOT NULL,
	surface     TEXT NOT NULL,
	at          INTEGER NOT NULL,
	PRIMARY KEY (group_id, set_id)
);
CREATE INDEX group_answers_set ON group_answers(set_id);
