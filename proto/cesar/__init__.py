"""Generated gRPC/protobuf code for the cesar API (built from proto/cesar/v1/*.proto)."""
