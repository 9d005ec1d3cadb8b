//! QUIC for `--http3`: the client settings of a run (quinn-proto, sans-IO,
//! on the run's rustls configuration with ALPN `h3`) and how a lost
//! connection is reported. The engine drives the connections on its own
//! mio loop (`engine/h3.rs`): datagrams through quinn-udp on one connected
//! UDP socket per connection, timers in its timer heap.

use crate::record::Failure;
use crate::transport::TlsSetup;
use quinn_proto::{ClientConfig, ConnectionError, EndpointConfig, TransportConfig, VarInt};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The stream receive window we give the server (per response): large
/// enough that one stream of a 100 MB download is not held by it on
/// loopback (quinn's default is 1.25 MB, sized for 100 Mbit/s at 100 ms).
const STREAM_WINDOW: u32 = 16 << 20;

/// QUIC settings of a run, resolved once before it.
#[derive(Clone)]
pub struct QuicSetup {
    pub client: ClientConfig,
    pub endpoint: Arc<EndpointConfig>,
    /// The name sent in SNI and checked against the certificate.
    pub server_name: String,
    /// The cipher suites of the provider and how many packet keys each
    /// has made (see [`noted_provider`]).
    pub suites: Arc<Vec<(String, &'static AtomicU64)>>,
}

/// A suite's QUIC packet protection, counting the packet keys it makes.
struct Noted {
    inner: &'static dyn rustls::quic::Algorithm,
    keys: &'static AtomicU64,
}

impl rustls::quic::Algorithm for Noted {
    fn packet_key(
        &self,
        key: rustls::crypto::cipher::AeadKey,
        iv: rustls::crypto::cipher::Iv,
    ) -> Box<dyn rustls::quic::PacketKey> {
        self.keys.fetch_add(1, Relaxed);
        self.inner.packet_key(key, iv)
    }

    fn header_protection_key(
        &self,
        key: rustls::crypto::cipher::AeadKey,
    ) -> Box<dyn rustls::quic::HeaderProtectionKey> {
        self.inner.header_protection_key(key)
    }

    fn aead_key_len(&self) -> usize {
        self.inner.aead_key_len()
    }

    fn fips(&self) -> bool {
        self.inner.fips()
    }
}

/// The ring provider with each TLS 1.3 suite's QUIC protection wrapped to
/// count the packet keys it makes: quinn-proto does not say which suite a
/// handshake chose, but the keys do (the Initial keys are always
/// TLS_AES_128_GCM_SHA256's, RFC 9001 §5.2; the Handshake and 1-RTT keys
/// are the chosen suite's). A few bytes per run are leaked for the
/// `'static` references rustls wants.
pub fn noted_provider() -> (
    Arc<rustls::crypto::CryptoProvider>,
    Vec<(String, &'static AtomicU64)>,
) {
    let mut provider = rustls::crypto::ring::default_provider();
    let mut notes = Vec::new();
    for s in &mut provider.cipher_suites {
        let rustls::SupportedCipherSuite::Tls13(t) = *s else {
            continue;
        };
        let Some(quic) = t.quic else {
            continue;
        };
        let keys: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
        let noted: &'static Noted = Box::leak(Box::new(Noted { inner: quic, keys }));
        let suite: &'static rustls::Tls13CipherSuite =
            Box::leak(Box::new(rustls::Tls13CipherSuite {
                common: rustls::crypto::CipherSuiteCommon {
                    suite: t.common.suite,
                    hash_provider: t.common.hash_provider,
                    confidentiality_limit: t.common.confidentiality_limit,
                },
                hkdf_provider: t.hkdf_provider,
                aead_alg: t.aead_alg,
                quic: Some(noted),
            }));
        *s = rustls::SupportedCipherSuite::Tls13(suite);
        let name = t
            .common
            .suite
            .as_str()
            .map_or_else(|| format!("{:?}", t.common.suite), str::to_string);
        notes.push((name, keys));
    }
    (Arc::new(provider), notes)
}

impl QuicSetup {
    /// The suite the handshakes so far chose: one whose keys were made
    /// other than TLS_AES_128_GCM_SHA256, the Initial suite, or that one.
    pub fn negotiated_suite(&self) -> Option<String> {
        const INITIAL: &str = "TLS13_AES_128_GCM_SHA256";
        let used = |n: &(String, &AtomicU64)| n.1.load(Relaxed) > 0;
        self.suites
            .iter()
            .find(|n| n.0 != INITIAL && used(n))
            .or_else(|| self.suites.iter().find(|n| n.0 == INITIAL && used(n)))
            .map(|n| n.0.clone())
    }
}

impl std::fmt::Debug for QuicSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicSetup")
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl QuicSetup {
    /// QUIC over the TLS settings `tls` (which must offer ALPN `h3`; QUIC
    /// is TLS 1.3 only, RFC 9001 §4.2).
    pub fn new(
        tls: &TlsSetup,
        host: &str,
        suites: Vec<(String, &'static AtomicU64)>,
    ) -> Result<QuicSetup, String> {
        let crypto = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls.config.clone())
            .map_err(|e| format!("QUIC: {e}"))?;
        let mut client = ClientConfig::new(Arc::new(crypto));
        let mut transport = TransportConfig::default();
        transport
            .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
            // The server opens no request streams to a client (RFC 9114
            // §6.1: server push is off, we send no MAX_PUSH_ID).
            .max_concurrent_bidi_streams(VarInt::from_u32(0));
        client.transport_config(Arc::new(transport));
        Ok(QuicSetup {
            client,
            endpoint: Arc::new(EndpointConfig::default()),
            server_name: host.to_string(),
            suites: Arc::new(suites),
        })
    }
}

/// How a lost connection counts, its message, and whether every other
/// connection would be lost the same way (a refused certificate, no
/// common ALPN protocol).
pub fn classify(reason: &ConnectionError, handshaking: bool) -> (Failure, String, bool) {
    use ConnectionError as E;
    match reason {
        E::TransportError(t) => {
            let code = u64::from(t.code);
            if (0x100..0x200).contains(&code) {
                // A TLS alert raised here (RFC 9001 §4.8): the certificate
                // check, or ALPN (alert 120, no_application_protocol).
                let fatal = code == 0x100 + 120
                    || t.reason.contains("certificate")
                    || t.reason.contains("NoApplicationProtocol");
                let msg = if t.reason.is_empty() {
                    format!("TLS handshake: alert {}", code & 0xff)
                } else {
                    format!("TLS handshake: {}", t.reason)
                };
                (Failure::Tls, msg, fatal)
            } else {
                (Failure::Malformed, format!("QUIC: {t}"), false)
            }
        }
        E::ConnectionClosed(c) => {
            let code = u64::from(c.error_code);
            if (0x100..0x200).contains(&code) {
                let fatal = code == 0x100 + 120 || code == 0x100 + 42 || code == 0x100 + 48;
                (
                    Failure::Tls,
                    format!("TLS handshake: the server sent {c}"),
                    fatal,
                )
            } else if handshaking {
                (
                    Failure::Connect,
                    format!("QUIC: closed by the server: {c}"),
                    false,
                )
            } else {
                (
                    Failure::Closed,
                    format!("QUIC: closed by the server: {c}"),
                    false,
                )
            }
        }
        E::ApplicationClosed(c) => (
            Failure::Closed,
            format!(
                "HTTP/3: the server closed the connection with {}",
                crate::h3::error_name(c.error_code.into_inner())
            ),
            false,
        ),
        E::Reset => (Failure::Reset, "QUIC: stateless reset".into(), false),
        E::TimedOut if handshaking => (
            Failure::Connect,
            "QUIC: no answer to the handshake (idle timeout)".into(),
            false,
        ),
        E::TimedOut => (Failure::Timeout, "QUIC: idle timeout".into(), false),
        E::VersionMismatch => (
            Failure::Tls,
            "QUIC: the server speaks no QUIC version we do".into(),
            true,
        ),
        E::LocallyClosed | E::CidsExhausted => (Failure::Closed, format!("QUIC: {reason}"), false),
    }
}
