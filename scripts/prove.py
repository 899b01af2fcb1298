#!/usr/bin/env python3
"""Guard evidence: remove each guard in turn, run the tests that should
notice, and require them to fail; then restore the file and verify it is
byte-for-byte what it was. Exits non-zero if any guard goes unnoticed."""
import hashlib, json, subprocess, sys, os, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The guard-proof list is data (register/guards.json), shared with the action
# register (starter register), which lists each tool's guards and the tests
# that prove them. Each entry: name, the checks it proves, file, the guard as
# written, the guard removed, and the tests that must notice.
GUARDS = [(g["name"], g["file"], g["guard"], g["removed"], g["test"].split())
          for g in json.load(open(os.path.join(ROOT, "register", "guards.json")))]

def check():
    """Every guard is found exactly once: a renamed guard fails lint in a
    second rather than the proof at the end of CI."""
    stale = [f"{name}: not found exactly once in {path}" for name, path, guard, _, _ in GUARDS
             if open(os.path.join(ROOT, path)).read().count(guard) != 1]
    for s in stale:
        print(f"FAIL  {s}; update register/guards.json")
    sys.exit(1 if stale else 0)


def main():
    if sys.argv[1:] == ["--check"]:
        check()
    only = sys.argv[1:]
    env = dict(os.environ, TOOLGATE_REQUIRE_SERVICES="1")
    failures = 0
    started = time.monotonic()
    for name, path, guard, removed, cmd in GUARDS:
        if only and not any(o in name for o in only):
            continue
        full = os.path.join(ROOT, path)
        original = open(full, "rb").read()
        digest = hashlib.sha256(original).hexdigest()
        text = original.decode()
        if text.count(guard) != 1:
            print(f"FAIL  {name}: the guard is not found exactly once in {path}; update register/guards.json")
            failures += 1
            continue
        began = time.monotonic()
        try:
            open(full, "w").write(text.replace(guard, removed))
            r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        finally:
            open(full, "wb").write(original)
        if hashlib.sha256(open(full, "rb").read()).hexdigest() != digest:
            print(f"FAIL  {name}: {path} was not restored")
            sys.exit(2)
        if "[build failed]" in r.stdout or "[setup failed]" in r.stdout:
            print(f"FAIL  {name}: the mutant does not compile, so it proves nothing; fix register/guards.json")
            failures += 1
        elif r.returncode == 0:
            print(f"FAIL  {name}: the suite passed with the guard removed")
            failures += 1
        else:
            print(f"ok    {name}: removed, suite failed, {path} restored ({time.monotonic() - began:.0f}s)")
    tried = [g for g in GUARDS if not only or any(o in g[0] for o in only)]
    print(f"{len(tried) - failures} of {len(tried)} guards proved, {failures} unnoticed, in {(time.monotonic() - started) / 60:.0f} minutes")
    sys.exit(1 if failures else 0)

main()
