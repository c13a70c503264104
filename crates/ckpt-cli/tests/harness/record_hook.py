#!/usr/bin/env python3
"""Hook command that records its payload: saves stdin to DIR/<n>_<EVENT>.json
(n counts from 1 in arrival order; EVENT is argv[2], else the payload's
hook_event_name / hookEventName, else "event"), plus the hook's environment
variables whose names look harness-specific to DIR/<n>_<EVENT>.env. Prints
nothing, exits 0. Used to collect the fixtures under tests/fixtures/hooks."""
import json
import os
import sys

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
data = sys.stdin.buffer.read()
event = sys.argv[2] if len(sys.argv) > 2 else None
if not event:
    try:
        v = json.loads(data)
        event = v.get("hook_event_name") or v.get("hookEventName") or "event"
    except ValueError:
        event = "event"
n = 1
while True:
    try:
        fd = os.open(os.path.join(d, ".%02d.lock" % n), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
        break
    except FileExistsError:
        n += 1
with open(os.path.join(d, "%02d_%s.json" % (n, event)), "wb") as f:
    f.write(data)
keep = ("CLAUDE", "CODEX", "GEMINI", "COPILOT", "OPENCODE", "CURSOR", "HOOK", "SESSION")
with open(os.path.join(d, "%02d_%s.env" % (n, event)), "w") as f:
    for k in sorted(os.environ):
        if any(s in k.upper() for s in keep) and "KEY" not in k.upper() and "TOKEN" not in k.upper():
            f.write("%s=%s\n" % (k, os.environ[k]))
    f.write("cwd=%s\nargv=%r\n" % (os.getcwd(), sys.argv))
