"""Starting, watching and stopping a point's programs: spawning into a group, readiness, perf's control
FIFO. Workloads start everything through here, so every process is confined, accounted and stopped."""
