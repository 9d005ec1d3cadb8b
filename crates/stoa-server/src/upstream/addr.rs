//! A server's TCP address as the configuration writes it. A leaf of the
//! upstream layer: targets and TLS settings both parse with it.

use std::net::SocketAddr;

/// Accepts `127.0.0.1:8080`, `[::1]:8080`, `localhost:8080` and `:8080`
/// (all IPv4 interfaces).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| format!("`{s}`: bad port"))?;
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        let port: u16 = port.parse().map_err(|_| format!("`{s}`: bad port"))?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(format!(
        "`{s}` is not an address (write e.g. \"127.0.0.1:8080\" or \"[::1]:8080\")"
    ))
}
