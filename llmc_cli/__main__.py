"""The `llmc` command (pyproject.toml's scripts: run) and `python -m llmc_cli`.

Start-up runs with the cyclic garbage collector off: importing the program and building its
command tree allocates some hundred thousand objects that live as long as the process, and the
collector would walk them again and again (its passes were an eighth of a short command's
instructions, issue 34). cli/main.py turns it back on once the command's module is loaded, after
moving everything alive then into the permanent generation (gc.freeze: long-running commands,
the gateway and the keeper, never walk their start-up again). At exit, what is still alive is
frozen too, so the interpreter's last full collection walks only the young objects (the
interpreter does not promise finalizers of garbage cycles at exit in any case).
"""

import atexit
import gc

gc.disable()
atexit.register(gc.freeze)  # registered first: runs last of the exit handlers

from llmc_cli.cli.main import main  # noqa: E402 - after the collector is off


def run() -> None:
    main()


if __name__ == "__main__":
    run()
