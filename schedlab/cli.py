"""`schedlab` command line. Sub-commands import lazily: `schedlab ministat` must
start as fast as the C ministat it replaces."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import signal
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `schedlab plan s0 | head` ends quietly
    if argv and argv[0] == "ministat":
        from schedlab.stats.ministat import main as ministat_main
        return ministat_main(argv[1:])
    from schedlab.commands import main as commands_main
    return commands_main(argv)


if __name__ == "__main__":
    sys.exit(main())
