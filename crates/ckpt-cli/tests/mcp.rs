//! `ckpt mcp` end to end, driven by a real MCP client: the official Python
//! SDK (`mcp` on PyPI) runs `tests/fixtures/mcp_client.py` against the real
//! binary: initialize → tools/list → save → edit files → diff → restore
//! (dry run, then real). The script asserts each step; this test then checks
//! the files on disk are byte for byte the saved ones.
//!
//! Python is found as `$CKPT_MCP_PYTHON`, else `target/mcp-venv/bin/python`
//! (what `scripts/test` creates), else `python3`; without one that can
//! `import mcp` the test reports a skip (`common::skip`), which fails under
//! `CI=true`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

#[test]
fn python_client_saves_diffs_and_restores() {
    let py = match python_with("CKPT_MCP_PYTHON", "mcp-venv", "mcp.client.stdio") {
        Ok(p) => p,
        Err(why) => {
            skip(&why);
            return;
        }
    };
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("a.txt"), "first line\n").unwrap();
    std::fs::write(ws.root.join("b.txt"), "to be deleted\n").unwrap();
    std::fs::create_dir(ws.root.join("docs")).unwrap();
    std::fs::write(ws.root.join("docs/keep.md"), "# kept\n").unwrap();
    let before = snapshot(&ws.root);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_client.py");
    let out = Command::new(&py)
        .arg(&script)
        .arg(bin())
        .arg(&ws.root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "MCP client failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    println!("mcp timings: {stdout}");
    // After the restore the script made more saves (timing loop) that only
    // touched a.txt and the agent state; everything else is the saved tree.
    let after = snapshot(&ws.root);
    for p in ["b.txt", "docs/keep.md"] {
        assert_eq!(
            after.get(p.as_bytes()),
            before.get(p.as_bytes()),
            "{p} differs"
        );
    }
    assert!(
        !after.contains_key(&b"src/new.py"[..]),
        "src/new.py survived the restore"
    );
    // The restore is recorded: an undo checkpoint exists and the log names it.
    let log = ws.run(&["log", "--json"]).ok().json();
    let n = log["checkpoints"].as_array().unwrap().len();
    assert!(
        n >= 3,
        "expected base, undo and timing checkpoints, got {n}"
    );
}
