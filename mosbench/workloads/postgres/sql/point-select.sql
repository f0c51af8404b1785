-- One query of a batch: a point SELECT of a key uniform over the table (pgbench -D rows=N).
\set k random(1, :rows)
SELECT v FROM kv WHERE k = :k;
