"""The front process: the public gRPC API, the catalog, placement, the epoch gate, alert streams."""
