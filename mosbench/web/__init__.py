"""mosbench serve: the lab's pages and their JSON over a store (app.py), each page a view of one record
built by a module of its own (overview, summaries, graphs, runs), who may write (tokens, auth), and the
server that serves them (serving)."""
