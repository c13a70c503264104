#!/usr/bin/env python3
"""Runs a real agent-harness CLI offline against the scripted model stand-in
(model_standin.py), for the end-to-end tests (tests/harnesses.rs), the
benchmark (bench/harness.py) and the recorded hook fixtures
(tests/fixtures/hooks/). It owns how each harness is pointed at a local
model and made to run without a person: the user-level configuration it
writes into a private HOME (provider, auth, trust of the workspace), the
environment and the command line. It does not own the project-level hook
configuration ckpt installs (`ckpt init --agent NAME --write` does), except
for recording payloads (`record`) and benchmark setups (`hooks`).

  drive.py run HARNESS --ws DIR --home DIR --script FILE [--path PATH]
        [--bin-dir DIR] [--log DIR] [--no-hook-trust-bypass] [--timeout S]
        [--prompt TEXT] [--env K=V]... [--extra-arg ARG]...
      Runs one scripted turn in DIR; prints JSON: exit code, stdout,
      stderr, number of model requests, wall seconds. --extra-arg appends
      ARG to the harness's command line (e.g. --resume ID).
  drive.py codex-hooks --ws DIR --home DIR [--bin-dir DIR]
      What the real Codex says of the hooks it finds for DIR (`codex
      app-server`, `hooks/list`): each hook's trust key, currentHash and
      trustStatus, as JSON.
  drive.py hooks HARNESS --ws DIR --command CMD [--events ckpt|all]
      Writes project-level hooks that run CMD (payload on stdin) for the
      events ckpt uses (or every event), the same way `record` does.
  drive.py record HARNESS OUTDIR [--bin-dir DIR]
      Runs the standard scenario with a recording hook on every event and
      saves the payloads as OUTDIR/<harness>-<version>/NN_<event>.json.
  drive.py version HARNESS [--bin-dir DIR]

HARNESS: claude, codex, gemini, opencode, copilot. The CLIs come from
--bin-dir, default target/harness-clis/node_modules/.bin (install.sh).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_standin  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "../../../.."))
DEFAULT_BIN = os.path.join(REPO, "target/harness-clis/node_modules/.bin")
NAMES = ["claude", "codex", "gemini", "opencode", "copilot"]

# A dummy credential: the stand-in accepts anything, the CLIs want one set.
DUMMY_KEY = "standin-dummy-key"


def bin_path(name, bin_dir):
    return os.path.join(bin_dir or DEFAULT_BIN, name)


def version(name, bin_dir=None):
    out = subprocess.run([bin_path(name, bin_dir), "--version"], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60,
                         env=dict(os.environ, HOME=tempfile.gettempdir())).stdout
    for w in out.replace(",", " ").split():
        w = w.rstrip(".")
        if w[:1].isdigit() and "." in w:
            return w
    raise RuntimeError("%s --version printed no version: %r" % (name, out))


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


# --- User-level configuration and command line, per harness -----------------


def hook_state_tables(text):
    """The `[hooks.state."KEY"]` tables of a Codex config.toml, verbatim."""
    out, keep = [], False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("["):
            keep = line.lstrip().startswith("[hooks.state")
        if keep:
            out.append(line)
    return "".join(out)


def user_config(name, home, ws, port):
    """Points the harness at the stand-in and lets it run unattended in ws.
    Everything goes under `home` (the harness's HOME); returns extra env."""
    base = "http://127.0.0.1:%d" % port
    if name == "claude":
        return {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": DUMMY_KEY,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    if name == "codex":
        codex_home = os.path.join(home, ".codex")
        os.makedirs(codex_home, exist_ok=True)
        # gpt-5.5 is in Codex's bundled model catalog with the freeform
        # apply_patch tool, so the edit step is a real apply_patch call. The
        # project is trusted (as a user would from the TUI): Codex loads
        # <repo>/.codex/ (hooks.json included) only for trusted projects.
        # The hooks the user approved ([hooks.state."KEY"] tables, which
        # Codex's TUI writes) are kept from an existing config.toml.
        config = os.path.join(codex_home, "config.toml")
        try:
            with open(config) as f:
                approved = hook_state_tables(f.read())
        except FileNotFoundError:
            approved = ""
        with open(config, "w") as f:
            f.write('model = "gpt-5.5"\nmodel_provider = "standin"\n'
                    'check_for_update_on_startup = false\n\n'
                    '[model_providers.standin]\nname = "standin"\n'
                    'base_url = "%s/v1"\nwire_api = "responses"\n\n'
                    '[projects."%s"]\ntrust_level = "trusted"\n' % (base, ws))
            f.write(approved)
        return {"CODEX_HOME": codex_home}
    if name == "gemini":
        # API-key auth (so no Google login), folder trust off (else --yolo
        # is refused in an untrusted folder).
        write_json(os.path.join(home, ".gemini/settings.json"), {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False},
        })
        return {"GOOGLE_GEMINI_BASE_URL": base, "GEMINI_API_KEY": DUMMY_KEY}
    if name == "opencode":
        # A custom OpenAI-compatible provider in the user's config (not the
        # project's opencode.json, which is the user's own).
        write_json(os.path.join(home, ".config/opencode/opencode.json"), {
            "$schema": "https://opencode.ai/config.json",
            "provider": {"standin": {"npm": "@ai-sdk/openai-compatible", "name": "standin",
                                     "options": {"baseURL": base + "/v1", "apiKey": DUMMY_KEY},
                                     "models": {"standin-model": {"name": "standin", "tool_call": True}}}},
            "model": "standin/standin-model",
            "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"},
            "autoupdate": False,
            "share": "disabled",
        })
        return {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}
    if name == "copilot":
        # BYOK: Copilot CLI talks to any Anthropic- or OpenAI-compatible
        # endpoint and then needs no GitHub login. A Claude model id makes it
        # offer its create/edit tools (a GPT id offers apply_patch only over
        # the Responses API).
        return {"COPILOT_PROVIDER_TYPE": "anthropic", "COPILOT_PROVIDER_BASE_URL": base,
                "COPILOT_PROVIDER_API_KEY": DUMMY_KEY, "COPILOT_MODEL": "claude-sonnet-4.5"}
    raise ValueError("unknown harness %r" % name)


def argv(name, bin_dir, prompt, hook_trust_bypass=True):
    b = bin_path(name, bin_dir)
    if name == "claude":
        # Root may not use --dangerously-skip-permissions; allowing exactly
        # the two tools the script uses runs them without a prompt.
        return [b, "-p", prompt, "--allowedTools", "Bash,Write"]
    if name == "codex":
        a = [b, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        if hook_trust_bypass:
            # Codex runs a hook only once the user trusted its hash (TUI
            # /hooks); this is its documented way to run them without.
            a.append("--dangerously-bypass-hook-trust")
        return a + [prompt]
    if name == "gemini":
        return [b, "-p", prompt, "--yolo"]
    if name == "opencode":
        return [b, "run", prompt]
    if name == "copilot":
        # --trust-folder: without it Copilot ignores the repository's
        # .github/hooks (untrusted folder) in prompt mode.
        return [b, "-p", prompt, "--allow-all", "--no-ask-user", "--trust-folder"]
    raise ValueError(name)


def run(name, ws, home, script, path=None, bin_dir=None, log_dir=None, hook_trust_bypass=True,
        timeout=300, prompt="Do the scripted task.", extra_env=None, extra_args=()):
    """One scripted turn; returns a dict with exit, stdout, stderr,
    requests and seconds."""
    os.makedirs(home, exist_ok=True)
    srv, port = model_standin.serve(script, log_dir)
    try:
        env = {"PATH": path if path is not None else os.environ.get("PATH", "/usr/bin:/bin"),
               "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1"}
        if os.environ.get("TMPDIR"):
            env["TMPDIR"] = os.environ["TMPDIR"]
        # Caches shared by all runs, beside the installed CLIs: Copilot CLI
        # unpacks itself (about 200 MB) into its cache on first run, and
        # opencode npm-installs its plugin package at every start.
        shared = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(bin_dir or DEFAULT_BIN))), "cache")
        env["COPILOT_CACHE_HOME"] = os.path.join(shared, "copilot")
        env["npm_config_cache"] = os.path.join(shared, "npm")
        env.update(user_config(name, home, os.path.realpath(ws), port))
        env.update(extra_env or {})
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv(name, bin_dir, prompt, hook_trust_bypass) + list(extra_args), cwd=ws, env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, out, err = None, e.stdout or b"", (e.stderr or b"") + b"\n[drive.py: timed out]"
        seconds = time.monotonic() - t0
    finally:
        srv.shutdown()
        srv.server_close()
    return {"harness": name, "exit": code, "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace"), "requests": model_standin.request_count(),
            "seconds": seconds}


def codex_hooks(ws, home, bin_dir=None):
    """The hooks Codex finds for ws, as its app server lists them (the
    list the TUI's /hooks shows): key, eventName, command, currentHash,
    trustStatus, enabled."""
    codex_home = os.path.join(home, ".codex")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "CODEX_HOME": codex_home,
           "LANG": "C.UTF-8"}
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"clientInfo": {"name": "ckpt-tests", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [os.path.realpath(ws)]}}]
    p = subprocess.Popen([bin_path("codex", bin_dir), "app-server"], cwd=ws, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for m in msgs:
            p.stdin.write(json.dumps(m) + "\n")
        p.stdin.flush()
        deadline = time.monotonic() + 120
        for line in p.stdout:
            if time.monotonic() > deadline:
                break
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if v.get("id") == 2:
                if "error" in v:
                    raise RuntimeError("codex app-server hooks/list: %r" % v["error"])
                return [h for d in v["result"]["data"] for h in d["hooks"]]
        raise RuntimeError("codex app-server gave no hooks/list answer")
    finally:
        p.kill()
        p.wait()


# --- Project-level hooks (recording, benchmark setups) -------------------------

# Events per harness: (all events it documents, the ones ckpt uses). Tool
# events take a matcher; "*" matches every tool.
EVENTS = {
    "claude": (["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
                "PermissionRequest", "Notification", "Stop", "SubagentStop", "PreCompact", "SessionEnd"],
               ["UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"]),
    "codex": (["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
               "PreCompact", "PostCompact", "SubagentStart", "SubagentStop", "Stop", "SessionEnd"],
              ["UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"]),
    "gemini": (["SessionStart", "BeforeAgent", "BeforeModel", "AfterModel", "BeforeToolSelection",
                "BeforeTool", "AfterTool", "AfterAgent", "PreCompress", "Notification", "SessionEnd"],
               ["BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent"]),
    "copilot": (["sessionStart", "userPromptSubmitted", "preToolUse", "permissionRequest", "postToolUse",
                 "postToolUseFailure", "errorOccurred", "agentStop", "subagentStart", "subagentStop",
                 "preCompact", "notification", "sessionEnd"],
                ["userPromptSubmitted", "preToolUse", "postToolUse", "agentStop"]),
    "opencode": (["chat.message", "tool.execute.before", "tool.execute.after", "event"],
                 ["chat.message", "tool.execute.before", "tool.execute.after"]),
}
TOOL_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "BeforeTool", "AfterTool"}

# opencode has no command hooks: a plugin (a JS module in .opencode/plugins/)
# gets in-process callbacks. This one runs COMMAND with a JSON payload on
# stdin for each callback in EVENTS, shaped like Claude Code's
# (hook_event_name, session_id, cwd, tool_name, tool_input, prompt), and
# ignores its exit status and output.
OPENCODE_PLUGIN = r"""// Written by ckpt's harness tests (drive.py hooks): runs a command per event.
import { spawnSync } from "child_process";
const COMMAND = %(command)s;
const EVENTS = new Set(%(events)s);
export const CkptTestHooks = async ({ directory }) => {
  const run = (payload) => {
    spawnSync("sh", ["-c", COMMAND], { input: JSON.stringify({ cwd: directory, ...payload }), stdio: ["pipe", "ignore", "inherit"] });
  };
  return {
    "chat.message": async (input, output) => {
      if (!EVENTS.has("chat.message")) return;
      const prompt = (output.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
      run({ hook_event_name: "chat.message", session_id: input.sessionID, prompt });
    },
    "tool.execute.before": async (input, output) => {
      if (!EVENTS.has("tool.execute.before")) return;
      run({ hook_event_name: "tool.execute.before", session_id: input.sessionID, tool_name: input.tool, tool_input: output.args });
    },
    "tool.execute.after": async (input, output) => {
      if (!EVENTS.has("tool.execute.after")) return;
      run({ hook_event_name: "tool.execute.after", session_id: input.sessionID, tool_name: input.tool, tool_input: input.args });
    },
  };
};
"""

# Records what an opencode plugin is given, verbatim (for fixtures).
OPENCODE_RECORDER = r"""// Written by ckpt's harness tests (drive.py record): records plugin callbacks.
import fs from "fs";
const DIR = %(dir)s;
let n = 0;
const rec = (name, obj) => {
  n++;
  fs.writeFileSync(`${DIR}/${String(n).padStart(2, "0")}_${name}.json`, JSON.stringify(obj, null, 1));
};
// Streaming and bookkeeping events, many per turn and of no use to ckpt.
const SKIP = new Set(["message.part.delta", "message.part.updated", "message.updated", "session.diff",
  "plugin.added", "catalog.updated", "reference.updated", "integration.updated", "session.status",
  "lsp.client.diagnostics", "file.watcher.updated"]);
export const CkptRecorder = async (ctx) => {
  rec("plugin_init", { directory: ctx.directory, worktree: ctx.worktree, project: ctx.project, keys: Object.keys(ctx) });
  return {
    "chat.message": async (input, output) => rec("chat.message", { input, output }),
    "tool.execute.before": async (input, output) => rec("tool.execute.before", { input, output }),
    "tool.execute.after": async (input, output) => rec("tool.execute.after", { input, output }),
    event: async ({ event }) => { if (!SKIP.has(event.type)) rec("event." + event.type, event); },
  };
};
"""


def write_hooks(name, ws, command_for, events):
    """Project-level hooks in ws running command_for(event) for each event."""
    if name in ("claude", "codex", "gemini"):
        path = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json",
                "gemini": ".gemini/settings.json"}[name]
        path = os.path.join(ws, path)
        cfg = read_json(path)
        hooks = cfg.setdefault("hooks", {})
        for e in events:
            group = {"hooks": [{"type": "command", "command": command_for(e)}]}
            if e in TOOL_EVENTS:
                group = {"matcher": "*", **group}
            hooks.setdefault(e, []).append(group)
        write_json(path, cfg)
        return path
    if name == "copilot":
        path = os.path.join(ws, ".github/hooks/ckpt-test.json")
        write_json(path, {"version": 1, "hooks": {
            e: [{"type": "command", "bash": command_for(e), "timeoutSec": 30}] for e in events}})
        return path
    if name == "opencode":
        raise ValueError("opencode hooks are a plugin: use write_opencode_plugin")
    raise ValueError(name)


def write_opencode_plugin(ws, command, events):
    path = os.path.join(ws, ".opencode/plugins/ckpt-test.js")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(OPENCODE_PLUGIN % {"command": json.dumps(command), "events": json.dumps(events)})
    return path


# --- The standard scenario, for recording ---------------------------------------


def scenario(ws, name):
    """The four steps of the issue: an edit, 1,000 files from a shell
    command, removing a directory the agent did not create, and a command
    that changes nothing. (`split`, not a `$(seq …)` loop: Gemini CLI
    refuses command substitution. `rm -r`, not `rm -rf`, for Codex, which
    refuses `rm -f` forms itself.)"""
    rm = "rm -r keep" if name == "codex" else "rm -rf keep"
    return {"steps": [
        {"edit": {"path": os.path.join(ws, "notes.txt"), "content": "hello from the agent\n"}},
        {"shell": "mkdir gen && seq 1 1000 | split -l 1 -a 4 - gen/f"},
        {"shell": rm},
        {"shell": "ls"},
    ], "final": "All done."}


def record(name, outdir, bin_dir=None):
    ver = version(name, bin_dir)
    top = tempfile.mkdtemp(prefix="ckpt-record-%s-" % name)
    ws, home, rec = (os.path.join(top, d) for d in ("ws", "home", "rec"))
    os.makedirs(os.path.join(ws, "keep"))
    os.makedirs(rec)
    for i in range(3):
        with open(os.path.join(ws, "keep/f%d.txt" % i), "w") as f:
            f.write("keep %d\n" % i)
    if name == "opencode":
        path = os.path.join(ws, ".opencode/plugins/ckpt-record.js")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write(OPENCODE_RECORDER % {"dir": json.dumps(rec)})
    else:
        recorder = os.path.join(HERE, "record_hook.py")
        write_hooks(name, ws, lambda e: "python3 %s %s %s" % (recorder, rec, e), EVENTS[name][0])
    r = run(name, ws, home, scenario(ws, name), bin_dir=bin_dir, log_dir=os.path.join(top, "requests"))
    dest = os.path.join(outdir, "%s-%s" % (name, ver))
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    for f in sorted(os.listdir(rec)):
        if f.endswith(".json"):
            with open(os.path.join(rec, f)) as src:
                data = json.load(src)
            write_json(os.path.join(dest, f), data)
    print(json.dumps({"dir": dest, "exit": r["exit"], "files": len(os.listdir(dest)), "tmp": top,
                      "stderr_tail": r["stderr"][-2000:]}, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("harness", choices=NAMES)
    r.add_argument("--ws", required=True)
    r.add_argument("--home", required=True)
    r.add_argument("--script", required=True)
    r.add_argument("--path")
    r.add_argument("--bin-dir")
    r.add_argument("--log")
    r.add_argument("--no-hook-trust-bypass", action="store_true")
    r.add_argument("--timeout", type=float, default=300)
    r.add_argument("--prompt", default="Do the scripted task.")
    r.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="extra environment for the harness (and so its hooks)")
    r.add_argument("--extra-arg", action="append", default=[], metavar="ARG",
                   help="appended to the harness's command line (repeat for each word)")
    k = sub.add_parser("codex-hooks")
    k.add_argument("--ws", required=True)
    k.add_argument("--home", required=True)
    k.add_argument("--bin-dir")
    h = sub.add_parser("hooks")
    h.add_argument("harness", choices=NAMES)
    h.add_argument("--ws", required=True)
    h.add_argument("--command", required=True)
    h.add_argument("--events", choices=["ckpt", "all"], default="ckpt")
    c = sub.add_parser("record")
    c.add_argument("harness", choices=NAMES)
    c.add_argument("outdir")
    c.add_argument("--bin-dir")
    v = sub.add_parser("version")
    v.add_argument("harness", choices=NAMES)
    v.add_argument("--bin-dir")
    a = ap.parse_args()
    if a.cmd == "run":
        with open(a.script) as f:
            script = json.load(f)
        extra = dict(e.split("=", 1) for e in a.env)
        res = run(a.harness, a.ws, a.home, script, a.path, a.bin_dir, a.log, not a.no_hook_trust_bypass,
                  a.timeout, a.prompt, extra, a.extra_arg)
        print(json.dumps(res))
    elif a.cmd == "codex-hooks":
        print(json.dumps(codex_hooks(a.ws, a.home, a.bin_dir)))
    elif a.cmd == "hooks":
        events = EVENTS[a.harness][0 if a.events == "all" else 1]
        if a.harness == "opencode":
            print(write_opencode_plugin(a.ws, a.command, events))
        else:
            print(write_hooks(a.harness, a.ws, lambda e: a.command, events))
    elif a.cmd == "record":
        record(a.harness, a.outdir, a.bin_dir)
    elif a.cmd == "version":
        print(version(a.harness, a.bin_dir))


if __name__ == "__main__":
    main()
