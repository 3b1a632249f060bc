"""Processes and command-line entry points of cesar."""
