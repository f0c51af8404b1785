"""PostgreSQL driven by pgbench: the workload, its private cluster, its system-call counting."""
