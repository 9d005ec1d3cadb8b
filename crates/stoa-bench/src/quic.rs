//! QUIC for `--http3`: the client settings of a run (quinn-proto, sans-IO,
//! on the run's rustls configuration with ALPN `h3`) and how a lost
//! connection is reported. The engine drives the connections on its own
//! mio loop (`engine/h3.rs`): datagrams through quinn-udp on one connected
//! UDP socket per connection, timers in its timer heap.

use crate::record::Failure;
use crate::transport::TlsSetup;
use quinn_proto::{ClientConfig, ConnectionError, EndpointConfig, TransportConfig, VarInt};
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
    pub fn new(tls: &TlsSetup, host: &str) -> Result<QuicSetup, String> {
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
