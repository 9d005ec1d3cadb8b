//! The properties the `ssi` fuzz target checks (see [`fuzz_check`]). Not
//! API: shared by the libFuzzer target (crates/stoa-ssi/fuzz) and the
//! corpus replay test (tests/fuzz_corpus.rs), so that a corpus file means
//! the same in both places.

use crate::parser::{Event, Parser};
use crate::{Action, Env, FileStat, Page, Settings, Template, Times, VarList};

/// A small bound, so that short inputs reach the too-long path.
const MAX: usize = 64;

/// Input layout: 2 bytes (u16 little-endian) choose a split point, modulo
/// the length of the rest, which is the page. Panics when a property
/// breaks:
///
/// - the parser gives the same events (texts merged) whether the page
///   comes whole, in two pieces or byte by byte, and never holds more
///   than its bound; every call leaves no input unused;
/// - the text events, concatenated, are a subsequence of the page (no
///   byte invented) made of whole runs outside directives;
/// - the interpreter, with every reply a scripted server may give, gives
///   the same output for the whole page, for the two pieces and for the
///   page parsed once into a [`Template`] (what the server caches), and
///   never panics.
pub fn fuzz_check(data: &[u8]) {
    let (cut, page) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => (0, &[][..]),
    };
    let cut = cut % (page.len() + 1);
    let (a, b) = page.split_at(cut);

    let whole = events(&[page]);
    assert_eq!(events(&[a, b]), whole, "events differ when split at {cut}");
    if page.len() <= 4096 {
        let bytes: Vec<&[u8]> = page.chunks(1).collect();
        assert_eq!(events(&bytes), whole, "events differ byte by byte");
    }
    let text: Vec<u8> = whole
        .iter()
        .filter_map(|e| match e {
            Owned::Text(t) => Some(&t[..]),
            _ => None,
        })
        .flatten()
        .copied()
        .collect();
    let mut rest = page.iter();
    assert!(
        text.iter().all(|c| rest.any(|p| p == c)),
        "text is not taken from the page"
    );

    for exec in [false, true] {
        let settings = Settings {
            exec,
            max_directive: MAX,
            ..Settings::default()
        };
        let one = render(&settings, &[page]);
        assert_eq!(
            render(&settings, &[a, b]),
            one,
            "output differs when split at {cut}"
        );
        let t = Template::parse(page.to_vec(), MAX);
        assert_eq!(render_in(&settings, &t), one, "a template's output differs");
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Owned {
    Text(Vec<u8>),
    Other(String),
}

fn events(pieces: &[&[u8]]) -> Vec<Owned> {
    let mut p = Parser::new(MAX);
    let mut out: Vec<Owned> = Vec::new();
    let push = |out: &mut Vec<Owned>, ev: Event<'_>| match ev {
        Event::Text(t) => {
            assert!(!t.is_empty(), "an empty text event");
            match out.last_mut() {
                Some(Owned::Text(prev)) => prev.extend_from_slice(t),
                _ => out.push(Owned::Text(t.to_vec())),
            }
        }
        ev => out.push(Owned::Other(format!("{ev:?}"))),
    };
    for piece in pieces {
        let mut input = *piece;
        while let Some(ev) = p.next(&mut input) {
            push(&mut out, ev);
            assert!(p.buffered() <= MAX, "the parser holds {}", p.buffered());
        }
        assert!(input.is_empty(), "input left unused");
        assert!(p.buffered() <= MAX, "the parser holds {}", p.buffered());
    }
    if let Some(ev) = p.finish() {
        push(&mut out, ev);
    }
    out
}

/// [`render`] of a page parsed once.
fn render_in(settings: &Settings, t: &Template) -> Vec<u8> {
    render_with(settings, &mut |page, env, out, handle| {
        let mut pos = 0;
        let mut drain = |page: &mut Page, out: &mut Vec<u8>| {
            while let Some(action) = page.next_in(t, &mut pos, env) {
                if let Action::Text(t) = action {
                    out.extend_from_slice(t);
                    continue;
                }
                handle(page, action, out);
            }
        };
        drain(page, out);
        page.finish_template();
        drain(page, out);
    })
}

/// A driver of a page: the page, its environment, the output, and what
/// handles an action that is not text.
type Handler<'h> = dyn FnMut(&mut Page, Action<'_>, &mut Vec<u8>) + 'h;
type Driver<'d> = dyn FnMut(&mut Page, &dyn Env, &mut Vec<u8>, &mut Handler<'_>) + 'd;

/// The page's output with a server that fails every other request.
fn render(settings: &Settings, pieces: &[&[u8]]) -> Vec<u8> {
    render_with(settings, &mut |page, env, out, handle| {
        for piece in pieces {
            let mut input = *piece;
            while let Some(action) = page.next(&mut input, env) {
                // Only requests count towards `n`, so that both runs script
                // the same replies whatever the text's pieces.
                if let Action::Text(t) = action {
                    out.extend_from_slice(t);
                    continue;
                }
                handle(page, action, out);
            }
        }
        page.finish();
        while let Some(action) = page.next(&mut &[][..], env) {
            if let Action::Text(t) = action {
                out.extend_from_slice(t);
                continue;
            }
            handle(page, action, out);
        }
    })
}

fn render_with(settings: &Settings, drive: &mut Driver<'_>) -> Vec<u8> {
    let mut env = VarList::new();
    env.set(b"DOCUMENT_URI", b"/a/b.shtml");
    env.set(b"QUERY_STRING", b"x=1&y=%41");
    let mut page = Page::new(
        settings.clone(),
        Times {
            request: 1_700_000_000,
            last_modified: -1,
        },
    );
    let mut out = Vec::new();
    let mut n = 0u32;
    let mut handle = move |page: &mut Page, action: Action<'_>, out: &mut Vec<u8>| {
        n += 1;
        match action {
            Action::Text(t) => out.extend_from_slice(t),
            Action::Output(v) => out.extend_from_slice(&v),
            Action::Error { errmsg, .. } => out.extend_from_slice(&errmsg),
            Action::Warning(_) => {}
            Action::Include(_) | Action::Exec { .. } => {
                if n.is_multiple_of(2) {
                    page.failed("scripted failure");
                } else {
                    out.extend_from_slice(b"[included]");
                }
            }
            Action::FileInfo { .. } => {
                if n.is_multiple_of(2) {
                    page.failed("scripted failure");
                } else {
                    page.file_info(FileStat {
                        size: u64::from(n) << 20,
                        mtime: i64::from(n),
                    });
                }
            }
        }
    };
    let env: &dyn Env = &env;
    drive(&mut page, env, &mut out, &mut handle);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuzz_check_holds_on_a_page_split_everywhere() {
        let page = b"a<!--#set var=x value=\"$DOCUMENT_URI\" --><!--#if expr=\"$x = /b(.)/\" -->\
            <!--#echo var=1 --><!--#include virtual=/v onerror=/e --><!--#fsize file=f -->\
            <!--#else --><!--#exec cmd=ls --><!--#endif --><!--#flastmod virtual=/v --><!--";
        for cut in 0..=page.len() as u16 {
            let mut input = cut.to_le_bytes().to_vec();
            input.extend_from_slice(page);
            fuzz_check(&input);
        }
        fuzz_check(b"");
        fuzz_check(b"\x01");
        fuzz_check(&[b'<'; 300]);
    }
}
