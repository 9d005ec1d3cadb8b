//! Session tickets sealed with keys from files (nginx
//! `ssl_session_ticket_key`), so that several instances behind one load
//! balancer resume each other's sessions (RFC 5077 §4 for TLS 1.2,
//! RFC 8446 §4.6.1 for TLS 1.3: the ticket is opaque to the client, and
//! whoever holds the key can open it).
//!
//! A key file is what nginx takes: 80 bytes (or 48), made with
//! `openssl rand 80 > ticket.key`. Its first 16 bytes name the key (they
//! travel in every ticket, so the server knows which key to try); the
//! rest is secret. nginx splits that secret into an HMAC and an AES-CBC
//! key; Stoa seals with one AEAD instead, as rustls' own ticketer does:
//! AES-256-GCM under a key derived from the whole secret by HKDF-SHA256
//! (RFC 5869), so every secret byte counts and a 48-byte file gets a
//! 256-bit key too. The tickets are Stoa's own (the session state inside
//! them is rustls'), so a file shared with nginx gives no resumption
//! between nginx and Stoa: only between Stoa instances.
//!
//! Several files rotate: the first seals new tickets, every one opens
//! tickets. To rotate, put a new file first and keep the old one second
//! for a ticket lifetime, then drop it; a reload (SIGHUP) reads the files
//! again.

use ring::aead;
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// How long a ticket opens, in seconds, from when it was sealed: the hint
/// sent to clients, and enforced on return (the sealing time travels
/// inside the ticket, so every instance enforces it alike). rustls' own
/// ticketer uses the same; RFC 8446 §4.6.1 allows up to 7 days.
const LIFETIME: u32 = 12 * 60 * 60;

/// Length of a key's name, at the start of its file and of each ticket.
const NAME_LEN: usize = 16;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// The sealing time, seconds since the epoch, before the session state.
const TIME_LEN: usize = 8;

/// A ticket key file that cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TicketKeyError {
    /// Neither 80 nor 48 bytes long.
    Size { path: PathBuf, len: usize },
    /// Two files begin with the same 16-byte name: a ticket could not
    /// say which of them sealed it.
    SameName { path: PathBuf, other: PathBuf },
    /// The system's random generator or key derivation failed.
    Crypto,
}

impl fmt::Display for TicketKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TicketKeyError::Size { path, len } => write!(
                f,
                "{}: a session ticket key is 80 or 48 bytes (`openssl rand 80`), \
                 this file has {len}",
                path.display()
            ),
            TicketKeyError::SameName { path, other } => write!(
                f,
                "{}: its first 16 bytes (the key's name) are those of {}",
                path.display(),
                other.display()
            ),
            TicketKeyError::Crypto => {
                f.write_str("session tickets: no random numbers or no key derivation")
            }
        }
    }
}

struct Key {
    name: [u8; NAME_LEN],
    aead: aead::LessSafeKey,
    path: PathBuf,
}

/// Seals tickets with the first key, opens them with any.
pub(crate) struct FileTicketer {
    keys: Vec<Key>,
    rng: SystemRandom,
}

impl fmt::Debug for FileTicketer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys stay out of logs; their files say which they are.
        let paths: Vec<&Path> = self.keys.iter().map(|k| k.path.as_path()).collect();
        f.debug_struct("FileTicketer")
            .field("files", &paths)
            .finish_non_exhaustive()
    }
}

impl FileTicketer {
    /// The ticketer for these key files' contents, in order (the first
    /// seals). None for an empty list.
    pub(crate) fn new(
        files: &[(PathBuf, Vec<u8>)],
    ) -> Result<Option<FileTicketer>, TicketKeyError> {
        let mut keys: Vec<Key> = Vec::with_capacity(files.len());
        for (path, bytes) in files {
            if bytes.len() != 80 && bytes.len() != 48 {
                return Err(TicketKeyError::Size {
                    path: path.clone(),
                    len: bytes.len(),
                });
            }
            let (name_bytes, secret) = bytes.split_at(NAME_LEN);
            let mut name = [0u8; NAME_LEN];
            name.copy_from_slice(name_bytes);
            if let Some(other) = keys.iter().find(|k| k.name == name) {
                return Err(TicketKeyError::SameName {
                    path: path.clone(),
                    other: other.path.clone(),
                });
            }
            keys.push(Key {
                name,
                aead: derive(&name, secret).ok_or(TicketKeyError::Crypto)?,
                path: path.clone(),
            });
        }
        if keys.is_empty() {
            return Ok(None);
        }
        let rng = SystemRandom::new();
        // Fail at load rather than at the first handshake.
        let mut probe = [0u8; 1];
        rng.fill(&mut probe).map_err(|_| TicketKeyError::Crypto)?;
        Ok(Some(FileTicketer { keys, rng }))
    }

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    /// Seals `message` as sealed at `now` (seconds since the epoch).
    fn seal_at(&self, message: &[u8], now: u64) -> Option<Vec<u8>> {
        let key = self.keys.first()?;
        // A random nonce: a counter would have to be shared by every
        // instance using the file. 2^32 tickets per key stay well within
        // AES-GCM's bound for random nonces (NIST SP 800-38D §8.3).
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + TIME_LEN + message.len() + TAG_LEN);
        out.extend_from_slice(&key.name);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&now.to_be_bytes());
        out.extend_from_slice(message);
        let tag = key
            .aead
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&key.name),
                &mut out[NAME_LEN + NONCE_LEN..],
            )
            .ok()?;
        out.extend_from_slice(tag.as_ref());
        Some(out)
    }

    /// Opens a ticket sealed by any of the keys no longer ago than
    /// [`LIFETIME`] before `now`.
    fn open_at(&self, ticket: &[u8], now: u64) -> Option<Vec<u8>> {
        if ticket.len() < NAME_LEN + NONCE_LEN + TIME_LEN + TAG_LEN {
            return None;
        }
        let (name, rest) = ticket.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        // The name is not secret (it is in every ticket); it only says
        // which key to try, and the AEAD authenticates it as AAD.
        let key = self.keys.iter().find(|k| k.name[..] == *name)?;
        let nonce = aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key
            .aead
            .open_in_place(nonce, aead::Aad::from(&key.name), &mut buf)
            .ok()?;
        let (time, message) = plain.split_at(TIME_LEN);
        let mut t = [0u8; TIME_LEN];
        t.copy_from_slice(time);
        let sealed_at = u64::from_be_bytes(t);
        // Too old, or from a clock far ahead of ours: a full handshake.
        if now.saturating_sub(sealed_at) > u64::from(LIFETIME) || sealed_at > now + 300 {
            return None;
        }
        Some(message.to_vec())
    }
}

/// The AEAD key of a key file: HKDF-SHA256 of its secret, salted with a
/// label of Stoa's own and bound to the key's name.
fn derive(name: &[u8; NAME_LEN], secret: &[u8]) -> Option<aead::LessSafeKey> {
    let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, b"stoa session ticket key v1");
    let prk = salt.extract(secret);
    let info = [&name[..]];
    // `expand` fails only for an output longer than 255 hashes.
    let okm = prk.expand(&info, &aead::AES_256_GCM).ok()?;
    Some(aead::LessSafeKey::new(aead::UnboundKey::from(okm)))
}

impl ProducesTickets for FileTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.seal_at(plain, Self::now())
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.open_at(cipher, Self::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, fill: u8, len: usize) -> (PathBuf, Vec<u8>) {
        let mut b = vec![fill; len];
        // Distinct names even for equal fills of other lengths.
        b[0] = len as u8;
        (PathBuf::from(name), b)
    }

    fn ticketer(files: &[(PathBuf, Vec<u8>)]) -> FileTicketer {
        match FileTicketer::new(files) {
            Ok(Some(t)) => t,
            other => panic!("no ticketer: {other:?}"),
        }
    }

    #[test]
    fn two_instances_with_the_same_key_file_open_each_others_tickets_rfc5077_4() {
        let a = ticketer(&[file("a.key", 1, 80)]);
        let b = ticketer(&[file("a.key", 1, 80)]);
        let t = a.encrypt(b"session state").expect("sealed");
        assert_eq!(b.decrypt(&t).as_deref(), Some(&b"session state"[..]));
        // Random nonces: the same state never gives the same ticket
        // (RFC 8446 §4.6.1, tickets must not let sessions be linked).
        assert_ne!(a.encrypt(b"session state"), Some(t));
    }

    #[test]
    fn the_first_file_seals_and_every_file_opens_as_nginx_ssl_session_ticket_key() {
        let old = ticketer(&[file("old.key", 2, 80)]);
        let rotated = ticketer(&[file("new.key", 3, 80), file("old.key", 2, 80)]);
        let from_old = old.encrypt(b"s").expect("sealed");
        assert_eq!(rotated.decrypt(&from_old).as_deref(), Some(&b"s"[..]));
        let from_new = rotated.encrypt(b"s").expect("sealed");
        assert!(old.decrypt(&from_new).is_none());
        let only_new = ticketer(&[file("new.key", 3, 80)]);
        assert_eq!(only_new.decrypt(&from_new).as_deref(), Some(&b"s"[..]));
        // Once the old key is dropped, its tickets no longer open.
        assert!(only_new.decrypt(&from_old).is_none());
    }

    #[test]
    fn a_48_byte_file_is_a_key_too_and_other_sizes_and_repeated_names_are_refused() {
        assert!(matches!(
            FileTicketer::new(&[file("k", 4, 48)]),
            Ok(Some(_))
        ));
        assert_eq!(
            FileTicketer::new(&[file("short.key", 4, 79)]).err(),
            Some(TicketKeyError::Size {
                path: "short.key".into(),
                len: 79
            })
        );
        let e = FileTicketer::new(&[file("a", 5, 80), file("b", 5, 80)]).err();
        assert!(matches!(e, Some(TicketKeyError::SameName { .. })), "{e:?}");
        assert!(matches!(FileTicketer::new(&[]), Ok(None)));
    }

    #[test]
    fn a_tampered_or_expired_ticket_gives_a_full_handshake_rfc8446_4_6_1() {
        let t = ticketer(&[file("k", 6, 80)]);
        let now = 1_800_000_000;
        let sealed = t.seal_at(b"state", now).expect("sealed");
        assert!(t.open_at(&sealed, now + u64::from(LIFETIME)).is_some());
        assert!(t.open_at(&sealed, now + u64::from(LIFETIME) + 1).is_none());
        for i in [0, NAME_LEN + 1, NAME_LEN + NONCE_LEN + 2, sealed.len() - 1] {
            let mut bad = sealed.clone();
            bad[i] ^= 1;
            assert!(t.open_at(&bad, now).is_none(), "byte {i} flipped");
        }
        assert!(t.open_at(&sealed[..20], now).is_none());
        // The same name with another secret opens nothing.
        let mut other = file("k", 6, 80);
        other.1[40] ^= 0xff;
        assert!(ticketer(&[other]).open_at(&sealed, now).is_none());
    }
}
