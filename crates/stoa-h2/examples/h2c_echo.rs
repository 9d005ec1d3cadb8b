//! A minimal blocking h2c server on the codec alone, to run h2spec (or
//! h2load) against `stoa-h2` without the rest of Stoa:
//! `cargo run -p stoa-h2 --example h2c_echo -- 127.0.0.1:18520`, then
//! `h2spec -h 127.0.0.1 -p 18520`. Every request gets 200 and a short
//! body once its request has ended; request bodies are consumed at once.

use bytes::BytesMut;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;
use stoa_h2::hpack::Encoder;
use stoa_h2::{Config, Conn, Event};

const BODY: &[u8] = b"hello from stoa-h2\n";

fn serve(mut s: TcpStream) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut conn = Conn::new(&Config::default());
    let mut input = BytesMut::with_capacity(16 << 10);
    let mut head = Vec::new();
    Encoder::status(&mut head, 200);
    Encoder::field(&mut head, b"content-type", b"text/plain");
    // Bodies waiting for window, by stream.
    let mut pending: HashMap<u32, usize> = HashMap::new();
    let mut buf = vec![0; 32 << 10];
    loop {
        let r = conn.recv(&mut input);
        while let Some(e) = conn.next_event() {
            let ended = match e {
                Event::Request { id, end_stream, .. } => end_stream.then_some(id),
                Event::Data {
                    id,
                    data,
                    end_stream,
                } => {
                    conn.release(id, data.len());
                    end_stream.then_some(id)
                }
                Event::Trailers { id, .. } => Some(id),
                Event::HeadersTooLarge { id } => {
                    let mut h = Vec::new();
                    Encoder::status(&mut h, 431);
                    conn.send_headers(id, &h, true);
                    None
                }
                Event::Reset { id, .. } => {
                    pending.remove(&id);
                    None
                }
                Event::WindowUpdate { .. } | Event::GoAway { .. } => None,
            };
            if let Some(id) = ended {
                conn.send_headers(id, &head, false);
                pending.insert(id, 0);
            }
        }
        pending.retain(|&id, sent| {
            *sent += conn.send_data(id, &BODY[*sent..], true);
            *sent < BODY.len()
        });
        s.write_all(conn.output())?;
        let n = conn.output().len();
        conn.consume_output(n);
        if let Err(e) = &r {
            eprintln!("connection error: {e}");
        }
        if r.is_err() || conn.is_closed() {
            // A lingering close: closing with unread bytes (a PING that
            // followed GOAWAY) would reset the connection, and the client
            // could lose what was written last.
            s.shutdown(std::net::Shutdown::Write)?;
            s.set_read_timeout(Some(Duration::from_secs(1)))?;
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            return Ok(());
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        input.extend_from_slice(&buf[..n]);
    }
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18520".into());
    let l = TcpListener::bind(&addr)?;
    eprintln!("listening on {addr}");
    for s in l.incoming() {
        let s = s?;
        std::thread::spawn(move || {
            if let Err(e) = serve(s) {
                eprintln!("io: {e}");
            }
        });
    }
    Ok(())
}
