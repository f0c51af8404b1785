"""From stored points to answers: series and cells, comparisons between runs, scaling models, stored
profiles read back, and the verdict on each curve. Reads the store's records only, never the machine."""
