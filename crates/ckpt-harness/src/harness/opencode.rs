//! opencode: no command hooks, but plugins. `ckpt init --agent opencode`
//! writes a plugin of its own, `.opencode/plugins/ckpt.js`
//! (`opencode-plugin.js` here), whose `tool.execute.before` and
//! `tool.execute.after` handlers run `ckpt hook --agent opencode` with a
//! Claude-shaped payload (`session_id`, `hook_event_name`, `tool_name`,
//! `tool_input`) and `chat.message` sends the prompt. The plugin waits for
//! ckpt (the checkpoint before a tool must exist before it runs) and never
//! throws, so a failed checkpoint cannot stop the agent.

use super::{Layout, Spec};

pub(crate) static SPEC: Spec = Spec {
    name: "opencode",
    title: "opencode",
    path: ".opencode/plugins/ckpt.js",
    layout: Layout::Plugin {
        text: include_str!("opencode-plugin.js"),
    },
    hooks: &[],
    command_suffix: "",
    failure_exit: 1,
    event_in_command: false,
    markers: &[".opencode", "opencode.json", "opencode.jsonc"],
    approval: None,
    latest_session: None,
};
