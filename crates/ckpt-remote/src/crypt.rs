//! Client-side encryption of a remote (`ckpt remote add --encrypt`).
//!
//! An encrypted remote holds one object in the clear, `config`: the
//! cipher and KDF parameters, a random salt, and the remote's master key
//! sealed with a key derived from the user's secret (a passphrase or the
//! contents of a key file) by Argon2id, a memory-hard KDF. Everything else
//! is sealed or named with keys derived from the master key ([`Keys`]):
//!
//! - **Sealed** (XChaCha20-Poly1305, RustCrypto's `chacha20poly1305`; a
//!   random 24-byte nonce per seal, so nonces never repeat in practice;
//!   `nonce ‖ ciphertext ‖ tag`): every blob inside a pack (file contents,
//!   trees, mtimes nodes, agent-state snapshots) with the blob's hash and
//!   kind as associated data; every pack index (alone and at the pack's
//!   end); checkpoint records, ref entries and markers, `gc/condemned`,
//!   each with its object key as associated data, so an object moved to
//!   another key does not open.
//! - **Named by keyed hashes** (BLAKE3 in keyed mode): records
//!   (`checkpoints/<keyed id>`), ref directories (`refs/<keyed workspace
//!   name>`) and entries (`refs/…/<keyed id>`). Packs are named by the
//!   BLAKE3 of their sealed bytes, which says nothing about the contents.
//!
//! So the bucket shows only sizes, counts and times. Deduplication still
//! works between workspaces that share the key: blobs are found by their
//! plaintext hash through the (sealed) pack indexes every pusher opens.
//!
//! A wrong or missing secret is found when `config` is opened, before
//! anything is written; an object that does not open (damaged, replaced,
//! moved) is an error naming it. The unsealed master key is cached in the
//! store's remote cache (`remote-cache/<url id>/key`, mode 0600) under a
//! hash of the secret and `config`, so only the first command of a store
//! pays for Argon2id; the secret is still needed every time.

use std::path::{Path, PathBuf};

use argon2::{Algorithm, Argon2, Params, Version};
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::XChaCha20Poly1305;
use ckpt_lib::Hash;
use serde::{Deserialize, Serialize};

use crate::{usage, Error, Result};

/// Key of the remote's configuration object.
pub const CONFIG: &str = "config";

const NONCE: usize = 24;
const TAG: usize = 16;

/// Bytes a seal adds.
pub const OVERHEAD: usize = NONCE + TAG;

/// Where the user's secret comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Secret {
    /// A passphrase (`CKPT_REMOTE_PASSPHRASE`).
    Passphrase(String),
    /// A file whose bytes are the secret (`CKPT_REMOTE_KEY_FILE`,
    /// `--key-file`); a trailing newline is not part of it.
    KeyFile(PathBuf),
}

impl Secret {
    /// The secret's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>> {
        match self {
            Secret::Passphrase(p) => Ok(p.as_bytes().to_vec()),
            Secret::KeyFile(p) => {
                let mut b = std::fs::read(p).map_err(|e| {
                    Error::Key(format!(
                        "cannot read the key file {}: {e} (nothing was changed)",
                        p.display()
                    ))
                })?;
                while b.last().is_some_and(|c| *c == b'\n' || *c == b'\r') {
                    b.pop();
                }
                if b.is_empty() {
                    return Err(Error::Key(format!(
                        "the key file {} is empty (nothing was changed)",
                        p.display()
                    )));
                }
                Ok(b)
            }
        }
    }

    fn shown(&self) -> String {
        match self {
            Secret::Passphrase(_) => "the passphrase in CKPT_REMOTE_PASSPHRASE".into(),
            Secret::KeyFile(p) => format!("the key file {}", p.display()),
        }
    }
}

/// The `config` object.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Remote format (crate::layout::REF_FORMAT).
    pub format: u32,
    /// How the remote is encrypted.
    pub encryption: Encryption,
}

/// The encryption parameters in `config`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Encryption {
    /// `xchacha20poly1305`.
    pub cipher: String,
    /// `argon2id`.
    pub kdf: String,
    /// Argon2id memory, KiB.
    pub m_kib: u32,
    /// Argon2id passes.
    pub t: u32,
    /// Argon2id lanes.
    pub p: u32,
    /// Salt (hex).
    pub salt: String,
    /// The master key sealed with the key derived from the secret (hex).
    pub key: String,
}

/// The keys of an encrypted remote, derived from its master key.
pub struct Keys {
    aead: XChaCha20Poly1305,
    names: [u8; 32],
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(..)")
    }
}

impl Keys {
    /// The keys of master key `master`.
    pub fn new(master: &[u8; 32]) -> Keys {
        let enc = blake3::derive_key("ckpt remote 2026 encryption key", master);
        Keys {
            aead: XChaCha20Poly1305::new(&enc.into()),
            names: blake3::derive_key("ckpt remote 2026 object names", master),
        }
    }

    /// `nonce ‖ ciphertext ‖ tag` of `plain`, bound to `aad`.
    pub fn seal(&self, aad: &[u8], plain: &[u8]) -> Vec<u8> {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ct = self
            .aead
            .encrypt(&nonce, Payload { msg: plain, aad })
            .expect("XChaCha20-Poly1305 seals any length a pack holds");
        let mut out = Vec::with_capacity(NONCE + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        out
    }

    /// Opens what [`Keys::seal`] made with the same `aad`; None if it does
    /// not open (damaged, replaced, another key).
    pub fn open(&self, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < OVERHEAD {
            return None;
        }
        let (nonce, ct) = sealed.split_at(NONCE);
        self.aead
            .decrypt(nonce.into(), Payload { msg: ct, aad })
            .ok()
    }

    /// The keyed hash of `data` in `domain` (an object name).
    pub fn name(&self, domain: &str, data: &[u8]) -> Hash {
        let mut h = blake3::Hasher::new_keyed(&self.names);
        h.update(domain.as_bytes());
        h.update(&[0]);
        h.update(data);
        Hash(*h.finalize().as_bytes())
    }
}

/// The key that seals the master key, from the secret.
fn kek(e: &Encryption, secret: &[u8]) -> Result<XChaCha20Poly1305> {
    let bad = |why: String| Error::corrupt(format!("remote `config`: {why}"));
    if e.cipher != "xchacha20poly1305" || e.kdf != "argon2id" {
        return Err(usage(format!(
            "the remote is encrypted with {} / {}, which this ckpt does not know; upgrade ckpt (nothing was changed)",
            e.cipher, e.kdf
        )));
    }
    let salt = hex(&e.salt).ok_or_else(|| bad("bad salt".into()))?;
    let params = Params::new(e.m_kib, e.t, e.p, Some(32)).map_err(|err| bad(format!("{err}")))?;
    let mut out = [0u8; 32];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(secret, &salt, &mut out)
        .map_err(|err| bad(format!("{err}")))?;
    Ok(XChaCha20Poly1305::new(&out.into()))
}

const MASTER_AAD: &[u8] = b"ckpt remote master key";

/// A new `config` for a new encrypted remote, and its keys.
pub fn create(secret: &[u8]) -> Result<(Vec<u8>, Keys)> {
    use chacha20poly1305::aead::rand_core::RngCore;
    let mut master = [0u8; 32];
    OsRng.fill_bytes(&mut master);
    let mut salt = [0u8; 16];
    OsRng.fill_bytes(&mut salt);
    let d = Params::default();
    let mut e = Encryption {
        cipher: "xchacha20poly1305".into(),
        kdf: "argon2id".into(),
        m_kib: d.m_cost(),
        t: d.t_cost(),
        p: d.p_cost(),
        salt: to_hex(&salt),
        key: String::new(),
    };
    let k = kek(&e, secret)?;
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let ct = k
        .encrypt(
            &nonce,
            Payload {
                msg: &master,
                aad: MASTER_AAD,
            },
        )
        .expect("seals 32 bytes");
    let mut sealed = nonce.to_vec();
    sealed.extend_from_slice(&ct);
    e.key = to_hex(&sealed);
    let c = Config {
        format: crate::layout::REF_FORMAT,
        encryption: e,
    };
    Ok((
        serde_json::to_vec_pretty(&c).expect("config serialises"),
        Keys::new(&master),
    ))
}

/// Opens `config` (its bytes) with `secret`: the remote's keys. `cache`:
/// the store's cache directory of this remote, where the master key is
/// kept under a hash of the secret and the config (None: not cached).
pub fn unlock(
    url: &str,
    config: &[u8],
    secret: Option<&Secret>,
    cache: Option<&Path>,
) -> Result<Keys> {
    let c: Config =
        serde_json::from_slice(config).map_err(|e| Error::corrupt(format!("{url}/config: {e}")))?;
    let Some(secret) = secret else {
        return Err(Error::Key(format!(
            "{url} is encrypted and no key was given: set CKPT_REMOTE_PASSPHRASE, or \
             CKPT_REMOTE_KEY_FILE=PATH, or add the remote with `ckpt remote add --encrypt \
             --key-file PATH NAME URL` (nothing was changed)"
        )));
    };
    let bytes = secret.bytes()?;
    let check = {
        let mut h = blake3::Hasher::new_derive_key("ckpt remote 2026 key cache");
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
        h.update(config);
        h.finalize().to_hex().to_string()
    };
    let file = cache.map(|c| c.join("key"));
    if let Some(f) = &file {
        if let Ok(s) = std::fs::read_to_string(f) {
            if let Some((ch, m)) = s.trim().split_once(' ') {
                if ch == check {
                    if let Some(m) = hex(m).and_then(|m| <[u8; 32]>::try_from(m).ok()) {
                        return Ok(Keys::new(&m));
                    }
                }
            }
        }
    }
    let k = kek(&c.encryption, &bytes)?;
    let sealed = hex(&c.encryption.key)
        .ok_or_else(|| Error::corrupt(format!("{url}/config: bad sealed key")))?;
    let master = (sealed.len() > NONCE)
        .then(|| {
            let (n, ct) = sealed.split_at(NONCE);
            k.decrypt(
                n.into(),
                Payload {
                    msg: ct,
                    aad: MASTER_AAD,
                },
            )
            .ok()
        })
        .flatten()
        .and_then(|m| <[u8; 32]>::try_from(m).ok())
        .ok_or_else(|| {
            Error::Key(format!(
                "{} does not open {url}: wrong key (nothing was changed)",
                secret.shown()
            ))
        })?;
    if let (Some(f), Some(dir)) = (&file, cache) {
        let _ = std::fs::create_dir_all(dir);
        let tmp = dir.join(format!(".key.tmp{}", std::process::id()));
        let body = format!("{check} {}\n", to_hex(&master));
        let written = {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .and_then(|mut w| w.write_all(body.as_bytes()))
        };
        if written.is_err() || std::fs::rename(&tmp, f).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(Keys::new(&master))
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_opens_only_with_its_key_and_aad() {
        let (cfg, k) = create(b"correct horse").unwrap();
        let s = k.seal(b"aad", b"secret bytes");
        assert_eq!(k.open(b"aad", &s).unwrap(), b"secret bytes");
        assert!(k.open(b"other", &s).is_none());
        let mut t = s.clone();
        t[30] ^= 1;
        assert!(k.open(b"aad", &t).is_none());
        let again = unlock(
            "u",
            &cfg,
            Some(&Secret::Passphrase("correct horse".into())),
            None,
        )
        .unwrap();
        assert_eq!(again.open(b"aad", &s).unwrap(), b"secret bytes");
        assert_eq!(again.name("d", b"x"), k.name("d", b"x"));
        let e = unlock("u", &cfg, Some(&Secret::Passphrase("wrong".into())), None).unwrap_err();
        assert!(e.to_string().contains("wrong key"), "{e}");
        let e = unlock("u", &cfg, None, None).unwrap_err();
        assert!(e.to_string().contains("no key was given"), "{e}");
    }
}
