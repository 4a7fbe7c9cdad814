"""Runs several commands as one target for bench/: PgBouncer scaled the way
its documentation suggests (one process per CPU on one port with
so_reuseport) is started, measured and stopped like one pooler. Signals
are passed on to every command; the exit status is the worst of theirs.

usage: multiproc.py -- CMD ARGS... -- CMD ARGS..."""

import os
import signal
import subprocess
import sys


def split(argv):
    cmds, cur = [], None
    for a in argv:
        if a == "--":
            cur = []
            cmds.append(cur)
        elif cur is not None:
            cur.append(a)
    return [c for c in cmds if c]


def main():
    cmds = split(sys.argv[1:])
    if not cmds:
        sys.exit(__doc__)
    procs = [subprocess.Popen(c) for c in cmds]

    def forward(signum, frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    worst = 0
    left = {p.pid: p for p in procs}
    while left:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if left.pop(pid, None) is None:
            continue
        worst = max(worst, abs(os.waitstatus_to_exitcode(status)))
        # One command gone means the target is broken: stop the others too.
        forward(signal.SIGINT, None)
    sys.exit(worst)


if __name__ == "__main__":
    main()
