//! The demo site's FastCGI applications, written on Stoa's own application
//! library ([`stoa_fastcgi::app::blocking`]) as any Rust application would
//! be. `stoa demo-app NAME` runs one of them; `demo/stoa.toml` starts them
//! as pools with `command = ["{stoa}", "demo-app", NAME]`.
//!
//! - [`comments`]: the form of Figure 1 of "Apache dynamic content
//!   technologies" (a visitor leaves a name and a comment; the page lists
//!   the comments), stored in SQLite.
//! - [`authorizer`]: a FastCGI Authorizer (§6.3) that lets HTTP Basic
//!   `demo:demo` through and answers 401 otherwise.
//! - [`personalized`]: the personalized-content application of the FastCGI
//!   paper (§5), for the lab.
//! - [`table`]: the comments application of the dynamic-content study
//!   (Select * as an HTML table, a form POST inserted), for the lab.
//!
//! This crate sits above `stoa-fastcgi` and beside the server: only the
//! `stoa` binary depends on it, so `stoa-server` never links SQLite.

pub mod authorizer;
pub mod comments;
mod form;
mod html;
pub mod personalized;
pub mod table;

/// One of the demo's applications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum App {
    Comments,
    Authorizer,
    /// The personalized-content application (FastCGI).
    Personalized,
    /// The same as a CGI program (one request, from the environment).
    PersonalizedCgi,
    /// The lab's dynamic-routes application: Select * as an HTML table.
    Table,
}

/// Serves `app` on the listening socket passed as fd 0 (FastCGI §2.2), as
/// a web server starts it. Returns only on error, with a message for a
/// person.
pub fn run(app: App) -> Result<(), String> {
    match app {
        App::Comments => comments::run(),
        App::Authorizer => authorizer::run(),
        App::Personalized => personalized::run(),
        App::PersonalizedCgi => personalized::cgi(),
        App::Table => table::run(),
    }
}

/// A CGI response (status, fields, body) as the application writes it on
/// FCGI_STDOUT; kept as a value so the handlers can be tested without a
/// socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    fn html(status: u16, body: String) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", "text/html; charset=utf-8".to_owned())],
            body: body.into_bytes(),
        }
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// The first field named `name` (ASCII case-insensitive).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The CGI head (`Status`, fields, `Content-Length`) and the body.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("Status: {} {}\r\n", self.status, reason(self.status));
        for (n, v) in &self.headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str(&format!("Content-Length: {}\r\n\r\n", self.body.len()));
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        _ => "",
    }
}
