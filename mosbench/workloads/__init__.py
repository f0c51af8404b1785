"""The workloads, one module each behind one interface (base.Workload); registry.py names them."""
