"""``overbrainer tui``: the project, its dataset, the pipeline, training runs and logs in
one terminal screen (textual).

Every action it takes runs the CLI command that does the same (``train stop``, ``dataset
rm``, the stage commands) in a process of its own, so the TUI itself never holds the
project lock: that process takes it for as long as it works, as it would from a shell.
"""
