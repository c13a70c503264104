//! The page: three hand-written files embedded in the binary
//! (`crates/ckpt-ui/assets/`), so `cargo install` needs no Node and the page
//! works offline.
//!
//! The HTML names its script and stylesheet with the token in their URLs
//! (`{{TOKEN}}` is replaced when it is served; the token is 64 hex digits,
//! so the substitution cannot inject markup). Nothing else is templated:
//! every piece of workspace data reaches the page as JSON and is rendered
//! by `app.js` with `textContent`.

/// `index.html`, with `{{TOKEN}}` placeholders.
pub const INDEX_HTML: &str = include_str!("../assets/index.html");
/// The script.
pub const APP_JS: &str = include_str!("../assets/app.js");
/// The stylesheet.
pub const APP_CSS: &str = include_str!("../assets/app.css");

/// The page for this run's token.
pub fn index(token: &str) -> String {
    debug_assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    INDEX_HTML.replace("{{TOKEN}}", token)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CSP forbids inline script: the page must have none, and no
    /// inline event handler either.
    #[test]
    fn page_has_no_inline_script_or_handlers() {
        let html = INDEX_HTML.to_lowercase();
        for (i, _) in html.match_indices("<script") {
            let tag = &html[i..i + html[i..].find('>').unwrap()];
            assert!(tag.contains(" src="), "inline script: {tag}");
        }
        assert!(!html.contains(" onclick="), "inline handler");
        assert!(!html.contains(" onload="), "inline handler");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "remote URL"
        );
        assert!(
            !APP_JS.contains("innerHTML"),
            "app.js must render with textContent"
        );
        assert!(!APP_JS.contains("eval("), "no eval");
    }
}
