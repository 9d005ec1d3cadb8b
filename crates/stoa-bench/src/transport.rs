//! The connection seam: what the engine reads and writes a request through.
//!
//! The engine knows a connection only as a [`Conn`]: bytes in, bytes out,
//! a handshake that may still be under way, and whether a short read means
//! the socket is drained. A plain TCP stream and a TLS session (rustls,
//! driven by hand on the non-blocking mio socket) are its two kinds today.
//! QUIC (`--http3`) does not go through this seam: a QUIC connection
//! carries several requests' streams and has timers of its own, so the
//! engine drives it beside its HTTP/2 groups (`engine/h3.rs`, settings in
//! `quic.rs`); the TLS settings here (trust, `--insecure`) are its too.

use mio::net::TcpStream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

/// TLS settings of a run, resolved once before it.
#[derive(Debug, Clone)]
pub struct TlsSetup {
    pub config: Arc<ClientConfig>,
    /// The name sent in SNI and checked against the certificate.
    pub server_name: ServerName<'static>,
    /// `--insecure`: the certificate is not checked.
    pub insecure: bool,
    /// `--tls-resume`: sessions are resumed (tickets or ids).
    pub resume: bool,
}

/// How the server's certificate is checked.
pub enum Trust<'a> {
    /// The system's roots (/etc/ssl/certs, as curl and wget use).
    System,
    /// The certificates of this PEM file only (curl's `--cacert`).
    CaFile(&'a Path),
    /// Not at all (curl's `-k`, `--insecure`).
    Insecure,
}

impl TlsSetup {
    /// A client configuration for `host`: the trust, session resumption on
    /// or off, and the ALPN protocols to offer.
    pub fn new(host: &str, trust: Trust, resume: bool, alpn: &[&[u8]]) -> Result<TlsSetup, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        TlsSetup::with_provider(host, trust, resume, alpn, provider)
    }

    /// As [`TlsSetup::new`], with this crypto provider (`--http3` notes
    /// through its own which cipher suite the handshakes chose).
    pub fn with_provider(
        host: &str,
        trust: Trust,
        resume: bool,
        alpn: &[&[u8]],
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<TlsSetup, String> {
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let insecure = matches!(trust, Trust::Insecure);
        let roots = match trust {
            Trust::Insecure => None,
            Trust::CaFile(p) => {
                let mut roots = rustls::RootCertStore::empty();
                let pem = std::fs::read(p).map_err(|e| format!("--cacert {}: {e}", p.display()))?;
                use rustls::pki_types::pem::PemObject;
                for c in CertificateDer::pem_slice_iter(&pem) {
                    let c = c.map_err(|e| format!("--cacert {}: {e:?}", p.display()))?;
                    roots
                        .add(c)
                        .map_err(|e| format!("--cacert {}: {e}", p.display()))?;
                }
                if roots.is_empty() {
                    return Err(format!(
                        "--cacert {}: no PEM certificate in the file",
                        p.display()
                    ));
                }
                Some(roots)
            }
            Trust::System => {
                let mut roots = rustls::RootCertStore::empty();
                let found = rustls_native_certs::load_native_certs();
                // Certificates the store cannot parse are skipped, as
                // curl skips them.
                roots.add_parsable_certificates(found.certs);
                Some(roots)
            }
        };
        let mut config = match (roots, resume) {
            (Some(roots), false) => builder.with_root_certificates(roots).with_no_client_auth(),
            (roots, resume) => {
                let verifier: Arc<dyn ServerCertVerifier> = match roots {
                    None => Arc::new(NoVerify(provider.clone())),
                    Some(roots) => rustls::client::WebPkiServerVerifier::builder_with_provider(
                        Arc::new(roots),
                        provider.clone(),
                    )
                    .build()
                    .map_err(|e| format!("TLS: {e}"))?,
                };
                // With resumption on, a full handshake is told from a
                // resumed one by whether the certificate was checked: QUIC
                // (quinn-proto) does not say which it was.
                let verifier: Arc<dyn ServerCertVerifier> = if resume {
                    Arc::new(Noting(verifier))
                } else {
                    verifier
                };
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(verifier)
                    .with_no_client_auth()
            }
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        if !resume {
            // Every connection a full handshake (ab, wrk and h2load make
            // no use of an earlier session either).
            config.resumption = rustls::client::Resumption::disabled();
        }
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|_| format!("{host}: not a valid TLS server name"))?;
        Ok(TlsSetup {
            config: Arc::new(config),
            server_name,
            insecure,
            resume,
        })
    }
}

/// `--insecure`: any certificate is accepted; the handshake's signatures
/// are still checked (the server must hold the key of the certificate it
/// sent), as curl `-k` does.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

thread_local! {
    /// Certificates checked on this thread (full handshakes with
    /// resumption on): a connection driven by this thread whose handshake
    /// did not move it was resumed.
    static CHECKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Certificates this thread has checked so far (see [`Noting`]).
pub(crate) fn certificates_checked_here() -> u64 {
    CHECKED.with(|c| c.get())
}

/// A verifier that counts, per thread, the certificates it checks. The
/// same one serves every connection: rustls resumes a session only under
/// the verifier that made it.
#[derive(Debug)]
struct Noting(Arc<dyn ServerCertVerifier>);

impl ServerCertVerifier for Noting {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        CHECKED.with(|c| c.set(c.get() + 1));
        self.0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.0.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.0.root_hint_subjects()
    }
}

/// Why a TLS handshake failed.
#[derive(Debug, Clone)]
pub struct TlsFailure {
    pub message: String,
    /// The server's certificate was refused, or no ALPN protocol was
    /// common: every other connection would fail the same way.
    pub fatal: bool,
}

/// Where a handshake stands.
pub enum Handshake {
    Done,
    /// Waiting for the peer (an event will come).
    Pending,
    Failed(TlsFailure),
}

/// A TLS session on a non-blocking socket.
pub struct TlsConn {
    sock: TcpStream,
    tls: ClientConnection,
    /// The last read from the socket was shorter than asked: it was
    /// drained then (epoll(7), edge-triggered), and the next read that
    /// finds no plaintext buffered can say WouldBlock without a system
    /// call, as a plain read shorter than the buffer does.
    drained: bool,
}

/// The socket as rustls reads it, noting a short read.
struct Probe<'a> {
    sock: &'a mut TcpStream,
    short: bool,
}

impl Read for Probe<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

/// One connection of a client.
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsConn>),
}

impl Conn {
    /// A connection over `sock` (its connect still in progress): plain, or
    /// TLS when `tls` is given (the handshake starts once it is connected).
    pub fn new(sock: TcpStream, tls: Option<&TlsSetup>) -> io::Result<Conn> {
        match tls {
            None => Ok(Conn::Plain(sock)),
            Some(t) => {
                let tls = ClientConnection::new(t.config.clone(), t.server_name.clone())
                    .map_err(io::Error::other)?;
                Ok(Conn::Tls(Box::new(TlsConn {
                    sock,
                    tls,
                    drained: false,
                })))
            }
        }
    }

    pub fn socket(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => &t.sock,
        }
    }

    pub fn socket_mut(&mut self) -> &mut TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => &mut t.sock,
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Conn::Tls(_))
    }

    /// A read shorter than the buffer means the socket is drained (for an
    /// edge-triggered epoll). Not so over TLS: a read returns at most the
    /// plaintext of the records decrypted so far.
    pub fn short_read_drains(&self) -> bool {
        matches!(self, Conn::Plain(_))
    }

    /// Moves the handshake on; called once connected and on every event
    /// until it is done.
    pub fn handshake(&mut self) -> Handshake {
        let Conn::Tls(t) = self else {
            return Handshake::Done;
        };
        loop {
            if let Err(e) = t.flush() {
                if e.kind() != io::ErrorKind::WouldBlock {
                    return Handshake::Failed(TlsFailure {
                        message: format!("TLS handshake: {e}"),
                        fatal: false,
                    });
                }
            }
            if !t.tls.is_handshaking() {
                return Handshake::Done;
            }
            match t.tls.read_tls(&mut t.sock) {
                Ok(0) => {
                    return Handshake::Failed(TlsFailure {
                        message: "TLS handshake: the server closed the connection".into(),
                        fatal: false,
                    })
                }
                Ok(_) => {
                    if let Err(e) = t.tls.process_new_packets() {
                        // The alert rustls queued tells the server why.
                        let _ = t.flush();
                        let no_alpn = matches!(
                            e,
                            rustls::Error::AlertReceived(
                                rustls::AlertDescription::NoApplicationProtocol
                            ) | rustls::Error::NoApplicationProtocol
                        );
                        let fatal = no_alpn
                            || matches!(
                                e,
                                rustls::Error::InvalidCertificate(_)
                                    | rustls::Error::NoCertificatesPresented
                            );
                        let message = if no_alpn {
                            // RFC 7301 §3.2: the server supports none of
                            // the protocols offered.
                            "TLS handshake: the server chose none of the offered ALPN protocols \
                             (no_application_protocol alert)"
                                .to_string()
                        } else {
                            format!("TLS handshake: {e}")
                        };
                        return Handshake::Failed(TlsFailure { message, fatal });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Still handshaking and nothing to read: the next
                    // event moves it on (anything queued was written above,
                    // or waits for a writable event).
                    return match t.flush() {
                        Ok(()) => Handshake::Pending,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Handshake::Pending,
                        Err(e) => Handshake::Failed(TlsFailure {
                            message: format!("TLS handshake: {e}"),
                            fatal: false,
                        }),
                    };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Handshake::Failed(TlsFailure {
                        message: format!("TLS handshake: {e}"),
                        fatal: false,
                    })
                }
            }
        }
    }

    /// The handshake resumed an earlier session.
    pub fn resumed(&self) -> bool {
        match self {
            Conn::Plain(_) => false,
            Conn::Tls(t) => t.tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        }
    }

    /// ALPN chose `proto` (RFC 7301).
    pub fn alpn_is(&self, proto: &[u8]) -> bool {
        match self {
            Conn::Plain(_) => false,
            Conn::Tls(t) => t.tls.alpn_protocol() == Some(proto),
        }
    }

    /// The negotiated protocol version, cipher suite and ALPN protocol.
    pub fn tls_params(&self) -> Option<(String, String, Option<String>)> {
        let Conn::Tls(t) = self else { return None };
        let v = t.tls.protocol_version()?;
        let c = t.tls.negotiated_cipher_suite()?;
        let version = match v {
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
            other => format!("{other:?}"),
        };
        let suite = c
            .suite()
            .as_str()
            .map_or_else(|| format!("{:?}", c.suite()), str::to_string);
        let alpn = t
            .tls
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        Some((version, suite, alpn))
    }

    /// A readiness event arrived: the socket may hold bytes again, whatever
    /// the last read found.
    pub fn readable(&mut self) {
        if let Conn::Tls(t) = self {
            t.drained = false;
        }
    }

    /// Reads response bytes: `Ok(0)` at the end of the stream (a TLS peer
    /// that closes without close_notify ends it too: HTTP framing, not
    /// the TLS close, says whether the response was whole).
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(t) => t.read(buf),
        }
    }

    /// Writes request bytes; over TLS they are encrypted and sent as far
    /// as the socket takes them ([`Conn::flushed`] says whether all went).
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(t) => {
                let n = t.tls.writer().write(buf)?;
                match t.flush() {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if n == 0 && !buf.is_empty() {
                    // rustls' send buffer is full until the socket drains.
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            }
        }
    }

    /// Sends what TLS still holds; `Ok(true)` when nothing is left.
    pub fn flushed(&mut self) -> io::Result<bool> {
        match self {
            Conn::Plain(_) => Ok(true),
            Conn::Tls(t) => match t.flush() {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
                Err(e) => Err(e),
            },
        }
    }
}

impl TlsConn {
    /// Writes the TLS records rustls holds, until none or WouldBlock.
    fn flush(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed the TCP stream without close_notify.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            // No plaintext buffered: decrypt more records, unless the
            // socket was found empty by the last read (the next event
            // brings more).
            if self.drained {
                self.drained = false;
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut probe = Probe {
                sock: &mut self.sock,
                short: false,
            };
            let r = self.tls.read_tls(&mut probe);
            self.drained = probe.short;
            match r {
                Ok(0) => {
                    // End of the TCP stream: what is buffered has been read.
                    return Ok(0);
                }
                Ok(_) => {
                    if let Err(e) = self.tls.process_new_packets() {
                        let _ = self.flush();
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                    // A key update or an alert to answer.
                    if self.tls.wants_write() {
                        match self.flush() {
                            Ok(()) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}
