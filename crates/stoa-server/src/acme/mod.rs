//! Automatic HTTPS: certificates from an ACME directory (RFC 8555) for
//! the hosts of a `[[tls]]` block with `acme = { ... }`, with
//! instant-acme as the protocol client.
//!
//! Each block's certificate lives in a process-wide [`Entry`], keyed by
//! directory, storage and hosts, so a reload finds the same entry, its
//! `CertSlot` and its running manager again. The config loader gets the
//! slot ([`slot`]): it serves the stored certificate if there is one that
//! has not expired, else a temporary self-signed one, until the manager
//! has a certificate in hand. [`start`] (in the process that serves, once
//! it runs as `user`) starts one manager task per entry on a thread of its
//! own. A manager renews at two thirds of the lifetime, less a random
//! jitter of up to a twentieth of it, or in the window the directory
//! suggests (ACME Renewal Information, RFC 9773) when it offers one;
//! on failure it tries again after 1 minute, doubling to 6 hours, and
//! the certificate in service stays until a new one is in hand.
//!
//! Orders run under a lock in `storage` (store.rs): an instance that
//! takes it first checks whether another has stored a fresh certificate
//! meanwhile and then takes that one instead of ordering.
//!
//! The ordering runs in the serving process, as `user`: the HTTP-01 and
//! TLS-ALPN-01 answers must be in the process that accepts connections,
//! and the privileged parent parses nothing from the network (a JSON
//! answer of the CA included). So `storage` must be writable by `user`;
//! when started as root, the parent creates it for the user.

pub(crate) mod order;
pub(crate) mod store;
pub(crate) mod tokens;

use crate::proto::tls::CertSlot;
use instant_acme::{CertificateIdentifier, ChallengeType};
use rustls::sign::CertifiedKey;
use serde::Deserialize;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::Store;

/// Let's Encrypt's production directory, the default (as Caddy's).
pub(crate) const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// `[[tls]] acme = { ... }` as written.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct AcmeTable {
    /// The directory URL; Let's Encrypt's production one by default.
    pub directory: Option<String>,
    /// The account's contact address (optional).
    pub email: Option<String>,
    /// The challenges to answer, in order of preference:
    /// "http-01", "tls-alpn-01" (default both, in that order).
    pub challenges: Option<Vec<String>>,
    /// Where the account and certificates are kept (default
    /// /var/lib/stoa/acme).
    pub storage: Option<String>,
    /// A PEM certificate to trust for the directory's HTTPS (a private
    /// CA: Pebble's, step-ca's) instead of the system's roots.
    pub directory_ca: Option<String>,
}

/// A challenge type Stoa answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Challenge {
    Http01,
    TlsAlpn01,
}

impl Challenge {
    pub(crate) fn acme_type(self) -> ChallengeType {
        match self {
            Challenge::Http01 => ChallengeType::Http01,
            Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
        }
    }
}

/// An `acme` table checked, with the block's hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    pub(crate) directory: String,
    pub(crate) email: Option<String>,
    pub(crate) challenges: Vec<Challenge>,
    pub(crate) storage: PathBuf,
    pub(crate) directory_ca: Option<PathBuf>,
    /// Its PEM contents, read when the config is loaded (by root under
    /// the privileged parent, like certificates and keys).
    pub(crate) directory_ca_pem: Option<Vec<u8>>,
    /// DNS names, lower case; the first names the storage directory.
    pub(crate) hosts: Vec<String>,
}

impl Spec {
    /// Checks a table; `resolve` makes relative paths relative to the
    /// config file.
    pub(crate) fn new(
        t: &AcmeTable,
        hosts: &[String],
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Spec, String> {
        if hosts.is_empty() {
            return Err("`acme` needs `hosts`: the names to get a certificate for".into());
        }
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
        if let Some(h) = hosts.iter().find(|h| {
            h.starts_with("*.")
                || h.parse::<std::net::IpAddr>().is_ok()
                || h.is_empty()
                || !h
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        }) {
            return Err(format!(
                "`{h}`: `acme` gets certificates for DNS names (no wildcards: HTTP-01 and TLS-ALPN-01 cannot prove them)"
            ));
        }
        let challenges = match &t.challenges {
            None => vec![Challenge::Http01, Challenge::TlsAlpn01],
            Some(list) if list.is_empty() => return Err("`acme.challenges` is empty".into()),
            Some(list) => list
                .iter()
                .map(|c| match c.as_str() {
                    "http-01" => Ok(Challenge::Http01),
                    "tls-alpn-01" => Ok(Challenge::TlsAlpn01),
                    other => Err(format!(
                        "`acme.challenges`: `{other}`: Stoa answers \"http-01\" and \"tls-alpn-01\""
                    )),
                })
                .collect::<Result<_, _>>()?,
        };
        let directory = t
            .directory
            .clone()
            .unwrap_or_else(|| LETS_ENCRYPT.to_owned());
        if !directory.starts_with("https://") {
            return Err(format!(
                "`acme.directory`: `{directory}` is not an https:// URL"
            ));
        }
        Ok(Spec {
            directory,
            email: t.email.clone(),
            challenges,
            storage: resolve(t.storage.as_deref().unwrap_or("/var/lib/stoa/acme")),
            directory_ca: t.directory_ca.as_deref().map(resolve),
            directory_ca_pem: None,
            hosts,
        })
    }

    fn store(&self) -> Store {
        Store::new(&self.storage, &self.directory, &self.hosts[0])
    }

    pub(crate) fn wants_http01(&self) -> bool {
        self.challenges.contains(&Challenge::Http01)
    }
}

/// What a certificate in service is.
#[derive(Debug, Clone)]
struct Held {
    not_before: SystemTime,
    not_after: SystemTime,
    /// Its RFC 9773 identifier (None for a temporary certificate).
    id: Option<CertificateIdentifier<'static>>,
    /// When the two-thirds rule (with its jitter) renews it.
    renew_at: SystemTime,
}

impl Held {
    fn of(chain_pem: &[u8]) -> Result<Held, String> {
        use rustls::pki_types::pem::PemObject;
        let leaf = rustls::pki_types::CertificateDer::pem_slice_iter(chain_pem)
            .next()
            .ok_or("no certificate")?
            .map_err(|e| format!("{e:?}"))?;
        let (_, x) = x509_parser::parse_x509_certificate(leaf.as_ref())
            .map_err(|e| format!("not a certificate: {e}"))?;
        let at = |t: i64| UNIX_EPOCH + Duration::from_secs(t.max(0) as u64);
        let not_before = at(x.validity().not_before.timestamp());
        let not_after = at(x.validity().not_after.timestamp());
        let id = CertificateIdentifier::try_from(&leaf)
            .ok()
            .map(|i| i.into_owned());
        Ok(Held {
            not_before,
            not_after,
            id,
            renew_at: renewal_time(not_before, not_after, random()),
        })
    }

    fn lifetime(&self) -> Duration {
        self.not_after
            .duration_since(self.not_before)
            .unwrap_or(Duration::ZERO)
    }
}

/// Two thirds into `[not_before, not_after]`, earlier by `r` (0..1) times
/// a twentieth of the lifetime, so that a fleet's certificates made at
/// once do not all renew in the same second.
fn renewal_time(not_before: SystemTime, not_after: SystemTime, r: f64) -> SystemTime {
    let life = not_after
        .duration_since(not_before)
        .unwrap_or(Duration::ZERO);
    let two_thirds = life.mul_f64(2.0 / 3.0);
    let jitter = life.mul_f64(r.clamp(0.0, 1.0) / 20.0);
    not_before + two_thirds - jitter
}

/// A random number in [0, 1) from the standard library's per-process
/// random hash keys (no generator crate needed for jitter).
fn random() -> f64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_nanos(),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A time in an RFC 9773 window, chosen at random (§4.2), but not in
/// the first third of the certificate's life nor in its last tenth
/// (left for retries) unless the whole window is: Pebble, for one,
/// suggests all of a short-lived certificate's life. A window wholly
/// before the first third (the CA wants the certificate replaced early,
/// as after a revocation) is followed as it is.
fn ari_time(held: &Held, start: SystemTime, end: SystemTime, r: f64) -> SystemTime {
    let floor = held.not_before + held.lifetime() / 3;
    let ceiling = held.not_after - held.lifetime() / 10;
    let (from, to) = if end <= floor {
        (start, end)
    } else {
        let from = start.max(floor);
        let to = end.min(ceiling).max(from);
        (from, to)
    };
    let span = to.duration_since(from).unwrap_or(Duration::ZERO);
    from + span.mul_f64(r.clamp(0.0, 1.0))
}

/// What the status page shows of one certificate.
#[derive(Debug, Clone, Default)]
pub(crate) struct Report {
    pub(crate) hosts: Vec<String>,
    pub(crate) directory: String,
    /// "temporary" (self-signed, none obtained yet), "stored" (from
    /// storage at start), "issued" (obtained or picked up by this process).
    pub(crate) source: &'static str,
    pub(crate) not_after: Option<SystemTime>,
    pub(crate) next_renewal: Option<SystemTime>,
    pub(crate) last_renewal: Option<SystemTime>,
    /// The last attempt's time and outcome (Ok or the error).
    pub(crate) last_attempt: Option<(SystemTime, Result<(), String>)>,
}

/// One managed certificate, process-wide.
struct Entry {
    spec: Mutex<Spec>,
    slot: Arc<CertSlot>,
    held: Mutex<Option<Held>>,
    report: Mutex<Report>,
    started: AtomicBool,
    /// In the running configuration; a manager whose entry a reload
    /// dropped ends, woken by `wake`.
    wanted: AtomicBool,
    wake: tokio::sync::Notify,
}

type Key = (String, PathBuf, Vec<String>);

fn registry() -> &'static Mutex<HashMap<Key, Arc<Entry>>> {
    static R: OnceLock<Mutex<HashMap<Key, Arc<Entry>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The slot of the certificate `spec` describes: the entry's, when a
/// previous load made it (a reload), else a new one serving the stored
/// certificate (if it has not expired) or a temporary self-signed one.
pub(crate) fn slot(spec: &Spec) -> Result<Arc<CertSlot>, String> {
    let key = (
        spec.directory.clone(),
        spec.storage.clone(),
        spec.hosts.clone(),
    );
    let mut reg = lock(registry());
    if let Some(e) = reg.get(&key) {
        *lock(&e.spec) = spec.clone();
        return Ok(e.slot.clone());
    }
    let store = spec.store();
    let (certified, held, source) = match stored(&store) {
        Some((k, h)) => (k, Some(h), "stored"),
        None => (temporary(&spec.hosts)?, None, "temporary"),
    };
    let slot = CertSlot::new(certified);
    let report = Report {
        hosts: spec.hosts.clone(),
        directory: spec.directory.clone(),
        source,
        not_after: held.as_ref().map(|h| h.not_after),
        next_renewal: held.as_ref().map(|h| h.renew_at),
        ..Report::default()
    };
    let e = Arc::new(Entry {
        spec: Mutex::new(spec.clone()),
        slot: slot.clone(),
        held: Mutex::new(held),
        report: Mutex::new(report),
        started: AtomicBool::new(false),
        wanted: AtomicBool::new(true),
        wake: tokio::sync::Notify::new(),
    });
    reg.insert(key, e);
    Ok(slot)
}

/// The stored certificate, when it is there, belongs to its key and has
/// not expired.
fn stored(store: &Store) -> Option<(CertifiedKey, Held)> {
    let (chain, key) = match store.load() {
        Ok(Some(ck)) => ck,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!("ACME: {}: {e}", store.cert_dir.display());
            return None;
        }
    };
    let certified = crate::proto::tls::certified_key(&store.cert(), &chain, &store.key(), &key)
        .map_err(|e| tracing::warn!("ACME: stored certificate: {e}"))
        .ok()?;
    let held = Held::of(&chain)
        .map_err(|e| tracing::warn!("ACME: {}: {e}", store.cert().display()))
        .ok()?;
    (SystemTime::now() < held.not_after).then_some((certified, held))
}

/// A self-signed certificate for `hosts`, served until the first one is
/// obtained (browsers warn; nothing better exists before the CA answers).
fn temporary(hosts: &[String]) -> Result<CertifiedKey, String> {
    let ck = rcgen::generate_simple_self_signed(hosts.to_vec()).map_err(|e| e.to_string())?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(vec![ck.cert.der().clone()], key, &provider).map_err(|e| e.to_string())
}

/// Whether some configured certificate answers HTTP-01 (the cleartext
/// listeners then look at challenge paths before routing).
pub(crate) fn any_http01(specs: &[Spec]) -> bool {
    specs.iter().any(Spec::wants_http01)
}

/// Starts a manager for every certificate of `specs` (the running
/// configuration's) that has none, on the process's ACME thread, and
/// lets the managers of certificates no longer configured end (at start
/// and after each reload).
pub(crate) fn start(specs: &[Spec]) {
    let mut reg = lock(registry());
    let mut fresh = Vec::new();
    for (key, e) in reg.iter() {
        let wanted = specs
            .iter()
            .any(|s| (&s.directory, &s.storage, &s.hosts) == (&key.0, &key.1, &key.2));
        let was = e.wanted.swap(wanted, Ordering::SeqCst);
        if was && !wanted {
            // Its manager may be asleep for hours: it ends now.
            e.wake.notify_one();
        }
        if wanted && !e.started.swap(true, Ordering::SeqCst) {
            fresh.push(e.clone());
        }
    }
    // An entry no longer wanted and never started (a load that failed
    // later, `stoa check`) is forgotten; a started one ends on its own.
    reg.retain(|_, e| e.wanted.load(Ordering::SeqCst) || e.started.load(Ordering::SeqCst));
    drop(reg);
    if fresh.is_empty() {
        return;
    }
    let Some(handle) = runtime() else {
        return;
    };
    for e in fresh {
        handle.spawn(manage(e));
    }
}

/// The ACME thread's runtime (started once).
fn runtime() -> Option<tokio::runtime::Handle> {
    static H: OnceLock<Option<tokio::runtime::Handle>> = OnceLock::new();
    H.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("stoa-acme".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!("ACME: cannot start its runtime: {e}");
                        let _ = tx.send(None);
                        return;
                    }
                };
                let _ = tx.send(Some(rt.handle().clone()));
                rt.block_on(std::future::pending::<()>());
            });
        match spawned {
            Ok(_) => rx.recv().ok().flatten(),
            Err(e) => {
                tracing::error!("ACME: cannot start its thread: {e}");
                None
            }
        }
    })
    .clone()
}

/// Back-off after failures: 1 minute, doubling, at most 6 hours.
fn backoff(failures: u32) -> Duration {
    let base = Duration::from_secs(60);
    base.saturating_mul(1u32 << failures.saturating_sub(1).min(9))
        .min(Duration::from_secs(6 * 3600))
}

/// How often a manager looks at storage (another instance's renewal)
/// and at renewal information while it waits.
const RECHECK: Duration = Duration::from_secs(3600);

/// Sleeps `d`, or less when a reload drops the entry.
async fn nap(e: &Entry, d: Duration) {
    tokio::select! {
        () = tokio::time::sleep(d) => {}
        () = e.wake.notified() => {}
    }
}

async fn manage(e: Arc<Entry>) {
    let mut failures = 0u32;
    loop {
        if !e.wanted.load(Ordering::SeqCst) {
            e.started.store(false, Ordering::SeqCst);
            // A reload that wanted it again meanwhile saw this manager
            // still running and started none: it goes on.
            if !e.wanted.load(Ordering::SeqCst) || e.started.swap(true, Ordering::SeqCst) {
                let hosts = lock(&e.spec).hosts.join(", ");
                tracing::info!("ACME: {hosts} is no longer configured");
                return;
            }
        }
        let spec = lock(&e.spec).clone();
        let due = due(&e, &spec).await;
        let now = SystemTime::now();
        if due > now {
            let wait = due
                .duration_since(now)
                .unwrap_or(Duration::ZERO)
                .min(RECHECK);
            lock(&e.report).next_renewal = Some(due);
            nap(&e, wait).await;
            if !e.wanted.load(Ordering::SeqCst) {
                continue;
            }
            if SystemTime::now() < due {
                pick_up(&e, &spec.store());
                continue;
            }
        }
        let outcome = match tokio::time::timeout(Duration::from_secs(600), renew(&e, &spec)).await {
            Ok(r) => r.map_err(|err| err.to_string()),
            Err(_) => Err("no certificate within 10 minutes".to_owned()),
        };
        let at = SystemTime::now();
        match &outcome {
            Ok(()) => failures = 0,
            Err(err) => {
                failures += 1;
                let wait = backoff(failures);
                // Shown before it is logged, as a new certificate is.
                {
                    let mut r = lock(&e.report);
                    r.last_attempt = Some((at, outcome.clone()));
                    r.next_renewal = Some(at + wait);
                }
                tracing::error!(
                    "ACME: {} from {}: {err}; the certificate in service stays; next try in {}s",
                    spec.hosts.join(", "),
                    spec.directory,
                    wait.as_secs()
                );
                nap(&e, wait).await;
                continue;
            }
        }
        lock(&e.report).last_attempt = Some((at, outcome));
    }
}

/// When the certificate in service is to be renewed: now for a temporary
/// one; else the directory's suggestion (RFC 9773) when it offers renewal
/// information, else two thirds into its life (with jitter).
async fn due(e: &Entry, spec: &Spec) -> SystemTime {
    let held = lock(&e.held).clone();
    let Some(held) = held else {
        return SystemTime::now();
    };
    let Some(id) = held.id.clone() else {
        return held.renew_at;
    };
    let store = spec.store();
    if !store.account().exists() {
        return held.renew_at;
    }
    let ari = async {
        let account = order::account(spec, &store).await.ok()?;
        account.renewal_info(&id).await.ok()
    };
    match tokio::time::timeout(Duration::from_secs(30), ari).await {
        Ok(Some((info, _retry_after))) => {
            let w = info.suggested_window;
            let at = |t: i64| UNIX_EPOCH + Duration::from_secs(t.max(0) as u64);
            ari_time(
                &held,
                at(w.start.unix_timestamp()),
                at(w.end.unix_timestamp()),
                random(),
            )
        }
        _ => held.renew_at,
    }
}

/// Serves a certificate another instance stored meanwhile, if it is
/// newer than the one in service. True when it took one.
fn pick_up(e: &Entry, store: &Store) -> bool {
    let Some((certified, held)) = stored(store) else {
        return false;
    };
    let newer = lock(&e.held)
        .as_ref()
        .is_none_or(|h| held.not_after > h.not_after);
    if !newer {
        return false;
    }
    install(e, certified, held, "issued");
    tracing::info!(
        "ACME: took the certificate another instance stored in {}",
        store.cert_dir.display()
    );
    true
}

fn install(e: &Entry, certified: CertifiedKey, held: Held, source: &'static str) {
    e.slot.set(certified);
    let mut r = lock(&e.report);
    r.source = source;
    r.not_after = Some(held.not_after);
    r.next_renewal = Some(held.renew_at);
    r.last_renewal = Some(SystemTime::now());
    drop(r);
    *lock(&e.held) = Some(held);
}

/// One renewal under the storage lock: a fresh certificate another
/// instance stored is taken as it is; otherwise one is ordered, stored
/// and served.
async fn renew(e: &Entry, spec: &Spec) -> Result<(), order::OrderError> {
    let store = spec.store();
    let _lock = store.lock().await?;
    if pick_up(e, &store) {
        let fresh = lock(&e.held)
            .as_ref()
            .is_some_and(|h| SystemTime::now() < h.renew_at);
        if fresh {
            return Ok(());
        }
    }
    let account = order::account(spec, &store).await?;
    let replaces = lock(&e.held).as_ref().and_then(|h| h.id.clone());
    // `replaces` only where the directory has renewal information (the
    // client refuses it otherwise).
    let replaces = match replaces {
        Some(id) => account.renewal_info(&id).await.ok().map(|_| id),
        None => None,
    };
    tracing::info!(
        "ACME: ordering a certificate for {} from {}",
        spec.hosts.join(", "),
        spec.directory
    );
    let (chain, key) = match order::obtain(spec, &account, replaces.clone()).await {
        // A CA may refuse `replaces` (the old order already replaced):
        // the order is tried once more without it.
        Err(order::OrderError::Acme(instant_acme::Error::Api(p))) if replaces.is_some() => {
            tracing::info!("ACME: order with `replaces` refused ({p}); ordering without");
            order::obtain(spec, &account, None).await?
        }
        r => r?,
    };
    let certified = crate::proto::tls::certified_key(
        &store.cert(),
        chain.as_bytes(),
        &store.key(),
        key.as_bytes(),
    )
    .map_err(order::OrderError::Certificate)?;
    let held = Held::of(chain.as_bytes()).map_err(order::OrderError::Certificate)?;
    store.save(chain.as_bytes(), key.as_bytes())?;
    let until = httpdate::fmt_http_date(held.not_after);
    // Served before it is logged: whoever reads the log line and connects
    // gets the new certificate.
    install(e, certified, held, "issued");
    tracing::info!(
        "ACME: new certificate for {} (valid until {until}), stored in {}",
        spec.hosts.join(", "),
        store.cert_dir.display()
    );
    Ok(())
}

/// Every managed certificate, for the status page.
pub(crate) fn reports() -> Vec<Report> {
    let mut out: Vec<Report> = lock(registry())
        .values()
        .filter(|e| e.started.load(Ordering::Relaxed) && e.wanted.load(Ordering::Relaxed))
        .map(|e| lock(&e.report).clone())
        .collect();
    out.sort_by(|a, b| a.hosts.cmp(&b.hosts));
    out
}

/// The storage directories of `specs` that do not exist yet, made and
/// given to `uid`/`gid` (the privileged parent does this for its child).
pub(crate) fn give_storage_to(specs: &[Spec], uid: u32, gid: u32) -> std::io::Result<()> {
    for s in specs {
        let d: &Path = &s.storage;
        if d.exists() {
            continue;
        }
        std::fs::create_dir_all(d)?;
        std::os::unix::fs::chown(d, Some(uid), Some(gid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(life: u64) -> Held {
        let nb = UNIX_EPOCH + Duration::from_secs(1_000_000);
        Held {
            not_before: nb,
            not_after: nb + Duration::from_secs(life),
            id: None,
            renew_at: nb,
        }
    }

    #[test]
    fn renewal_comes_at_two_thirds_of_the_lifetime_less_a_bounded_jitter() {
        let h = held(90 * 86400);
        let at = |r| {
            renewal_time(h.not_before, h.not_after, r)
                .duration_since(h.not_before)
                .unwrap()
                .as_secs()
        };
        assert_eq!(at(0.0), 60 * 86400);
        // At most a twentieth of 90 days (4.5 days) early.
        assert_eq!(at(1.0), 60 * 86400 - 90 * 86400 / 20);
        assert!(at(0.5) < at(0.0) && at(0.5) > at(1.0));
    }

    #[test]
    fn an_ari_window_is_followed_but_not_in_the_first_third_nor_the_last_tenth_rfc9773_4_2() {
        let h = held(30);
        let s = |secs| h.not_before + Duration::from_secs(secs);
        // Pebble's window for a short certificate: all of its life.
        assert_eq!(ari_time(&h, s(0), s(30), 0.0), s(10));
        assert_eq!(ari_time(&h, s(0), s(30), 1.0), s(27));
        // A window the CA moved before the floor (revocation): followed.
        assert_eq!(ari_time(&h, s(1), s(5), 0.0), s(1));
        // A late window is kept as it is.
        assert_eq!(ari_time(&h, s(20), s(25), 0.0), s(20));
    }

    #[test]
    fn back_off_doubles_from_a_minute_to_six_hours() {
        assert_eq!(backoff(1), Duration::from_secs(60));
        assert_eq!(backoff(2), Duration::from_secs(120));
        assert_eq!(backoff(5), Duration::from_secs(960));
        assert_eq!(backoff(40), Duration::from_secs(6 * 3600));
    }

    #[test]
    fn a_spec_needs_dns_hosts_and_known_challenges() {
        let r = |s: &str| PathBuf::from("/etc/stoa").join(s);
        let t = AcmeTable {
            directory: None,
            email: None,
            challenges: None,
            storage: Some("acme".into()),
            directory_ca: None,
        };
        let s = Spec::new(&t, &["A.test".into()], &r).unwrap();
        assert_eq!(s.directory, LETS_ENCRYPT);
        assert_eq!(s.hosts, ["a.test"]);
        assert_eq!(s.storage, PathBuf::from("/etc/stoa/acme"));
        assert_eq!(s.challenges, [Challenge::Http01, Challenge::TlsAlpn01]);
        assert!(Spec::new(&t, &[], &r).is_err());
        assert!(Spec::new(&t, &["*.a.test".into()], &r).is_err());
        assert!(Spec::new(&t, &["127.0.0.1".into()], &r).is_err());
        let bad = AcmeTable {
            challenges: Some(vec!["dns-01".into()]),
            ..t.clone()
        };
        assert!(Spec::new(&bad, &["a.test".into()], &r).is_err());
        let plain = AcmeTable {
            directory: Some("http://ca.test/dir".into()),
            ..t
        };
        assert!(Spec::new(&plain, &["a.test".into()], &r).is_err());
    }
}
