"""What crosses a process boundary: protobuf and Arrow, event files, routing, the client."""
