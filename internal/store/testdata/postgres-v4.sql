--
-- PostgreSQL database dump
--


-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: -; Type: SCHEMA; Schema: -; Owner: -
--



SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: answers; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE answers (
    set_id text NOT NULL,
    question_id text NOT NULL,
    body text NOT NULL,
    answered_by text NOT NULL,
    surface text NOT NULL,
    at bigint NOT NULL
);


--
-- Name: comment_decisions; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE comment_decisions (
    key text NOT NULL,
    decision text NOT NULL,
    decided_at bigint NOT NULL
);


--
-- Name: deliveries; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE deliveries (
    run_id text NOT NULL,
    repo_dir text NOT NULL,
    worktree text NOT NULL,
    branch text NOT NULL,
    base text DEFAULT ''::text NOT NULL,
    base_commit text DEFAULT ''::text NOT NULL,
    state text NOT NULL,
    commit_sha text DEFAULT ''::text NOT NULL,
    pushed bigint DEFAULT 0 NOT NULL,
    pr_number bigint DEFAULT 0 NOT NULL,
    pr_url text DEFAULT ''::text NOT NULL,
    commented bigint DEFAULT 0 NOT NULL,
    note text DEFAULT ''::text NOT NULL,
    removed_at bigint DEFAULT 0 NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: question_sets; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE question_sets (
    id text NOT NULL,
    run_id text NOT NULL,
    turn bigint NOT NULL,
    state text NOT NULL,
    body text NOT NULL,
    surfaces text DEFAULT '[]'::text NOT NULL,
    created_at bigint NOT NULL,
    answered_at bigint DEFAULT 0 NOT NULL,
    claimed_at bigint DEFAULT 0 NOT NULL,
    resumed_at bigint DEFAULT 0 NOT NULL,
    reminded_at bigint DEFAULT 0 NOT NULL,
    escalated_at bigint DEFAULT 0 NOT NULL,
    kind text DEFAULT 'marker'::text NOT NULL
);


--
-- Name: questions; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE questions (
    id text NOT NULL,
    set_id text NOT NULL,
    "position" bigint NOT NULL
);


--
-- Name: run_policies; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE run_policies (
    run_id text NOT NULL,
    policy text NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: run_rules; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE run_rules (
    run_id text NOT NULL,
    rule text NOT NULL,
    created_at bigint NOT NULL
);


--
-- Name: runs; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE runs (
    id text NOT NULL,
    spec text DEFAULT ''::text NOT NULL,
    title text DEFAULT ''::text NOT NULL,
    prompt text NOT NULL,
    workdir text DEFAULT ''::text NOT NULL,
    surfaces text DEFAULT '[]'::text NOT NULL,
    options text DEFAULT '{}'::text NOT NULL,
    status text NOT NULL,
    session_id text DEFAULT ''::text NOT NULL,
    error text DEFAULT ''::text NOT NULL,
    final_text text DEFAULT ''::text NOT NULL,
    cost_usd double precision DEFAULT 0 NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: schedule; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE schedule (
    spec text NOT NULL,
    last_run bigint NOT NULL
);


--
-- Name: schema_migrations; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE schema_migrations (
    version bigint NOT NULL,
    applied_at bigint NOT NULL
);


--
-- Name: surface_refs; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE surface_refs (
    surface text NOT NULL,
    key text NOT NULL,
    value text NOT NULL
);


--
-- Name: tool_calls; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE tool_calls (
    tool_use_id text NOT NULL,
    run_id text NOT NULL,
    set_id text DEFAULT ''::text NOT NULL,
    kind text NOT NULL,
    tool text NOT NULL,
    input text DEFAULT ''::text NOT NULL,
    decision text DEFAULT ''::text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    updated_input text DEFAULT ''::text NOT NULL,
    decided_by text DEFAULT ''::text NOT NULL,
    deferred bigint DEFAULT 0 NOT NULL,
    created_at bigint NOT NULL,
    decided_at bigint DEFAULT 0 NOT NULL,
    used_at bigint DEFAULT 0 NOT NULL
);


--
-- Name: turns; Type: TABLE; Schema: -; Owner: -
--

CREATE TABLE turns (
    run_id text NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    prompt text NOT NULL,
    set_id text DEFAULT ''::text NOT NULL,
    session_id text DEFAULT ''::text NOT NULL,
    resume bigint DEFAULT 0 NOT NULL,
    transcript_path text DEFAULT ''::text NOT NULL,
    finished bigint DEFAULT 0 NOT NULL,
    status text DEFAULT ''::text NOT NULL,
    category text DEFAULT ''::text NOT NULL,
    error text DEFAULT ''::text NOT NULL,
    cost_usd double precision DEFAULT 0 NOT NULL,
    input_tokens bigint DEFAULT 0 NOT NULL,
    output_tokens bigint DEFAULT 0 NOT NULL,
    num_turns bigint DEFAULT 0 NOT NULL,
    question_error text DEFAULT ''::text NOT NULL,
    started_at bigint NOT NULL,
    finished_at bigint DEFAULT 0 NOT NULL
);


--
-- Data for Name: answers; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO answers VALUES ('old-1-s1', 'qa', '{"question_id":"qa","labels":["A"]}', '@octocat', 'github', 1795000000000000005);


--
-- Data for Name: comment_decisions; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO comment_decisions VALUES ('github:o/r#42:1001', 'answer', 1795000000000000006);


--
-- Data for Name: deliveries; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO deliveries VALUES ('old-2', '/srv/repo', '/srv/state/worktrees/old-2', 'orchestrator/old-2', 'main', '1111111111111111111111111111111111111111', 'opened', '2222222222222222222222222222222222222222', 1, 7, 'https://github.com/o/r/pull/7', 1, '', 0, 1795000000000000002, 1795000000000000003);


--
-- Data for Name: question_sets; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO question_sets VALUES ('old-1-s1', 'old-1', 1, 'pending', '{"id":"old-1-s1","run_id":"old-1","turn":1,"title":"Nightly","questions":[{"id":"qa","text":"Which one?","options":[{"label":"A"},{"label":"B"}]},{"id":"qb","text":"Why?"}]}', '["terminal","github"]', 1795000000000000004, 0, 0, 0, 0, 0, 'marker');


--
-- Data for Name: questions; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO questions VALUES ('qa', 'old-1-s1', 0);
INSERT INTO questions VALUES ('qb', 'old-1-s1', 1);


--
-- Data for Name: run_policies; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO run_policies VALUES ('old-1', '{"ask":["Bash"]}', 1795000000000000001);


--
-- Data for Name: run_rules; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO run_rules VALUES ('old-1', 'Bash(make:*)', 1795000000000000001);


--
-- Data for Name: runs; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO runs VALUES ('old-1', 'nightly', 'Nightly', 'tidy the docs', '/srv/work/old-1', '["terminal","github"]', '{"model":"sonnet"}', 'waiting', 'sess-old-1', '', '', 0.25, 1795000000000000000, 1795000000000000001);
INSERT INTO runs VALUES ('old-2', '', 'fix it', 'fix it', '/srv/work/old-2', '["terminal"]', '{}', 'done', 'sess-old-2', '', 'Fixed.', 1.5, 1795000000000000002, 1795000000000000003);


--
-- Data for Name: schedule; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO schedule VALUES ('nightly', 1795000000000000000);


--
-- Data for Name: schema_migrations; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO schema_migrations VALUES (1, 1795723651007939781);
INSERT INTO schema_migrations VALUES (2, 1795723651023139061);
INSERT INTO schema_migrations VALUES (3, 1795723651026356700);
INSERT INTO schema_migrations VALUES (4, 1795723651040341908);


--
-- Data for Name: surface_refs; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO surface_refs VALUES ('github', 'issue:old-1', '42');


--
-- Data for Name: tool_calls; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO tool_calls VALUES ('toolu_01', 'old-1', '', 'approval', 'Bash', '{"command":"make test"}', 'allow', '', '', 'policy: Bash(make:*)', 0, 1795000000000000001, 1795000000000000001, 1795000000000000002);


--
-- Data for Name: turns; Type: TABLE DATA; Schema: -; Owner: -
--

INSERT INTO turns VALUES ('old-1', 1, 'start', 'tidy the docs', '', 'sess-old-1', 0, '', 1, 'success', '', '', 0.25, 1200, 340, 3, '', 1795000000000000000, 1795000000000000004);
INSERT INTO turns VALUES ('old-2', 1, 'start', 'fix it', '', 'sess-old-2', 0, '', 1, 'success', '', '', 1.5, 900, 100, 2, '', 1795000000000000002, 1795000000000000003);


--
-- Name: answers answers_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY answers
    ADD CONSTRAINT answers_pkey PRIMARY KEY (set_id, question_id);


--
-- Name: comment_decisions comment_decisions_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY comment_decisions
    ADD CONSTRAINT comment_decisions_pkey PRIMARY KEY (key);


--
-- Name: deliveries deliveries_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY deliveries
    ADD CONSTRAINT deliveries_pkey PRIMARY KEY (run_id);


--
-- Name: question_sets question_sets_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY question_sets
    ADD CONSTRAINT question_sets_pkey PRIMARY KEY (id);


--
-- Name: questions questions_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY questions
    ADD CONSTRAINT questions_pkey PRIMARY KEY (set_id, id);


--
-- Name: run_policies run_policies_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY run_policies
    ADD CONSTRAINT run_policies_pkey PRIMARY KEY (run_id);


--
-- Name: run_rules run_rules_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY run_rules
    ADD CONSTRAINT run_rules_pkey PRIMARY KEY (run_id, rule);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);


--
-- Name: schedule schedule_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY schedule
    ADD CONSTRAINT schedule_pkey PRIMARY KEY (spec);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: surface_refs surface_refs_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY surface_refs
    ADD CONSTRAINT surface_refs_pkey PRIMARY KEY (surface, key);


--
-- Name: tool_calls tool_calls_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY tool_calls
    ADD CONSTRAINT tool_calls_pkey PRIMARY KEY (tool_use_id);


--
-- Name: turns turns_pkey; Type: CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY turns
    ADD CONSTRAINT turns_pkey PRIMARY KEY (run_id, seq);


--
-- Name: question_sets_run; Type: INDEX; Schema: -; Owner: -
--

CREATE INDEX question_sets_run ON question_sets USING btree (run_id, state);


--
-- Name: question_sets_state; Type: INDEX; Schema: -; Owner: -
--

CREATE INDEX question_sets_state ON question_sets USING btree (state);


--
-- Name: questions_id; Type: INDEX; Schema: -; Owner: -
--

CREATE INDEX questions_id ON questions USING btree (id);


--
-- Name: runs_spec; Type: INDEX; Schema: -; Owner: -
--

CREATE INDEX runs_spec ON runs USING btree (spec, created_at);


--
-- Name: runs_status; Type: INDEX; Schema: -; Owner: -
--

CREATE INDEX runs_status ON runs USING btree (status);


--
-- Name: tool_calls_run; Type: INDEX; Schema: -; Owner: -
--

CREATE INDEX tool_calls_run ON tool_calls USING btree (run_id);


--
-- Name: answers answers_set_id_fkey; Type: FK CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY answers
    ADD CONSTRAINT answers_set_id_fkey FOREIGN KEY (set_id) REFERENCES question_sets(id);


--
-- Name: deliveries deliveries_run_id_fkey; Type: FK CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY deliveries
    ADD CONSTRAINT deliveries_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(id);


--
-- Name: question_sets question_sets_run_id_fkey; Type: FK CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY question_sets
    ADD CONSTRAINT question_sets_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(id);


--
-- Name: questions questions_set_id_fkey; Type: FK CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY questions
    ADD CONSTRAINT questions_set_id_fkey FOREIGN KEY (set_id) REFERENCES question_sets(id);


--
-- Name: run_policies run_policies_run_id_fkey; Type: FK CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY run_policies
    ADD CONSTRAINT run_policies_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(id);


--
-- Name: run_rules run_rules_run_id_fkey; Type: FK CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY run_rules
    ADD CONSTRAINT run_rules_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(id);


--
-- Name: tool_calls tool_calls_run_id_fkey; Type: FK CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY tool_calls
    ADD CONSTRAINT tool_calls_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(id);


--
-- Name: turns turns_run_id_fkey; Type: FK CONSTRAINT; Schema: -; Owner: -
--

ALTER TABLE ONLY turns
    ADD CONSTRAINT turns_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(id);


--
-- PostgreSQL database dump complete
--


