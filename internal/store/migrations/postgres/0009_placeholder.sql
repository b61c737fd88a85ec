-- Placeholder for the version another branch adds as 0009 (the question
-- sets' feed): delete this file when that branch is merged.
SELECT 1;
