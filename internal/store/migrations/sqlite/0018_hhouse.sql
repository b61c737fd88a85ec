-- Surface refs (sets.go) are kept by retention (retention.go): a ref
-- stored for a run (run_id) goes with the run; one of no run goes once
-- it has not been written for the retention period (updated_at). The
-- refs stored before this migration know neither: their age starts now.
ALTER TABLE surface_refs ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE surface_refs ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
UPDATE surface_refs SET updated_at = CAST((julianday('now') - 2440587.5) * 86400 AS INTEGER) * 1000000000;
CREATE INDEX surface_refs_run ON surface_refs(run_id);
CREATE INDEX surface_refs_updated ON surface_refs(updated_at);
