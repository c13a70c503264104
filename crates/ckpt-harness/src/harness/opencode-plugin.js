// ckpt: a checkpoint before and after every tool call that can change
// files, and one per prompt. Written by `ckpt init --agent opencode`;
// `ckpt init --agent opencode --remove` deletes it.
import { spawnSync } from "node:child_process";

const MUTATING = new Set(["bash", "edit", "write", "patch", "multiedit"]);
const pending = new Map();

function record(directory, payload) {
  try {
    const r = spawnSync("ckpt", ["hook", "--agent", "opencode"], {
      cwd: directory,
      input: JSON.stringify({ ...payload, cwd: directory }),
      encoding: "utf8",
      timeout: 30000,
    });
    const why = r.error ? r.error.message : r.status !== 0 ? (r.stderr || "").trim() : "";
    if (why) console.error(`ckpt: ${why}`);
  } catch (e) {
    console.error(`ckpt: ${e}`);
  }
}

export const Ckpt = async ({ directory }) => ({
  "chat.message": async (input, output) => {
    const text = (output.parts || [])
      .filter((p) => p.type === "text" && !p.synthetic)
      .map((p) => p.text)
      .join("\n");
    record(directory, { hook_event_name: "chat.message", session_id: input.sessionID, prompt: text });
  },
  "tool.execute.before": async (input, output) => {
    if (!MUTATING.has(input.tool)) return;
    pending.set(input.callID, output.args);
    record(directory, {
      hook_event_name: "tool.execute.before",
      session_id: input.sessionID,
      tool_name: input.tool,
      tool_input: output.args,
    });
  },
  "tool.execute.after": async (input) => {
    if (!MUTATING.has(input.tool)) return;
    const args = input.args ?? pending.get(input.callID);
    pending.delete(input.callID);
    record(directory, {
      hook_event_name: "tool.execute.after",
      session_id: input.sessionID,
      tool_name: input.tool,
      tool_input: args,
    });
  },
});
