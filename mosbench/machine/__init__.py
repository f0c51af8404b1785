"""The machine: its topology and where a point's CPUs are, the cgroups and hotplug that confine a point,
/proc/stat accounting, the facts recorded with a run, what the machine supports, the lock that gives a
run the machine alone, and the journal and guardian that undo everything a run changed."""
