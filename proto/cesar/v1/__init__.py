"""cesar.v1: the public service (cesar.proto) and the internal shard service (shard.proto).

The *_pb2*.py modules here are generated at install time by the build backend
(proto/build_backend.py); never edit them by hand.
"""
