-- The key/value table of the paper's PostgreSQL benchmark (section 5.5), loaded once and cached.
-- Run by psql with -v rows=N. The key's index is built after the rows (faster than row by row);
-- VACUUM FREEZE sets every hint bit and the visibility map now, so a point's first reads write nothing.
-- v counts the UPDATEs a key received: the read-write test checks their sum after each point.
CREATE EXTENSION pg_prewarm;
CREATE TABLE kv (k bigint NOT NULL, v bigint NOT NULL DEFAULT 0);
INSERT INTO kv (k) SELECT generate_series(1, :rows);
ALTER TABLE kv ADD PRIMARY KEY (k);
VACUUM (FREEZE, ANALYZE) kv;
CHECKPOINT;
