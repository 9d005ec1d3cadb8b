//! The layering of stoa-server (docs/ARCHITECTURE.md, "Layers"), checked
//! from the source: every `crate::` path a file names is an import, and
//! imports point down only.
//!
//! - handlers, the gateway and the upstream layer never import the
//!   connection loops, the wire (`proto`), routing, the config loader or
//!   start-up; no handler imports another;
//! - connections never import handlers;
//! - connections route, and routing reads the configuration's runtime:
//!   `conn -> route -> config`, never back (`config` imports no
//!   connection, routing or start-up; `route` no connection, wire or
//!   start-up);
//! - the upstream layer knows no protocol and no request: nothing of the
//!   exchange, the gateway or handlers;
//! - `local`, `http`, `fs` and `units` (the config's units) are leaves,
//!   and so is `log` (the log formats and files), which only `local`
//!   beneath the exchange may use.
//! - `handler/mod.rs` (the one enum of handlers), `handler/configure.rs`
//!   (what configurators share) and `handler/php.rs` (the preset that
//!   composes two handlers) are the handler layer itself, which every
//!   handler may use;
//! - the access phase (`access`) sits beside the handlers: it imports the
//!   exchange, and the FastCGI and Lua handlers for the Authorizer and Lua
//!   checks, never the connections, the wire, routing or the config
//!   loader; no handler, gateway or upstream code imports it.
//!
//! - the response cache (`cache`) is a low layer like `upstream`: it
//!   imports only the leaves; the exchange (a subrequest that fills an
//!   object), the status page (zone counters), the config loader and
//!   routing (the request path, `route::cache`) import it, and nothing
//!   else does.
//!
//! Handlers also never look at how the request was framed on the wire
//! (`head.framing`, `req().keep_alive`, `.expect_continue` of the request
//! head): the exchange decides.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layer a source file belongs to, from its path under `src/`.
fn layer_of(rel: &str) -> String {
    let mut parts = rel.trim_end_matches(".rs").split('/');
    let first = parts.next().unwrap_or("");
    match first {
        "handler" => match parts.next() {
            None | Some("mod" | "configure" | "php") => "handler".to_owned(),
            Some(name) => format!("handler::{name}"),
        },
        "lib" | "server" | "worker" | "lifecycle" | "listen" | "notify" | "upgrade"
        | "unix_listen" => "top".to_owned(),
        other => other.to_owned(),
    }
}

/// The layer a `crate::` path names.
fn layer_named(path: &str) -> String {
    let mut parts = path.split("::");
    let first = parts.next().unwrap_or("");
    match first {
        "handler" => match parts.next() {
            Some("configure") => "handler".to_owned(),
            Some(name) if name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) => {
                format!("handler::{name}")
            }
            _ => "handler".to_owned(),
        },
        "server" | "worker" | "lifecycle" | "listen" | "notify" | "upgrade" | "unix_listen" => {
            "top".to_owned()
        }
        other => other.to_owned(),
    }
}

fn forbidden(from: &str, to: &str) -> bool {
    let above_handlers = ["conn", "proto", "route", "config", "top"];
    let is_handler = |l: &str| l.starts_with("handler::");
    if from == to {
        return false;
    }
    if (is_handler(from) || from == "handler" || from == "gateway" || from == "upstream")
        && above_handlers.contains(&to)
    {
        return true;
    }
    if is_handler(from) && is_handler(to) {
        return true;
    }
    if from == "access" && above_handlers.contains(&to) {
        return true;
    }
    if (is_handler(from) || ["handler", "gateway", "upstream", "exchange", "proto"].contains(&from))
        && to == "access"
    {
        return true;
    }
    if from == "conn" && (is_handler(to) || to == "handler") {
        return true;
    }
    if from == "config" && ["conn", "route", "top"].contains(&to) {
        return true;
    }
    if from == "route" && ["conn", "proto", "top"].contains(&to) {
        return true;
    }
    if from == "upstream" && (to == "exchange" || to == "gateway" || is_handler(to)) {
        return true;
    }
    if from == "gateway" && (is_handler(to) || to == "handler") {
        return true;
    }
    if from == "exchange"
        && [
            "route", "config", "conn", "gateway", "upstream", "handler", "top",
        ]
        .iter()
        .any(|l| to == *l || to.starts_with("handler::"))
    {
        return true;
    }
    if from == "proto"
        && [
            "exchange", "route", "config", "conn", "gateway", "upstream", "handler", "top",
        ]
        .iter()
        .any(|l| to == *l || to.starts_with("handler::"))
    {
        return true;
    }
    // ACME (`acme`) sits under the config loader and routing, beside the
    // wire: it imports the wire's TLS (slots, TLS-ALPN-01 answers) and
    // the leaves; the config loader, routing (HTTP-01 answers), start-up
    // and the status page import it.
    if from == "acme" && !["proto", "local", "log", "http", "units", "fs"].contains(&to) {
        return true;
    }
    if to == "acme" && !["config", "route", "top", "handler::status"].contains(&from) {
        return true;
    }
    // Response filters sit below the exchange: they see a head and body
    // bytes, never a carrier, a route, a configuration file or a handler.
    if from == "filter"
        && [
            "exchange", "route", "config", "conn", "proto", "gateway", "upstream", "handler", "top",
        ]
        .iter()
        .any(|l| to == *l || to.starts_with("handler::"))
    {
        return true;
    }
    // The response cache: its store and rules import only the leaves;
    // above it, only the exchange, the status page, the config loader
    // and routing use it.
    if from == "cache" && !["local", "log", "http", "units", "fs", "cache"].contains(&to) {
        return true;
    }
    if to == "cache" && !["exchange", "handler::status", "config", "route", "top"].contains(&from) {
        return true;
    }
    if from == "local" && to == "log" {
        return false;
    }
    if ["local", "http", "fs", "log", "units"].contains(&from) {
        return true;
    }
    false
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `crate::a::b` named in `src` outside comments, including the
/// items of `use crate::{a, b::c}` groups.
fn crate_paths(src: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in src.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + 7..];
            if let Some(group) = tail.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let item = item.trim();
                    if !item.is_empty() {
                        found.insert(item.to_owned());
                    }
                }
            } else {
                let end = tail
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(tail.len());
                found.insert(tail[..end].trim_end_matches(':').to_owned());
            }
            rest = &rest[i + 7..];
        }
    }
    found
}

#[test]
fn imports_in_stoa_server_point_down_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut violations = Vec::new();
    let mut checked = 0;
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        let from = layer_of(&rel);
        let text = std::fs::read_to_string(f).expect("read source");
        // Unit tests may reach anywhere.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for path in crate_paths(code) {
            checked += 1;
            let to = layer_named(&path);
            if forbidden(&from, &to) {
                violations.push(format!("{rel} ({from}) imports crate::{path} ({to})"));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} imports found: is the parser broken?"
    );
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn handlers_never_branch_on_wire_framing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root.join("handler"), &mut files);
    rust_files(&root.join("gateway"), &mut files);
    assert!(files.len() >= 6, "{files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // The request's head, by the names handlers give it (an
            // upstream response's framing is the proxy's to read).
            for field in [".framing", ".keep_alive", ".expect_continue"] {
                let hit = ["head", "req()", "req", "orig"]
                    .iter()
                    .any(|h| code.contains(&format!("{h}{field}")));
                if hit {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The checker itself: a handler importing the connection loop, or another
/// handler, is caught; importing the exchange is not.
#[test]
fn the_layer_rules_catch_an_upward_import() {
    assert!(forbidden("handler::cgi", "conn"));
    assert!(forbidden("handler::cgi", "handler::fastcgi"));
    assert!(forbidden("upstream", "gateway"));
    assert!(forbidden("conn", "handler::static_files"));
    assert!(!forbidden("handler::cgi", "exchange"));
    assert!(!forbidden("handler::cgi", "handler"));
    assert!(!forbidden("route", "handler::cgi"));
    assert!(forbidden("filter", "exchange"));
    assert!(!forbidden("exchange", "filter"));
    assert!(forbidden("config", "conn"));
    assert!(forbidden("config", "route"));
    assert!(forbidden("route", "conn"));
    assert!(!forbidden("conn", "route"));
    assert!(!forbidden("route", "config"));
    assert_eq!(layer_of("handler/fastcgi/mux.rs"), "handler::fastcgi");
    assert_eq!(layer_of("handler/configure.rs"), "handler");
    assert!(!forbidden(
        "handler::cgi",
        layer_named("handler::configure::Ctx").as_str()
    ));
    assert!(forbidden("units", "config"));
    assert_eq!(layer_named("handler::fastcgi"), "handler::fastcgi");
    assert!(forbidden("cache", "exchange"));
    assert!(forbidden("cache", "upstream"));
    assert!(!forbidden("cache", "http"));
    assert!(!forbidden("route", "cache"));
    assert!(!forbidden("exchange", "cache"));
    assert!(!forbidden("handler::status", "cache"));
    assert!(forbidden("handler::proxy", "cache"));
    assert!(forbidden("gateway", "cache"));
    let p = crate_paths("use crate::exchange::{BodyFail, Exchange};\nuse crate::{a, b::c};");
    assert!(p.contains("exchange"), "{p:?}");
    assert!(p.contains("b::c"));
}

/// The module of the upstream layer a file belongs to (`pool` for
/// everything under `upstream/pool/`), `None` for the layer's root.
fn upstream_module(rel: &str) -> Option<String> {
    let rest = rel.strip_prefix("upstream/")?;
    let first = rest.split('/').next()?.trim_end_matches(".rs");
    (first != "mod").then(|| first.to_owned())
}

/// The upstream modules `text` (a file of module `from`) names: through
/// `crate::upstream::X` paths, and `super::X` from a top-level file of the
/// layer.
fn upstream_imports(from: &str, top_level: bool, text: &str) -> BTreeSet<String> {
    let mut to: BTreeSet<String> = crate_paths(text)
        .into_iter()
        .filter_map(|p| p.strip_prefix("upstream::").map(str::to_owned))
        .filter_map(|p| p.split("::").next().map(str::to_owned))
        .filter(|m| m.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
        .collect();
    if top_level {
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(i) = rest.find("super::") {
                let tail = &rest[i + 7..];
                let end = tail
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                let m = &tail[..end];
                if m.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                    to.insert(m.to_owned());
                }
                rest = tail;
            }
        }
    }
    to.remove(from);
    to
}

/// A cycle in `edges` (module -> modules it imports), if there is one.
fn find_cycle(edges: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_owned());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_owned());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

/// The modules of the upstream layer (target, stream, pool, health) import
/// each other without a cycle, so each can be read (and tested) knowing
/// only what is below it: addr <- tls <- target <- stream <- pool <- health.
#[test]
fn the_upstream_modules_import_each_other_without_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root.join("upstream"), &mut files);
    let mut edges: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        let Some(from) = upstream_module(&rel) else {
            continue;
        };
        let text = std::fs::read_to_string(f).expect("read source");
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let top_level = rel.matches('/').count() == 1;
        let to = upstream_imports(&from, top_level, code);
        edges.entry(from).or_default().extend(to);
    }
    assert!(
        ["pool", "stream", "health"]
            .iter()
            .all(|m| edges.contains_key(*m)),
        "{edges:?}"
    );
    assert_eq!(find_cycle(&edges), None, "{edges:?}");
}

/// The cycle finder itself: `health -> pool -> health` is one.
#[test]
fn the_cycle_check_catches_a_cycle() {
    let mut edges: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    edges.insert("health".into(), ["pool".to_owned()].into());
    edges.insert(
        "pool".into(),
        ["stream".to_owned(), "health".to_owned()].into(),
    );
    edges.insert("stream".into(), BTreeSet::new());
    assert!(find_cycle(&edges).is_some());
    edges.insert("pool".into(), ["stream".to_owned()].into());
    assert_eq!(find_cycle(&edges), None);
}
