"""`schedlab` command line. Sub-commands import lazily: `schedlab ministat` must
start as fast as the C ministat it replaces."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # SIGPIPE keeps Python's SIG_IGN: with the default action, a pipe to a child that exits
    # early (ssh to a lab host that drops the connection while a build is sent) would kill
    # `schedlab run` silently, without a failure record. A closed stdout is handled here.
    try:
        if argv and argv[0] == "ministat":
            from schedlab.stats.ministat import main as ministat_main

            rc = ministat_main(argv[1:])
        elif argv and argv[0] == "pack":  # its own parser and exit codes (schedlab.packrun)
            from schedlab.packrun import main as pack_main

            rc = pack_main(argv[1:])
        else:
            from schedlab.commands import main as commands_main

            rc = commands_main(argv)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        # `schedlab plan STUDY | head`: the reader went away; end quietly (and keep the
        # interpreter's final flush from failing again)
        _drop_stdout()
        return 141
    except OSError as e:
        # stdout on a full disk (commands.main names the files it fails on): one line, no traceback
        from schedlab.commands import describe_oserror

        _drop_stdout()
        print(f"schedlab: {describe_oserror(e, 'standard output')}", file=sys.stderr)
        return 1


def _drop_stdout() -> None:
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
