"""perf/loadcli.py names, without importing them, the workloads the load test draws."""

import argparse

from cesar.perf.loadcli import TEMPLATES, add_loadtest_command
from cesar.perf.loadwork import TEMPLATES as WORKLOADS


def test_the_command_line_offers_every_workload_in_its_order():
    assert TEMPLATES == WORKLOADS


def test_the_command_parses_without_the_load_test_and_runs_it_on_call():
    parser = argparse.ArgumentParser()
    add_loadtest_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["loadtest", "--template", "Filter", "--smoke"])
    assert args.template == "Filter" and args.smoke and args.handler.__name__ == "_command"
