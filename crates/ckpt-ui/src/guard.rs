//! The door: what every request must show before a handler runs, and the
//! headers every answer carries.
//!
//! Checked in this order, each failure answered with a status and a plain
//! text reason (no handler runs, so nothing is read or changed):
//! 1. `Host` is one of the names this server answers to ([`allowed_hosts`]:
//!    `127.0.0.1`, `localhost`, `[::1]` and the bound address, with or
//!    without the port): a DNS-rebinding page's requests name its own host
//!    and are refused (421).
//! 2. The token: header `X-Ckpt-Token` or query `token=`, compared in
//!    constant time (403). The page learns it from its own URL; another
//!    origin cannot read it.
//! 3. A request that changes something (any method but `GET`/`HEAD`) must
//!    be a `POST` whose `Origin` is this server's own origin and whose body
//!    is `application/json` (403). A cross-site form can neither send the
//!    header nor that content type without a preflight this server never
//!    answers.
//!
//! Every answer gets the Content-Security-Policy (scripts and styles only
//! from this server, no inline script, no framing, no plugins),
//! `nosniff`, `no-referrer` (the URL holds the token) and `no-store`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::Shared;

/// The header that carries the token.
pub const TOKEN_HEADER: &str = "x-ckpt-token";

/// The page's Content-Security-Policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

/// A per-run secret: 32 random bytes as 64 hex digits.
#[derive(Clone, Debug)]
pub struct Token(String);

impl Token {
    /// A fresh token from the operating system's random source.
    pub fn random() -> std::io::Result<Token> {
        let mut b = [0u8; 32];
        getrandom::fill(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Token(ckpt_lib::ops::json::hex(&b)))
    }

    /// The token text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison with what a request presented.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The `Host` values accepted for these listening addresses: the loopback
/// names, and each bound address itself, each with and without its port.
pub fn allowed_hosts(addrs: &[SocketAddr]) -> Vec<String> {
    let mut out = Vec::new();
    for a in addrs {
        let port = a.port();
        let mut names = vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            "[::1]".to_string(),
        ];
        names.push(match a {
            SocketAddr::V4(v) => v.ip().to_string(),
            SocketAddr::V6(v) => format!("[{}]", v.ip()),
        });
        for n in names {
            out.push(format!("{n}:{port}"));
            out.push(n);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The token presented by a request: the header, else `token=` in the
/// query.
fn presented(req: &Request) -> Option<String> {
    if let Some(v) = req.headers().get(TOKEN_HEADER) {
        return v.to_str().ok().map(str::to_string);
    }
    req.uri().query().and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "token")
            .map(|(_, v)| v.to_string())
    })
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("ckpt ui: refused: {why}; nothing was read or changed\n"),
    )
        .into_response()
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Why a request may not pass, or `None`.
fn check(shared: &Shared, req: &Request) -> Option<(StatusCode, &'static str)> {
    let h = req.headers();
    let host = header_str(h, header::HOST).unwrap_or("");
    if !shared.hosts.iter().any(|a| a.eq_ignore_ascii_case(host)) {
        return Some((
            StatusCode::MISDIRECTED_REQUEST,
            "the Host header is not a loopback name of this server",
        ));
    }
    if !presented(req).is_some_and(|t| shared.token.matches(&t)) {
        return Some((StatusCode::FORBIDDEN, "missing or wrong token"));
    }
    let m = req.method();
    if m == Method::GET || m == Method::HEAD {
        return None;
    }
    if m != Method::POST {
        return Some((
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and POST are served",
        ));
    }
    let origin = header_str(h, header::ORIGIN).unwrap_or("");
    if !origin.eq_ignore_ascii_case(&format!("http://{host}")) {
        return Some((StatusCode::FORBIDDEN, "the Origin is not this server"));
    }
    let json = header_str(h, header::CONTENT_TYPE)
        .is_some_and(|c| c.split(';').next().unwrap_or("").trim() == "application/json");
    if !json {
        return Some((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a POST body must be application/json",
        ));
    }
    if shared.read_only {
        return Some((StatusCode::FORBIDDEN, "the UI runs with --read-only"));
    }
    None
}

/// The middleware: [`check`], then the handler, then the headers every
/// answer carries.
pub async fn guard(State(shared): State<Arc<Shared>>, req: Request<Body>, next: Next) -> Response {
    let mut resp = match check(&shared, &req) {
        Some((status, why)) => refuse(status, why),
        None => next.run(req).await,
    };
    let h = resp.headers_mut();
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_compare_is_exact() {
        let t = Token::random().unwrap();
        assert_eq!(t.as_str().len(), 64);
        assert!(t.matches(t.as_str()));
        assert!(!t.matches(&t.as_str()[1..]));
        let mut wrong = t.as_str().to_string();
        wrong.replace_range(63.., if wrong.ends_with('0') { "1" } else { "0" });
        assert!(!t.matches(&wrong));
        assert_ne!(Token::random().unwrap().as_str(), t.as_str());
    }

    #[test]
    fn hosts_are_loopback_names_and_the_bound_address() {
        let h = allowed_hosts(&["127.0.0.1:8080".parse().unwrap()]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "localhost",
        ] {
            assert!(h.iter().any(|x| x == ok), "{ok}");
        }
        assert!(!h.iter().any(|x| x.contains("evil")));
        assert!(!h.iter().any(|x| x == "localhost:8081"));
    }
}
