"""A run: the plan (made or resumed through one path), the sweep over its points, one point's window
measurement, its typed record, the profiler recording perf over a window."""
