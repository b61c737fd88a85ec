-- Offers to remember an answer (remember_offers.go): after a person's
-- answer closed a set on Discord or Slack, they are offered a button that
-- keeps it as a rule. The offer is kept here, so that a click after a
-- restart or on another instance still takes it, at most once: the rule is
-- made and the offer marked taken in one transaction.
CREATE TABLE remember_offers (
	surface    TEXT NOT NULL,
	offer_key  TEXT NOT NULL,
	run_id     TEXT NOT NULL,
	set_id     TEXT NOT NULL,
	user_id    TEXT NOT NULL,
	made_by    TEXT NOT NULL,
	remember   TEXT NOT NULL,
	expires_at BIGINT NOT NULL,
	taken_at   BIGINT NOT NULL DEFAULT 0,
	rule_id    TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (surface, offer_key)
);
CREATE INDEX remember_offers_run ON remember_offers(run_id);
