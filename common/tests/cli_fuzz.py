#!/usr/bin/env python3
"""common/tests/cli_fuzz.py — the command-line fuzzer of issue 29 (run by common/tests/cli_fuzz.sh).

Generates combinations of every subcommand's options, read from `dpcert --help` (the command
list) and `dpcert CMD [SUB] --help` (the option lines "  --name S|X|N  help"): valid values (the
choices the help lists, small sizes, fixture files), boundary values (0, -1, 2^31, 2^63 - 1,
1e308, 4.9e-324, an empty string), garbage (nan, inf, 1e400, 0x10, words, control and non-UTF-8
bytes, a 5000-byte value), repeated options, several options at once (conflicts), unknown
options and stray positional words. Each run executes in a fresh directory (TMPDIR and HOME
inside it) under a time limit and must:
  - exit 0, 1, 2, 3 or 77 (a signal, e.g. a crash, or any other code is a finding);
  - print a message (a line starting "dpcert") on stderr when it exits 2 or 3;
  - show no sanitizer report (the sanitizer pass runs this on the ASan+UBSan build);
  - finish within the limit (--timeout; a run past it is run again with 3 times the limit before
    it counts as a hang: a loaded machine can stall a run), unless it asked for work beyond it (a size option above 1000, a
    certify or full level, or a command that is slow by design: those are counted as "slow by
    request", never as a pass or a finding);
  - write nothing outside its directory (the fuzzer's work directory and the source tree are
    checked for new files).
Before the generated runs: every command form's `--help` must exit 0, and exit 3 with a
"cannot write" message on /dev/full (issue 29 item 9); an option its help calls "(required"
must be required (exit 2 naming it without options: item 7). The corpus
(common/tests/data/cli_fuzz_corpus.txt: an expected exit code or "any", a tab, the argv as
JSON, one per line, "{fx}" standing for the fixtures directory) is replayed next: each line must
still behave (its exit code, and the rules above). The generated runs are a function of the
seed (how many run depends on the time). Findings are printed with their argv and a shell line
that reproduces them, and written as corpus lines to WORK/findings.txt.

Usage: cli_fuzz.py --dpcert BIN --root REPO --seconds S --seed N [--max-runs M] [--timeout T]
                   [--corpus FILE] [--work DIR] [--replay-only] [--verbose]
Exit 0 no finding, 1 findings, 2 bad usage (argparse: also 2).
"""
import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

ALLOWED = {0, 1, 2, 3, 77}
# commands that take a sub-word (the sub-words are listed in their --help)
SUBWORDS = {"reference": ["dpsgd", "dpzo"], "train": ["dpsgd", "dpzo"], "rng": ["philox", "sample"],
            "audit": ["", "reference-candidate"]}
# slow by design even with small options (whole suites, trained models, audits): a timeout is
# "slow by request"; every other command must finish within the limit
SLOW = {"conform", "mia", "audit", "reproduce", "certify"}
# options that size the work: a value above 1000 may legitimately take longer than the limit
WORK = {"--steps", "--dataset-size", "--trials", "--models", "--repeats", "--count", "--hidden", "--dim", "--seq",
        "--layers", "--vocab", "--ffn", "--heads", "--in", "--classes", "--micro-batches", "--n-spsa", "--onerun-canaries",
        "--onerun-rounds", "--population", "--threads", "--epochs", "--batch", "--iters", "--timeout", "--rounds"}
HEAVY_VALUES = {"certify", "full", "all", "strict"}
# what the fuzzer's work directory holds besides what a run writes into r/
WORK_ENTRIES = {"r", "fx", "fx-pristine", "findings.txt"}
SAN = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|ThreadSanitizer")

BOUNDARY_N = ["0", "-1", "1", "2147483647", "2147483648", "9223372036854775807", "18446744073709551615",
              "99999999999999999999", "1000000"]
BOUNDARY_X = ["0", "-0", "1e-308", "4.9e-324", "1e308", "-1", "1e-400", "1e400", "0.999999999999", "1"]
# "\udcff": the byte 0xff (not UTF-8) through os.fsencode (surrogateescape)
GARBAGE = ["nan", "inf", "-inf", "0x10", "1.5", "abc", "", " ", "--", "-", "1,2", "1e", "\x01\x1b[31m", "\udcff\udcfe",
           "é", "%s%n%x", "a" * 5000]
SMALL_N = ["1", "2", "3", "4", "8", "16"]
MLP = "--model mlp --in 4 --hidden 8 --classes 3 --dataset-size 8 --q 0.5 --steps 1"
# a valid small run of each command form ({fx}: the fixtures' directory), mutated by the generator so
# that most runs get past the required options into the command's own checks
TEMPLATES = {
    "reference dpsgd": MLP, "train dpsgd": MLP,
    "reference dpzo": MLP + " --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3",
    "train dpzo": MLP + " --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3",
    "account": "--sigma 1 --q 0.01 --steps 10 --delta 1e-5",
    "audit-accounting": "{fx}/claims.csv", "compare": "{fx}/ref {fx}/cand",
    "inspect": "{fx}/ref/step-000001.safetensors",
    "rng philox": "--key 0,0 --counter 0,0,0,0",
    "rng sample": "--dist gaussian --key 1 --stream 0 --purpose init --count 3",
    "vectors": "--suite ci --out o", "keygen": "--private o/k.pem --public o/k.pub",
    "verify-report": "{fx}/bundle --pubkey {fx}/k.pub",
    "certify": "--candidate true --suite ci --filter ^step-mlp-batch1$ --repeats 1 --timeout 5 --report o",
    "conform": "--suite ci --list", "losscale": "", "version": "",
    "mia": "--models 4 --dataset-size 16", "audit": "--level custom --trials 20 --onerun-canaries 0",
}
SMALL_X = ["0.5", "1", "0.01", "1e-3", "2", "0.1", "1e-5"]


def parse_opts(help_text):
    """[(name, type)] from help lines '  --name S   help'; type '' (flag), S, X or N; and the choices."""
    opts = []
    for line in help_text.splitlines():
        m = re.match(r"^  (--[a-z0-9][a-z0-9-]*)(?: ([SXN]))?\s+(.*)$", line)
        if not m:
            continue
        name, typ, hlp = m.group(1), m.group(2) or "", m.group(3)
        choices = []
        if typ == "S":  # "a | b | c (default)" or "a|b|c": the listed words (not "BYTES[K|M|G|T]")
            bare = re.sub(r"\s+", " ", re.sub(r"\([^)]*\)", "", hlp))  # "ci (default) | certify" -> "ci | certify"
            m2 = re.match(r"^([a-z0-9][a-z0-9_.-]*(?: ?\| ?[a-z0-9][a-z0-9_.-]*)+)(?:[\s:;,]|$)", bare)
            if m2:
                choices = [w.strip() for w in m2.group(1).split("|")]
        opts.append((name, typ, choices, hlp))
    return opts


class Fixtures:
    """Input files the runs may name (made once, undisturbed, outside the runs' directories)."""

    def __init__(self, dpcert, base):
        self.dir = os.path.join(base, "fx")
        os.makedirs(self.dir, exist_ok=True)
        d = self.dir
        m = ["--model", "mlp", "--in", "4", "--hidden", "8", "--classes", "3", "--dataset-size", "8", "--q", "0.5",
             "--steps", "2", "--seed", "1", "--noise-key", "2"]
        run = lambda *a: subprocess.run([dpcert, *a], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        run("reference", "dpsgd", *m, "--export", os.path.join(d, "ref"))
        run("train", "dpsgd", *m, "--export", os.path.join(d, "cand"))
        run("reference", "dpzo", *m, "--clip", "1", "--sigma", "1", "--phi", "1e-3", "--lr", "1e-3",
            "--log", os.path.join(d, "dz.log"))
        with open(os.path.join(d, "claims.csv"), "w") as f:
            f.write("mechanism,q,sigma,steps,delta,epsilon\ngaussian,0.01,1,10,1e-5,5\n")
        with open(os.path.join(d, "sched.json"), "w") as f:
            f.write('[{"mechanism":"gaussian","q":0.01,"sigma":1,"steps":10}]\n')
        run("keygen", "--private", os.path.join(d, "k.pem"), "--public", os.path.join(d, "k.pub"))
        run("vectors", "--suite", "ci", "--out", os.path.join(d, "vectors"))
        run("certify", "--candidate", "sh -c 'cp \"$1\" \"$2\"' x", "--suite", "ci", "--filter", "^step-mlp-batch1$",
            "--repeats", "1", "--report", os.path.join(d, "bundle"), "--sign", os.path.join(d, "k.pem"))
        self.inputs = [os.path.join(d, p) for p in ("ref", "cand", "ref/step-000001.safetensors",
                                                    "cand/step-000002.safetensors", "dz.log", "claims.csv",
                                                    "sched.json", "k.pem", "k.pub", "vectors",
                                                    "vectors/step-mlp-batch1.safetensors")]
        self.devices = ["/dev/null", "/dev/zero", "/dev/full"]
        # a run may name a fixture as its output (as a user may): the fixtures are restored from a
        # pristine copy after such a run, so that every run sees the same inputs (replayable)
        self.pristine = os.path.join(base, "fx-pristine")
        shutil.rmtree(self.pristine, ignore_errors=True)
        shutil.copytree(d, self.pristine, symlinks=True)
        self.state = self.snapshot()

    def snapshot(self):
        st = {}
        for top, dirs, files in os.walk(self.dir):
            for f in dirs + files:
                p = os.path.join(top, f)
                s = os.lstat(p)
                st[p] = (s.st_mode, s.st_size, s.st_mtime_ns)
        return st

    def restore_if_touched(self, argv):
        if not any(self.dir in w for w in argv):
            return
        if self.snapshot() != self.state:
            shutil.rmtree(self.dir, ignore_errors=True)
            shutil.copytree(self.pristine, self.dir, symlinks=True)
            self.state = self.snapshot()


class Fuzzer:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.work = os.path.abspath(a.work)
        self.findings = []
        self.stats = {"runs": 0, "slow": 0, "by_rc": {}}
        if a.replay_only:  # the corpus alone (no fixtures, no discovery: the test's negative controls)
            self.fx, self.cmds = None, []
            return
        self.fx = Fixtures(a.dpcert, self.work)
        self.cmds = self.discover()
        self.required_check()

    def help_of(self, words):
        try:
            p = subprocess.run([self.a.dpcert, *words, "--help"], capture_output=True, timeout=30,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            self.finding("help", "--help did not exit within 30 s", [*words, "--help"], "")
            return ""
        if p.returncode != 0:
            self.finding("help", f"--help exited {p.returncode}", [*words, "--help"], p.stderr.decode("utf-8", "replace"))
        # the help is a result: lost on a full device it is exit 3 with a message (issue 29 item 9)
        with open("/dev/full", "wb") as full:
            q = subprocess.run([self.a.dpcert, *words, "--help"], stdout=full, stderr=subprocess.PIPE, timeout=30,
                               stdin=subprocess.DEVNULL)
        qerr = q.stderr.decode("utf-8", "replace")
        if q.returncode != 3 or not re.search(r"^dpcert.*cannot write", qerr, re.M):
            self.finding("help", f"--help to /dev/full exited {q.returncode} (want 3 and 'cannot write')",
                         [*words, "--help"], qerr)
        return p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")

    def discover(self):
        top = self.help_of([])
        names = re.findall(r"^  ([a-z][a-z-]*) ", top, re.M)
        if not names:
            raise SystemExit("cli_fuzz: no command in `dpcert --help`")
        cmds = []
        for n in names:
            subs = SUBWORDS.get(n, [""])
            if n == "reproduce":
                t = re.search(r"^targets: (.*)$", self.help_of(["reproduce"]), re.M)
                subs = t.group(1).split() if t else [""]
            for s in subs:
                words = [n] + ([s] if s else [])
                cmds.append((words, parse_opts(self.help_of(words))))
        return cmds

    def required_check(self):
        """An option the help calls required must be required (issue 29 item 7): a command whose help
        marks options "(required" exits 2 without options, naming one of them."""
        for words, opts in self.cmds:
            req = [name for name, _, _, hlp in opts if "(required" in hlp]
            if not req:
                continue
            rc, _ = self.run(list(words), origin="required options")
            err = self.last_err
            if rc != 2 or not any(n in err for n in req):
                self.finding("help", f"the help says {', '.join(req)} required, but without options the command "
                             f"exits {rc}", list(words), err)

    # ---- values ----
    def path(self, kind):
        r = self.rng.random()
        if kind == "out" or r < 0.35:
            return self.rng.choice(["o", "o/x", "o/sub/deep", "out.json", "o/r.html", "o/k.pem", "./o2", "o/../o3"])
        if r < 0.8:
            return self.rng.choice(self.fx.inputs)
        if r < 0.9:
            return self.rng.choice(self.fx.devices)
        return self.rng.choice(["nonexistent", "", "/", "o/", "a" * 5000 + "/x", "\udcff\x01name", "-"])

    def value(self, name, typ, choices):
        r = self.rng.random()
        if typ == "N":
            if name in WORK and r < 0.75:
                return self.rng.choice(SMALL_N[:4])
            return self.rng.choice(SMALL_N) if r < 0.6 else self.rng.choice(BOUNDARY_N) if r < 0.85 else self.rng.choice(GARBAGE)
        if typ == "X":
            return self.rng.choice(SMALL_X) if r < 0.6 else self.rng.choice(BOUNDARY_X) if r < 0.85 else self.rng.choice(GARBAGE)
        # S
        if choices and r < 0.7:
            v = self.rng.choice(choices)
            return v if self.rng.random() < 0.9 else ",".join(self.rng.sample(choices, min(2, len(choices))))
        if re.search(r"export|report|out|log|work|private|public|json|sign|save", name):
            return self.path("out" if r < 0.8 else "in")
        if re.search(r"cases|data|schedule|pubkey|replay|check|load|key|file|vectors", name):
            return self.path("in")
        if name == "--candidate":
            return self.rng.choice(["true", "sh -c 'cp \"$1\" \"$2\"' x", "false", "sh -c 'kill -SEGV $$'",
                                    "nonexistent-command", "", "sleep 0.1", "/usr/bin/env"])
        return self.rng.choice(GARBAGE) if r < 0.9 else self.rng.choice(SMALL_N)

    def gen(self):
        # slow-by-design commands a quarter as often (a valid reproduce target runs its whole table)
        while True:
            words, opts = self.rng.choice(self.cmds)
            if words[0] not in SLOW or self.rng.random() < 0.25:
                break
        argv = list(words)
        tpl = TEMPLATES.get(" ".join(words))
        templated = tpl is not None and self.rng.random() < 0.65
        if templated:  # a valid run, mutated
            argv += [w.replace("{fx}", self.fx.dir) for w in shlex.split(tpl)]
            k = self.rng.choice([0, 1, 1, 1, 2, 2, 3])
        else:
            k = self.rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 8])
        picked = [self.rng.choice(opts) for _ in range(k)] if opts else []
        for name, typ, choices, _ in picked:
            if name in argv and self.rng.random() < 0.9:  # the template's value replaced (else: repeated)
                i = argv.index(name)
                del argv[i:i + (2 if typ and i + 1 < len(argv) else 1)]
            argv.append(name if self.rng.random() < 0.97 else name.upper())
            if typ:
                if self.rng.random() < 0.03:
                    continue  # missing value (also at the end)
                v = self.value(name, typ, choices)
                if self.rng.random() < 0.1:
                    argv[-1] = f"{name}={v}"
                else:
                    argv.append(v)
            if self.rng.random() < 0.05:  # repeated
                argv.append(name)
                if typ:
                    argv.append(self.value(name, typ, choices))
        r = self.rng.random()
        if r < (0.08 if templated else 0.25) or not opts:  # positional words
            for _ in range(self.rng.choice([1, 1, 2, 3])):
                argv.append(self.path("in") if self.rng.random() < 0.8 else self.rng.choice(GARBAGE))
        elif r < 0.3:
            argv.append(self.rng.choice(["--no-such-option", "-x", "--help", "--", "--sigma"]))
        return argv

    # ---- one run ----
    def heavy(self, argv):
        if argv[0] in SLOW:
            return True
        for i, w in enumerate(argv):
            base = w.split("=", 1)
            if base[0] in WORK:
                v = base[1] if len(base) == 2 else (argv[i + 1] if i + 1 < len(argv) else "")
                try:
                    if abs(float(v)) > 1000:
                        return True
                except ValueError:
                    pass
            if w in HEAVY_VALUES:
                return True
        return False

    def exec1(self, argv, limit):
        """One run in a fresh directory: (rc or "timeout"/"oserror", stderr text)."""
        d = os.path.join(self.work, "r")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "tmp"))
        os.makedirs(os.path.join(d, "home"))
        env = dict(os.environ, TMPDIR=os.path.join(d, "tmp"), HOME=os.path.join(d, "home"))
        bargv = [os.fsencode(self.a.dpcert)] + [os.fsencode(w) for w in argv]
        try:
            p = subprocess.Popen(bargv, cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, start_new_session=True)
            RUNNING[0] = p.pid
            try:
                _, e = p.communicate(timeout=limit)
                rc, err = p.returncode, e.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)  # the whole session: mpirun, candidates
                except OSError:
                    pass
                p.communicate()
                rc, err = "timeout", ""
            RUNNING[0] = 0
        except OSError as e:
            rc, err = "oserror", str(e)
        if self.fx:
            self.fx.restore_if_touched(argv)
        return rc, err

    def run(self, argv, want=None, origin="fuzz"):
        self.stats["runs"] += 1
        t0 = time.time()
        rc, err = self.exec1(argv, self.a.timeout)
        if rc == "timeout" and not (self.heavy(argv) and want is None):
            # a loaded machine can stall a run: confirm a hang with three times the limit
            rc, err = self.exec1(argv, 3 * self.a.timeout)
        dt = time.time() - t0
        self.last_err = err
        self.stats["by_rc"][str(rc)] = self.stats["by_rc"].get(str(rc), 0) + 1
        why = None
        if rc == "timeout":
            if self.heavy(argv) and want is None:
                self.stats["slow"] += 1
            else:
                why = f"no exit within {3 * self.a.timeout:g} s (and {self.a.timeout:g} s before)"
        elif rc == "oserror":
            why = err
        elif rc < 0 or rc not in ALLOWED:
            why = f"exit {rc}" + (f" (signal {-rc})" if rc < 0 else "")
        elif SAN.search(err):
            why = "sanitizer report: " + SAN.search(err).group(0)
        elif rc in (2, 3) and not re.search(r"^dpcert", err, re.M):
            why = f"exit {rc} without a message on stderr"
        elif want is not None and rc != want:
            why = f"exit {rc}, the corpus expects {want}"
        elif rc == 3 and self.a.verbose:  # allowed (a lost result, an internal error): shown for review
            print(f"exit 3: {json.dumps(argv)[:300]}: {err.strip()[-300:]!r}", flush=True)
        if not why:
            new = [e for e in os.listdir(self.work) if e not in WORK_ENTRIES]
            if new:
                why = "wrote outside its directory: " + ", ".join(new)
                for e in new:
                    shutil.rmtree(os.path.join(self.work, e), ignore_errors=True)
        if why:
            self.finding(origin, why, argv, err)
        return rc, dt

    def finding(self, origin, why, argv, err):
        self.findings.append((origin, why, argv, err[-400:]))
        shown = [w if len(w) <= 80 else w[:40] + f"...({len(w)} chars)" for w in argv]
        print(f"FINDING ({origin}): {why}\n  argv: {json.dumps(argv)[:600]}\n"
              f"  reproduce: cd $(mktemp -d) && $DPCERT {shlex.join(shown)}\n  stderr: {err[-300:]!r}", flush=True)

    def outside_writes(self, since):
        """New files outside the runs' directory: in the work dir (besides r/ and fx/) and the source tree."""
        bad = []
        root = self.a.root
        for top, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith("build") and x != ".git"]
            for f in files:
                p = os.path.join(top, f)
                try:
                    if os.lstat(p).st_mtime > since:
                        bad.append(p)
                except OSError:
                    pass
        return bad

    def main(self):
        since = time.time() - 1
        # corpus first
        n_corpus = 0
        if os.path.exists(self.a.corpus):
            for ln, line in enumerate(open(self.a.corpus, encoding="utf-8", errors="surrogateescape"), 1):
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                want, js = line.split("\t", 1)
                argv = json.loads(js)
                if self.fx:
                    argv = [w.replace("{fx}", self.fx.dir) for w in argv]
                elif any("{fx}" in w for w in argv):
                    continue  # names a fixture: not in a replay without fixtures
                self.run(argv, None if want == "any" else int(want), origin=f"corpus line {ln}")
                n_corpus += 1
        t_end = time.time() + (0 if self.a.replay_only else self.a.seconds)
        n = 0
        while time.time() < t_end and (self.a.max_runs == 0 or n < self.a.max_runs):
            self.run(self.gen())
            n += 1
        bad = self.outside_writes(since)
        for b in bad:
            self.finding("fuzz", "a file in the source tree was written: " + b, [], "")
        print(f"cli_fuzz: seed {self.a.seed}, {len(self.cmds)} command forms, corpus {n_corpus} runs, {n} generated runs "
              f"in {self.a.seconds} s (exit codes {json.dumps(self.stats['by_rc'], sort_keys=True)}; "
              f"{self.stats['slow']} slow by request), {len(self.findings)} finding(s)", flush=True)
        if self.findings:
            with open(os.path.join(self.work, "findings.txt"), "w", encoding="utf-8", errors="surrogateescape") as f:
                for origin, why, argv, _ in self.findings:
                    if self.fx:
                        argv = [w.replace(self.fx.dir, "{fx}") for w in argv]
                    f.write(f"# {origin}: {why}\nany\t{json.dumps(argv)}\n")
            print(f"cli_fuzz: findings (corpus lines to add after fixing) in {self.work}/findings.txt")
        return 1 if self.findings else 0


RUNNING = [0]  # the session of the run in progress (its leader's pid), 0 between runs


def on_signal(sig, frame):
    """Stopped (the test runner's time limit, ^C): end the run in progress, its whole session, too."""
    if RUNNING[0]:
        try:
            os.killpg(RUNNING[0], signal.SIGKILL)
        except OSError:
            pass
    sys.exit(128 + sig)


def main():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpcert", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--max-runs", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--corpus", default="")
    ap.add_argument("--work", default=".")
    ap.add_argument("--replay-only", action="store_true", help="replay the corpus only")
    ap.add_argument("--verbose", action="store_true", help="also show the runs that exit 3 (allowed)")
    a = ap.parse_args()
    if not os.access(a.dpcert, os.X_OK):
        print(f"cli_fuzz: {a.dpcert} is not executable", file=sys.stderr)
        return 2
    return Fuzzer(a).main()


if __name__ == "__main__":
    sys.exit(main())
