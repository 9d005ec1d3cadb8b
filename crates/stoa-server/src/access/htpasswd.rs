//! The password files Apache's `htpasswd` writes: one `user:hash` a line,
//! the hash in one of the schemes it makes - bcrypt (`-B`, `$2y$`), the
//! APR's MD5 rounds (`-m`, the default, `$apr1$`) and `{SHA}` (`-s`,
//! base64 of one SHA-1). Plain `crypt(3)` DES (`-d`) is not read: it
//! keeps 8 characters of a password, `htpasswd` itself calls it insecure,
//! and neither nginx's `ngx_crypt` nor Caddy take it; a line with it is
//! refused when the file is loaded, so no user is silently locked out.

use base64::Engine as _;
use md5::{Digest as _, Md5};
use sha1::Sha1;
use std::collections::HashMap;
use subtle::ConstantTimeEq;

/// One user's stored password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hash {
    /// `$2y$NN$` + 53 characters, as written (the bcrypt crate parses it).
    Bcrypt(String),
    /// `$apr1$SALT$` + 22 characters: the salt and the digest text.
    Apr1 { salt: String, digest: String },
    /// `{SHA}` + base64: the 20 bytes of SHA-1.
    Sha1([u8; 20]),
}

impl Hash {
    /// Parses the hash field of a line.
    pub(crate) fn parse(s: &str) -> Result<Hash, String> {
        if s.starts_with("$2y$") || s.starts_with("$2b$") || s.starts_with("$2a$") {
            // Checked now so that a bad line fails the load, not a login.
            let cost = s.get(4..6).and_then(|c| c.parse::<u32>().ok());
            return match cost {
                Some(4..=31) if s.len() == 60 && s.as_bytes()[6] == b'$' => {
                    Ok(Hash::Bcrypt(s.to_owned()))
                }
                _ => Err("a bcrypt hash is `$2y$NN$` and 53 characters".into()),
            };
        }
        if let Some(rest) = s.strip_prefix("$apr1$") {
            let (salt, digest) = rest
                .split_once('$')
                .ok_or("an apr1 hash is `$apr1$SALT$DIGEST`")?;
            if salt.is_empty() || salt.len() > 8 || digest.len() != 22 {
                return Err("an apr1 hash has a salt of 1 to 8 characters and 22 of digest".into());
            }
            return Ok(Hash::Apr1 {
                salt: salt.to_owned(),
                digest: digest.to_owned(),
            });
        }
        if let Some(b64) = s.strip_prefix("{SHA}") {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| "a {SHA} hash is base64")?;
            let arr: [u8; 20] = bytes
                .try_into()
                .map_err(|_| "a {SHA} hash is 20 bytes of SHA-1")?;
            return Ok(Hash::Sha1(arr));
        }
        Err(
            "not a hash Stoa reads: bcrypt (`htpasswd -B`), apr1 MD5 (`-m`) or {SHA} (`-s`); \
             crypt(3) DES (`-d`) and plain text are refused"
                .into(),
        )
    }

    /// Whether verifying costs enough to keep it off the event loop
    /// (bcrypt: by design, milliseconds per try at `htpasswd`'s cost 5,
    /// ~100 ms at cost 10).
    pub(crate) fn is_slow(&self) -> bool {
        matches!(self, Hash::Bcrypt(_))
    }

    /// Whether `password` is the one stored, compared in constant time.
    pub(crate) fn verify(&self, password: &[u8]) -> bool {
        match self {
            // The crate compares the digests with `subtle` itself.
            Hash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
            Hash::Apr1 { salt, digest } => {
                let made = apr1(password, salt.as_bytes());
                made.as_slice().ct_eq(digest.as_bytes()).into()
            }
            Hash::Sha1(want) => {
                let got = Sha1::digest(password);
                got.as_slice().ct_eq(want.as_slice()).into()
            }
        }
    }

    /// A hash of the same scheme and cost as this one for a password no
    /// one knows: what a user the file does not list is checked against,
    /// so that an unknown user costs what a wrong password costs.
    pub(crate) fn dummy(&self) -> Hash {
        // Not secret: nothing is ever accepted against it (`verify` of an
        // unknown user returns false whatever it says).
        const SALT: [u8; 16] = *b"stoa-dummy-salt!";
        match self {
            Hash::Bcrypt(h) => {
                let cost = h.get(4..6).and_then(|c| c.parse().ok()).unwrap_or(5);
                match bcrypt::hash_with_salt(b"\0stoa-no-such-user", cost, SALT) {
                    Ok(p) => Hash::Bcrypt(p.format_for_version(bcrypt::Version::TwoY)),
                    Err(_) => Hash::Sha1([0; 20]),
                }
            }
            Hash::Apr1 { .. } => Hash::Apr1 {
                salt: "stoadumy".into(),
                digest: "0000000000000000000000".into(),
            },
            Hash::Sha1(_) => Hash::Sha1([0; 20]),
        }
    }
}

/// The users of one file, and the hash an unknown user is checked against.
#[derive(Debug, Default)]
pub(crate) struct Users {
    pub(crate) users: HashMap<String, Hash>,
    pub(crate) dummy: Option<Hash>,
}

/// Parses a whole file: `user:hash` lines; blank lines and `#` comments
/// skipped (Apache's `ap_cfg_getline` does the same). Errors name the line.
pub(crate) fn parse(text: &str) -> Result<Users, String> {
    let mut users = HashMap::new();
    let mut first: Option<Hash> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (user, hash) = line
            .split_once(':')
            .ok_or_else(|| format!("line {}: not `user:hash`", n + 1))?;
        let hash = Hash::parse(hash).map_err(|e| format!("line {}: {e}", n + 1))?;
        if first.is_none() {
            first = Some(hash.clone());
        }
        // Apache takes the first line for a user; so do we.
        users.entry(user.to_owned()).or_insert(hash);
    }
    // The dummy matches the slowest scheme in the file, so that no user
    // name can be told from its absence by timing.
    let slowest = users
        .values()
        .filter(|h| h.is_slow())
        .max_by_key(|h| match h {
            Hash::Bcrypt(s) => s.get(4..6).and_then(|c| c.parse::<u32>().ok()),
            _ => None,
        })
        .or(first.as_ref());
    let dummy = slowest.map(Hash::dummy);
    Ok(Users { users, dummy })
}

/// The APR's MD5 crypt (`apr_md5_encode`, `$apr1$`): Poul-Henning Kamp's
/// FreeBSD MD5 crypt with another magic string. Returns the 22-character
/// digest text that follows `$apr1$SALT$`.
pub(crate) fn apr1(password: &[u8], salt: &[u8]) -> [u8; 22] {
    const MAGIC: &[u8] = b"$apr1$";
    let salt = &salt[..salt.len().min(8)];
    let mut ctx = Md5::new();
    ctx.update(password);
    ctx.update(MAGIC);
    ctx.update(salt);
    let alt = {
        let mut c = Md5::new();
        c.update(password);
        c.update(salt);
        c.update(password);
        c.finalize()
    };
    let mut left = password.len();
    while left > 0 {
        let n = left.min(16);
        ctx.update(&alt[..n]);
        left -= n;
    }
    // The length's bits, low first: a zero byte for a 1, the password's
    // first byte for a 0 (the C code's "final" buffer was zeroed).
    let mut i = password.len();
    while i != 0 {
        if i & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(&password[..1]);
        }
        i >>= 1;
    }
    let mut fin: [u8; 16] = ctx.finalize().into();
    // 1000 rounds "to slow things down" (the original comment).
    for r in 0..1000 {
        let mut c = Md5::new();
        if r & 1 == 1 {
            c.update(password);
        } else {
            c.update(fin);
        }
        if r % 3 != 0 {
            c.update(salt);
        }
        if r % 7 != 0 {
            c.update(password);
        }
        if r & 1 == 1 {
            c.update(fin);
        } else {
            c.update(password);
        }
        fin = c.finalize().into();
    }
    const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = [0u8; 22];
    let mut at = 0;
    let mut to64 = |mut v: u32, n: usize| {
        for _ in 0..n {
            out[at] = ITOA64[(v & 0x3f) as usize];
            at += 1;
            v >>= 6;
        }
    };
    let b = |i: usize| u32::from(fin[i]);
    for (x, y, z) in [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)] {
        to64((b(x) << 16) | (b(y) << 8) | b(z), 4);
    }
    to64(b(11), 2);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines written by Apache's `htpasswd` 2.4 (Debian apache2-utils):
    /// `htpasswd -nbm`, `-nbs`, `-nbB -C 5`.
    const MADE_BY_HTPASSWD: [(&str, &str); 6] = [
        ("sesame", "$apr1$qW6NU5xu$wxBciWQ7N4Z6N1HgaSu1p."),
        ("p@ss wörd", "$apr1$vBGBW59U$Fl.RPkVmrBs0sHR/BBMfb/"),
        ("", "$apr1$9WpdUY.5$MOYTttQbYRrfmVkApCrq7."),
        (
            "a-rather-long-password-over-sixteen",
            "$apr1$q1Wh9OjP$0JEiE.4S1mtRqvarUmZkG0",
        ),
        ("sesame", "{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw="),
        (
            "sesame",
            "$2y$05$ea3O/mlQA6vydbSkuXbBbewYBpeDcLVaRoE87VlKxRlAn80mQJKzm",
        ),
    ];

    #[test]
    fn passwords_hashed_by_apache_htpasswd_verify() {
        for (pw, h) in MADE_BY_HTPASSWD {
            let hash = Hash::parse(h).expect(h);
            assert!(hash.verify(pw.as_bytes()), "{pw:?} against {h}");
            assert!(!hash.verify(b"wrong"), "wrong password against {h}");
            let mut near = pw.as_bytes().to_vec();
            near.push(b'x');
            assert!(!hash.verify(&near), "{pw:?}+x against {h}");
        }
    }

    #[test]
    fn apr1_matches_the_apr_digest_text_exactly() {
        // The digest text itself, not only a yes: the algorithm is the
        // APR's to the byte (salt, rounds, the odd 6-4-2 byte order).
        let (salt, digest) = ("qW6NU5xu", "wxBciWQ7N4Z6N1HgaSu1p.");
        assert_eq!(&apr1(b"sesame", salt.as_bytes()), digest.as_bytes());
    }

    #[test]
    fn crypt_des_and_plain_text_lines_are_refused_with_their_line() {
        assert!(Hash::parse("abJnggxhB/yWI").is_err(), "htpasswd -d");
        assert!(Hash::parse("sesame").is_err(), "htpasswd -p");
        assert!(Hash::parse("{SHA}short").is_err());
        assert!(Hash::parse("$apr1$toolongsalt$wxBciWQ7N4Z6N1HgaSu1p.").is_err());
        assert!(Hash::parse("$2y$05$short").is_err());
        let err = parse("alice:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\nbob:abJnggxhB/yWI\n")
            .expect_err("line 2");
        assert!(err.starts_with("line 2:"), "{err}");
    }

    #[test]
    fn a_file_is_read_as_apache_reads_it() {
        let text = "# admins\n\nalice:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\r\n\
                    alice:$apr1$qW6NU5xu$wxBciWQ7N4Z6N1HgaSu1p.\nbob:$apr1$vBGBW59U$Fl.RPkVmrBs0sHR/BBMfb/\n";
        let u = parse(text).expect("parses");
        assert_eq!(u.users.len(), 2);
        // The first line for a user wins.
        assert!(matches!(u.users["alice"], Hash::Sha1(_)));
        assert!(u.users["bob"].verify("p@ss wörd".as_bytes()));
    }

    #[test]
    fn an_unknown_user_is_checked_against_a_hash_as_slow_as_the_files_slowest() {
        let text = format!(
            "a:{{SHA}}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\nb:{}\n",
            MADE_BY_HTPASSWD[5].1
        );
        let u = parse(&text).expect("parses");
        let dummy = u.dummy.expect("a dummy");
        assert!(dummy.is_slow());
        let Hash::Bcrypt(d) = &dummy else {
            panic!("bcrypt dummy")
        };
        assert!(d.starts_with("$2y$05$"), "{d}");
        assert!(!dummy.verify(b"sesame"));
        let u = parse("a:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\n").expect("parses");
        assert!(matches!(u.dummy, Some(Hash::Sha1(_))));
    }
}
