"""The repository layer, the only writer of files, objects, refs and the index; git access."""
