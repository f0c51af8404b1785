-- One query of a batch: an UPDATE of a key uniform over the table, counted in the row (pgbench -D rows=N).
\set k random(1, :rows)
UPDATE kv SET v = v + 1 WHERE k = :k;
