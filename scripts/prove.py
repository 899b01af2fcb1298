#!/usr/bin/env python3
"""Guard evidence: remove each guard in turn, run the tests that should
notice, and require them to fail; then restore the file and verify it is
byte-for-byte what it was. Exits non-zero if any guard goes unnoticed.

Guards are proved in PROVE_JOBS copies of the working tree at once (default
2): a test mostly waits on its dev server, PostgreSQL or Chromium, so two
share the machine's two cores well. A guard is removed only in a copy, so the
working tree is never changed, even by a run that is killed. Each test
command first runs as the tree is and must pass, so a suite that fails for
another reason proves no guard. Each runs with -failfast (a mutant's first
failure is the proof) and -vet=off (vet is lint's, once, not every run's)."""
import hashlib, json, subprocess, sys, os, time, shutil, tempfile, threading, queue

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The guard-proof list is data (register/guards.json), shared with the action
# register (starter register), which lists each tool's guards and the tests
# that prove them. Each entry: name, the checks it proves, file, the guard as
# written, the guard removed, and the tests that must notice.
GUARDS = [(g["name"], g["file"], g["guard"], g["removed"], g["test"].split())
          for g in json.load(open(os.path.join(ROOT, "register", "guards.json")))]

# What every run adds to `go test`: a baseline's group and a mutant's
# command get one bound, so a command cannot pass in its group and then
# fail alone by timing out; and no DWARF in the test binary (-ldflags=-w),
# which no test reads and whose writing was a third to a half of linking a
# mutant's binary, the larger part of a mutant's run.
TEST_FLAGS = ["-failfast", "-vet=off", "-timeout=30m", "-ldflags=-w"]


def check():
    """Every guard is found exactly once: a renamed guard fails lint in a
    second rather than the proof at the end of CI."""
    stale = [f"{name}: not found exactly once in {path}" for name, path, guard, _, _ in GUARDS
             if open(os.path.join(ROOT, path)).read().count(guard) != 1]
    for s in stale:
        print(f"FAIL  {s}; update register/guards.json")
    sys.exit(1 if stale else 0)


def copy_tree(dest):
    """A copy of the working tree as git sees it (tracked and untracked, not
    ignored), with the ignored folders the tests read (tools, npm packages)
    linked, not copied."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        src = os.path.join(ROOT, f.decode())
        if not os.path.exists(src):  # deleted, not yet committed
            continue
        dst = os.path.join(dest, f.decode())
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
    for dirpath, dirnames, _ in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in (".git", ".dev", ".gobin", "tmp")]
            if "bin" in dirnames:
                os.symlink(os.path.join(ROOT, "bin"), os.path.join(dest, "bin"))
                dirnames.remove("bin")
        if "node_modules" in dirnames:
            os.makedirs(os.path.join(dest, rel), exist_ok=True)
            os.symlink(os.path.join(dirpath, "node_modules"), os.path.join(dest, rel, "node_modules"))
            dirnames.remove("node_modules")


def with_flags(cmd):
    if cmd[:2] == ["go", "test"]:
        return cmd[:2] + TEST_FLAGS + cmd[2:]
    return cmd


def grouped(commands):
    """The baseline's commands, one per package: a package's tests run in
    one go test, built once and on one dev server, instead of once per
    guard that names them. A command of another shape runs alone, and a
    package whose run together fails runs its commands one by one, so a
    broken command is still named exactly. Largest first, so the two trees
    finish together."""
    patterns, alone = {}, []
    for cmd in commands:
        c = list(cmd)
        if c[:3] == ["go", "test", "-count=1"] and len(c) == 6 and c[3] == "-run" and "/" not in c[4]:
            pattern, pkgs = c[4], c[5:]
        elif c[:3] == ["go", "test", "-count=1"] and all(a.startswith("./") for a in c[3:]):
            pattern, pkgs = None, c[3:]
        else:
            alone.append((None, [cmd]))
            continue
        for pkg in pkgs:
            runs, members = patterns.setdefault(pkg, (set(), []))
            runs.add(pattern)
            members.append(cmd)
    groups = []
    for pkg, (runs, members) in patterns.items():
        # Joined as written: a pattern Go would refuse alone fails the group
        # too, and its commands then run one by one.
        run = [] if None in runs else ["-run", "|".join(sorted(runs))]
        groups.append((tuple(["go", "test", "-count=1"] + run + [pkg]), sorted(set(members))))
    return sorted(groups + alone, key=lambda g: -len(g[1]))


def prove(tree, env, name, path, guard, removed, cmd):
    """One guard in one tree: (ok, line)."""
    full = os.path.join(tree, path)
    original = open(full, "rb").read()
    digest = hashlib.sha256(original).hexdigest()
    text = original.decode()
    if text.count(guard) != 1:
        return False, f"FAIL  {name}: the guard is not found exactly once in {path}; update register/guards.json"
    began = time.monotonic()
    try:
        open(full, "w").write(text.replace(guard, removed))
        r = subprocess.run(with_flags(cmd), cwd=tree, env=env, capture_output=True, text=True)
    finally:
        open(full, "wb").write(original)
    if hashlib.sha256(open(full, "rb").read()).hexdigest() != digest:
        return False, f"FAIL  {name}: {path} was not restored"
    if "[build failed]" in r.stdout or "[setup failed]" in r.stdout:
        return False, f"FAIL  {name}: the mutant does not compile, so it proves nothing; fix register/guards.json"
    took = time.monotonic() - began
    with lock:
        durations.append((took, name))
    if r.returncode == 0:
        return False, f"FAIL  {name}: the suite passed with the guard removed"
    return True, f"ok    {name}: removed, suite failed, {path} restored ({took:.0f}s)"


# How long each mutant took, for the slowest list at the end: a mutant
# that makes its test wait out a timeout, rather than fail at once, is
# what makes the proof slow.
durations = []
lock = threading.Lock()


def pool(trees, items, work):
    """Runs work(tree, item) for every item, one tree per thread."""
    todo = queue.Queue()
    for item in items:
        todo.put(item)

    def run(tree):
        while True:
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            work(tree, item)

    threads = [threading.Thread(target=run, args=(tree,)) for tree in trees]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    if sys.argv[1:] == ["--check"]:
        check()
    only = sys.argv[1:]
    tried = [g for g in GUARDS if not only or any(o in g[0] for o in only)]
    jobs = max(1, min(int(os.environ.get("PROVE_JOBS", "2")), len(tried)))
    env = dict(os.environ, TOOLGATE_REQUIRE_SERVICES="1")
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="prove-")
    proved, failures = [], []
    try:
        trees = [os.path.join(work, str(i)) for i in range(jobs)]
        pool(trees, trees, lambda _, tree: copy_tree(tree))
        # First each test command as the tree is: a suite that fails with
        # every guard in place proves nothing by failing without one.
        commands = sorted({tuple(g[4]) for g in tried})
        broken = set()

        def passes(tree, cmd):
            # Twice before it counts as failing: make test has just passed
            # these suites, and one may meet a passing fault of the machine's.
            for _ in range(2):
                r = subprocess.run(with_flags(list(cmd)), cwd=tree, env=env, capture_output=True, text=True)
                if r.returncode == 0:
                    return True, r
            return False, r

        def baseline(tree, group):
            together, members = group
            if together is not None and passes(tree, together)[0]:
                return
            for cmd in members:
                ok, r = passes(tree, cmd)
                if not ok:
                    with lock:
                        broken.add(cmd)
                        print(f"FAIL  {' '.join(cmd)}: fails with every guard in place, so it proves none:\n{r.stdout[-2000:]}", flush=True)

        pool(trees, grouped(commands), baseline)
        print(f"the {len(commands)} test commands pass as the tree is ({(time.monotonic() - started) / 60:.0f} minutes)", flush=True)

        def mutant(tree, g):
            if tuple(g[4]) in broken:
                ok, line = False, f"FAIL  {g[0]}: its tests fail with the guard in place"
            else:
                ok, line = prove(tree, env, *g)
            with lock:
                print(line, flush=True)
                (proved if ok else failures).append(g[0])

        pool(trees, tried, mutant)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    slowest = sorted(durations, reverse=True)[:10]
    if len(durations) > 10:
        print("the slowest mutants (a test that waits out a timeout instead of failing at once):")
        for took, name in slowest:
            print(f"  {took:4.0f}s  {name}")
    untried = len(tried) - len(proved) - len(failures)
    print(f"{len(proved)} of {len(tried)} guards proved, {len(failures)} unnoticed, {untried} not tried, "
          f"{jobs} at a time, in {(time.monotonic() - started) / 60:.0f} minutes")
    sys.exit(0 if len(proved) == len(tried) else 1)


main()
