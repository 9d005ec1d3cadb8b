//! OCSP stapling (RFC 6960; RFC 6066 §8 `status_request`; RFC 8446
//! §4.4.2.1): for a `[[tls]]` block with `ocsp_stapling`, the server asks
//! the OCSP responder its certificate names (authorityInfoAccess, or
//! `ocsp_responder`) whether the certificate is good, checks the answer,
//! and hands it to clients in the handshake (`CertifiedKey::ocsp`, set
//! through the block's `CertSlot`), so that they need not ask the
//! responder themselves.
//!
//! An answer is stapled only when it is for this certificate, says
//! "good", is signed by the issuer or by a responder the issuer delegated
//! to (id-kp-OCSPSigning, RFC 6960 §4.2.2.2), and is current (thisUpdate
//! not in the future, nextUpdate not past). It is fetched again halfway
//! to its nextUpdate, as Caddy does; a failed fetch is retried with
//! back-off while the previous answer, still current, stays stapled; once
//! no current good answer is held, nothing is stapled (a client then asks
//! the responder or goes without, which is better than a stale or bad
//! staple a strict client would refuse).
//!
//! One thread per server process (started by `start`, so not in the
//! privileged parent nor in `stoa check`) does the fetching with blocking
//! I/O: a handful of small requests an hour need no event loop, and the
//! workers' loops never wait for a responder. The answers are kept
//! process-wide by certificate, so a reload, which makes new slots, staples
//! the answer in hand at once.

use super::der::{self, Reader, Tlv};
use super::CertSlot;
use ring::digest;
use ring::signature;
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far a responder's clock may be ahead of ours.
const SKEW: i64 = 5 * 60;
/// Bounds on the wait before fetching again after a failure.
const RETRY_MIN: i64 = 60;
const RETRY_MAX: i64 = 60 * 60;
/// The soonest a good answer is asked for again: short-lived answers
/// (a minute) are still refreshed before they lapse, and a responder is
/// never asked in a tight loop.
const REFRESH_MIN: i64 = 10;
/// How long an answer without nextUpdate is stapled (nginx: an hour).
const NO_NEXT_UPDATE: i64 = 60 * 60;
/// The largest answer read from a responder.
const MAX_ANSWER: u64 = 256 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(10);

// OIDs, as their DER contents.
const OID_OCSP_BASIC: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 48, 1, 1];
const OID_AD_OCSP: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 48, 1];
const OID_EXT_AIA: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 1, 1];
const OID_EXT_EKU: &[u8] = &[0x55, 0x1d, 0x25];
const OID_KP_OCSP_SIGNING: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 3, 9];
const OID_SHA1: &[u8] = &[0x2b, 0x0e, 3, 2, 0x1a];
const OID_SHA256: &[u8] = &[0x60, 0x86, 0x48, 1, 0x65, 3, 4, 2, 1];
const OID_RSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 5];
const OID_RSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 11];
const OID_RSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 12];
const OID_RSA_SHA512: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 13];
const OID_ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 4, 3, 2];
const OID_ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 4, 3, 3];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];

/// Why an answer is not stapled.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OcspError {
    /// The certificate names no responder (and no `ocsp_responder`).
    NoResponder,
    /// The chain has no issuer certificate after the leaf.
    NoIssuer,
    /// A certificate that cannot be read.
    BadCertificate,
    /// A responder URL Stoa cannot ask (not `http://`).
    Url(String),
    /// The responder could not be reached or answered HTTP badly.
    Http(String),
    /// Not an OCSP response, or not one Stoa understands.
    Malformed,
    /// responseStatus other than successful (RFC 6960 §4.2.1).
    Status(u8),
    /// No SingleResponse is about this certificate.
    OtherCertificate,
    Revoked,
    Unknown,
    /// thisUpdate in the future.
    NotYetValid,
    /// nextUpdate past.
    Expired,
    /// Neither the issuer nor a delegated responder signed it.
    Signature,
}

impl fmt::Display for OcspError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OcspError::NoResponder => f.write_str("the certificate names no OCSP responder"),
            OcspError::NoIssuer => {
                f.write_str("the chain has no issuer certificate after the leaf")
            }
            OcspError::BadCertificate => f.write_str("a certificate of the chain is unreadable"),
            OcspError::Url(u) => write!(f, "{u}: only http:// responders are asked"),
            OcspError::Http(e) => f.write_str(e),
            OcspError::Malformed => f.write_str("the answer is not an OCSP response"),
            OcspError::Status(s) => write!(f, "the responder says responseStatus {s}"),
            OcspError::OtherCertificate => f.write_str("the answer is about another certificate"),
            OcspError::Revoked => f.write_str("the certificate is revoked"),
            OcspError::Unknown => f.write_str("the responder does not know the certificate"),
            OcspError::NotYetValid => f.write_str("the answer's thisUpdate is in the future"),
            OcspError::Expired => f.write_str("the answer's nextUpdate is past"),
            OcspError::Signature => f.write_str(
                "the answer is not signed by the issuer nor a responder it delegated to",
            ),
        }
    }
}

/// What OCSP needs from a certificate.
#[derive(Debug)]
pub(crate) struct Cert<'a> {
    tbs: &'a [u8],
    serial: &'a [u8],
    issuer: &'a [u8],
    subject: &'a [u8],
    key: &'a [u8],
    not_before: i64,
    not_after: i64,
    sig_alg: &'a [u8],
    signature: &'a [u8],
    ocsp_urls: Vec<String>,
    ocsp_signing: bool,
}

/// Reads a certificate (RFC 5280 §4.1).
pub(crate) fn parse_cert(der: &[u8]) -> Option<Cert<'_>> {
    let cert = Reader::new(der).tagged(der::SEQUENCE)?;
    let mut c = cert.reader();
    let tbs = c.tagged(der::SEQUENCE)?;
    let sig_alg = c.tagged(der::SEQUENCE)?.reader().tagged(der::OID)?.content;
    let signature = c.tagged(der::BIT_STRING)?.bits()?;
    let mut t = tbs.reader();
    t.optional(der::ctx(0));
    let serial = t.tagged(der::INTEGER)?.content;
    t.tagged(der::SEQUENCE)?;
    let issuer = t.tagged(der::SEQUENCE)?.whole;
    let mut validity = t.tagged(der::SEQUENCE)?.reader();
    let not_before = der::time(&validity.any()?)?;
    let not_after = der::time(&validity.any()?)?;
    let subject = t.tagged(der::SEQUENCE)?.whole;
    let mut spki = t.tagged(der::SEQUENCE)?.reader();
    spki.tagged(der::SEQUENCE)?;
    let key = spki.tagged(der::BIT_STRING)?.bits()?;
    t.optional(der::ctx_prim(1));
    t.optional(der::ctx_prim(2));
    let mut ocsp_urls = Vec::new();
    let mut ocsp_signing = false;
    if let Some(exts) = t.optional(der::ctx(3)) {
        let mut exts = exts.reader().tagged(der::SEQUENCE)?.reader();
        while !exts.is_empty() {
            let mut ext = exts.tagged(der::SEQUENCE)?.reader();
            let oid = ext.tagged(der::OID)?.content;
            ext.optional(0x01);
            let value = ext.tagged(der::OCTET_STRING)?.content;
            if oid == OID_EXT_AIA {
                let mut descs = Reader::new(value).tagged(der::SEQUENCE)?.reader();
                while !descs.is_empty() {
                    let mut d = descs.tagged(der::SEQUENCE)?.reader();
                    let method = d.tagged(der::OID)?.content;
                    let name = d.any()?;
                    // uniformResourceIdentifier [6] IA5String.
                    if method == OID_AD_OCSP && name.tag == der::ctx_prim(6) {
                        if let Ok(u) = std::str::from_utf8(name.content) {
                            ocsp_urls.push(u.to_owned());
                        }
                    }
                }
            } else if oid == OID_EXT_EKU {
                let mut purposes = Reader::new(value).tagged(der::SEQUENCE)?.reader();
                while !purposes.is_empty() {
                    if purposes.tagged(der::OID)?.content == OID_KP_OCSP_SIGNING {
                        ocsp_signing = true;
                    }
                }
            }
        }
    }
    Some(Cert {
        tbs: tbs.whole,
        serial,
        issuer,
        subject,
        key,
        not_before,
        not_after,
        sig_alg,
        signature,
        ocsp_urls,
        ocsp_signing,
    })
}

/// Whether `key` (a subjectPublicKey) signed `msg` with `sig` under the
/// signature algorithm `alg` (an OID's contents).
fn signed(alg: &[u8], key: &[u8], msg: &[u8], sig: &[u8]) -> bool {
    let algs: &[&dyn signature::VerificationAlgorithm] = match alg {
        OID_RSA_SHA256 => &[&signature::RSA_PKCS1_2048_8192_SHA256],
        OID_RSA_SHA384 => &[&signature::RSA_PKCS1_2048_8192_SHA384],
        OID_RSA_SHA512 => &[&signature::RSA_PKCS1_2048_8192_SHA512],
        // Still what some responders sign with (RFC 6960 §4.3 names it).
        OID_RSA_SHA1 => &[&signature::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY],
        OID_ECDSA_SHA256 => &[
            &signature::ECDSA_P256_SHA256_ASN1,
            &signature::ECDSA_P384_SHA256_ASN1,
        ],
        OID_ECDSA_SHA384 => &[
            &signature::ECDSA_P384_SHA384_ASN1,
            &signature::ECDSA_P256_SHA384_ASN1,
        ],
        OID_ED25519 => &[&signature::ED25519],
        _ => &[],
    };
    algs.iter().any(|a| {
        signature::UnparsedPublicKey::new(*a, key)
            .verify(msg, sig)
            .is_ok()
    })
}

/// The OCSP request for `leaf` issued by `issuer` (RFC 6960 §4.1.1): one
/// CertID with SHA-1 hashes (what RFC 5019 §2.1.1 asks responders to
/// understand), no nonce (so that responders may answer from a cache).
pub(crate) fn request(leaf: &Cert<'_>, issuer: &Cert<'_>) -> Vec<u8> {
    let hash = |b: &[u8]| digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, b);
    let alg = der::encode(
        der::SEQUENCE,
        &[der::encode(der::OID, OID_SHA1), vec![0x05, 0x00]].concat(),
    );
    let cert_id = der::encode(
        der::SEQUENCE,
        &[
            alg,
            der::encode(der::OCTET_STRING, hash(leaf.issuer).as_ref()),
            der::encode(der::OCTET_STRING, hash(issuer.key).as_ref()),
            der::encode(der::INTEGER, leaf.serial),
        ]
        .concat(),
    );
    let one = der::encode(der::SEQUENCE, &cert_id);
    let list = der::encode(der::SEQUENCE, &one);
    let tbs = der::encode(der::SEQUENCE, &list);
    der::encode(der::SEQUENCE, &tbs)
}

/// A good answer's validity, seconds since the epoch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Good {
    pub this_update: i64,
    pub next_update: Option<i64>,
}

/// Checks an OCSP response for `leaf` issued by `issuer` at `now`
/// (RFC 6960 §3.2 and §4.2.2.2).
pub(crate) fn verify(
    resp: &[u8],
    leaf: &Cert<'_>,
    issuer: &Cert<'_>,
    now: i64,
) -> Result<Good, OcspError> {
    use OcspError::Malformed;
    let mut top = Reader::new(resp)
        .tagged(der::SEQUENCE)
        .ok_or(Malformed)?
        .reader();
    let status = top.tagged(der::ENUMERATED).ok_or(Malformed)?;
    match status.content {
        [0] => {}
        [s] => return Err(OcspError::Status(*s)),
        _ => return Err(Malformed),
    }
    let mut bytes = top
        .tagged(der::ctx(0))
        .and_then(|b| b.reader().tagged(der::SEQUENCE))
        .ok_or(Malformed)?
        .reader();
    if bytes.tagged(der::OID).ok_or(Malformed)?.content != OID_OCSP_BASIC {
        return Err(Malformed);
    }
    let basic = bytes.tagged(der::OCTET_STRING).ok_or(Malformed)?.content;
    let mut basic = Reader::new(basic)
        .tagged(der::SEQUENCE)
        .ok_or(Malformed)?
        .reader();
    let tbs = basic.tagged(der::SEQUENCE).ok_or(Malformed)?;
    let sig_alg = basic
        .tagged(der::SEQUENCE)
        .and_then(|a| a.reader().tagged(der::OID))
        .ok_or(Malformed)?
        .content;
    let sig = basic
        .tagged(der::BIT_STRING)
        .and_then(|s| s.bits())
        .ok_or(Malformed)?;
    let certs = basic.optional(der::ctx(0));

    let good = single_response(&tbs, leaf, issuer, now)?;

    // Signed by the issuer itself, or by a certificate in the answer that
    // the issuer signed for this purpose and that is valid now.
    if signed(sig_alg, issuer.key, tbs.whole, sig) {
        return Ok(good);
    }
    if let Some(certs) = certs {
        let mut list = certs
            .reader()
            .tagged(der::SEQUENCE)
            .ok_or(Malformed)?
            .reader();
        while !list.is_empty() {
            let der = list.any().ok_or(Malformed)?.whole;
            let Some(r) = parse_cert(der) else { continue };
            if r.issuer == issuer.subject
                && r.ocsp_signing
                && r.not_before <= now + SKEW
                && now <= r.not_after
                && signed(r.sig_alg, issuer.key, r.tbs, r.signature)
                && signed(sig_alg, r.key, tbs.whole, sig)
            {
                return Ok(good);
            }
        }
    }
    Err(OcspError::Signature)
}

/// The SingleResponse about `leaf` in ResponseData, checked.
fn single_response(
    tbs: &Tlv<'_>,
    leaf: &Cert<'_>,
    issuer: &Cert<'_>,
    now: i64,
) -> Result<Good, OcspError> {
    use OcspError::Malformed;
    let mut data = tbs.reader();
    data.optional(der::ctx(0));
    data.any().ok_or(Malformed)?; // responderID
    data.tagged(der::GENERALIZED_TIME).ok_or(Malformed)?;
    let mut responses = data.tagged(der::SEQUENCE).ok_or(Malformed)?.reader();
    while !responses.is_empty() {
        let mut one = responses.tagged(der::SEQUENCE).ok_or(Malformed)?.reader();
        let cert_id = one.tagged(der::SEQUENCE).ok_or(Malformed)?;
        let status = one.any().ok_or(Malformed)?;
        let this_update = one
            .tagged(der::GENERALIZED_TIME)
            .and_then(|t| der::time(&t))
            .ok_or(Malformed)?;
        let next_update = match one.optional(der::ctx(0)) {
            Some(n) => Some(
                n.reader()
                    .tagged(der::GENERALIZED_TIME)
                    .and_then(|t| der::time(&t))
                    .ok_or(Malformed)?,
            ),
            None => None,
        };
        if !same_cert(&cert_id, leaf, issuer).ok_or(Malformed)? {
            continue;
        }
        match status.tag {
            t if t == der::ctx_prim(0) => {}
            t if t == der::ctx(1) => return Err(OcspError::Revoked),
            _ => return Err(OcspError::Unknown),
        }
        if this_update > now + SKEW {
            return Err(OcspError::NotYetValid);
        }
        if next_update.is_some_and(|n| n < now) {
            return Err(OcspError::Expired);
        }
        return Ok(Good {
            this_update,
            next_update,
        });
    }
    Err(OcspError::OtherCertificate)
}

/// Whether a CertID names `leaf` of `issuer`, with SHA-1 or SHA-256.
fn same_cert(id: &Tlv<'_>, leaf: &Cert<'_>, issuer: &Cert<'_>) -> Option<bool> {
    let mut r = id.reader();
    let alg = r.tagged(der::SEQUENCE)?.reader().tagged(der::OID)?.content;
    let name_hash = r.tagged(der::OCTET_STRING)?.content;
    let key_hash = r.tagged(der::OCTET_STRING)?.content;
    let serial = r.tagged(der::INTEGER)?.content;
    let alg = match alg {
        OID_SHA1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
        OID_SHA256 => &digest::SHA256,
        _ => return Some(false),
    };
    Some(
        serial == leaf.serial
            && digest::digest(alg, leaf.issuer).as_ref() == name_hash
            && digest::digest(alg, issuer.key).as_ref() == key_hash,
    )
}

/// POSTs `body` to an `http://` responder (RFC 6960 Appendix A.1) and
/// returns the answer's body.
fn fetch(url: &str, body: &[u8]) -> Result<Vec<u8>, OcspError> {
    let http = |e: String| OcspError::Http(format!("{url}: {e}"));
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| OcspError::Url(url.to_owned()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let has_port = match authority.rfind(':') {
        Some(i) => !authority[i..].contains(']'),
        None => false,
    };
    let target = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addrs = target
        .to_socket_addrs()
        .map_err(|e| http(format!("cannot resolve: {e}")))?;
    let mut last = None;
    let mut conn = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, IO_TIMEOUT) {
            Ok(c) => {
                conn = Some(c);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut conn = conn.ok_or_else(|| {
        http(match last {
            Some(e) => format!("cannot connect: {e}"),
            None => "no address".to_owned(),
        })
    })?;
    let io = |e: std::io::Error| http(e.to_string());
    conn.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    conn.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    let head = format!(
        "POST {path} HTTP/1.0\r\nHost: {authority}\r\nContent-Type: application/ocsp-request\r\n\
         Content-Length: {}\r\nAccept: application/ocsp-response\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(&[head.as_bytes(), body].concat())
        .map_err(io)?;
    let mut answer = Vec::new();
    conn.take(MAX_ANSWER + 1)
        .read_to_end(&mut answer)
        .map_err(io)?;
    if answer.len() as u64 > MAX_ANSWER {
        return Err(http("answer too large".to_owned()));
    }
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| http("no HTTP head in the answer".to_owned()))?;
    let head = String::from_utf8_lossy(&answer[..split]);
    let status = head
        .split(' ')
        .nth(1)
        .ok_or_else(|| http("no status line".to_owned()))?;
    if status != "200" {
        return Err(http(format!("HTTP status {status}")));
    }
    Ok(answer[split + 4..].to_vec())
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// How a `[[tls]]` block staples.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// `ocsp_responder`: asked instead of the certificate's.
    pub responder: Option<String>,
    /// `ocsp_cache`: a directory where good answers are kept, so that a
    /// start staples at once (and through a responder outage) with an
    /// answer still current.
    pub cache: Option<PathBuf>,
    /// The certificate file, for the log.
    pub label: String,
}

/// A slot whose certificate gets stapled.
struct Watch {
    slot: Weak<CertSlot>,
    settings: Settings,
}

/// A good answer in hand.
struct Answer {
    der: Vec<u8>,
    /// Stapled until then.
    expires: i64,
}

/// What is known about one certificate (by its DER).
#[derive(Default)]
struct Entry {
    answer: Option<Answer>,
    next_try: i64,
    backoff: i64,
}

#[derive(Default)]
struct Registry {
    watches: Vec<Watch>,
    entries: HashMap<Vec<u8>, Entry>,
}

fn registry() -> &'static (Mutex<Registry>, Condvar) {
    static R: OnceLock<(Mutex<Registry>, Condvar)> = OnceLock::new();
    R.get_or_init(|| (Mutex::new(Registry::default()), Condvar::new()))
}

fn lock(m: &Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    match m.lock() {
        Ok(g) => g,
        // The registry holds no invariant a panic could break halfway.
        Err(p) => p.into_inner(),
    }
}

/// Staples OCSP answers for the certificate in `slot` from now on
/// (while the slot lives), asking `responder` if given, else the URL in
/// the certificate. An answer already in hand for it is stapled at once.
pub(crate) fn watch(slot: &Arc<CertSlot>, settings: Settings) {
    let (m, cv) = registry();
    let mut reg = lock(m);
    // Slots of configs replaced by reloads go (where no thread runs to
    // prune them: the privileged parent).
    reg.watches.retain(|w| w.slot.strong_count() > 0);
    let ck = slot.get();
    let t = now();
    if let Some(leaf) = ck.cert.first() {
        let entry = reg.entries.entry(leaf.as_ref().to_vec()).or_default();
        // A certificate given up on (no responder, no issuer) is tried
        // again with what this config says: a reload may have fixed it.
        if entry.next_try == i64::MAX {
            entry.next_try = 0;
        }
        if entry.answer.is_none() {
            if let Some(dir) = &settings.cache {
                let path = cache_file(dir, leaf.as_ref());
                if let Some(found) = from_cache(&path, &ck, t) {
                    match record(entry, &settings.label, Ok(found), t) {
                        Ok(line) => tracing::info!("{line}"),
                        Err(line) => tracing::warn!("{line}"),
                    }
                }
            }
        }
    }
    reg.watches.push(Watch {
        slot: Arc::downgrade(slot),
        settings,
    });
    apply(&mut reg, t);
    cv.notify_all();
}

/// The cache file of a certificate: named by its SHA-256, so that a
/// renewed certificate never reads its predecessor's answer.
fn cache_file(dir: &Path, leaf: &[u8]) -> PathBuf {
    let hash = digest::digest(&digest::SHA256, leaf);
    let name: String = hash.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    dir.join(format!("{name}.ocsp"))
}

/// A cached answer for `ck`'s certificate, checked as a fetched one is;
/// none if missing, unreadable, or no longer good.
fn from_cache(path: &Path, ck: &CertifiedKey, t: i64) -> Option<(Vec<u8>, Good, String)> {
    let der = std::fs::read(path).ok()?;
    let leaf = parse_cert(ck.cert.first()?)?;
    let issuer = parse_cert(ck.cert.get(1)?)?;
    match verify(&der, &leaf, &issuer, t) {
        Ok(good) => Some((der, good, path.display().to_string())),
        Err(e) => {
            tracing::info!("OCSP {}: not used: {e}", path.display());
            None
        }
    }
}

/// Keeps a good answer in the cache directory (written aside and renamed,
/// so that a reader never sees half of one).
fn to_cache(dir: &Path, leaf: &[u8], der: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = cache_file(dir, leaf);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, der)?;
    std::fs::rename(&tmp, &path)
}

/// Starts the thread that fetches answers (once per process; in the
/// process that serves).
pub(crate) fn start() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        if let Err(e) = std::thread::Builder::new()
            .name("stoa-ocsp".into())
            .spawn(run)
        {
            tracing::error!("OCSP stapling: cannot start its thread: {e}");
        }
    });
}

/// One certificate to ask about.
struct Job {
    leaf: Vec<u8>,
    issuer: Option<Vec<u8>>,
    settings: Settings,
}

fn run() {
    let (m, cv) = registry();
    loop {
        let jobs = {
            let mut reg = lock(m);
            // Answers past their time come off first.
            apply(&mut reg, now());
            due(&mut reg, now())
        };
        for job in jobs {
            let t = now();
            let outcome = ask(&job, t);
            if let (Ok((der, _, _)), Some(dir)) = (&outcome, &job.settings.cache) {
                if let Err(e) = to_cache(dir, &job.leaf, der) {
                    tracing::warn!("OCSP {}: cannot keep the answer: {e}", dir.display());
                }
            }
            let mut reg = lock(m);
            let entry = reg.entries.entry(job.leaf.clone()).or_default();
            let said = record(entry, &job.settings.label, outcome, t);
            apply(&mut reg, now());
            drop(reg);
            match said {
                Ok(line) => tracing::info!("{line}"),
                Err(line) => tracing::warn!("{line}"),
            }
        }
        let reg = lock(m);
        let t = now();
        let next = reg
            .entries
            .values()
            .flat_map(|e| [Some(e.next_try), e.answer.as_ref().map(|a| a.expires)])
            .flatten()
            .min()
            .unwrap_or(t + RETRY_MAX);
        let wait = (next - t).clamp(1, RETRY_MAX);
        // Woken early by `watch`; a spurious wake-up only costs a loop.
        let _ = cv.wait_timeout(reg, Duration::from_secs(wait as u64));
    }
}

/// The certificates whose answer is due, once each; drops the watches of
/// slots gone and the entries no slot serves.
fn due(reg: &mut Registry, t: i64) -> Vec<Job> {
    reg.watches.retain(|w| w.slot.strong_count() > 0);
    let mut jobs: Vec<Job> = Vec::new();
    let mut live: Vec<Vec<u8>> = Vec::new();
    for w in &reg.watches {
        let Some(slot) = w.slot.upgrade() else {
            continue;
        };
        let ck = slot.get();
        let Some(leaf) = ck.cert.first() else {
            continue;
        };
        let leaf = leaf.as_ref().to_vec();
        live.push(leaf.clone());
        let entry = reg.entries.entry(leaf.clone()).or_default();
        if entry.next_try <= t && !jobs.iter().any(|j| j.leaf == leaf) {
            jobs.push(Job {
                leaf,
                issuer: ck.cert.get(1).map(|c| c.as_ref().to_vec()),
                settings: w.settings.clone(),
            });
        }
    }
    reg.entries.retain(|k, _| live.contains(k));
    jobs
}

/// Fetches and checks the answer for a job: the answer and its validity.
fn ask(job: &Job, t: i64) -> Result<(Vec<u8>, Good, String), OcspError> {
    let leaf = parse_cert(&job.leaf).ok_or(OcspError::BadCertificate)?;
    let issuer_der = job.issuer.as_deref().ok_or(OcspError::NoIssuer)?;
    let issuer = parse_cert(issuer_der).ok_or(OcspError::BadCertificate)?;
    let url = match &job.settings.responder {
        Some(u) => u.clone(),
        None => leaf
            .ocsp_urls
            .first()
            .cloned()
            .ok_or(OcspError::NoResponder)?,
    };
    let der = fetch(&url, &request(&leaf, &issuer))?;
    let good = verify(&der, &leaf, &issuer, t)?;
    Ok((der, good, url))
}

/// Keeps a good answer, or notes a failure and when to try again.
/// Returns the line to log: Ok for a good answer, Err for a failure.
/// (Logged by the caller once the slots are updated, so that whoever
/// reads the log sees the staple already on.)
fn record(
    entry: &mut Entry,
    label: &str,
    outcome: Result<(Vec<u8>, Good, String), OcspError>,
    t: i64,
) -> Result<String, String> {
    match outcome {
        Ok((der, good, url)) => {
            let expires = good.next_update.unwrap_or(t + NO_NEXT_UPDATE);
            // Halfway to nextUpdate (Caddy), counted from thisUpdate or,
            // for an answer a responder kept a while, from now; not sooner
            // than REFRESH_MIN.
            let refresh = (good.this_update.max(t - SKEW) + expires) / 2;
            entry.next_try = refresh.max(t + REFRESH_MIN);
            entry.backoff = 0;
            entry.answer = Some(Answer { der, expires });
            Ok(format!(
                "OCSP {label}: good answer from {url}, stapled until {}s from now, asked again in {}s",
                expires - t,
                entry.next_try - t
            ))
        }
        Err(e) => {
            // A responder that says the certificate is bad is believed at
            // once: the good answer held before is not stapled any more.
            if matches!(e, OcspError::Revoked | OcspError::Unknown) {
                entry.answer = None;
            }
            let never = matches!(
                e,
                OcspError::NoResponder
                    | OcspError::NoIssuer
                    | OcspError::BadCertificate
                    | OcspError::Url(_)
            );
            entry.backoff = (entry.backoff * 2).clamp(RETRY_MIN, RETRY_MAX);
            entry.next_try = if never { i64::MAX } else { t + entry.backoff };
            let kept = match &entry.answer {
                Some(a) if a.expires > t => "; the previous answer stays stapled",
                _ => "; nothing is stapled",
            };
            Err(if never {
                format!("OCSP {label}: {e}; not stapling")
            } else {
                format!(
                    "OCSP {label}: {e}{kept}; asking again in {}s",
                    entry.backoff
                )
            })
        }
    }
}

/// Puts on each watched slot the current answer for its certificate, or
/// none when there is no current one.
fn apply(reg: &mut Registry, t: i64) {
    for w in &reg.watches {
        let Some(slot) = w.slot.upgrade() else {
            continue;
        };
        let ck = slot.get();
        let Some(leaf) = ck.cert.first() else {
            continue;
        };
        let want: Option<&[u8]> = reg
            .entries
            .get(leaf.as_ref())
            .and_then(|e| e.answer.as_ref())
            .filter(|a| a.expires > t)
            .map(|a| a.der.as_slice());
        if ck.ocsp.as_deref() != want {
            let key: CertifiedKey = CertifiedKey {
                ocsp: want.map(<[u8]>::to_vec),
                ..(*ck).clone()
            };
            swap_if_same(&slot, &ck, key);
        }
    }
}

/// Puts `key` in `slot` unless its certificate changed since `was` was
/// read (a renewal swapped in meanwhile): that one must not be replaced
/// by the old certificate; the next round staples it.
fn swap_if_same(slot: &CertSlot, was: &Arc<CertifiedKey>, key: CertifiedKey) {
    let mut current = match slot.current.write() {
        Ok(c) => c,
        Err(p) => p.into_inner(),
    };
    if Arc::ptr_eq(&current, was) {
        *current = Arc::new(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, CustomExtension, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair,
    };

    const NOW: i64 = 1_800_000_000; // 2027-01-15 08:00:00 UTC
    const HOUR_AGO: &str = "20270115070000Z";
    const IN_A_DAY: &str = "20270116080000Z";
    const A_MINUTE_AGO: &str = "20270115075900Z";
    const IN_AN_HOUR: &str = "20270115090000Z";

    struct Pki {
        ca: rcgen::Certificate,
        ca_key: KeyPair,
        leaf: Vec<u8>,
    }

    fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        (p.self_signed(&key).expect("ca"), key)
    }

    fn pki() -> Pki {
        let (ca, ca_key) = ca("Test CA");
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        p.serial_number = Some(vec![0x10, 0x01].into());
        // authorityInfoAccess: one ocsp AccessDescription.
        let url = b"http://127.0.0.1:9/ocsp";
        let desc = der::encode(
            der::SEQUENCE,
            &[
                der::encode(der::OID, OID_AD_OCSP),
                der::encode(der::ctx_prim(6), url),
            ]
            .concat(),
        );
        p.custom_extensions = vec![CustomExtension::from_oid_content(
            &[1, 3, 6, 1, 5, 5, 7, 1, 1],
            der::encode(der::SEQUENCE, &desc),
        )];
        let leaf = p
            .signed_by(&key, &ca, &ca_key)
            .expect("leaf")
            .der()
            .to_vec();
        Pki { ca, ca_key, leaf }
    }

    /// A responder certificate signed by `issuer`, with or without
    /// id-kp-OCSPSigning.
    fn responder(
        issuer: &rcgen::Certificate,
        issuer_key: &KeyPair,
        ocsp_signing: bool,
    ) -> (Vec<u8>, KeyPair) {
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name.push(DnType::CommonName, "responder");
        if ocsp_signing {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::OcspSigning];
        }
        let c = p.signed_by(&key, issuer, issuer_key).expect("responder");
        (c.der().to_vec(), key)
    }

    /// The CertID of the request Stoa sends for the leaf.
    fn cert_id(pki: &Pki) -> Vec<u8> {
        let leaf = parse_cert(&pki.leaf).expect("leaf");
        let issuer = parse_cert(pki.ca.der()).expect("ca");
        let req = request(&leaf, &issuer);
        let mut r = Reader::new(&req);
        let mut t = r.tagged(der::SEQUENCE).expect("OCSPRequest");
        for _ in 0..3 {
            t = t.reader().tagged(der::SEQUENCE).expect("nested");
        }
        t.reader()
            .tagged(der::SEQUENCE)
            .expect("CertID")
            .whole
            .to_vec()
    }

    fn gt(s: &str) -> Vec<u8> {
        der::encode(der::GENERALIZED_TIME, s.as_bytes())
    }

    /// An OCSP response with one SingleResponse, signed (ECDSA P-256
    /// SHA-256) by `signer`, carrying `certs`.
    fn response(
        id: &[u8],
        status: &[u8],
        this: &str,
        next: Option<&str>,
        signer: &KeyPair,
        certs: &[&[u8]],
    ) -> Vec<u8> {
        let mut single = [id, status, &gt(this)].concat();
        if let Some(n) = next {
            single.extend(der::encode(der::ctx(0), &gt(n)));
        }
        let single = der::encode(der::SEQUENCE, &single);
        let responder_id = der::encode(der::ctx(2), &der::encode(der::OCTET_STRING, &[0; 20]));
        let tbs = der::encode(
            der::SEQUENCE,
            &[
                responder_id,
                gt(HOUR_AGO),
                der::encode(der::SEQUENCE, &single),
            ]
            .concat(),
        );
        let rng = ring::rand::SystemRandom::new();
        let k = signature::EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            &signer.serialize_der(),
            &rng,
        )
        .expect("ring key");
        let sig = k.sign(&rng, &tbs).expect("sign");
        let mut basic = [
            tbs,
            der::encode(der::SEQUENCE, &der::encode(der::OID, OID_ECDSA_SHA256)),
            der::encode(der::BIT_STRING, &[&[0u8][..], sig.as_ref()].concat()),
        ]
        .concat();
        if !certs.is_empty() {
            let list = der::encode(der::SEQUENCE, &certs.concat());
            basic.extend(der::encode(der::ctx(0), &list));
        }
        let basic = der::encode(der::SEQUENCE, &basic);
        let bytes = der::encode(
            der::SEQUENCE,
            &[
                der::encode(der::OID, OID_OCSP_BASIC),
                der::encode(der::OCTET_STRING, &basic),
            ]
            .concat(),
        );
        der::encode(
            der::SEQUENCE,
            &[
                der::encode(der::ENUMERATED, &[0]),
                der::encode(der::ctx(0), &bytes),
            ]
            .concat(),
        )
    }

    const GOOD: &[u8] = &[0x80, 0x00];

    fn check(pki: &Pki, resp: &[u8]) -> Result<Good, OcspError> {
        let leaf = parse_cert(&pki.leaf).expect("leaf");
        let issuer = parse_cert(pki.ca.der()).expect("ca");
        verify(resp, &leaf, &issuer, NOW)
    }

    #[test]
    fn the_responder_url_comes_from_authority_info_access_rfc5280_4_2_2_1() {
        let pki = pki();
        let leaf = parse_cert(&pki.leaf).expect("leaf");
        assert_eq!(leaf.ocsp_urls, vec!["http://127.0.0.1:9/ocsp".to_owned()]);
        assert_eq!(leaf.serial, &[0x10, 0x01]);
    }

    #[test]
    fn a_good_current_answer_signed_by_the_issuer_is_accepted_rfc6960_4_2_2_2() {
        let pki = pki();
        let r = response(
            &cert_id(&pki),
            GOOD,
            HOUR_AGO,
            Some(IN_A_DAY),
            &pki.ca_key,
            &[],
        );
        assert_eq!(
            check(&pki, &r),
            Ok(Good {
                this_update: NOW - 3600,
                next_update: Some(NOW + 86400)
            })
        );
    }

    #[test]
    fn an_answer_signed_by_a_stranger_or_an_undelegated_responder_is_refused_rfc6960_4_2_2_2() {
        let pki = pki();
        let id = cert_id(&pki);
        let stranger = KeyPair::generate().expect("key");
        let r = response(&id, GOOD, HOUR_AGO, Some(IN_A_DAY), &stranger, &[]);
        assert_eq!(check(&pki, &r), Err(OcspError::Signature));
        // Delegated by the issuer with id-kp-OCSPSigning: accepted.
        let (cert, key) = responder(&pki.ca, &pki.ca_key, true);
        let r = response(&id, GOOD, HOUR_AGO, Some(IN_A_DAY), &key, &[&cert]);
        assert!(check(&pki, &r).is_ok());
        // Signed by the issuer but without id-kp-OCSPSigning: refused.
        let (cert, key) = responder(&pki.ca, &pki.ca_key, false);
        let r = response(&id, GOOD, HOUR_AGO, Some(IN_A_DAY), &key, &[&cert]);
        assert_eq!(check(&pki, &r), Err(OcspError::Signature));
        // With id-kp-OCSPSigning from another CA of the same name: refused.
        let (other, other_key) = ca("Test CA");
        let (cert, key) = responder(&other, &other_key, true);
        let r = response(&id, GOOD, HOUR_AGO, Some(IN_A_DAY), &key, &[&cert]);
        assert_eq!(check(&pki, &r), Err(OcspError::Signature));
    }

    #[test]
    fn revoked_unknown_stale_future_and_foreign_answers_are_refused_rfc6960_3_2() {
        let pki = pki();
        let id = cert_id(&pki);
        let k = &pki.ca_key;
        let revoked = der::encode(der::ctx(1), &gt(HOUR_AGO));
        let r = response(&id, &revoked, HOUR_AGO, Some(IN_A_DAY), k, &[]);
        assert_eq!(check(&pki, &r), Err(OcspError::Revoked));
        let r = response(&id, &[0x82, 0x00], HOUR_AGO, Some(IN_A_DAY), k, &[]);
        assert_eq!(check(&pki, &r), Err(OcspError::Unknown));
        let r = response(&id, GOOD, HOUR_AGO, Some(A_MINUTE_AGO), k, &[]);
        assert_eq!(check(&pki, &r), Err(OcspError::Expired));
        let r = response(&id, GOOD, IN_AN_HOUR, Some(IN_A_DAY), k, &[]);
        assert_eq!(check(&pki, &r), Err(OcspError::NotYetValid));
        // About another serial of the same issuer.
        let mut other = id.clone();
        let last = other.len() - 1;
        other[last] ^= 1;
        let r = response(&other, GOOD, HOUR_AGO, Some(IN_A_DAY), k, &[]);
        assert_eq!(check(&pki, &r), Err(OcspError::OtherCertificate));
        // responseStatus unauthorized (6), and bytes that are no answer.
        let unauthorized = der::encode(der::SEQUENCE, &der::encode(der::ENUMERATED, &[6]));
        assert_eq!(check(&pki, &unauthorized), Err(OcspError::Status(6)));
        assert_eq!(check(&pki, b"garbage"), Err(OcspError::Malformed));
        let good = response(&id, GOOD, HOUR_AGO, Some(IN_A_DAY), k, &[]);
        for cut in [1, good.len() / 2, good.len() - 1] {
            assert!(check(&pki, &good[..cut]).is_err());
        }
    }

    #[test]
    fn a_good_answer_is_asked_again_halfway_and_a_failure_keeps_it_until_next_update() {
        let mut e = Entry::default();
        let good = Good {
            this_update: NOW - 3600,
            next_update: Some(NOW + 86400 - 3600),
        };
        assert!(record(&mut e, "c", Ok((vec![1], good, "u".into())), NOW).is_ok());
        // Halfway from now (thisUpdate being older, as from a responder's
        // cache) to nextUpdate.
        assert_eq!(e.next_try, (NOW - SKEW + NOW + 86400 - 3600) / 2);
        assert_eq!(
            e.answer.as_ref().map(|a| a.expires),
            Some(NOW + 86400 - 3600)
        );
        // The responder is down: retried after a minute, then two; the
        // answer stays.
        let said = record(&mut e, "c", Err(OcspError::Http("down".into())), NOW);
        assert!(said.is_err_and(|l| l.contains("the previous answer stays stapled")));
        assert_eq!(e.next_try, NOW + 60);
        let _ = record(&mut e, "c", Err(OcspError::Http("down".into())), NOW + 60);
        assert_eq!(e.next_try, NOW + 60 + 120);
        assert!(e.answer.is_some());
        // A one-minute answer is asked for again after 30 s, before it
        // lapses.
        let mut short = Entry::default();
        let brief = Good {
            this_update: NOW,
            next_update: Some(NOW + 60),
        };
        assert!(record(&mut short, "c", Ok((vec![1], brief, "u".into())), NOW).is_ok());
        assert_eq!(short.next_try, NOW + 30);
        // Revoked: the answer comes off at once.
        let _ = record(&mut e, "c", Err(OcspError::Revoked), NOW + 200);
        assert!(e.answer.is_none());
    }

    #[test]
    fn an_expired_answer_comes_off_the_slot_and_a_current_one_goes_on() {
        let pki = pki();
        let provider = rustls::crypto::ring::default_provider();
        let leaf_key = KeyPair::generate().expect("key");
        let p = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        let leaf = p.signed_by(&leaf_key, &pki.ca, &pki.ca_key).expect("leaf");
        let ck = CertifiedKey::from_der(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).expect("key"),
            &provider,
        )
        .expect("certified key");
        let slot = CertSlot::new(ck);
        let mut reg = Registry::default();
        reg.watches.push(Watch {
            slot: Arc::downgrade(&slot),
            settings: Settings {
                responder: None,
                cache: None,
                label: "t".into(),
            },
        });
        reg.entries.insert(
            leaf.der().to_vec(),
            Entry {
                answer: Some(Answer {
                    der: vec![9, 9],
                    expires: NOW + 10,
                }),
                ..Entry::default()
            },
        );
        apply(&mut reg, NOW);
        assert_eq!(slot.get().ocsp.as_deref(), Some(&[9u8, 9][..]));
        apply(&mut reg, NOW + 11);
        assert_eq!(slot.get().ocsp, None);
    }
}
