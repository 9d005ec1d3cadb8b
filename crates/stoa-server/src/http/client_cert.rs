//! A TLS client's verified certificate as HTTP applications are told of
//! it: the names Apache's mod_ssl gives CGI and FastCGI (`SSL_CLIENT_S_DN`,
//! `SSL_CLIENT_VERIFY`, ...) and the values of nginx's `$ssl_client_*`,
//! both made by OpenSSL, so printed here as OpenSSL prints them (RFC 4514
//! names, uppercase hex serials, `ASN1_TIME_print` dates). The connection
//! side (proto/tls/client.rs) makes one from the rustls session; the
//! gateways, header templates and the access phase read it.

/// The verified certificate of a connection's client, as the gateways
/// and the access phase read it. Made from the leaf certificate when asked
/// (per request, as nginx and mod_ssl make their variables).
#[derive(Debug, Clone, Default)]
pub struct ClientCert {
    der: Vec<u8>,
    /// The SNI name the handshake was made for (the `[[tls]]` block that
    /// verified the certificate was chosen by it).
    pub sni: Option<String>,
    /// RFC 4514 strings, as mod_ssl's and nginx's (OpenSSL
    /// `XN_FLAG_RFC2253`): last RDN first, `,` between.
    pub subject: String,
    pub issuer: String,
    /// Attributes by OpenSSL's short names, in certificate order, for
    /// `SSL_CLIENT_S_DN_CN` and the like.
    subject_attrs: Vec<(&'static str, String)>,
    issuer_attrs: Vec<(&'static str, String)>,
    /// Uppercase hex, no separators (mod_ssl `SSL_CLIENT_M_SERIAL`,
    /// nginx `$ssl_client_serial`).
    pub serial: String,
    /// 1, 2 or 3.
    pub version: u32,
    /// Validity, seconds since the epoch.
    pub not_before: i64,
    pub not_after: i64,
}

impl ClientCert {
    /// A certificate from its DER bytes. One that does not parse (webpki
    /// accepted it, so this is unlikely) still counts as verified, with
    /// its names empty.
    pub fn from_der(der: &[u8], sni: Option<&str>) -> ClientCert {
        let mut c = ClientCert {
            der: der.to_vec(),
            sni: sni.map(str::to_owned),
            ..ClientCert::default()
        };
        match x509_parser::parse_x509_certificate(der) {
            Ok((_, x)) => {
                (c.subject, c.subject_attrs) = rfc4514(x.subject());
                (c.issuer, c.issuer_attrs) = rfc4514(x.issuer());
                c.serial = serial_hex(x.raw_serial());
                c.version = x.version().0 + 1;
                c.not_before = x.validity().not_before.timestamp();
                c.not_after = x.validity().not_after.timestamp();
            }
            Err(e) => tracing::debug!("client certificate: cannot read its names: {e}"),
        }
        c
    }

    /// SHA-1 of the DER, lowercase hex (nginx `$ssl_client_fingerprint`).
    pub fn fingerprint_sha1(&self) -> String {
        use sha1::Digest;
        hex_lower(&sha1::Sha1::digest(&self.der))
    }

    /// PEM, lines of 64 (mod_ssl `SSL_CLIENT_CERT`).
    pub fn pem(&self) -> String {
        use base64::Engine;
        let b = base64::engine::general_purpose::STANDARD.encode(&self.der);
        let mut out = String::with_capacity(b.len() + b.len() / 64 + 64);
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b.as_bytes().chunks(64) {
            // Base64 is ASCII.
            out.push_str(std::str::from_utf8(line).unwrap_or_default());
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
        out
    }

    /// The PEM percent-encoded, one line (nginx
    /// `$ssl_client_escaped_cert`), for a header field.
    pub fn escaped_pem(&self) -> String {
        let mut out = String::new();
        for b in self.pem().bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// `notBefore` as OpenSSL prints it (`Nov 27 04:12:59 2026 GMT`:
    /// mod_ssl `SSL_CLIENT_V_START`, nginx `$ssl_client_v_start`).
    pub fn v_start(&self) -> String {
        openssl_time(self.not_before)
    }

    pub fn v_end(&self) -> String {
        openssl_time(self.not_after)
    }

    /// Whole days until `notAfter` (0 once past), at `now` (seconds since
    /// the epoch).
    pub fn v_remain(&self, now: i64) -> i64 {
        ((self.not_after - now) / 86_400).max(0)
    }

    /// Adds mod_ssl's variables (`SSLOptions +StdEnvVars +ExportCertData`)
    /// of a TLS request to `env`: `SSL_CLIENT_VERIFY` always, the rest
    /// with a certificate.
    pub fn set_env(cert: Option<&ClientCert>, now: i64, env: &mut stoa_cgi::Env) {
        let Some(c) = cert else {
            env.set("SSL_CLIENT_VERIFY", b"NONE");
            return;
        };
        env.set("SSL_CLIENT_VERIFY", b"SUCCESS");
        env.set("SSL_CLIENT_S_DN", c.subject.as_bytes());
        env.set("SSL_CLIENT_I_DN", c.issuer.as_bytes());
        for (prefix, attrs) in [
            ("SSL_CLIENT_S_DN_", &c.subject_attrs),
            ("SSL_CLIENT_I_DN_", &c.issuer_attrs),
        ] {
            for name in ENV_ATTRS {
                if let Some(v) = first(attrs, name) {
                    let key = match name {
                        "emailAddress" => "Email",
                        n => n,
                    };
                    env.set(&format!("{prefix}{key}"), v.as_bytes());
                }
            }
        }
        env.set("SSL_CLIENT_M_SERIAL", c.serial.as_bytes());
        env.set("SSL_CLIENT_M_VERSION", c.version.to_string().as_bytes());
        env.set("SSL_CLIENT_V_START", c.v_start().as_bytes());
        env.set("SSL_CLIENT_V_END", c.v_end().as_bytes());
        env.set(
            "SSL_CLIENT_V_REMAIN",
            c.v_remain(now).to_string().as_bytes(),
        );
        env.set("SSL_CLIENT_FINGERPRINT", c.fingerprint_sha1().as_bytes());
        env.set("SSL_CLIENT_CERT", c.pem().as_bytes());
    }
}

/// The DN components mod_ssl exports one by one (`SSL_CLIENT_S_DN_CN`,
/// ...; `emailAddress` as `_Email`).
const ENV_ATTRS: [&str; 8] = ["C", "ST", "L", "O", "OU", "CN", "UID", "emailAddress"];

fn first<'a>(attrs: &'a [(&'static str, String)], name: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

fn hex_lower(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// A DER INTEGER's content bytes as OpenSSL prints a serial: uppercase
/// hex, the sign byte DER puts before a high bit dropped.
fn serial_hex(raw: &[u8]) -> String {
    let mut b = raw;
    while b.len() > 1 && b[0] == 0 {
        b = &b[1..];
    }
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02X}"));
    }
    if s.is_empty() {
        s.push_str("00");
    }
    s
}

/// OpenSSL's short name of an attribute type (what `XN_FLAG_RFC2253`
/// prints); None: printed as its dotted OID with the value in `#hex`.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.13" => "description",
        "2.5.4.17" => "postalCode",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.2.840.113549.1.9.1" => "emailAddress",
        _ => return None,
    })
}

/// A name as an RFC 4514 string (§2.1: the last RDN first, `,` between
/// RDNs, `+` inside one) and its attributes by short name, in order.
fn rfc4514(name: &x509_parser::x509::X509Name<'_>) -> (String, Vec<(&'static str, String)>) {
    let mut rdns: Vec<String> = Vec::new();
    let mut attrs = Vec::new();
    for rdn in name.iter_rdn() {
        let mut parts = Vec::new();
        for a in rdn.iter() {
            let oid = a.attr_type().to_id_string();
            let value = a.attr_value();
            let text = string_value(value.tag(), value.data);
            let part = match (short_name(&oid), &text) {
                (Some(sn), Some(t)) => {
                    attrs.push((sn, t.clone()));
                    format!("{sn}={}", escape_value(t))
                }
                // §2.4: a value that is no string, or of an unknown type,
                // goes as `#` and the hex of its BER encoding.
                (sn, _) => format!("{}=#{}", sn.unwrap_or(&oid), hex_lower(&der_of(value))),
            };
            parts.push(part);
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    (rdns.join(","), attrs)
}

/// An `Any`'s encoding again, for `#hex` values.
fn der_of(v: &x509_parser::asn1_rs::Any<'_>) -> Vec<u8> {
    use x509_parser::asn1_rs::ToDer;
    v.to_der_vec().unwrap_or_default()
}

/// The text of a directory string, from its type and content bytes.
fn string_value(tag: x509_parser::asn1_rs::Tag, data: &[u8]) -> Option<String> {
    use x509_parser::asn1_rs::Tag;
    match tag {
        Tag::Utf8String
        | Tag::PrintableString
        | Tag::Ia5String
        | Tag::NumericString
        | Tag::VisibleString => std::str::from_utf8(data).ok().map(str::to_owned),
        // T.61 in theory; Latin-1 in every certificate that uses it.
        Tag::TeletexString => Some(data.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            data.len()
                .is_multiple_of(2)
                .then(|| String::from_utf16(&units).ok())
                .flatten()
        }
        Tag::UniversalString => data
            .len()
            .is_multiple_of(4)
            .then(|| {
                data.chunks_exact(4)
                    .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                    .collect::<Option<String>>()
            })
            .flatten(),
        _ => None,
    }
}

/// RFC 4514 §2.4: `"+,;<>\` escaped, `#` first and space first or last
/// escaped; control characters as `\XX` (OpenSSL's `ESC_CTRL`), so that a
/// DN never breaks a header line or an environment entry.
fn escape_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let n = v.chars().count();
    for (i, c) in v.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '#' if i == 0 => out.push_str("\\#"),
            ' ' if i == 0 || i + 1 == n => out.push_str("\\ "),
            c if c.is_control() => {
                let mut buf = [0; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Seconds since the epoch as OpenSSL's `ASN1_TIME_print`:
/// `Nov  7 04:12:59 2026 GMT` (day padded with a space).
fn openssl_time(t: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Days to a civil date (H. Hinnant, "chrono-Compatible Low-Level
    // Date Algorithms").
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {day:>2} {:02}:{:02}:{:02} {year} GMT",
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    /// A certificate made here, with names worth escaping.
    fn cert(subject: &[(rcgen::DnType, &str)]) -> Vec<u8> {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in subject {
            p.distinguished_name.push(t.clone(), *v);
        }
        p.serial_number = Some(rcgen::SerialNumber::from_slice(&[0x00, 0x9a, 0x01]));
        p.not_before = rcgen::date_time_ymd(2026, 11, 7);
        p.not_after = rcgen::date_time_ymd(2027, 1, 1);
        let key = rcgen::KeyPair::generate().expect("key");
        p.self_signed(&key).expect("cert").der().to_vec()
    }

    /// mod_ssl and nginx print DNs with OpenSSL's `XN_FLAG_RFC2253`: the
    /// most significant RDN last, RFC 4514 §2.4 escapes.
    #[test]
    fn names_print_as_rfc4514_with_the_last_rdn_first() {
        let der = cert(&[
            (rcgen::DnType::CountryName, "DE"),
            (rcgen::DnType::OrganizationName, "Acme, Inc."),
            (rcgen::DnType::CommonName, " #alice+bob "),
        ]);
        let c = ClientCert::from_der(&der, Some("a.test"));
        assert_eq!(c.subject, r"CN=\ #alice\+bob\ ,O=Acme\, Inc.,C=DE");
        assert_eq!(c.issuer, c.subject, "self-signed");
        assert_eq!(first(&c.subject_attrs, "CN"), Some(" #alice+bob "));
        assert_eq!(c.sni.as_deref(), Some("a.test"));
    }

    /// OpenSSL prints a serial's bytes in uppercase hex without DER's
    /// sign byte (nginx `$ssl_client_serial`, mod_ssl
    /// `SSL_CLIENT_M_SERIAL`).
    #[test]
    fn the_serial_is_uppercase_hex_without_the_sign_byte() {
        let c = ClientCert::from_der(&cert(&[(rcgen::DnType::CommonName, "x")]), None);
        assert_eq!(c.serial, "9A01");
        assert_eq!(c.version, 3);
        assert_eq!(serial_hex(&[0]), "00");
        assert_eq!(serial_hex(&[0, 0x80]), "80");
    }

    /// `ASN1_TIME_print`'s format, which mod_ssl's `SSL_CLIENT_V_START`
    /// and nginx's `$ssl_client_v_start` use.
    #[test]
    fn validity_prints_as_openssl_does() {
        let c = ClientCert::from_der(&cert(&[(rcgen::DnType::CommonName, "x")]), None);
        assert_eq!(c.v_start(), "Nov  7 00:00:00 2026 GMT");
        assert_eq!(c.v_end(), "Jan  1 00:00:00 2027 GMT");
        assert_eq!(openssl_time(0), "Jan  1 00:00:00 1970 GMT");
        assert_eq!(
            openssl_time(951_782_400 + 3_661),
            "Feb 29 01:01:01 2000 GMT"
        );
        assert_eq!(c.v_remain(c.not_after - 86_400 * 3 - 5), 3);
        assert_eq!(c.v_remain(c.not_after + 1), 0);
    }

    #[test]
    fn control_characters_in_a_name_are_escaped_as_hex() {
        assert_eq!(escape_value("#a"), r"\#a");
        assert_eq!(escape_value("a\nb\x7f"), r"a\0Ab\7F");
        assert_eq!(escape_value("a b"), "a b");
        assert_eq!(escape_value("a#"), "a#");
    }

    /// mod_ssl's `StdEnvVars`: `SSL_CLIENT_VERIFY` on every TLS request,
    /// the certificate's variables with one.
    #[test]
    fn the_cgi_variables_carry_mod_ssl_names() {
        let der = cert(&[
            (rcgen::DnType::CommonName, "alice"),
            (rcgen::DnType::OrganizationName, "Test"),
        ]);
        let c = ClientCert::from_der(&der, None);
        let mut env = stoa_cgi::Env::new();
        ClientCert::set_env(Some(&c), c.not_before, &mut env);
        let get = |k: &str| env.get(k).map(|v| String::from_utf8_lossy(v).into_owned());
        assert_eq!(get("SSL_CLIENT_VERIFY").as_deref(), Some("SUCCESS"));
        assert_eq!(get("SSL_CLIENT_S_DN").as_deref(), Some("O=Test,CN=alice"));
        assert_eq!(get("SSL_CLIENT_S_DN_CN").as_deref(), Some("alice"));
        assert_eq!(get("SSL_CLIENT_S_DN_O").as_deref(), Some("Test"));
        assert_eq!(get("SSL_CLIENT_M_SERIAL").as_deref(), Some("9A01"));
        assert_eq!(get("SSL_CLIENT_V_REMAIN").as_deref(), Some("55"));
        assert_eq!(
            get("SSL_CLIENT_FINGERPRINT").map(|f| f.len()),
            Some(40),
            "SHA-1, hex"
        );
        let pem = get("SSL_CLIENT_CERT").expect("pem");
        let back = CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM parses");
        assert_eq!(back.as_ref(), &der[..]);
        let mut env = stoa_cgi::Env::new();
        ClientCert::set_env(None, 0, &mut env);
        assert_eq!(env.len(), 1);
    }

    #[test]
    fn the_escaped_pem_is_one_header_safe_line() {
        let c = ClientCert::from_der(&cert(&[(rcgen::DnType::CommonName, "x")]), None);
        let e = c.escaped_pem();
        assert!(e.starts_with("-----BEGIN%20CERTIFICATE-----%0A"), "{e}");
        assert!(e.bytes().all(|b| b.is_ascii_graphic()));
    }
}
