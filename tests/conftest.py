"""Pytest configuration shared by every test folder: Hypothesis profiles, and the JIT of
Spark's JVMs."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "pure", max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")

# Every JVM the tests start (the shared SparkSession, each `cesar feed`, a standalone
# cluster) stops its JIT at C1: a test's JVM lives under a minute, and C2's compiling took a
# quarter of its CPU (the demo's test: 28-31 CPU-s with C2, 20-23 without), CPU the other
# workers need. The code the JVM runs is the same; a deployed feed keeps C2.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")
