"""What server workloads share: private server processes, ports, the load generator as a point sees it,
the client's network namespace, and the client-bound verdict."""
