//! What every command gets: the library's [`Context`] (directory and
//! [`Config`]) and how much to print.
//!
//! This is the one place the CLI turns its global flags and the
//! environment into configuration; the library reads neither. The
//! variables are documented in `docs/CLI.md` ("Environment").

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use ckpt_fs::copy::Strategy;
use ckpt_lib::config::CopyConfig;
use ckpt_lib::ops::Context;
use ckpt_lib::{Config, Error, Result};

/// `--lock-timeout` when it is not given: long enough for another
/// command's save or restore to end.
pub const DEFAULT_LOCK_TIMEOUT: u64 = 60;

/// A command's context.
pub struct Ctx {
    /// Where the operation runs, and its configuration.
    pub ops: Context,
    /// Print less.
    pub quiet: bool,
    /// Print more.
    pub verbose: bool,
    /// `CKPT_COPY_STRATEGY` when it names no strategy: `ckpt cp` refuses
    /// it, `ckpt doctor` shows it, every other command ignores it.
    pub bad_copy_strategy: Option<String>,
    /// `--lock-timeout` was given (`ckpt hook` waits less by default).
    pub lock_timeout_given: bool,
    /// How remote commands reach object storage: credentials, endpoint and
    /// region from the environment and the AWS config files
    /// ([`remote_settings`]); why not, when a `CKPT_REMOTE_*` value does
    /// not parse (only remote commands refuse it: [`Ctx::remote`]). Made
    /// on first use, so that no other command reads the AWS files.
    remote: OnceLock<std::result::Result<ckpt_remote::Settings, String>>,
    /// The environment, as [`Ctx::new`] was given it, for [`Ctx::remote`].
    env: Box<Env>,
}

/// A variable's value by name: the process environment, or a map in tests.
type Env = dyn Fn(&str) -> Option<String> + Send + Sync;

/// The global flags.
pub struct Globals<'a> {
    /// `-C DIR`.
    pub chdir: Option<&'a PathBuf>,
    /// `--lock-timeout SECS`, when given.
    pub lock_timeout: Option<u64>,
    /// `-q`.
    pub quiet: bool,
    /// `-v`.
    pub verbose: bool,
    /// `--full-scan`.
    pub full_scan: bool,
}

impl Ctx {
    /// Builds the context from the global flags and `env` (the process
    /// environment, or a map in tests).
    pub fn new(
        g: Globals<'_>,
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Result<Ctx> {
        let cwd = match g.chdir {
            Some(d) => std::env::current_dir()
                .map(|c| c.join(d))
                .unwrap_or_else(|_| d.clone()),
            None => std::env::current_dir().map_err(|e| Error::io("getcwd", ".", e))?,
        };
        let set = |k: &str| env(k).filter(|v| !v.is_empty());
        let positive = |k: &str| {
            set(k)
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&v| v > 0)
        };
        if set("CKPT_TRACE").is_some_and(|v| v != "0") {
            ckpt_lib::trace::enable();
        }
        let (strategy, bad_copy_strategy) = match set("CKPT_COPY_STRATEGY") {
            None => (None, None),
            Some(v) => match Strategy::parse(&v) {
                Some(s) => (Some(s), None),
                None => (
                    None,
                    Some(format!(
                        "CKPT_COPY_STRATEGY={v:?} is not one of reflink, copy_file_range, userspace"
                    )),
                ),
            },
        };
        let config = Config {
            lock_timeout: Duration::from_secs(g.lock_timeout.unwrap_or(DEFAULT_LOCK_TIMEOUT)),
            full_scan: g.full_scan || set("CKPT_FULL_SCAN").is_some_and(|v| v != "0"),
            copy: CopyConfig {
                strategy,
                split_at: positive("CKPT_SPLIT_BYTES"),
            },
            band_min: positive("CKPT_BAND_MIN"),
            harness_homes: {
                let in_home = |d: &str| set("HOME").map(|h| PathBuf::from(h).join(d));
                ckpt_harness::Homes {
                    codex: set("CODEX_HOME")
                        .map(PathBuf::from)
                        .or_else(|| in_home(".codex")),
                    claude: set("CLAUDE_CONFIG_DIR")
                        .map(PathBuf::from)
                        .or_else(|| in_home(".claude")),
                    gemini: in_home(".gemini"),
                    copilot: in_home(".copilot"),
                }
            },
            hook_watch: match set("CKPT_HOOK_WATCH").as_deref() {
                None => Some(ckpt_lib::config::HOOK_WATCH_IDLE),
                Some("off" | "0") => None,
                Some(v) => Some(v.parse::<u64>().map(Duration::from_secs).map_err(|_| {
                    Error::Usage(format!(
                        "CKPT_HOOK_WATCH={v:?} is neither a number of seconds nor `off` (nothing was done)"
                    ))
                })?),
            },
            // `$XDG_DATA_HOME` (absolute, as the XDG spec requires), else
            // `$HOME/.local/share` when `$HOME` is a directory that exists
            // (`HOME=/nonexistent` is a common "no home"); else none, and
            // stores go beside the workspace.
            data_home: set("XDG_DATA_HOME")
                .map(PathBuf::from)
                .filter(|d| d.is_absolute())
                .or_else(|| {
                    set("HOME")
                        .map(PathBuf::from)
                        .filter(|h| h.is_absolute() && h.is_dir())
                        .map(|h| h.join(".local/share"))
                }),
        };
        Ok(Ctx {
            remote: OnceLock::new(),
            env: Box::new(env),
            ops: Context::new(cwd, config),
            lock_timeout_given: g.lock_timeout.is_some(),
            quiet: g.quiet,
            verbose: g.verbose,
            bad_copy_strategy,
        })
    }
}

impl Ctx {
    /// The remote settings, or a usage error naming the `CKPT_REMOTE_*`
    /// value that does not parse.
    pub fn remote(&self) -> Result<&ckpt_remote::Settings> {
        let settings = self.remote.get_or_init(|| remote_settings(&self.env));
        settings.as_ref().map_err(|why| {
            Error::Usage(format!(
                "{why}; fix or unset it (nothing was changed; docs/CLI.md, \"Environment\")"
            ))
        })
    }
}

/// Environment variables handed to object_store (as lower-case
/// configuration keys: `AWS_ENDPOINT` → `aws_endpoint`). The AWS names are
/// the usual ones; `AWS_ENDPOINT_URL` is accepted for `AWS_ENDPOINT`.
const REMOTE_ENV: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT",
    "AWS_ALLOW_HTTP",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
    "AWS_SKIP_SIGNATURE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "GOOGLE_SERVICE_ACCOUNT",
    "GOOGLE_SERVICE_ACCOUNT_PATH",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_TOKEN",
    "AZURE_STORAGE_USE_EMULATOR",
    "AZURE_STORAGE_ENDPOINT",
];

/// The remote settings: object_store keys from the environment, then (for
/// keys still unset) from the AWS config files (`~/.aws/credentials` and
/// `~/.aws/config`, or `$AWS_SHARED_CREDENTIALS_FILE` / `$AWS_CONFIG_FILE`,
/// profile `$AWS_PROFILE` or `default`); `CKPT_REMOTE_CONCURRENCY` sets the
/// requests in flight, `CKPT_REMOTE_PACK_BYTES` the pack size,
/// `CKPT_REMOTE_COMMIT_BYTES` how much a pull fetches between two durable
/// commits; `CKPT_REMOTE_PASSPHRASE` or `CKPT_REMOTE_KEY_FILE` the secret
/// of an encrypted remote. Documented in docs/CLI.md ("Environment").
pub fn remote_settings(
    env: &impl Fn(&str) -> Option<String>,
) -> std::result::Result<ckpt_remote::Settings, String> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    let mut options: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| {
        if !options.iter().any(|(key, _)| key == k) {
            options.push((k.to_string(), v));
        }
    };
    for k in REMOTE_ENV {
        if let Some(v) = set(k) {
            put(&k.to_ascii_lowercase(), v);
        }
    }
    if let Some(v) = set("AWS_ENDPOINT_URL_S3").or_else(|| set("AWS_ENDPOINT_URL")) {
        put("aws_endpoint", v);
    }
    let home = set("HOME").map(PathBuf::from);
    let profile = set("AWS_PROFILE").unwrap_or_else(|| "default".into());
    let file = |var: &str, name: &str| {
        set(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let keys = [
        ("aws_access_key_id", "aws_access_key_id"),
        ("aws_secret_access_key", "aws_secret_access_key"),
        ("aws_session_token", "aws_session_token"),
        ("region", "aws_region"),
        ("endpoint_url", "aws_endpoint"),
    ];
    // In `config`, profiles other than default are `[profile NAME]`.
    let sections = [
        (
            file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
            profile.clone(),
        ),
        (
            file("AWS_CONFIG_FILE", "config"),
            if profile == "default" {
                profile.clone()
            } else {
                format!("profile {profile}")
            },
        ),
    ];
    for (path, section) in sections {
        let Some(text) = path.and_then(|p| std::fs::read_to_string(p).ok()) else {
            continue;
        };
        for (k, v) in ini_section(&text, &section) {
            if let Some((_, key)) = keys.iter().find(|(name, _)| *name == k) {
                put(key, v);
            }
        }
    }
    let mut s = ckpt_remote::Settings {
        options,
        ..ckpt_remote::Settings::default()
    };
    let number = |k: &str| -> std::result::Result<Option<u64>, String> {
        set(k)
            .map(|v| match v.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{k}={v:?} is not a positive whole number")),
            })
            .transpose()
    };
    if let Some(n) = number("CKPT_REMOTE_CONCURRENCY")? {
        s.concurrency = n.min(256) as usize;
    }
    if let Some(n) = number("CKPT_REMOTE_PACK_BYTES")? {
        s.pack_target = n;
    }
    if let Some(n) = number("CKPT_REMOTE_COMMIT_BYTES")? {
        s.commit_bytes = n;
    }
    // The secret of an encrypted remote (docs/REMOTE.md): a passphrase
    // before a key file.
    s.secret = env("CKPT_REMOTE_PASSPHRASE")
        .filter(|v| !v.is_empty())
        .map(ckpt_remote::crypt::Secret::Passphrase)
        .or_else(|| {
            set("CKPT_REMOTE_KEY_FILE").map(|p| ckpt_remote::crypt::Secret::KeyFile(p.into()))
        });
    Ok(s)
}

/// The `key = value` lines of `[section]` in an AWS config file.
fn ini_section(text: &str, section: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
        } else if let (true, Some((k, v))) = (inside, line.split_once('=')) {
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_settings_take_env_first_then_the_aws_files() {
        let dir = std::env::temp_dir().join(format!("ckpt-aws-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".aws")).unwrap();
        std::fs::write(
            dir.join(".aws/credentials"),
            "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n[other]\naws_access_key_id = OTHER\n",
        )
        .unwrap();
        std::fs::write(
            dir.join(".aws/config"),
            "[profile other]\nregion = eu-west-3\n",
        )
        .unwrap();
        let home = dir.display().to_string();
        let env = |k: &str| match k {
            "HOME" => Some(home.clone()),
            "AWS_ACCESS_KEY_ID" => Some("ENVKEY".to_string()),
            "AWS_ENDPOINT_URL" => Some("http://127.0.0.1:9000".to_string()),
            "CKPT_REMOTE_CONCURRENCY" => Some("3".to_string()),
            _ => None,
        };
        let s = remote_settings(&env).unwrap();
        let get = |k: &str| {
            s.options
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("aws_access_key_id"), Some("ENVKEY"));
        assert_eq!(get("aws_secret_access_key"), Some("FILESECRET"));
        assert_eq!(get("aws_endpoint"), Some("http://127.0.0.1:9000"));
        assert_eq!(get("aws_region"), None);
        assert_eq!(s.concurrency, 3);
        let env2 = |k: &str| match k {
            "HOME" => Some(home.clone()),
            "AWS_PROFILE" => Some("other".to_string()),
            _ => None,
        };
        let s = remote_settings(&env2).unwrap();
        let get = |k: &str| {
            s.options
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("aws_access_key_id"), Some("OTHER"));
        assert_eq!(get("aws_region"), Some("eu-west-3"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_a_remote_command_reads_the_remote_settings() {
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = asked.clone();
        let env = move |k: &str| {
            log.lock().unwrap().push(k.to_string());
            (k == "CKPT_REMOTE_CONCURRENCY").then(|| "eight".to_string())
        };
        let globals = Globals {
            chdir: None,
            lock_timeout: Some(1),
            quiet: false,
            verbose: false,
            full_scan: false,
        };
        let ctx = Ctx::new(globals, env).unwrap();
        let remote_keys = |asked: &[String]| {
            asked
                .iter()
                .filter(|k| k.starts_with("AWS_") || k.starts_with("CKPT_REMOTE_"))
                .count()
        };
        assert_eq!(remote_keys(&asked.lock().unwrap()), 0);
        // A bad value is refused when a remote command asks, not before.
        let err = ctx.remote().unwrap_err().to_string();
        assert!(err.contains("CKPT_REMOTE_CONCURRENCY"), "{err}");
        assert!(asked.lock().unwrap().iter().any(|k| k == "AWS_PROFILE"));
    }

    #[test]
    fn a_remote_number_that_does_not_parse_is_refused_not_ignored() {
        for (k, v) in [
            ("CKPT_REMOTE_CONCURRENCY", "eight"),
            ("CKPT_REMOTE_PACK_BYTES", "0"),
            ("CKPT_REMOTE_COMMIT_BYTES", "-5"),
        ] {
            let env = |key: &str| (key == k).then(|| v.to_string());
            let err = remote_settings(&env).unwrap_err();
            assert!(err.contains(k) && err.contains(v), "{err}");
        }
        let env = |key: &str| (key == "CKPT_REMOTE_PACK_BYTES").then(|| "1048576".to_string());
        assert_eq!(remote_settings(&env).unwrap().pack_target, 1 << 20);
    }
}
