//! Every directive through the public API, driven the way the server
//! drives a page, with a scripted "server" answering includes and file
//! lookups.

use std::collections::HashMap;

use stoa_ssi::{
    Action, ExecKind, FileStat, InfoKind, Page, Settings, SizeFmt, Source, Times, VarList, Zone,
};

/// 2023-11-14 22:13:20 UTC
const NOW: i64 = 1_700_000_000;
/// 2001-09-09 01:46:40 UTC
const MTIME: i64 = 1_000_000_000;

/// What the scripted server knows.
#[derive(Default)]
struct Server {
    /// Subrequest output by path; a missing path fails.
    virtuals: HashMap<Vec<u8>, Vec<u8>>,
    files: HashMap<Vec<u8>, Vec<u8>>,
    stats: HashMap<Vec<u8>, FileStat>,
    /// Every request action, in order, for the tests to inspect.
    log: Vec<String>,
}

impl Server {
    fn new() -> Server {
        let mut s = Server::default();
        s.virtuals
            .insert(b"/footer.html".to_vec(), b"[footer]".to_vec());
        s.virtuals
            .insert(b"/error.html".to_vec(), b"[sorry]".to_vec());
        s.files.insert(b"part.html".to_vec(), b"[part]".to_vec());
        s.stats.insert(
            b"big.bin".to_vec(),
            FileStat {
                size: 1_258_291,
                mtime: MTIME,
            },
        );
        s.stats.insert(
            b"/small.txt".to_vec(),
            FileStat {
                size: 5,
                mtime: MTIME,
            },
        );
        s
    }
}

fn env() -> VarList {
    let mut e = VarList::new();
    e.set(b"DOCUMENT_URI", b"/dir/page.shtml");
    e.set(b"DOCUMENT_NAME", b"page.shtml");
    e.set(b"QUERY_STRING", b"a=%3Cb%3E");
    e.set(b"HTML", b"<b>\"x\"&y</b>");
    e
}

fn settings() -> Settings {
    Settings {
        errmsg: b"[ERR]".to_vec(),
        ..Settings::default()
    }
}

fn times() -> Times {
    Times {
        request: NOW,
        last_modified: MTIME,
    }
}

/// Runs `pieces` through a page as the server would and returns the
/// response body.
fn serve_with(page: &mut Page, pieces: &[&[u8]], env: &VarList, server: &mut Server) -> Vec<u8> {
    let mut out = Vec::new();
    let mut handle = |page: &mut Page, action: Action<'_>, out: &mut Vec<u8>| match action {
        Action::Text(t) => out.extend_from_slice(t),
        Action::Output(v) => out.extend_from_slice(&v),
        Action::Error { errmsg, reason } => {
            server.log.push(format!("error: {reason}"));
            out.extend_from_slice(&errmsg)
        }
        Action::Warning(w) => server.log.push(format!("warning: {w}")),
        Action::Include(src) => {
            let found = match &src {
                Source::Virtual(p) => server.virtuals.get(p),
                Source::File(p) => server.files.get(p),
            };
            server.log.push(format!("include {src:?}"));
            match found {
                Some(body) => out.extend_from_slice(body),
                None => page.failed("not found"),
            }
        }
        Action::FileInfo { kind, source } => {
            let key = match &source {
                Source::Virtual(p) | Source::File(p) => p.clone(),
            };
            server.log.push(format!("{kind:?} {source:?}"));
            match server.stats.get(&key) {
                Some(st) => page.file_info(*st),
                None => page.failed("no such file"),
            }
        }
        Action::Exec { kind, command } => {
            server.log.push(format!(
                "exec {kind:?} {}",
                String::from_utf8_lossy(&command)
            ));
            if command == b"fail" {
                page.failed("exit 1");
            } else {
                out.extend_from_slice(b"[ran]");
            }
        }
    };
    for piece in pieces {
        let mut input = *piece;
        while let Some(action) = page.next(&mut input, env) {
            handle(page, action, &mut out);
        }
    }
    page.finish();
    while let Some(action) = page.next(&mut &[][..], env) {
        handle(page, action, &mut out);
    }
    out
}

fn serve(src: &str) -> String {
    let mut page = Page::new(settings(), times());
    let out = serve_with(&mut page, &[src.as_bytes()], &env(), &mut Server::new());
    String::from_utf8_lossy(&out).into_owned()
}

fn serve_logged(src: &str, s: Settings) -> (String, Vec<String>) {
    let mut page = Page::new(s, times());
    let mut server = Server::new();
    let out = serve_with(&mut page, &[src.as_bytes()], &env(), &mut server);
    (String::from_utf8_lossy(&out).into_owned(), server.log)
}

#[test]
fn echo_prints_variables_entity_encoded_by_default() {
    assert_eq!(
        serve("<!--#echo var=\"DOCUMENT_URI\" -->"),
        "/dir/page.shtml"
    );
    assert_eq!(
        serve("<!--#echo var=HTML -->"),
        "&lt;b&gt;&quot;x&quot;&amp;y&lt;/b&gt;"
    );
    assert_eq!(
        serve("<!--#echo encoding=none var=HTML -->"),
        "<b>\"x\"&y</b>"
    );
    assert_eq!(
        serve("<!--#echo encoding=\"url\" var=HTML -->"),
        "%3cb%3e%22x%22&y%3c/b%3e"
    );
    assert_eq!(
        serve("<!--#echo encoding=urlencoded var=DOCUMENT_URI -->"),
        "%2fdir%2fpage.shtml"
    );
    assert_eq!(
        serve("<!--#echo encoding=base64 var=DOCUMENT_NAME -->"),
        "cGFnZS5zaHRtbA=="
    );
    assert_eq!(
        serve("<!--#echo decoding=url encoding=none var=QUERY_STRING -->"),
        "a=<b>"
    );
    assert_eq!(
        serve("<!--#echo var=document_uri -->"),
        "/dir/page.shtml",
        "names ignore case"
    );
}

#[test]
fn echo_of_an_unset_variable_prints_the_echomsg() {
    assert_eq!(serve("<!--#echo var=nope -->"), "(none)");
    assert_eq!(
        serve("<!--#config echomsg=\"?\" --><!--#echo var=nope -->"),
        "?"
    );
}

#[test]
fn echo_with_a_bad_encoding_or_parameter_prints_the_errmsg() {
    assert_eq!(
        serve("<!--#echo encoding=rot13 var=DOCUMENT_NAME -->"),
        "[ERR]"
    );
    assert_eq!(serve("<!--#echo bogus=1 var=DOCUMENT_NAME -->"), "[ERR]");
    assert_eq!(serve("<!--#echo -->"), "[ERR]");
    // A bare attribute ends the list quietly, as in Apache.
    assert_eq!(serve("<!--#echo var -->"), "");
}

#[test]
fn set_substitutes_variables_and_echo_reads_them_back() {
    assert_eq!(
        serve("<!--#set var=\"x\" value=\"[$DOCUMENT_NAME|${DOCUMENT_URI}|\\$y|$nope]\" --><!--#echo var=x -->"),
        "[page.shtml|/dir/page.shtml|$y|]"
    );
    assert_eq!(
        serve("<!--#set var=a value=1 --><!--#set var=a value=2 --><!--#echo var=A -->"),
        "2"
    );
    assert_eq!(
        serve("<!--#set var=a value=\"<&>\" encoding=entity --><!--#set var=b encoding=entity value=\"<&>\" --><!--#echo encoding=none var=a --><!--#echo encoding=none var=b -->"),
        "<&>&lt;&amp;&gt;",
        "encoding applies to the values after it"
    );
    assert_eq!(serve("<!--#set value=1 var=a -->"), "[ERR]");
    assert_eq!(serve("<!--#set var=a -->"), "[ERR]");
    assert_eq!(serve("<!--#set var=a value=1 foo=2 -->"), "[ERR]");
}

#[test]
fn set_variables_are_visible_to_the_server() {
    let mut page = Page::new(settings(), times());
    serve_with(
        &mut page,
        &[b"<!--#set var=A value=1 --><!--#set var=b value=2 -->"],
        &env(),
        &mut Server::new(),
    );
    let vars: Vec<(Vec<u8>, Vec<u8>)> =
        page.vars().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
    assert_eq!(
        vars,
        vec![
            (b"A".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec())
        ]
    );
}

#[test]
fn dates_follow_timefmt() {
    assert_eq!(
        serve("<!--#echo var=DATE_GMT -->"),
        "Tuesday, 14-Nov-2023 22:13:20 GMT"
    );
    assert_eq!(
        serve("<!--#echo var=DATE_LOCAL -->"),
        "Tuesday, 14-Nov-2023 22:13:20 UTC"
    );
    assert_eq!(
        serve("<!--#config timefmt=\"%Y-%m-%d %z\" --><!--#echo var=DATE_GMT --> <!--#echo var=LAST_MODIFIED -->"),
        "2023-11-14 +0000 2001-09-09 +0000"
    );
    assert_eq!(
        serve("<!--#set var=DATE_GMT value=x --><!--#echo var=DATE_GMT --><!--#config timefmt=%Y --><!--#echo var=DATE_GMT -->"),
        "x2023",
        "config timefmt stores the dates anew, as Apache does"
    );
}

#[test]
fn the_local_zone_comes_from_the_environment() {
    struct Cet(VarList);
    impl stoa_ssi::Env for Cet {
        fn var(&self, name: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
            self.0.var(name)
        }
        fn zone(&self, _t: i64) -> Zone {
            Zone {
                offset: 3600,
                name: "CET".into(),
            }
        }
    }
    let mut page = Page::new(settings(), times());
    let mut out = Vec::new();
    let mut input = &b"<!--#echo var=DATE_LOCAL -->"[..];
    let env = Cet(env());
    while let Some(a) = page.next(&mut input, &env) {
        if let Action::Output(v) = a {
            out.extend_from_slice(&v);
        }
    }
    assert_eq!(out, b"Tuesday, 14-Nov-2023 23:13:20 CET");
}

#[test]
fn conditionals_choose_one_branch() {
    let src = "<!--#set var=a value=1 -->\
        <!--#if expr=\"$a = 2\" -->two\
        <!--#elif expr=\"$a = 1\" -->one\
        <!--#elif expr=\"$a\" -->again\
        <!--#else -->other\
        <!--#endif -->.";
    assert_eq!(serve(src), "one.");
    assert_eq!(
        serve("<!--#if expr=\"\" -->a<!--#else -->b<!--#endif -->"),
        "b"
    );
    assert_eq!(
        serve("<!--#if expr=\"x\" -->a<!--#else -->b<!--#endif -->"),
        "a"
    );
}

#[test]
fn nested_conditionals_keep_their_own_state() {
    let src = "<!--#if expr=\"1\" -->A\
        <!--#if expr=\"\" -->B<!--#else -->C<!--#endif -->\
        D<!--#elif expr=\"1\" -->E<!--#else -->F<!--#endif -->\
        <!--#if expr=\"\" -->\
          <!--#if expr=\"1\" -->G<!--#else -->H<!--#endif -->\
          <!--#elif expr=\"\" -->I\
        <!--#else -->J<!--#if expr=\"1\" -->K<!--#endif -->L\
        <!--#endif -->M";
    assert_eq!(serve(src), "ACDJKLM");
    // Apache reports a bad elif even in an if whose branch is not taken.
    assert_eq!(
        serve("<!--#if expr=\"\" --><!--#elif expr=\"(\" -->a<!--#endif -->"),
        "[ERR]"
    );
}

#[test]
fn skipped_branches_emit_nothing_and_include_nothing() {
    let (out, log) = serve_logged(
        "<!--#if expr=\"\" --><!--#include virtual=\"/footer.html\" --><!--#echo var=x --><!--#bogus --><!--#fsize file=big.bin --><!--#exec cmd=ls --><!--#endif -->done",
        settings(),
    );
    assert_eq!(out, "done");
    assert!(log.is_empty(), "{log:?}");
}

#[test]
fn a_bad_expression_prints_the_errmsg_and_changes_nothing() {
    assert_eq!(serve("<!--#if expr=\"(\" -->a<!--#endif -->"), "[ERR]a");
    assert_eq!(
        serve("<!--#if expr=\"$a = /(/\" -->a<!--#endif -->"),
        "[ERR]a"
    );
    assert_eq!(serve("<!--#if -->a<!--#endif -->"), "[ERR]a");
    assert_eq!(serve("<!--#if foo=\"1\" -->a<!--#endif -->"), "[ERR]a");
    assert_eq!(serve("<!--#if expr=1 expr=2 -->a<!--#endif -->"), "[ERR]a");
    assert_eq!(serve("<!--#if expr=\"-A /x\" -->a<!--#endif -->"), "[ERR]a");
}

#[test]
fn regex_captures_are_echoed_as_0_to_9() {
    assert_eq!(
        // In the expression a backslash escapes the next byte: `\/` is a
        // slash inside the regex, `\\w` reaches the regex as `\w`.
        serve(
            r#"<!--#if expr="$DOCUMENT_URI = /^\/(\\w+)\/(.*)\\.shtml$/" --><!--#echo var=1 -->,<!--#echo var=2 -->,<!--#echo var=0 -->,<!--#echo var=3 --><!--#endif -->"#
        ),
        "dir,page,/dir/page.shtml,(none)"
    );
}

#[test]
fn unbalanced_else_and_endif_behave_as_in_apache() {
    // A stray else at the top hides output until an endif.
    assert_eq!(serve("a<!--#else -->b<!--#endif -->c"), "ac");
    assert_eq!(serve("a<!--#endif -->b"), "ab");
    let (out, log) = serve_logged("<!--#if expr=\"\" -->a", settings());
    assert_eq!(out, "");
    assert_eq!(log, vec!["warning: missing closing endif directive"]);
}

#[test]
fn config_changes_errmsg_and_sizefmt() {
    assert_eq!(
        serve("<!--#config errmsg=\"oops\" --><!--#nope -->"),
        "oops"
    );
    assert_eq!(serve("<!--#fsize file=big.bin -->"), "1.2M");
    assert_eq!(serve("<!--#fsize virtual=/small.txt -->"), "  5 ");
    assert_eq!(
        serve("<!--#config sizefmt=bytes --><!--#fsize file=big.bin -->"),
        "1,258,291"
    );
    assert_eq!(
        serve("<!--#config sizefmt=bytes --><!--#config sizefmt=abbrev --><!--#fsize file=big.bin -->"),
        "1.2M"
    );
    assert_eq!(serve("<!--#config sizefmt=Bytes -->"), "[ERR]");
    assert_eq!(serve("<!--#config color=red -->"), "[ERR]");
    let s = Settings {
        sizefmt: SizeFmt::Bytes,
        ..settings()
    };
    assert_eq!(
        serve_logged("<!--#fsize file=big.bin -->", s).0,
        "1,258,291"
    );
}

#[test]
fn flastmod_and_fsize_ask_the_server_and_print_its_answer() {
    let (out, log) = serve_logged(
        "<!--#config timefmt=\"%d.%m.%Y\" --><!--#flastmod file=\"big.bin\" virtual=\"/small.txt\" -->",
        settings(),
    );
    assert_eq!(out, "09.09.200109.09.2001");
    assert_eq!(
        log,
        vec![
            format!(
                "{:?} {:?}",
                InfoKind::Flastmod,
                Source::File(b"big.bin".to_vec())
            ),
            format!(
                "{:?} {:?}",
                InfoKind::Flastmod,
                Source::Virtual(b"/small.txt".to_vec())
            ),
        ]
    );
    assert_eq!(
        serve("<!--#fsize file=missing big.bin -->"),
        "[ERR]",
        "stops at the first failure"
    );
    assert_eq!(serve("<!--#fsize file=\"../etc/passwd\" -->"), "[ERR]");
    assert_eq!(serve("<!--#fsize file=\"/etc/passwd\" -->"), "[ERR]");
    assert_eq!(serve("<!--#fsize name=x -->"), "[ERR]");
}

#[test]
fn include_inserts_the_subrequest_output_in_place() {
    assert_eq!(
        serve("<p><!--#include virtual=\"/footer.html\" --></p><!--#include file=\"./x/../part.html\" -->"),
        "<p>[footer]</p>[part]"
    );
    assert_eq!(
        serve("<!--#set var=f value=footer --><!--#include virtual=\"/$f.html\" -->"),
        "[footer]"
    );
    assert_eq!(
        serve("<!--#include virtual=\"/footer&#46;html\" -->"),
        "[footer]",
        "include values are HTML-decoded"
    );
}

#[test]
fn include_onerror_recovers_from_a_failed_virtual() {
    assert_eq!(
        serve("<!--#include virtual=/missing onerror=/error.html -->"),
        "[sorry]"
    );
    assert_eq!(
        serve("<!--#include virtual=/missing onerror=/missing2 -->"),
        "[ERR]"
    );
    assert_eq!(serve("<!--#include virtual=/missing -->"), "[ERR]");
    // After a success, onerror is skipped; after a failure, virtual is.
    let (out, log) = serve_logged(
        "<!--#include virtual=/footer.html onerror=/error.html virtual=/missing virtual=/footer.html onerror=/error.html -->",
        settings(),
    );
    assert_eq!(out, "[footer][sorry]");
    assert_eq!(log.len(), 3, "footer, missing, error: {log:?}");
    assert_eq!(serve("<!--#include file=\"../secret\" -->"), "[ERR]");
    assert_eq!(
        serve("<!--#include file=\"/etc/passwd\" onerror=/error.html -->"),
        "[sorry]"
    );
    assert_eq!(serve("<!--#include src=/footer.html -->"), "[ERR]");
}

#[test]
fn exec_is_refused_unless_the_server_allows_it() {
    let (out, log) = serve_logged("<!--#exec cmd=\"ls\" -->", settings());
    assert_eq!(out, "[ERR]");
    assert_eq!(log, vec!["error: exec used but not allowed"]);
    let allow = Settings {
        exec: true,
        ..settings()
    };
    let (out, log) = serve_logged(
        "<!--#exec cmd=\"echo $DOCUMENT_NAME $nope\" --><!--#exec cgi=\"/cgi-bin/x?$nope\" --><!--#exec cmd=fail -->",
        allow,
    );
    assert_eq!(out, "[ran][ran][ERR]");
    assert_eq!(
        log[..2],
        [
            format!("exec {:?} echo page.shtml $nope", ExecKind::Cmd),
            format!("exec {:?} /cgi-bin/x?", ExecKind::Cgi)
        ]
    );
}

#[test]
fn printenv_lists_the_environment_html_escaped() {
    let out = serve(
        "<!--#set var=HTML value=changed --><!--#set var=new value=\"<v>\" --><!--#printenv -->",
    );
    assert_eq!(
        out,
        "DOCUMENT_URI=/dir/page.shtml\nDOCUMENT_NAME=page.shtml\nQUERY_STRING=a=%3Cb%3E\nHTML=changed\n\
         DATE_LOCAL=Tuesday, 14-Nov-2023 22:13:20 UTC\nDATE_GMT=Tuesday, 14-Nov-2023 22:13:20 GMT\n\
         LAST_MODIFIED=Sunday, 09-Sep-2001 01:46:40 UTC\nnew=&lt;v&gt;\n"
    );
    assert_eq!(serve("<!--#printenv x=1 -->"), "[ERR]");
}

#[test]
fn unknown_and_malformed_directives_print_the_errmsg() {
    assert_eq!(serve("a<!--#frobnicate -->b"), "a[ERR]b");
    assert_eq!(serve("a<!--#comment anything at all -->b"), "ab");
    assert_eq!(serve("a<!--# echo var=x -->b"), "a[ERR]b");
    assert_eq!(serve("a<!--#echo \"x\" -->b"), "a[ERR]b");
    assert_eq!(serve("a<!--#echo var=x"), "a[ERR]");
    assert_eq!(serve("a<!--"), "a<!--");
}

#[test]
fn a_directive_over_the_bound_prints_the_errmsg_and_the_page_goes_on() {
    let s = Settings {
        max_directive: 64,
        ..settings()
    };
    let src = format!("a<!--#echo var=\"{}\" -->b", "x".repeat(200));
    assert_eq!(serve_logged(&src, s).0, "a[ERR]b");
}

#[test]
fn a_page_served_in_any_two_pieces_gives_the_same_response() {
    let src = "<html><!--#set var=\"t\" value=\"Hi $DOCUMENT_NAME\" -->\
        <h1><!--#echo var=t --></h1><!--#if expr=\"$t = /^Hi (.*)$/\" -->[<!--#echo var=1 -->]\
        <!--#else -->no<!--#endif --><!--#include virtual=\"/footer.html\" --> <!-- plain comment -->\
        <!--#fsize file=big.bin --><!--#printenv --></html>";
    let page = src.as_bytes();
    let mut whole_page = Page::new(settings(), times());
    let whole = serve_with(&mut whole_page, &[page], &env(), &mut Server::new());
    assert!(String::from_utf8_lossy(&whole).starts_with(
        "<html><h1>Hi page.shtml</h1>[page.shtml][footer] <!-- plain comment -->1.2M"
    ));
    for cut in 0..=page.len() {
        let mut p = Page::new(settings(), times());
        let (a, b) = page.split_at(cut);
        assert_eq!(
            serve_with(&mut p, &[a, b], &env(), &mut Server::new()),
            whole,
            "cut at {cut}"
        );
    }
    let bytes: Vec<&[u8]> = page.chunks(1).collect();
    let mut p = Page::new(settings(), times());
    assert_eq!(
        serve_with(&mut p, &bytes, &env(), &mut Server::new()),
        whole
    );
}

#[test]
fn text_is_released_before_the_page_ends() {
    let mut page = Page::new(settings(), times());
    let env = env();
    let mut input = &b"<html><body>long page..."[..];
    assert_eq!(
        page.next(&mut input, &env),
        Some(Action::Text(b"<html><body>long page..."))
    );
    let mut input = &b"<!--#include virtual=\"/x\" -->more"[..];
    assert_eq!(
        page.next(&mut input, &env),
        Some(Action::Include(Source::Virtual(b"/x".to_vec())))
    );
    assert_eq!(input, b"more", "the rest waits while the include runs");
    assert_eq!(page.next(&mut input, &env), Some(Action::Text(b"more")));
}

/// A deterministic generator, so mangled pages run in `cargo test`
/// without a fuzzer.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn mangled_pages_never_panic() {
    let base = b"<!--#if expr=\"($a = /x(y)/) && !$b || $c < 'd'\" -->\
        <!--#set var=a value=\"\\\"$b${c}\" --><!--#echo encoding=url,entity decoding=base64 var=a -->\
        <!--#elif expr=\"-A /x\" --><!--#include virtual=/footer.html onerror=/e file=../x -->\
        <!--#else --><!--#config timefmt=\"%c %G %-d %\" sizefmt=bytes errmsg=e --><!--#printenv -->\
        <!--#endif --><!--#flastmod virtual=/small.txt --><!--#exec cmd=fail -->";
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..3000 {
        let mut input = base.to_vec();
        for _ in 0..(xorshift(&mut s) % 6) {
            let i = (xorshift(&mut s) as usize) % input.len();
            input[i] = b"<!-#\"'`\\$={}()/|&> -x"[(xorshift(&mut s) % 21) as usize];
        }
        let cut = (xorshift(&mut s) as usize) % (input.len() + 1);
        let allow = Settings {
            exec: xorshift(&mut s).is_multiple_of(2),
            max_directive: 32 + (xorshift(&mut s) as usize % 200),
            ..settings()
        };
        let mut p = Page::new(allow.clone(), times());
        let split = serve_with(
            &mut p,
            &[&input[..cut], &input[cut..]],
            &env(),
            &mut Server::new(),
        );
        let mut p = Page::new(allow, times());
        let whole = serve_with(&mut p, &[&input], &env(), &mut Server::new());
        assert_eq!(split, whole, "{}", String::from_utf8_lossy(&input));
    }
}
