"""``cesar feed``: the PySpark Structured Streaming job that validates, routes and publishes."""
