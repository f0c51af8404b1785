"""The many-core guest: a QEMU machine of a chosen shape booted with this machine's userland
(`host`), and what runs inside it (`inside`)."""
