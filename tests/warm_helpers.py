"""Entries run by the warm server in tests/test_warm.py (``--entry warm_helpers:NAME``)."""

import json
import os
import sys
import time


def report(argv):
    """Print what the child sees: its parent, directory, argv, one variable and stdin."""
    mods = sys.modules
    print(json.dumps({"ppid": os.getppid(), "pid": os.getpid(), "cwd": os.getcwd(), "argv": argv,
                      "marker": os.environ.get("WARM_TEST_MARKER"), "stdin": sys.stdin.read(),
                      "torch_threads": mods["torch"].get_num_threads() if "torch" in mods else None}))
    print("to stderr", file=sys.stderr)
    return int(argv[0]) if argv and argv[0].isdigit() else 0


def leave(argv):
    """SystemExit with a message, as argparse and sys.exit("...") do."""
    sys.exit(f"leaving: {argv}")


def sleep(argv):
    """Write the pid where the test can see it, then wait to be killed."""
    with open(argv[0], "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(120)
    return 0


def modes(argv):
    """Write one file through convrag.io and one with plain open() into argv[0]; print the
    modes, the child's parent and the umask convrag.io follows."""
    import stat

    from convrag.io import process_umask, write_json

    out = argv[0]
    write_json(os.path.join(out, "atomic.json"), {})
    with open(os.path.join(out, "plain.txt"), "w") as fh:
        fh.write("x")
    modes = {f: oct(stat.S_IMODE(os.stat(os.path.join(out, f)).st_mode)) for f in ("atomic.json", "plain.txt")}
    print(json.dumps({"ppid": os.getppid(), "umask": process_umask(), **modes}))
    return 0
