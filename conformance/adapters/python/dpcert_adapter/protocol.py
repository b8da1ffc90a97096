"""The candidate protocol's request loop (docs/certification.md "Candidate protocol").

A candidate's per-request work is one function `handle(in_path, out_path)`; the candidate
parses its own options and then calls

    from dpcert_adapter import run
    run(handle, rest)          # rest = the positional words left after its own options

One-call mode (the protocol's first form): `rest` is `[IN, OUT]`; `handle` runs once and
the process exits 0 (a raised exception exits 1 with the traceback on stderr).
"""
import sys


def run(handle, rest):
    """Serve the requests of one candidate process; returns the exit code's value."""
    if len(rest) != 2:
        sys.stderr.write("usage: CANDIDATE [options] IN OUT\n")
        sys.exit(2)
    handle(rest[0], rest[1])
    return 0
