#!/usr/bin/env python3
"""TEMPORARY (until `ckpt init --agent copilot` and `ckpt hook`'s Copilot
parser land): rewrites a Copilot CLI hook payload (stdin) into the Claude
Code shape today's `ckpt hook` reads, for the event named in argv[1]
(Copilot's payload does not name its event). Used only by the temporary
hook set-up in tests/harnesses.rs."""
import json
import sys

EVENTS = {"userPromptSubmitted": "UserPromptSubmit", "preToolUse": "PreToolUse",
          "postToolUse": "PostToolUse", "agentStop": "Stop"}
p = json.load(sys.stdin)
args = p.get("toolArgs")
if isinstance(args, str):
    try:
        args = json.loads(args)
    except ValueError:
        args = {"command": args}
json.dump({"hook_event_name": EVENTS.get(sys.argv[1], sys.argv[1]), "session_id": p.get("sessionId", ""),
           "cwd": p.get("cwd", ""), "tool_name": p.get("toolName", ""), "tool_input": args,
           "prompt": p.get("prompt", "")}, sys.stdout)
