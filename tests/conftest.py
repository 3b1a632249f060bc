"""Pytest configuration shared by every test folder: Hypothesis profiles."""

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
