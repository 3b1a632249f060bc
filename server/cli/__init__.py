"""The ``cesar`` command: local evaluation (run, bench, explain) and the server's clients."""
