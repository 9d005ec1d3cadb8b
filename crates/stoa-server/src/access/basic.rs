//! `basic_auth = { realm = "...", users = "htpasswd file" }`: HTTP Basic
//! authentication (RFC 7617) against a file Apache's `htpasswd` wrote
//! (see [`super::htpasswd`] for the schemes).
//!
//! The file is read when the configuration loads (a bad line fails the
//! load) and again while serving when it changed: its (mtime, size,
//! inode) are looked at, at most once a second, by whichever worker
//! comes first; the table is shared by every worker. A file that cannot
//! be read again keeps the users it had (logged).
//!
//! bcrypt is slow on purpose (milliseconds per try at `htpasswd -B`'s
//! cost 5, ~100 ms at cost 10), so it never runs on a worker's event
//! loop: it goes to the runtime's blocking threads, and a success is
//! remembered for [`CACHE_TTL`] under a key that is a salted SHA-1 of
//! (user, password, stored hash) - never the password itself - as Caddy
//! caches its bcrypt results. A changed password changes the stored hash
//! and so misses the cache. apr1 (1000 MD5 rounds, ~0.1 ms) and `{SHA}`
//! are verified in place.

use super::htpasswd::{self, Hash, Users};
use base64::Engine as _;
use serde::Deserialize;
use sha1::{Digest as _, Sha1};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long a successful bcrypt verification is remembered.
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(60);

/// Remembered verifications at most; past it the cache is emptied (a
/// flood of distinct good passwords is not a case worth an LRU).
const CACHE_MAX: usize = 4096;

/// How often the file's metadata is looked at.
const RECHECK: Duration = Duration::from_secs(1);

/// `basic_auth` as written: a table, or `false` on a route to lift the
/// site's.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
pub(crate) enum BasicAuthKey {
    Off(bool),
    On(BasicAuthTable),
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct BasicAuthTable {
    /// Shown by browsers in the login prompt.
    pub(crate) realm: String,
    /// The htpasswd file (relative to the config file's directory).
    pub(crate) users: String,
}

impl BasicAuthKey {
    /// The check, or None for `false`. `resolve` makes the file's path
    /// absolute.
    pub(crate) fn build(
        &self,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Option<Arc<BasicAuth>>, String> {
        match self {
            BasicAuthKey::Off(false) => Ok(None),
            BasicAuthKey::Off(true) => {
                Err("`basic_auth = true` names no users: give `{ realm, users }`".into())
            }
            BasicAuthKey::On(t) => BasicAuth::new(&t.realm, &resolve(&t.users)).map(Some),
        }
    }
}

/// A route's Basic authentication, shared by every worker.
pub(crate) struct BasicAuth {
    /// The whole `WWW-Authenticate` value.
    challenge: Box<[u8]>,
    path: PathBuf,
    table: RwLock<Arc<Table>>,
    /// When the file is next looked at, in ms since `epoch`.
    next_check_ms: AtomicU64,
    epoch: Instant,
    cache: Mutex<HashMap<[u8; 20], Instant>>,
    /// The salt of cache keys, random per process.
    salt: [u8; 16],
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

struct Table {
    users: Users,
    /// The file's signature when it was read.
    sig: Option<Signature>,
}

/// A file's (mtime ns, size, inode): what tells a changed file.
type Signature = (i128, u64, u64);

fn signature(path: &Path) -> Option<Signature> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
    Some((mtime, m.size(), m.ino()))
}

fn read(path: &Path) -> Result<(Users, Option<Signature>), String> {
    // Stat first: a change during the read is seen on the next look.
    let sig = signature(path);
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let users = htpasswd::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((users, sig))
}

/// What the credentials of a request come to.
pub(crate) enum Checked {
    /// The user, authenticated.
    User(String),
    /// None, malformed, unknown user or wrong password: 401.
    Refused,
    /// A bcrypt hash not in the cache: verify it off the event loop.
    Slow(SlowCheck),
}

/// A bcrypt verification to run on a blocking thread.
pub(crate) struct SlowCheck {
    user: String,
    password: Vec<u8>,
    hash: Hash,
    /// The cache key, None for an unknown user (never cached).
    key: Option<[u8; 20]>,
}

impl BasicAuth {
    pub(crate) fn new(realm: &str, path: &Path) -> Result<Arc<BasicAuth>, String> {
        if realm
            .bytes()
            .any(|b| b == b'"' || b == b'\\' || b.is_ascii_control())
        {
            return Err("realm: no quotes, backslashes or control characters".into());
        }
        let (users, sig) = read(path)?;
        let mut salt = [0u8; 16];
        let rs = std::collections::hash_map::RandomState::new();
        for (i, chunk) in salt.chunks_mut(8).enumerate() {
            let mut h = rs.build_hasher();
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
        Ok(Arc::new(BasicAuth {
            // RFC 7617 §2: the realm, and §2.1: the charset the server
            // expects user and password in.
            challenge: format!("Basic realm=\"{realm}\", charset=\"UTF-8\"")
                .into_bytes()
                .into(),
            path: path.to_owned(),
            table: RwLock::new(Arc::new(Table { users, sig })),
            next_check_ms: AtomicU64::new(RECHECK.as_millis() as u64),
            epoch: Instant::now(),
            cache: Mutex::new(HashMap::new()),
            salt,
        }))
    }

    /// The `WWW-Authenticate` value of a 401.
    pub(crate) fn challenge(&self) -> &[u8] {
        &self.challenge
    }

    /// The current table, read again when the file changed (looked at
    /// once a second at most).
    fn table(&self) -> Arc<Table> {
        let now = self.epoch.elapsed().as_millis() as u64;
        let next = self.next_check_ms.load(Ordering::Relaxed);
        // One worker wins the look; the others use the table as it is.
        if now >= next
            && self
                .next_check_ms
                .compare_exchange(
                    next,
                    now + RECHECK.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.reload_if_changed();
        }
        match self.table.read() {
            Ok(t) => t.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    #[cold]
    fn reload_if_changed(&self) {
        let sig = signature(&self.path);
        let same = match self.table.read() {
            Ok(t) => t.sig == sig,
            Err(_) => false,
        };
        if same {
            return;
        }
        match read(&self.path) {
            Ok((users, sig)) => {
                tracing::info!("basic_auth: {} read again", self.path.display());
                let t = Arc::new(Table { users, sig });
                match self.table.write() {
                    Ok(mut g) => *g = t,
                    Err(p) => *p.into_inner() = t,
                }
            }
            Err(e) => {
                // Keep the users we have; remember the signature so the
                // error is logged once per change, not once a second.
                tracing::error!("basic_auth: {e}; the users read before stay");
                if let Ok(mut g) = self.table.write() {
                    let old = Arc::clone(&g);
                    *g = Arc::new(Table {
                        users: Users {
                            users: old.users.users.clone(),
                            dummy: old.users.dummy.clone(),
                        },
                        sig,
                    });
                }
            }
        }
    }

    /// Checks a request's `Authorization` field value (None: absent).
    pub(crate) fn check(&self, authorization: Option<&[u8]>) -> Checked {
        let Some((user, password)) = authorization.and_then(decode) else {
            return Checked::Refused;
        };
        let (user, password) = (user.as_str(), password.as_slice());
        let table = self.table();
        let (hash, known) = match table.users.users.get(user) {
            Some(h) => (h, true),
            None => match &table.users.dummy {
                Some(d) => (d, false),
                None => return Checked::Refused,
            },
        };
        if !hash.is_slow() {
            let ok = hash.verify(password);
            return if ok && known {
                Checked::User(user.to_owned())
            } else {
                Checked::Refused
            };
        }
        let key = known.then(|| self.cache_key(user, password, hash));
        if let Some(k) = &key {
            if let Ok(mut c) = self.cache.lock() {
                match c.get(k) {
                    Some(t) if t.elapsed() < CACHE_TTL => return Checked::User(user.to_owned()),
                    Some(_) => {
                        c.remove(k);
                    }
                    None => {}
                }
            }
        }
        Checked::Slow(SlowCheck {
            user: user.to_owned(),
            password: password.to_vec(),
            hash: hash.clone(),
            key,
        })
    }

    fn cache_key(&self, user: &str, password: &[u8], hash: &Hash) -> [u8; 20] {
        let mut h = Sha1::new();
        h.update(self.salt);
        h.update(user.as_bytes());
        h.update([0]);
        h.update(password);
        h.update([0]);
        if let Hash::Bcrypt(s) = hash {
            h.update(s.as_bytes());
        }
        h.finalize().into()
    }

    /// Runs a bcrypt verification on the runtime's blocking threads and
    /// remembers a success.
    pub(crate) async fn verify_slow(&self, job: SlowCheck) -> Option<String> {
        let SlowCheck {
            user,
            password,
            hash,
            key,
        } = job;
        let ok = tokio::task::spawn_blocking(move || hash.verify(&password))
            .await
            .unwrap_or(false);
        let key = key?;
        if !ok {
            return None;
        }
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_MAX {
                c.clear();
            }
            c.insert(key, Instant::now());
        }
        Some(user)
    }

    /// Verifies in place, whatever the scheme (tests).
    #[cfg(test)]
    fn check_blocking(&self, authorization: Option<&[u8]>) -> Option<String> {
        match self.check(authorization) {
            Checked::User(u) => Some(u),
            Checked::Refused => None,
            Checked::Slow(j) => (j.hash.verify(&j.password) && j.key.is_some()).then_some(j.user),
        }
    }
}

/// The user and password of `Basic <base64(user:password)>` (RFC 7617
/// §2: the scheme in any case; the user-id cannot hold a colon, the
/// password may). The user must be UTF-8: it becomes REMOTE_USER.
pub(crate) fn decode(value: &[u8]) -> Option<(String, Vec<u8>)> {
    let value = value.trim_ascii();
    let (scheme, rest) = value.split_at(value.iter().position(|&b| b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let token = rest.trim_ascii();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()?;
    let colon = raw.iter().position(|&b| b == b':')?;
    let user = std::str::from_utf8(&raw[..colon]).ok()?.to_owned();
    Some((user, raw[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pw: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"));
        format!("Basic {b64}").into_bytes()
    }

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stoa-basic-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let p = dir.join("htpasswd");
        std::fs::write(&p, text).expect("write");
        p
    }

    #[test]
    fn credentials_decode_as_rfc_7617_says() {
        assert_eq!(
            decode(b"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
            Some(("Aladdin".into(), b"open sesame".to_vec()))
        );
        // §2: the scheme is case-insensitive; the password may hold ':'.
        assert_eq!(
            decode(&basic("u", "a:b")).map(|c| c.1),
            Some(b"a:b".to_vec())
        );
        assert!(decode(b"bAsIc dTpw").is_some());
        for bad in [
            &b"Bearer dTpw"[..],
            b"Basic",
            b"Basic !!!",
            b"Basic dXNlcg==",
        ] {
            assert_eq!(decode(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_challenge_names_the_realm_and_utf_8() {
        let p = file("challenge", "a:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\n");
        let b = BasicAuth::new("Admin area", &p).expect("loads");
        assert_eq!(
            b.challenge(),
            b"Basic realm=\"Admin area\", charset=\"UTF-8\""
        );
        assert!(BasicAuth::new("a\"b", &p).is_err());
    }

    #[test]
    fn right_passwords_pass_and_wrong_or_unknown_ones_do_not() {
        let p = file(
            "verify",
            "alice:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\n\
             bob:$2y$05$ea3O/mlQA6vydbSkuXbBbewYBpeDcLVaRoE87VlKxRlAn80mQJKzm\n",
        );
        let b = BasicAuth::new("r", &p).expect("loads");
        assert_eq!(
            b.check_blocking(Some(&basic("alice", "sesame"))),
            Some("alice".into())
        );
        assert_eq!(b.check_blocking(Some(&basic("alice", "nope"))), None);
        assert_eq!(
            b.check_blocking(Some(&basic("bob", "sesame"))),
            Some("bob".into())
        );
        assert_eq!(b.check_blocking(Some(&basic("bob", "nope"))), None);
        // An unknown user goes through the (bcrypt) dummy: slow like bob.
        assert!(matches!(
            b.check(Some(&basic("carol", "sesame"))),
            Checked::Slow(_)
        ));
        assert_eq!(b.check_blocking(Some(&basic("carol", "sesame"))), None);
        assert_eq!(b.check_blocking(None), None);
    }

    #[test]
    fn a_bcrypt_success_is_remembered_and_a_wrong_password_never() {
        let p = file(
            "cache",
            "bob:$2y$05$ea3O/mlQA6vydbSkuXbBbewYBpeDcLVaRoE87VlKxRlAn80mQJKzm\n",
        );
        let b = BasicAuth::new("r", &p).expect("loads");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let slow = |pw: &str| match b.check(Some(&basic("bob", pw))) {
            Checked::Slow(j) => Some(j),
            _ => None,
        };
        let job = slow("sesame").expect("first try is slow");
        assert_eq!(rt.block_on(b.verify_slow(job)), Some("bob".into()));
        assert!(matches!(
            b.check(Some(&basic("bob", "sesame"))),
            Checked::User(_)
        ));
        let job = slow("nope").expect("slow");
        assert_eq!(rt.block_on(b.verify_slow(job)), None);
        assert!(slow("nope").is_some(), "a failure is not cached");
    }

    #[test]
    fn a_changed_file_is_read_again() {
        let p = file("reread", "alice:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\n");
        let b = BasicAuth::new("r", &p).expect("loads");
        assert!(b.check_blocking(Some(&basic("alice", "sesame"))).is_some());
        // `htpasswd -s` of "other" for dave, alice gone; a different size.
        std::fs::write(&p, "dave:{SHA}0JQeaNqPOBUf+Gph/Fn3xc+fyqI=\n# x\n").expect("rewrite");
        // As if a second had passed since the last look.
        b.next_check_ms.store(0, Ordering::Relaxed);
        assert!(b.check_blocking(Some(&basic("alice", "sesame"))).is_none());
        assert!(b.check_blocking(Some(&basic("dave", "other"))).is_some());
        // A file that became unreadable keeps the users read before.
        std::fs::write(&p, "dave:garbage\n").expect("rewrite");
        b.next_check_ms.store(0, Ordering::Relaxed);
        assert!(b.check_blocking(Some(&basic("dave", "other"))).is_some());
    }
}
