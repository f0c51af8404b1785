"""Rigs that tests and benchmarks share: stores with planted changes (history_stores) and client hosts in
network namespaces (clienthosts). They may use every layer; nothing in the package imports them."""
