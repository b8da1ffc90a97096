"""The candidate protocol's request loop (docs/certification.md "The candidate protocol").

A candidate's per-request work is one function `handle(in_path, out_path)`; the candidate
parses its own options and then calls

    from dpcert_adapter import run
    run(handle, rest)          # rest = the positional words left after its own options

The same script serves both modes:

* one-call mode (dpcert runs `CMD IN OUT` once per request): `rest` is `[IN, OUT]`;
  `handle` runs once and the process exits 0 (a raised exception exits 1 with the traceback
  on stderr);
* persistent mode (`--candidate-mode persistent`: dpcert starts `CMD` once with no IN OUT and
  DPCERT_CANDIDATE_MODE=persistent): `rest` is empty; `run` writes `READY` on the reply
  descriptor (DPCERT_REPLY_FD, 3) once the imports are done, then reads requests
  `SEQ<TAB>IN<TAB>OUT` from stdin, one per line, calls `handle(IN, OUT)` for each and replies
  `SEQ OK`, or `SEQ ERROR <type: message>` with the traceback on stderr, and returns when
  stdin ends. State kept between requests is the candidate's own (its generators, caches).

Trajectory vectors (kind `trajectory`, K consecutive training steps of one run) are served
here for every candidate: `run` writes the K step vectors (the trajectory's parameters and
batch k, kind `step`, or kind `dpzo` when the trajectory's algorithm is `dpzo`) to a temporary
folder, calls `handle` on them in order, in this one process, and writes step k's outputs to
OUT under the trajectory's names: DP-SGD, the private gradients as
`step.<k>.private_grad.<name>`; DP-ZO, every output, `step.X` as `step.<k>.X` and any other
name N as `step.<k>.N` (`step.<k>.scalar`, `step.<k>.dpzo.z.<name>`, ...). A candidate whose
randomness does not move on from step to step (noise drawn once and reused, a generator
reseeded each epoch) shows it there.
"""
import os
import shutil
import sys
import tempfile
import traceback

from .safetensors_io import load_file, read_metadata, save_file


def _trajectory(handle, in_path, out_path):
    tensors, meta = load_file(in_path)
    K = int(meta["steps"])
    params = {k: v for k, v in tensors.items() if k.startswith("params.")}
    base = {k: v for k, v in meta.items() if k not in ("steps", "vector_sha256")}
    zo = meta.get("algorithm") == "dpzo"
    base["kind"] = "dpzo" if zo else "step"
    res, out_meta = {}, {}
    tmp = tempfile.mkdtemp(prefix="dpcert-trajectory-")
    try:
        for k in range(K):
            pre = f"batch.{k}."
            step = dict(params)
            step.update({"batch." + n[len(pre):]: v for n, v in tensors.items() if n.startswith(pre)})
            m = dict(base, name=f"{meta.get('name', 'trajectory')}.step{k}")
            sin, sout = os.path.join(tmp, f"step{k}.in.safetensors"), os.path.join(tmp, f"step{k}.out.safetensors")
            save_file(sin, step, m)
            handle(sin, sout)
            o, om = load_file(sout)
            for n, v in o.items():
                if zo:
                    res[f"step.{k}." + (n[len("step."):] if n.startswith("step.") else n)] = v
                elif n.startswith("step.private_grad."):
                    res[f"step.{k}.private_grad." + n[len("step.private_grad."):]] = v
            if k == 0:
                out_meta = {x: om[x] for x in ("dtype", "clip_fn", "candidate") if x in om}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save_file(out_path, res, out_meta)


def _call(handle, in_path, out_path):
    if read_metadata(in_path).get("kind") == "trajectory":
        _trajectory(handle, in_path, out_path)
    else:
        handle(in_path, out_path)


def _serve(handle):
    fd = int(os.environ.get("DPCERT_REPLY_FD", "3"))
    reply = os.fdopen(fd, "w", buffering=1)
    reply.write("READY\n")
    reply.flush()
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            reply.write("0 ERROR malformed request (expected SEQ<TAB>IN<TAB>OUT)\n")
            continue
        seq, inp, out = parts
        try:
            _call(handle, inp, out)
            status = "OK"
        except BaseException as e:  # SystemExit too: one request failed, the process serves on
            if isinstance(e, KeyboardInterrupt):
                raise
            traceback.print_exc()
            status = "ERROR " + (type(e).__name__ + ": " + str(e)).replace("\n", " ").replace("\r", " ")[:400]
        sys.stdout.flush()
        sys.stderr.flush()
        reply.write(f"{seq} {status}\n")
        reply.flush()
    return 0


def run(handle, rest):
    """Serve the requests of one candidate process (either mode); returns 0."""
    if os.environ.get("DPCERT_CANDIDATE_MODE") == "persistent":
        if rest:
            sys.stderr.write("persistent mode takes no IN OUT arguments\n")
            sys.exit(2)
        return _serve(handle)
    if len(rest) != 2:
        sys.stderr.write("usage: CANDIDATE [options] IN OUT   (or DPCERT_CANDIDATE_MODE=persistent, no IN OUT)\n")
        sys.exit(2)
    _call(handle, rest[0], rest[1])
    return 0
