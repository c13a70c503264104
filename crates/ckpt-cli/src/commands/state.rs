//! `ckpt state …`: the agent-state key-value store from the command line.
//!
//! Keys and values are bytes. On the command line they are arguments (any
//! bytes the shell can pass); a value omitted from `put`/`cas` is read from
//! stdin, byte for byte. `--json-value` checks that the value parses as JSON
//! (it is stored as given). Output: `get` prints the value's exact bytes;
//! with `--json` every command prints one object with `"schema": 1` and
//! keys/values as strings plus `key_hex`/`value_hex` when not UTF-8 (see
//! `render`).
//!
//! These commands open only `<store>/state.redb` (never the store lock, so
//! they do not wait for a running save); reads never create it. Writes are
//! single transactions that are retried on conflict. Exit codes: 7 when a
//! `cas` finds another version ([`ckpt_lib::error::EXIT_CAS_MISMATCH`]), 8 when
//! `get` finds no such key, otherwise those of [`ckpt_lib::Error::exit_code`].

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use ckpt_lib::store::state::{LazyState, StateError};
use ckpt_lib::{Error, Result};
use clap::Subcommand;
use serde_json::{json, Map, Value};

use crate::context::Ctx;
use crate::exit::{EXIT_CAS_MISMATCH, EXIT_NOT_FOUND};
use crate::render::{self, print_json, SCHEMA};

/// Agent-state subcommands.
#[derive(Subcommand)]
pub enum StateCmd {
    /// Print a key's value (its exact bytes); exit 8 if there is no such key.
    Get {
        /// The key.
        key: OsString,
        /// Read at this state version (e.g. a checkpoint's `state_version`).
        #[arg(long, value_name = "VERSION")]
        at: Option<u64>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Set a key (the value is read from stdin when omitted).
    Put {
        /// The key.
        key: OsString,
        /// The value (default: all of stdin).
        value: Option<OsString>,
        /// The value must parse as JSON.
        #[arg(long)]
        json_value: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Delete a key (deleting a missing key changes nothing and succeeds).
    Del {
        /// The key.
        key: OsString,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// List keys (with a prefix: only those starting with it), in byte order.
    Ls {
        /// Only keys starting with this.
        prefix: Option<OsString>,
        /// List at this state version.
        #[arg(long, value_name = "VERSION")]
        at: Option<u64>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Every retained version of a key, oldest first.
    History {
        /// The key.
        key: OsString,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Set a key only if its version is EXPECTED_VERSION (0: only if absent);
    /// exit 7 otherwise.
    Cas {
        /// The key.
        key: OsString,
        /// The version the key must have (0 = absent).
        expected_version: u64,
        /// The value (default: all of stdin).
        value: Option<OsString>,
        /// The value must parse as JSON.
        #[arg(long)]
        json_value: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `ckpt state` subcommand.
pub fn run(ctx: &Ctx, cmd: &StateCmd) -> Result<ExitCode> {
    let ws = ctx.ops.workspace()?;
    let state = ws.state(ctx.ops.config.lock_timeout)?;
    match cmd {
        StateCmd::Get { key, at, json } => get(ctx, &state, key.as_bytes(), *at, *json),
        StateCmd::Put {
            key,
            value,
            json_value,
            json,
        } => {
            let value = read_value(value.as_ref(), *json_value)?;
            let s = state.get_or_create()?;
            let version = s.put(key.as_bytes(), &value)?;
            if *json {
                let mut m = obj();
                render::bytes_fields(&mut m, "key", key.as_bytes());
                m.insert("version".into(), json!(version));
                print_json(&Value::Object(m));
            } else if ctx.quiet {
                println!("{version}");
            } else {
                println!(
                    "set {} (state version {version})",
                    render::quote(key.as_bytes())
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        StateCmd::Del { key, json } => {
            let key = key.as_bytes();
            // Read first so that deleting a missing key commits nothing.
            let (existed, version) = match state.get()? {
                None => (false, 0),
                Some(s) => s.transaction_with_retry(Default::default(), |t| {
                    let existed = t.get(key).is_some();
                    if existed {
                        t.delete(key);
                    }
                    Ok(existed)
                })?,
            };
            if *json {
                let mut m = obj();
                render::bytes_fields(&mut m, "key", key);
                m.insert("deleted".into(), json!(existed));
                m.insert("version".into(), json!(version));
                print_json(&Value::Object(m));
            } else if !ctx.quiet {
                if existed {
                    println!("deleted {} (state version {version})", render::quote(key));
                } else {
                    println!("{}: no such key, nothing deleted", render::quote(key));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        StateCmd::Ls { prefix, at, json } => {
            let prefix = prefix.as_ref().map_or(&[][..], |p| p.as_bytes());
            let (version, entries) = match state.get()? {
                None => (check_empty_at(*at)?, Vec::new()),
                Some(s) => {
                    let v = at.unwrap_or_else(|| s.latest_version());
                    let snap = s.snapshot(v)?;
                    (v, snap.scan(prefix))
                }
            };
            if *json {
                let mut m = obj();
                m.insert("version".into(), json!(version));
                render::bytes_fields(&mut m, "prefix", prefix);
                let list: Vec<Value> = entries
                    .iter()
                    .map(|e| {
                        let mut m = Map::new();
                        render::bytes_fields(&mut m, "key", &e.key);
                        m.insert("version".into(), json!(e.version));
                        m.insert("size".into(), json!(e.value.len()));
                        render::bytes_fields(&mut m, "value", &e.value);
                        Value::Object(m)
                    })
                    .collect();
                m.insert("entries".into(), Value::Array(list));
                print_json(&Value::Object(m));
            } else {
                let mut out = std::io::stdout().lock();
                for e in &entries {
                    let _ = if ctx.quiet {
                        writeln!(out, "{}", render::quote(&e.key))
                    } else {
                        writeln!(
                            out,
                            "{}  v{}  {}",
                            render::quote(&e.key),
                            e.version,
                            render::preview(&e.value, 60)
                        )
                    };
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        StateCmd::History { key, json } => {
            let key = key.as_bytes();
            let history = match state.get()? {
                None => Vec::new(),
                Some(s) => s.history(key),
            };
            if *json {
                let mut m = obj();
                render::bytes_fields(&mut m, "key", key);
                let list: Vec<Value> = history
                    .iter()
                    .map(|(v, val)| {
                        let mut m = Map::new();
                        m.insert("version".into(), json!(v));
                        m.insert("deleted".into(), json!(val.is_none()));
                        if let Some(val) = val {
                            render::bytes_fields(&mut m, "value", val);
                        }
                        Value::Object(m)
                    })
                    .collect();
                m.insert("history".into(), Value::Array(list));
                print_json(&Value::Object(m));
            } else {
                for (v, val) in &history {
                    match val {
                        Some(val) => println!("v{v}  {}", render::preview(val, 60)),
                        None => println!("v{v}  (deleted)"),
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        StateCmd::Cas {
            key,
            expected_version,
            value,
            json_value,
            json,
        } => {
            let value = read_value(value.as_ref(), *json_value)?;
            let key = key.as_bytes();
            let s = state.get_or_create()?;
            match s.cas(key, *expected_version, &value) {
                Ok(version) => {
                    if *json {
                        let mut m = obj();
                        render::bytes_fields(&mut m, "key", key);
                        m.insert("ok".into(), json!(true));
                        m.insert("version".into(), json!(version));
                        print_json(&Value::Object(m));
                    } else if ctx.quiet {
                        println!("{version}");
                    } else {
                        println!("set {} (state version {version})", render::quote(key));
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(StateError::CasMismatch {
                    expected, actual, ..
                }) if *json => {
                    let mut m = obj();
                    render::bytes_fields(&mut m, "key", key);
                    m.insert("ok".into(), json!(false));
                    m.insert("expected".into(), json!(expected));
                    m.insert("actual".into(), json!(actual));
                    print_json(&Value::Object(m));
                    Ok(ExitCode::from(EXIT_CAS_MISMATCH))
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

fn get(ctx: &Ctx, state: &LazyState, key: &[u8], at: Option<u64>, json: bool) -> Result<ExitCode> {
    let (version, found) = match state.get()? {
        None => (check_empty_at(at)?, None),
        Some(s) => {
            let v = at.unwrap_or_else(|| s.latest_version());
            (v, s.snapshot(v)?.get_versioned(key))
        }
    };
    if json {
        let mut m = obj();
        render::bytes_fields(&mut m, "key", key);
        m.insert("at".into(), json!(version));
        m.insert("found".into(), json!(found.is_some()));
        if let Some(f) = &found {
            m.insert("version".into(), json!(f.version));
            render::bytes_fields(&mut m, "value", &f.value);
        }
        print_json(&Value::Object(m));
    } else if let Some(f) = &found {
        let mut out = std::io::stdout().lock();
        out.write_all(&f.value)
            .and_then(|_| out.flush())
            .map_err(|e| Error::io("write", "stdout", e))?;
    } else if !ctx.quiet {
        eprintln!(
            "ckpt: no key {} in the agent state (version {version})",
            render::quote(key)
        );
    }
    Ok(match found {
        Some(_) => ExitCode::SUCCESS,
        None => ExitCode::from(EXIT_NOT_FOUND),
    })
}

/// With no state store, only version 0 (the empty state) exists.
fn check_empty_at(at: Option<u64>) -> Result<u64> {
    match at {
        None | Some(0) => Ok(0),
        Some(v) => Err(Error::Usage(format!(
            "state version {v} does not exist: this workspace has no agent state yet"
        ))),
    }
}

fn obj() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("schema".into(), json!(SCHEMA));
    m
}

/// The value argument, or all of stdin; checked as JSON with `--json-value`.
fn read_value(arg: Option<&OsString>, json_value: bool) -> Result<Vec<u8>> {
    let value = match arg {
        Some(v) => v.as_bytes().to_vec(),
        None => {
            let mut buf = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut buf)
                .map_err(|e| Error::io("read", "stdin", e))?;
            buf
        }
    };
    if json_value {
        if let Err(e) = serde_json::from_slice::<Value>(&value) {
            return Err(Error::Usage(format!(
                "--json-value: the value is not valid JSON ({e}); nothing was written"
            )));
        }
    }
    Ok(value)
}
