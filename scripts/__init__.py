"""The many-core check's Python (check_manycore, manycore_summary), importable from the checkout as
`scripts.<module>`: a package here, so nothing installed under the same name can shadow it."""
