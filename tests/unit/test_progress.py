"""Progress off a terminal (server/cli/progress.py): a line now and then, never a bar."""

from rich.progress import Progress

from cesar.server.cli import progress
from cesar.server.cli.progress import Lines, progress_bar


def test_off_a_terminal_a_long_command_says_where_it_is_in_lines(capsys, monkeypatch):
    assert isinstance(progress_bar(), Lines)  # pytest's stderr is not a terminal
    quiet = progress_bar(quiet=True)
    assert not isinstance(quiet, Lines) and isinstance(quiet, Progress) and quiet.disable
    clock = iter([0.0, 1.0, 6.0, 7.0, 12.5])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    with Lines(every=5.0) as lines:
        task = lines.add_task("evaluating (engine)", total=1_000)
        for done in (100, 600, 700, 900):
            lines.update(task, completed=done)
    said = capsys.readouterr().err.splitlines()
    assert [line.split(", ")[0] for line in said] == [
        "evaluating (engine): 600 of 1,000 (60 %)",
        "evaluating (engine): 900 of 1,000 (90 %)",
    ]
