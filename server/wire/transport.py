"""The gRPC channel and server options every cesar process uses (a module of its own, so a
shard takes them without importing the client's Arrow and protobuf conversions)."""

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 256 << 20),
    ("grpc.max_send_message_length", 256 << 20),
]
"""Channel and server options of every cesar process: messages up to 256 MiB each way."""
