#!/usr/bin/env python3
"""A scripted stand-in for the model APIs that agent harnesses call, on
127.0.0.1, so the real harness CLIs can run offline in tests and benchmarks.

One server speaks every wire format; the request path picks it:
  POST .../v1/messages                      Anthropic Messages (JSON or SSE)
  POST .../responses                        OpenAI Responses (SSE)
  POST .../chat/completions                 OpenAI Chat Completions (SSE or JSON)
  POST .../models/M:generateContent         Gemini (JSON)
  POST .../models/M:streamGenerateContent   Gemini (SSE with ?alt=sse, else a JSON array)
Anything else gets a small, harmless answer (e.g. an empty model list), and
is logged.

The script (--script FILE, JSON) is the turn the "model" plays:
  {"steps": [{"edit": {"path": "/abs/file", "content": "..."}},
             {"shell": "mkdir d && ..."}, ...],
   "final": "Done."}
A request that offers tools gets the step whose index is the number of tool
results already in its conversation, so a retried request gets the same step
and each conversation plays the script from its start; once the steps are
used up, or when the request offers no tools, the answer is the final text.
The step is rendered as a call of whichever of the offered tools fits
(Claude Code's Write/Bash, Codex's apply_patch/exec_command, Gemini's
write_file/run_shell_command, opencode's write/bash, Copilot's create/bash),
with argument names taken from that tool's schema.

Each request is written to --log DIR as NNNN.json (path, body) for
debugging; the port is written to --port-file once the server listens.
Stdlib only.
"""

import argparse
import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EDIT_TOOLS = ["Write", "write_file", "write", "create", "apply_patch"]
SHELL_TOOLS = [
    "Bash",
    "run_shell_command",
    "bash",
    "exec_command",
    "shell_command",
    "shell",
]
PATH_KEYS = ["file_path", "filePath", "absolute_path", "path"]
CONTENT_KEYS = ["content", "file_text", "contents", "text"]
COMMAND_KEYS = ["command", "cmd"]

SCRIPT = {"steps": [], "final": "Done."}
LOG_DIR = None
COUNTER = itertools.count(1)
LOCK = threading.Lock()
REQUESTS = [0]


def request_count():
    """Model requests (POSTs) served since the last serve()."""
    return REQUESTS[0]


# --- The script, independent of wire format --------------------------------


class Tool:
    """An offered tool: name, JSON-schema properties and required names, and
    whether it is a freeform (non-JSON) custom tool (Codex's apply_patch)."""

    def __init__(self, name, schema=None, freeform=False):
        self.name = name
        schema = schema or {}
        self.props = schema.get("properties") or {}
        self.required = schema.get("required") or []
        self.freeform = freeform


def pick(tools, names):
    by_name = {t.name: t for t in tools}
    for n in names:
        if n in by_name:
            return by_name[n]
    return None


def first_key(tool, keys):
    for k in keys:
        if k in tool.props:
            return k
    return keys[0]


def patch_add_file(path, content):
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    body = "".join("+" + line + "\n" for line in lines)
    return "*** Begin Patch\n*** Add File: " + path + "\n" + body + "*** End Patch\n"


def fill_extras(tool, args, what):
    """Required string arguments the step does not set (a description,
    a title) get a short text, so the call passes schema validation."""
    for k in tool.required:
        if k not in args:
            t = (tool.props.get(k) or {}).get("type")
            if t == "string":
                args[k] = what
            elif t == "boolean":
                args[k] = False
    return args


def render_step(step, tools):
    """(tool name, arguments dict or freeform string) for a script step."""
    if "edit" in step:
        e = step["edit"]
        t = pick(tools, EDIT_TOOLS)
        if t is None:
            raise ValueError("no edit tool offered among %s" % [x.name for x in tools])
        if t.name == "apply_patch":
            patch = patch_add_file(e["path"], e["content"])
            if t.freeform:
                return t.name, patch
            return t.name, {first_key(t, ["input", "patch"]): patch}
        args = {first_key(t, PATH_KEYS): e["path"], first_key(t, CONTENT_KEYS): e["content"]}
        return t.name, fill_extras(t, args, "write " + os.path.basename(e["path"]))
    if "shell" in step:
        cmd = step["shell"]
        t = pick(tools, SHELL_TOOLS)
        if t is None:
            raise ValueError("no shell tool offered among %s" % [x.name for x in tools])
        key = first_key(t, COMMAND_KEYS)
        val = ["bash", "-lc", cmd] if (t.props.get(key) or {}).get("type") == "array" else cmd
        return t.name, fill_extras(t, {key: val}, "scripted step")
    raise ValueError("unknown step %r" % (step,))


def next_action(tools, n_results):
    """('call', name, args) for the next step, or ('text', final)."""
    steps = SCRIPT.get("steps", [])
    if tools and n_results < len(steps):
        name, args = render_step(steps[n_results], tools)
        return ("call", name, args)
    return ("text", SCRIPT.get("final", "Done."))


# --- Wire formats ------------------------------------------------------------


def sse(handler, events):
    """Writes (event name or None, payload dict or raw str) pairs as SSE."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for name, data in events:
        chunk = ""
        if name:
            chunk += "event: " + name + "\n"
        chunk += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        handler.wfile.write(chunk.encode())
    handler.wfile.flush()
    handler.close_connection = True


def send_json(handler, obj, code=200):
    b = json.dumps(obj).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(b)))
    handler.end_headers()
    handler.wfile.write(b)


def anthropic(handler, body):
    tools = [Tool(t.get("name"), t.get("input_schema")) for t in body.get("tools") or [] if t.get("name")]
    n = 0
    for m in body.get("messages") or []:
        if isinstance(m.get("content"), list):
            n += sum(1 for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result")
    act = next_action(tools, n)
    mid = "msg_standin_%d" % next(COUNTER)
    model = body.get("model", "standin")
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    if act[0] == "call":
        block = {"type": "tool_use", "id": "toolu_standin_%d_%d" % (n, next(COUNTER)), "name": act[1], "input": act[2]}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": act[1]}
        stop = "end_turn"
    if not body.get("stream"):
        return send_json(handler, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                   "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage})
    start = dict(block)
    if block["type"] == "tool_use":
        start["input"] = {}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        start["text"] = ""
        delta = {"type": "text_delta", "text": block["text"]}
    sse(handler, [
        ("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def responses(handler, body):
    tools = []
    for t in body.get("tools") or []:
        if t.get("type") == "function":
            tools.append(Tool(t.get("name"), t.get("parameters")))
        elif t.get("type") == "custom":
            tools.append(Tool(t.get("name"), None, freeform=True))
    items = body.get("input") if isinstance(body.get("input"), list) else []
    n = sum(1 for i in items if isinstance(i, dict)
            and i.get("type") in ("function_call_output", "custom_tool_call_output"))
    act = next_action(tools, n)
    rid = "resp_standin_%d" % next(COUNTER)
    if act[0] == "call":
        cid = "call_standin_%d_%d" % (n, next(COUNTER))
        if isinstance(act[2], str):
            item = {"type": "custom_tool_call", "id": "ctc_" + cid, "call_id": cid, "name": act[1],
                    "input": act[2], "status": "completed"}
        else:
            item = {"type": "function_call", "id": "fc_" + cid, "call_id": cid, "name": act[1],
                    "arguments": json.dumps(act[2]), "status": "completed"}
    else:
        item = {"type": "message", "id": "msg_" + rid, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": act[1], "annotations": []}]}
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    resp = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "in_progress",
            "model": body.get("model", "standin"), "output": []}
    done = dict(resp, status="completed", output=[item], usage=usage)
    events = [("response.created", {"type": "response.created", "sequence_number": 0, "response": resp}),
              ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1,
                                              "output_index": 0, "item": item})]
    if item["type"] == "message":
        events.append(("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 2,
                                                       "item_id": item["id"], "output_index": 0,
                                                       "content_index": 0, "delta": act[1]}))
    events += [("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 3,
                                              "output_index": 0, "item": item}),
               ("response.completed", {"type": "response.completed", "sequence_number": 4, "response": done})]
    if not body.get("stream", True):
        return send_json(handler, done)
    sse(handler, events)


def chat(handler, body):
    tools = [Tool((t.get("function") or {}).get("name"), (t.get("function") or {}).get("parameters"))
             for t in body.get("tools") or [] if t.get("type") == "function"]
    n = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    act = next_action(tools, n)
    cid = "chatcmpl-standin-%d" % next(COUNTER)
    model = body.get("model", "standin")
    created = int(time.time())
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if act[0] == "call":
        call = {"id": "call_standin_%d_%d" % (n, next(COUNTER)), "type": "function",
                "function": {"name": act[1], "arguments": json.dumps(act[2])}}
        msg = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        msg = {"role": "assistant", "content": act[1]}
        finish = "stop"
    if not body.get("stream"):
        return send_json(handler, {"id": cid, "object": "chat.completion", "created": created, "model": model,
                                   "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                   "usage": usage})
    delta = dict(msg)
    if "tool_calls" in delta:
        delta["tool_calls"] = [dict(delta["tool_calls"][0], index=0)]
    base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
    sse(handler, [
        (None, dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])),
        (None, dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}])),
        (None, dict(base, choices=[], usage=usage)),
        (None, "[DONE]"),
    ])


def json_for_schema(schema):
    """A minimal value that fits a JSON schema: what Gemini CLI's side calls
    (next-speaker check, model routing) ask for with a response schema."""
    t = (schema or {}).get("type", "object")
    t = t.lower() if isinstance(t, str) else "object"
    if "enum" in (schema or {}):
        e = schema["enum"]
        return "user" if "user" in e else e[0]
    if t == "object":
        props = schema.get("properties") or {}
        return {k: json_for_schema(v) for k, v in props.items()}
    if t == "array":
        return []
    if t in ("integer", "number"):
        return schema.get("minimum", 1)
    if t == "boolean":
        return False
    return "scripted"


def gemini(handler, body, stream, alt_sse):
    tools = []
    for t in body.get("tools") or []:
        for d in t.get("functionDeclarations") or []:
            tools.append(Tool(d.get("name"), d.get("parametersJsonSchema") or d.get("parameters")))
    n = 0
    for c in body.get("contents") or []:
        n += sum(1 for p in c.get("parts") or [] if isinstance(p, dict) and "functionResponse" in p)
    gen = body.get("generationConfig") or {}
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
    if not tools and gen.get("responseMimeType") == "application/json":
        schema = gen.get("responseJsonSchema") or gen.get("responseSchema") or {}
        parts = [{"text": json.dumps(json_for_schema(schema))}]
    else:
        act = next_action(tools, n)
        if act[0] == "call":
            parts = [{"functionCall": {"name": act[1], "args": act[2]}}]
        else:
            parts = [{"text": act[1]}]
    out = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
           "usageMetadata": usage, "modelVersion": "standin"}
    if stream and alt_sse:
        return sse(handler, [(None, out)])
    send_json(handler, [out] if stream else out)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _log(self, method, body):
        with LOCK:
            REQUESTS[0] += method == "POST"
        if LOG_DIR:
            with LOCK:
                n = len(os.listdir(LOG_DIR)) + 1
                with open(os.path.join(LOG_DIR, "%04d.json" % n), "w") as f:
                    json.dump({"method": method, "path": self.path, "body": body}, f, indent=1)

    def do_GET(self):
        self._log("GET", None)
        if self.path.rstrip("/").endswith("/models"):
            return send_json(self, {"object": "list", "data": [{"id": "standin", "object": "model"}],
                                    "models": []})
        send_json(self, {})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        self._log("POST", body)
        path = self.path.split("?")[0]
        try:
            if path.endswith("/messages/count_tokens"):
                return send_json(self, {"input_tokens": 10})
            if path.endswith("/messages"):
                return anthropic(self, body)
            if path.endswith("/responses"):
                return responses(self, body)
            if path.endswith("/chat/completions"):
                return chat(self, body)
            if ":streamGenerateContent" in path:
                return gemini(self, body, True, "alt=sse" in self.path)
            if ":generateContent" in path:
                return gemini(self, body, False, False)
            if ":countTokens" in path:
                return send_json(self, {"totalTokens": 10})
            send_json(self, {})
        except Exception as e:  # noqa: BLE001 - answer the harness, say why
            sys.stderr.write("model_standin: %s %s: %r\n" % (self.command, self.path, e))
            send_json(self, {"error": {"type": "standin_error", "message": str(e)}}, code=500)


def serve(script, log_dir=None, port=0):
    """Starts the stand-in on 127.0.0.1 in a background thread; returns the
    server (call .shutdown() to stop it) and its port."""
    global LOG_DIR
    SCRIPT.clear()
    SCRIPT.update({"steps": [], "final": "Done."})
    SCRIPT.update(script)
    REQUESTS[0] = 0
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        LOG_DIR = log_dir
    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", required=True)
    ap.add_argument("--log")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    a = ap.parse_args()
    with open(a.script) as f:
        script = json.load(f)
    srv, port = serve(script, a.log, a.port)
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.rename(tmp, a.port_file)
    else:
        print(port, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
