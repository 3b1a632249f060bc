"""Predicate indices of the multi-query engine (Section 4.3 of the Cayuga paper)."""
