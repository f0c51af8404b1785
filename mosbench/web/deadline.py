"""How long a page waits on the store: apart from lab.py, which uses it, so that the command line reads it
(`mosbench serve --store-timeout`'s default) without importing the layer (SQLAlchemy, Flask), as
store/location.py holds the default store's path."""

# A page whose record is not built by then is answered 503: long enough for a machine's alerts to be
# recomputed after its new run (seconds), short enough that a client waiting on a dead database hears so.
STORE_TIMEOUT_S = 20.0
