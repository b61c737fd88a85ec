-- The feed of question sets (feed.go): seq is the position of a set's
-- last change (made, answered in part or whole, its state, its run's
-- status while it is open), one higher than any before it; a watcher
-- reads the sets above the last position it saw, by the index, instead
-- of a query term per set it waits on. Existing sets get positions in the
-- order they were made; the triggers below give the next ones, in the
-- statement of the change.
ALTER TABLE question_sets ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE question_sets SET seq = o.n
	FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY created_at, id) AS n FROM question_sets) o
	WHERE o.id = question_sets.id;
CREATE UNIQUE INDEX question_sets_seq ON question_sets(seq);
-- The next position. The advisory lock (the transaction's, fixed per
-- schema) makes the writers of positions take turns until their commit:
-- a position is above every one committed before, and commits after
-- them. A sequence would hand out numbers in the order transactions ask,
-- not the order they commit. The functions keep the search path of the
-- migration: the store's schema.
CREATE FUNCTION set_feed_next() RETURNS BIGINT LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended('orchestrator set feed ' || current_schema(), 0));
	RETURN (SELECT COALESCE(MAX(seq), 0) + 1 FROM question_sets);
END
$$;
CREATE FUNCTION set_feed_position() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	NEW.seq := set_feed_next();
	RETURN NEW;
END
$$;
CREATE TRIGGER question_sets_feed_insert BEFORE INSERT ON question_sets
	FOR EACH ROW EXECUTE FUNCTION set_feed_position();
CREATE TRIGGER question_sets_feed_state BEFORE UPDATE OF state ON question_sets
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION set_feed_position();
CREATE FUNCTION set_feed_answer() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	UPDATE question_sets SET seq = set_feed_next() WHERE id = NEW.set_id;
	RETURN NULL;
END
$$;
CREATE TRIGGER answers_feed AFTER INSERT ON answers
	FOR EACH ROW EXECUTE FUNCTION set_feed_answer();
-- A position each for the run's open sets, one at a time.
CREATE FUNCTION set_feed_run() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
	sid TEXT;
BEGIN
	FOR sid IN SELECT id FROM question_sets WHERE run_id = NEW.id AND state IN ('pending', 'answered') ORDER BY id LOOP
		UPDATE question_sets SET seq = set_feed_next() WHERE id = sid;
	END LOOP;
	RETURN NULL;
END
$$;
CREATE TRIGGER runs_feed_status AFTER UPDATE OF status ON runs
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION set_feed_run();
-- The waiting sets by ID (WaitingSets' pages) and the answered sets
-- (ClaimableRuns) are read by state; (state, id) serves both and what
-- (state) alone served.
CREATE INDEX question_sets_state_id ON question_sets(state, id);
DROP INDEX question_sets_state;
