//! HTTP-01 (RFC 8555 §8.3): the key authorizations of the challenges out
//! now, by token, which the cleartext listeners serve at
//! `/.well-known/acme-challenge/TOKEN` before any route (and before an
//! `https_redirect`).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The path prefix of RFC 8555 §8.3.
pub(crate) const PREFIX: &str = "/.well-known/acme-challenge/";

fn tokens() -> &'static Mutex<HashMap<String, String>> {
    static T: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

pub(crate) fn put(token: &str, key_authorization: &str) {
    let mut t = tokens().lock().unwrap_or_else(|p| p.into_inner());
    t.insert(token.to_owned(), key_authorization.to_owned());
}

pub(crate) fn remove(token: &str) {
    let mut t = tokens().lock().unwrap_or_else(|p| p.into_inner());
    t.remove(token);
}

/// The body for a normalized request path, when it asks for a token
/// that a challenge out now has. Other paths under the prefix go to
/// routing as usual (a site may serve its own files there).
pub(crate) fn answer(path: &str) -> Option<String> {
    let token = path.strip_prefix(PREFIX)?;
    if token.is_empty() || token.contains('/') {
        return None;
    }
    let t = tokens().lock().unwrap_or_else(|p| p.into_inner());
    t.get(token).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_answered_with_its_key_authorization_until_removed_rfc8555_8_3() {
        put("tok-abc_1", "tok-abc_1.thumb");
        assert_eq!(
            answer("/.well-known/acme-challenge/tok-abc_1").as_deref(),
            Some("tok-abc_1.thumb")
        );
        assert_eq!(answer("/.well-known/acme-challenge/other"), None);
        assert_eq!(answer("/.well-known/acme-challenge/tok-abc_1/x"), None);
        assert_eq!(answer("/tok-abc_1"), None);
        remove("tok-abc_1");
        assert_eq!(answer("/.well-known/acme-challenge/tok-abc_1"), None);
    }
}
