//! `ckpt state …`: the agent-state key-value store from the command line.
//!
//! Keys and values are bytes. On the command line they are arguments (any
//! bytes the shell can pass); a value omitted from `put`/`cas` is read from
//! stdin, byte for byte. `--json-value` checks that the value parses as JSON
//! (it is stored as given). Output: `get` prints the value's exact bytes;
//! with `--json` every command prints one object with `"schema": 1` and
//! keys/values as strings plus `key_hex`/`value_hex` when not UTF-8 (the
//! reports of [`ckpt_lib::ops::state`]).
//!
//! These commands open only `<store>/state.redb` (never the store lock, so
//! they do not wait for a running save); reads never create it. Writes are
//! single transactions that are retried on conflict. Exit codes: 7 when a
//! `cas` finds another version ([`ckpt_lib::error::EXIT_CAS_MISMATCH`]), 8 when
//! `get` finds no such key, otherwise those of [`ckpt_lib::Error::exit_code`].

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use ckpt_lib::ops::state::{
    self as ops, CasOptions, DelOptions, GetOptions, HistoryOptions, LsOptions, NewValue,
    PutOptions, Swap, ValueSource,
};
use ckpt_lib::{Error, Result};
use clap::Subcommand;

use crate::context::Ctx;
use crate::exit::{EXIT_CAS_MISMATCH, EXIT_NOT_FOUND};
use crate::render::{self, print_report};

// Agent-state subcommands.
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
    match cmd {
        StateCmd::Get { key, at, json } => {
            let opts = GetOptions {
                key: key.as_bytes().to_vec(),
                at: *at,
            };
            get(ctx, &opts, *json)
        }
        StateCmd::Put {
            key,
            value,
            json_value,
            json,
        } => {
            let mut stdin = std::io::stdin().lock();
            let opts = PutOptions {
                key: key.as_bytes().to_vec(),
                value: new_value(value.as_ref(), *json_value, &mut stdin),
            };
            let r = ops::put(&ctx.ops, opts)?;
            if *json {
                print_report(&r);
            } else if ctx.quiet {
                println!("{}", r.version);
            } else {
                println!(
                    "set {} (state version {})",
                    render::quote(&r.key),
                    r.version
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        StateCmd::Del { key, json } => {
            let opts = DelOptions {
                key: key.as_bytes().to_vec(),
            };
            let r = ops::del(&ctx.ops, &opts)?;
            if *json {
                print_report(&r);
            } else if !ctx.quiet {
                if r.deleted {
                    println!(
                        "deleted {} (state version {})",
                        render::quote(&r.key),
                        r.version
                    );
                } else {
                    println!("{}: no such key, nothing deleted", render::quote(&r.key));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        StateCmd::Ls { prefix, at, json } => {
            let opts = LsOptions {
                prefix: prefix.as_ref().map_or(&[][..], |p| p.as_bytes()).to_vec(),
                at: *at,
            };
            let r = ops::ls(&ctx.ops, &opts)?;
            if *json {
                print_report(&r);
            } else {
                let mut out = std::io::stdout().lock();
                for e in &r.entries {
                    let _ = if ctx.quiet {
                        writeln!(out, "{}", render::quote(&e.key))
                    } else {
                        writeln!(
                            out,
                            "{}  state@{}  {}",
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
            let opts = HistoryOptions {
                key: key.as_bytes().to_vec(),
            };
            let r = ops::history(&ctx.ops, &opts)?;
            if *json {
                print_report(&r);
            } else {
                for (v, val) in &r.history {
                    match val {
                        Some(val) => println!("state@{v}  {}", render::preview(val, 60)),
                        None => println!("state@{v}  (deleted)"),
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
            let mut stdin = std::io::stdin().lock();
            let opts = CasOptions {
                key: key.as_bytes().to_vec(),
                expected_version: *expected_version,
                value: new_value(value.as_ref(), *json_value, &mut stdin),
            };
            let r = ops::cas(&ctx.ops, opts)?;
            if *json {
                print_report(&r);
                return Ok(match r.outcome {
                    Swap::Set { .. } => ExitCode::SUCCESS,
                    Swap::Mismatch { .. } => ExitCode::from(EXIT_CAS_MISMATCH),
                });
            }
            let r = r.into_result()?;
            if let Swap::Set { version } = r.outcome {
                if ctx.quiet {
                    println!("{version}");
                } else {
                    println!("set {} (state version {version})", render::quote(&r.key));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn get(ctx: &Ctx, opts: &GetOptions, json: bool) -> Result<ExitCode> {
    let r = ops::get(&ctx.ops, opts)?;
    if json {
        print_report(&r);
    } else if let Some(f) = &r.found {
        let mut out = std::io::stdout().lock();
        out.write_all(&f.value)
            .and_then(|_| out.flush())
            .map_err(|e| Error::io("write", "stdout", e))?;
    } else if !ctx.quiet {
        eprintln!(
            "ckpt: no key {} in the agent state (version {})",
            render::quote(&r.key),
            r.at
        );
    }
    Ok(match r.found {
        Some(_) => ExitCode::SUCCESS,
        None => ExitCode::from(EXIT_NOT_FOUND),
    })
}

/// The value argument, or all of stdin (read by the operation once the
/// workspace is found); checked as JSON with `--json-value`.
fn new_value<'a>(
    arg: Option<&OsString>,
    json_value: bool,
    stdin: &'a mut dyn std::io::Read,
) -> NewValue<'a> {
    let source = match arg {
        Some(v) => ValueSource::Bytes(v.as_bytes().to_vec()),
        None => ValueSource::Reader {
            name: "stdin",
            reader: stdin,
        },
    };
    NewValue { source, json_value }
}
