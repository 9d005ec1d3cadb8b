//! One certificate order with instant-acme (RFC 8555 §7.4): the account
//! (loaded from storage or created), a new order, one challenge per
//! authorization answered in this process (HTTP-01 tokens, TLS-ALPN-01
//! certificates), finalization with a CSR for a fresh key, and the chain.

use super::store::{self, Store};
use super::{Challenge, Spec};
use instant_acme::BodyWrapper;
use instant_acme::{
    Account, AccountBuilder, AccountCredentials, AuthorizationStatus, CertificateIdentifier,
    ChallengeType, Identifier, NewAccount, NewOrder, OrderStatus, RetryPolicy,
};
use std::sync::Arc;
use std::time::Duration;

/// Why an order failed; every kind is retried later with back-off, the
/// certificate in service kept meanwhile.
#[derive(Debug)]
pub(crate) enum OrderError {
    /// The directory could not be reached or refused a request.
    Acme(instant_acme::Error),
    /// The CA did not validate a challenge (or offered none we answer).
    Challenge(String),
    /// The storage could not be read or written.
    Storage(std::io::Error),
    /// What the CA sent is not a usable certificate, or a key could not
    /// be made.
    Certificate(String),
}

impl std::fmt::Display for OrderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OrderError::Acme(e) => write!(f, "ACME directory: {e}"),
            OrderError::Challenge(m) => write!(f, "challenge: {m}"),
            OrderError::Storage(e) => write!(f, "storage: {e}"),
            OrderError::Certificate(m) => write!(f, "certificate: {m}"),
        }
    }
}

impl From<instant_acme::Error> for OrderError {
    fn from(e: instant_acme::Error) -> Self {
        OrderError::Acme(e)
    }
}

impl From<std::io::Error> for OrderError {
    fn from(e: std::io::Error) -> Self {
        OrderError::Storage(e)
    }
}

/// The HTTP client to the directory: the system's roots, or only the
/// certificates of `directory_ca` (read at load time, so the file may be
/// one only root can read).
fn builder(spec: &Spec) -> Result<AccountBuilder, OrderError> {
    let Some(pem) = &spec.directory_ca_pem else {
        return Ok(Account::builder()?);
    };
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem) {
        let c = c.map_err(|e| OrderError::Certificate(format!("directory_ca: {e:?}")))?;
        roots
            .add(c)
            .map_err(|e| OrderError::Certificate(format!("directory_ca: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| OrderError::Certificate(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    let client: hyper_util::client::legacy::Client<_, BodyWrapper<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https);
    Ok(Account::builder_with_http(Box::new(client)))
}

/// The account of `spec.directory`: the stored one, or a new one, stored
/// (called under the storage lock, so instances share one account).
pub(crate) async fn account(spec: &Spec, store: &Store) -> Result<Account, OrderError> {
    match std::fs::read(store.account()) {
        Ok(bytes) => {
            let creds: AccountCredentials = serde_json::from_slice(&bytes).map_err(|e| {
                OrderError::Storage(std::io::Error::other(format!(
                    "{}: {e}",
                    store.account().display()
                )))
            })?;
            Ok(builder(spec)?.from_credentials(creds).await?)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let contact: Vec<String> = spec.email.iter().map(|m| format!("mailto:{m}")).collect();
            let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
            let (account, creds) = builder(spec)?
                .create(
                    &NewAccount {
                        contact: &contact,
                        terms_of_service_agreed: true,
                        only_return_existing: false,
                    },
                    spec.directory.clone(),
                    None,
                )
                .await?;
            let json = serde_json::to_vec(&creds)
                .map_err(|e| OrderError::Storage(std::io::Error::other(e)))?;
            store::write_private(&store.account(), &json)?;
            tracing::info!(
                "ACME: new account {} at {}, stored in {}",
                account.id(),
                spec.directory,
                store.account().display()
            );
            Ok(account)
        }
        Err(e) => Err(OrderError::Storage(e)),
    }
}

/// Answers put up for one order, taken down when it ends however it ends.
#[derive(Default)]
struct Answers {
    tokens: Vec<String>,
    alpn: Vec<String>,
}

impl Drop for Answers {
    fn drop(&mut self) {
        for t in &self.tokens {
            super::tokens::remove(t);
        }
        for n in &self.alpn {
            crate::proto::tls::alpn::remove(n);
        }
    }
}

/// Orders a certificate for `spec.hosts` and returns its chain (PEM) and
/// its new key (PEM). `replaces` names the certificate it renews (RFC
/// 9773 §5), when the directory offers renewal information.
pub(crate) async fn obtain(
    spec: &Spec,
    account: &Account,
    replaces: Option<CertificateIdentifier<'static>>,
) -> Result<(String, String), OrderError> {
    let ids: Vec<Identifier> = spec.hosts.iter().cloned().map(Identifier::Dns).collect();
    let mut new = NewOrder::new(&ids);
    if let Some(r) = replaces {
        new = new.replaces(r);
    }
    let mut order = account.new_order(&new).await?;
    let mut answers = Answers::default();
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz?;
        match authz.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            s => {
                return Err(OrderError::Challenge(format!(
                    "authorization for {} is {s:?}",
                    authz.identifier()
                )))
            }
        }
        let name = authz.identifier().to_string();
        let offered: Vec<ChallengeType> =
            authz.challenges.iter().map(|c| c.r#type.clone()).collect();
        let Some(kind) = spec
            .challenges
            .iter()
            .find(|c| offered.contains(&c.acme_type()))
        else {
            return Err(OrderError::Challenge(format!(
                "the CA offers {offered:?} for {name}, none of `challenges`"
            )));
        };
        let mut ch = authz
            .challenge(kind.acme_type())
            .ok_or_else(|| OrderError::Challenge(format!("no {kind:?} challenge for {name}")))?;
        let ka = ch.key_authorization();
        match kind {
            Challenge::Http01 => {
                super::tokens::put(&ch.token, ka.as_str());
                answers.tokens.push(ch.token.clone());
            }
            Challenge::TlsAlpn01 => {
                let key = crate::proto::tls::alpn::challenge_key(&name, ka.digest().as_ref())
                    .map_err(OrderError::Certificate)?;
                crate::proto::tls::alpn::put(&name, key);
                answers.alpn.push(name.clone());
            }
        }
        tracing::info!("ACME: answering {kind:?} for {name}");
        ch.set_ready().await?;
    }
    let policy = RetryPolicy::new()
        .initial_delay(Duration::from_millis(250))
        .timeout(Duration::from_secs(120));
    let status = order.poll_ready(&policy).await?;
    if status != OrderStatus::Ready {
        return Err(OrderError::Challenge(format!(
            "the order is {status:?} after the challenges (the CA could not validate them)"
        )));
    }
    drop(answers);
    let mut params = rcgen::CertificateParams::new(spec.hosts.clone())
        .map_err(|e| OrderError::Certificate(e.to_string()))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let key = rcgen::KeyPair::generate().map_err(|e| OrderError::Certificate(e.to_string()))?;
    let csr = params
        .serialize_request(&key)
        .map_err(|e| OrderError::Certificate(e.to_string()))?;
    order.finalize_csr(csr.der()).await?;
    let chain = order.poll_certificate(&policy).await?;
    Ok((chain, key.serialize_pem()))
}
