//! The streaming parser: page bytes in, [`Event`]s out.
//!
//! It follows mod_include's state machine (`send_parsed_content` and its
//! `find_*` helpers in httpd 2.4), byte for byte where it matters:
//!
//! - a directive starts at `<!--#` and ends at the first `-->` that is not
//!   inside an attribute value; the element name follows `#` at once (a
//!   space there is a "missing directive name" error) and ends at white
//!   space or at `-->` (`<!--#printenv-->` works);
//! - element and attribute names are lower-cased (ASCII);
//! - an attribute is `name`, `name=value`, `name="value"`, `name='value'`
//!   or ``name=`value` ``, with white space allowed around `=`; an unquoted
//!   value ends at white space only (so `var=x-->` runs on, as in Apache);
//!   inside quotes a backslash escapes the quote character and nothing else
//!   (`\"` is `"`, `\n` stays `\n`);
//! - a value without a name (`<!--#echo "x" -->`) or an empty name makes
//!   the directive an error, reported when it ends;
//! - "white space" is C's `isspace`: space, `\t`, `\n`, `\v`, `\f`, `\r`;
//! - `-->` is matched without backtracking, as Apache does: `--->` right
//!   after a name or value does not end the directive.
//!
//! Where it differs: Apache keeps a directive's text in memory however long
//! it grows. Here a directive is bounded ([`Parser::new`]'s `max`): past
//! that many bytes the parser keeps following the syntax (so it still ends
//! at the right `-->`) but stores nothing more, and reports the directive as
//! [`Malformed::TooLong`], which prints the error message in its place. A
//! stray `<!--#` therefore behaves as under Apache (the text up to the next
//! `-->` disappears, the error message appears) while memory stays bounded.
//! A directive still open at the end of the page is
//! [`Malformed::Unterminated`] (Apache: "SSI directive was not properly
//! finished"), its text dropped as Apache drops it.
//!
//! Literal text is never copied: [`Event::Text`] borrows the input, except
//! for a partial `<!--` held back at the end of one input that turns out
//! not to start a directive, which comes back from a static string.

/// What opens a directive (Apache's default `SSIStartTag`).
pub const START: &[u8] = b"<!--#";
/// What closes one (Apache's default `SSIEndTag`).
pub const END: &[u8] = b"-->";
/// The default bound on one directive, `<!--#` to `-->` included.
pub const DEFAULT_MAX_DIRECTIVE: usize = 8192;

/// One attribute of a directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// Lower-cased.
    pub name: Vec<u8>,
    /// `None` for a bare name without `=`.
    pub value: Option<Vec<u8>>,
}

/// A directive that parsed cleanly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// The element, lower-cased (`echo`, `include`, ...); never empty.
    pub name: Vec<u8>,
    /// The attributes, in order (several may share a name).
    pub args: Vec<Arg>,
}

/// Why a directive cannot run; Apache prints its error message in its
/// place (when the page is printing at that point).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// `<!--#-->`, `<!--# echo ... -->`.
    MissingName,
    /// `"value"` without `name=`, or `=value` with an empty name.
    MissingArgName,
    /// Longer than the parser's bound.
    TooLong,
    /// The page ended inside the directive.
    Unterminated,
}

/// What the parser found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// Page text to pass through (borrowed from the input).
    Text(&'a [u8]),
    Directive(Directive),
    /// A directive that cannot run, with its name when it had one.
    Malformed {
        error: Malformed,
        name: Vec<u8>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Looking for `<`.
    Text,
    /// This many bytes of `START` ended the previous input.
    Start(usize),
    /// The element name.
    Name,
    /// This many bytes of `END` seen right after name characters.
    NameTail(usize),
    /// Between attributes: white space, then an attribute or `-->`.
    PreArg,
    /// This many bytes of `END` seen where an attribute could start.
    Tail(usize),
    ArgName,
    /// After a name: white space, then `=` or the next attribute.
    ArgEq,
    /// After `=`: white space, then the value.
    PreVal,
    /// Inside a value; `quote` is 0 for an unquoted one; `esc` when the
    /// previous byte was a backslash (quoted values only).
    Val {
        quote: u8,
        esc: bool,
    },
}

/// The streaming parser. Feed it input with [`Parser::next`] until that
/// returns `None`, then give it the next input; call [`Parser::finish`]
/// at the end of the page.
#[derive(Debug)]
pub struct Parser {
    state: State,
    max: usize,
    /// Bytes of the current directive so far, `<!--#` included.
    raw: usize,
    /// Past `max`: stop storing.
    overflow: bool,
    error: Option<Malformed>,
    name: Vec<u8>,
    args: Vec<Arg>,
    /// The attribute name or value being read.
    cur: Vec<u8>,
    /// The name of the attribute whose value is being read.
    cur_name: Vec<u8>,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn is_quote(c: u8) -> bool {
    matches!(c, b'"' | b'\'' | b'`')
}

impl Parser {
    /// A parser whose directives may be at most `max` bytes long
    /// (`<!--#` and `-->` included; at least `START.len() + END.len()`).
    pub fn new(max: usize) -> Parser {
        Parser {
            state: State::Text,
            max: max.max(START.len() + END.len()),
            raw: 0,
            overflow: false,
            error: None,
            name: Vec::new(),
            args: Vec::new(),
            cur: Vec::new(),
            cur_name: Vec::new(),
        }
    }

    /// How many bytes of directive text the parser holds now: never more
    /// than its bound.
    pub fn buffered(&self) -> usize {
        self.name.len()
            + self.cur.len()
            + self.cur_name.len()
            + self
                .args
                .iter()
                .map(|a| a.name.len() + a.value.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
    }

    /// Whether the parser is inside a directive (or a possible start of
    /// one), so that text is being held rather than passed through.
    pub fn in_directive(&self) -> bool {
        self.state != State::Text
    }

    /// Parses from the front of `input`, advancing it past what was used,
    /// and returns the next event; `None` once `input` is used up (a
    /// partial directive is kept inside the parser for the next input).
    pub fn next<'a>(&mut self, input: &mut &'a [u8]) -> Option<Event<'a>> {
        loop {
            if input.is_empty() {
                return None;
            }
            match self.state {
                State::Text => {
                    if let Some(ev) = self.text(input) {
                        return Some(ev);
                    }
                }
                State::Start(k) => {
                    let want = &START[k..];
                    let n = want.len().min(input.len());
                    if input[..n] != want[..n] {
                        // Not a directive after all: the held bytes are
                        // text. `<` occurs in `START` only at its start, so
                        // no directive can begin inside them.
                        self.state = State::Text;
                        return Some(Event::Text(&START[..k]));
                    }
                    *input = &input[n..];
                    if n == want.len() {
                        self.begin();
                    } else {
                        self.state = State::Start(k + n);
                    }
                }
                _ => {
                    if let Some(ev) = self.directive(input) {
                        return Some(ev);
                    }
                }
            }
        }
    }

    /// Text up to the next `<!--#` (or the partial start of one at the
    /// end of `input`).
    fn text<'a>(&mut self, input: &mut &'a [u8]) -> Option<Event<'a>> {
        let data = *input;
        let mut from = 0;
        while let Some(off) = memchr::memchr(b'<', &data[from..]) {
            let at = from + off;
            let rest = &data[at..];
            let n = rest.len().min(START.len());
            if rest[..n] == START[..n] {
                if at > 0 {
                    // The text first; the start is found again next call.
                    *input = &data[at..];
                    return Some(Event::Text(&data[..at]));
                }
                *input = &data[n..];
                if n == START.len() {
                    self.begin();
                } else {
                    self.state = State::Start(n);
                }
                return None;
            }
            from = at + 1;
        }
        *input = &[];
        Some(Event::Text(data))
    }

    fn begin(&mut self) {
        self.state = State::Name;
        self.raw = START.len();
        self.overflow = false;
        self.error = None;
        self.name.clear();
        self.args.clear();
        self.cur.clear();
        self.cur_name.clear();
    }

    fn store(&mut self, c: u8) {
        if !self.overflow {
            self.cur.push(c);
        }
    }

    fn store_name(&mut self, c: u8) {
        if !self.overflow {
            self.name.push(c);
        }
    }

    /// Ends the element name (white space or `-->` seen).
    fn end_name(&mut self) {
        if self.name.is_empty() && !self.overflow {
            self.error.get_or_insert(Malformed::MissingName);
        }
        self.name.make_ascii_lowercase();
    }

    fn end_arg_name(&mut self) {
        if self.cur.is_empty() && !self.overflow {
            self.error.get_or_insert(Malformed::MissingArgName);
        }
        self.cur.make_ascii_lowercase();
        self.cur_name = std::mem::take(&mut self.cur);
    }

    fn push_arg(&mut self, value: Option<Vec<u8>>) {
        let name = std::mem::take(&mut self.cur_name);
        if !self.overflow {
            self.args.push(Arg { name, value });
        }
    }

    /// The directive is complete: what it amounts to.
    fn complete<'a>(&mut self) -> Event<'a> {
        self.state = State::Text;
        let name = std::mem::take(&mut self.name);
        let args = std::mem::take(&mut self.args);
        self.cur.clear();
        self.cur_name.clear();
        if self.overflow {
            return Event::Malformed {
                error: Malformed::TooLong,
                name,
            };
        }
        match self.error {
            Some(error) => Event::Malformed { error, name },
            None => Event::Directive(Directive { name, args }),
        }
    }

    /// Runs the directive state machine over `input` until the directive
    /// ends (its event) or the input does (`None`).
    fn directive<'a>(&mut self, input: &mut &'a [u8]) -> Option<Event<'a>> {
        let data = *input;
        let mut i = 0;
        while i < data.len() {
            let c = data[i];
            // Counted once per byte; a byte handed to the next state
            // (`continue` without `i += 1`) is not counted again.
            let mut consumed = true;
            match self.state {
                State::Name => {
                    if is_space(c) {
                        self.end_name();
                        self.state = State::PreArg;
                    } else {
                        self.store_name(c);
                        if c == END[0] {
                            self.state = State::NameTail(1);
                        }
                    }
                }
                State::NameTail(k) => {
                    if c == END[k] {
                        if k + 1 == END.len() {
                            // The tail's dashes went into the name: drop them.
                            let keep = self.name.len().saturating_sub(END.len() - 1);
                            self.name.truncate(keep);
                            self.end_name();
                            self.count(1);
                            *input = &data[i + 1..];
                            return Some(self.complete());
                        }
                        self.store_name(c);
                        self.state = State::NameTail(k + 1);
                    } else {
                        self.state = State::Name;
                        consumed = false;
                    }
                }
                State::PreArg => {
                    if !is_space(c) {
                        if c == END[0] {
                            self.state = State::Tail(1);
                        } else {
                            self.cur.clear();
                            if is_quote(c) {
                                // A value with no name: Apache reads it and
                                // fails the directive.
                                self.error.get_or_insert(Malformed::MissingArgName);
                                self.cur_name.clear();
                                self.state = State::Val {
                                    quote: c,
                                    esc: false,
                                };
                            } else {
                                self.state = State::ArgName;
                                consumed = false;
                            }
                        }
                    }
                }
                State::Tail(k) => {
                    if c == END[k] {
                        if k + 1 == END.len() {
                            self.count(1);
                            *input = &data[i + 1..];
                            return Some(self.complete());
                        }
                        self.state = State::Tail(k + 1);
                    } else {
                        // Not the end: the dashes start an attribute name.
                        self.cur.clear();
                        for _ in 0..k {
                            self.store(END[0]);
                        }
                        self.state = State::ArgName;
                        consumed = false;
                    }
                }
                State::ArgName => {
                    if is_space(c) || c == b'=' {
                        self.end_arg_name();
                        self.state = State::ArgEq;
                        consumed = false;
                    } else {
                        self.store(c);
                    }
                }
                State::ArgEq => {
                    if c == b'=' {
                        self.state = State::PreVal;
                    } else if !is_space(c) {
                        self.push_arg(None);
                        self.state = State::PreArg;
                        consumed = false;
                    }
                }
                State::PreVal => {
                    if !is_space(c) {
                        self.cur.clear();
                        if is_quote(c) {
                            self.state = State::Val {
                                quote: c,
                                esc: false,
                            };
                        } else {
                            self.state = State::Val {
                                quote: 0,
                                esc: false,
                            };
                            consumed = false;
                        }
                    }
                }
                State::Val { quote: 0, .. } => {
                    if is_space(c) {
                        let v = std::mem::take(&mut self.cur);
                        self.push_arg(Some(v));
                        self.state = State::PreArg;
                    } else {
                        self.store(c);
                    }
                }
                State::Val { quote, esc: true } => {
                    self.state = State::Val { quote, esc: false };
                    if c == quote {
                        self.store(c);
                    } else {
                        // A backslash escapes only the quote: it stays,
                        // and this byte is read afresh.
                        self.store(b'\\');
                        consumed = false;
                    }
                }
                State::Val { quote, esc: false } => {
                    if c == b'\\' {
                        self.state = State::Val { quote, esc: true };
                    } else if c == quote {
                        let v = std::mem::take(&mut self.cur);
                        self.push_arg(Some(v));
                        self.state = State::PreArg;
                    } else {
                        self.store(c);
                    }
                }
                State::Text | State::Start(_) => {
                    // Not reached: `next` handles these states itself.
                    *input = &data[i..];
                    return None;
                }
            }
            if consumed {
                self.count(1);
                i += 1;
            }
        }
        *input = &[];
        None
    }

    /// Counts directive bytes against the bound; past it, frees what was
    /// stored and stores nothing more.
    fn count(&mut self, n: usize) {
        self.raw = self.raw.saturating_add(n);
        if self.raw > self.max && !self.overflow {
            self.overflow = true;
            self.name = Vec::new();
            self.args = Vec::new();
            self.cur = Vec::new();
            self.cur_name = Vec::new();
        }
    }

    /// The end of the page: what the parser still holds. A held partial
    /// `<!--` is text; an open directive is [`Malformed::Unterminated`].
    /// The parser is then ready for a new page.
    pub fn finish(&mut self) -> Option<Event<'static>> {
        let state = std::mem::replace(&mut self.state, State::Text);
        match state {
            State::Text => None,
            State::Start(k) => Some(Event::Text(&START[..k])),
            _ => {
                let name = std::mem::take(&mut self.name);
                self.args = Vec::new();
                self.cur = Vec::new();
                self.cur_name = Vec::new();
                Some(Event::Malformed {
                    error: Malformed::Unterminated,
                    name,
                })
            }
        }
    }
}

impl Default for Parser {
    fn default() -> Parser {
        Parser::new(DEFAULT_MAX_DIRECTIVE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event with its text owned, adjacent texts merged: what a page
    /// means, whatever the reads were.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Ev {
        Text(Vec<u8>),
        Dir(Directive),
        Bad(Malformed, Vec<u8>),
    }

    fn run(parser: &mut Parser, pieces: &[&[u8]]) -> Vec<Ev> {
        let mut out: Vec<Ev> = Vec::new();
        let push = |out: &mut Vec<Ev>, ev: Event<'_>| match ev {
            Event::Text(t) => {
                assert!(!t.is_empty(), "no empty text events");
                if let Some(Ev::Text(prev)) = out.last_mut() {
                    prev.extend_from_slice(t);
                } else {
                    out.push(Ev::Text(t.to_vec()));
                }
            }
            Event::Directive(d) => out.push(Ev::Dir(d)),
            Event::Malformed { error, name } => out.push(Ev::Bad(error, name)),
        };
        for piece in pieces {
            let mut input = *piece;
            while let Some(ev) = parser.next(&mut input) {
                push(&mut out, ev);
            }
            assert!(input.is_empty());
        }
        if let Some(ev) = parser.finish() {
            push(&mut out, ev);
        }
        out
    }

    fn parse(page: &[u8]) -> Vec<Ev> {
        run(&mut Parser::default(), &[page])
    }

    fn dir(name: &str, args: &[(&str, Option<&str>)]) -> Ev {
        Ev::Dir(Directive {
            name: name.as_bytes().to_vec(),
            args: args
                .iter()
                .map(|(n, v)| Arg {
                    name: n.as_bytes().to_vec(),
                    value: v.map(|v| v.as_bytes().to_vec()),
                })
                .collect(),
        })
    }

    fn text(s: &str) -> Ev {
        Ev::Text(s.as_bytes().to_vec())
    }

    /// Pages covering every state of the machine.
    const SAMPLES: &[&str] = &[
        "plain text, no directive at all",
        "a<!--#echo var=\"DATE_LOCAL\" -->b",
        "<!--#printenv-->",
        "<!--#ECHO Var='x' encoding=`url` -->",
        "x <!--#set var=a value=\"q\\\"uote\\\\n\" --> y",
        "<!--#include virtual = \"/a b\"\tfile=c\n-->",
        "<!--#if expr=\"$a = /x/ && ($b || !$c)\" -->yes<!--#else -->no<!--#endif -->",
        "<!- <!-- <!--x <!--#",
        "<!--# echo var=x -->after",
        "<!--#echo \"x\" -->",
        "<!--#echo =x -->",
        "<!--#a--b c---> d -->",
        "<!--#echo var=x-->tail",
        "<!--#echo -- -->",
        "<!--#echo var=\"a-->b\" -->",
        "<<<!--#-->>>",
        "<!--#echo var=\"unterminated",
        "text <!--",
    ];

    #[test]
    fn directives_parse_with_apaches_rules() {
        assert_eq!(parse(SAMPLES[0].as_bytes()), vec![text(SAMPLES[0])]);
        assert_eq!(
            parse(SAMPLES[1].as_bytes()),
            vec![
                text("a"),
                dir("echo", &[("var", Some("DATE_LOCAL"))]),
                text("b")
            ]
        );
        assert_eq!(parse(SAMPLES[2].as_bytes()), vec![dir("printenv", &[])]);
        assert_eq!(
            parse(SAMPLES[3].as_bytes()),
            vec![dir(
                "echo",
                &[("var", Some("x")), ("encoding", Some("url"))]
            )]
        );
        // \" is a quote, \\ and \n stay as written.
        assert_eq!(
            parse(SAMPLES[4].as_bytes()),
            vec![
                text("x "),
                dir(
                    "set",
                    &[("var", Some("a")), ("value", Some("q\"uote\\\\n"))]
                ),
                text(" y")
            ]
        );
        assert_eq!(
            parse(SAMPLES[5].as_bytes()),
            vec![dir(
                "include",
                &[("virtual", Some("/a b")), ("file", Some("c"))]
            )]
        );
        assert_eq!(
            parse(SAMPLES[6].as_bytes()),
            vec![
                dir("if", &[("expr", Some("$a = /x/ && ($b || !$c)"))]),
                text("yes"),
                dir("else", &[]),
                text("no"),
                dir("endif", &[]),
            ]
        );
    }

    #[test]
    fn near_misses_of_the_start_sequence_are_text() {
        assert_eq!(
            parse(SAMPLES[7].as_bytes()),
            vec![
                text("<!- <!-- <!--x "),
                Ev::Bad(Malformed::Unterminated, vec![])
            ]
        );
        assert_eq!(parse(SAMPLES[17].as_bytes()), vec![text("text <!--")]);
        assert_eq!(
            parse(SAMPLES[15].as_bytes()),
            vec![
                text("<<"),
                Ev::Bad(Malformed::MissingName, vec![]),
                text(">>")
            ]
        );
    }

    #[test]
    fn malformed_directives_are_reported_where_they_end() {
        assert_eq!(
            parse(SAMPLES[8].as_bytes()),
            vec![Ev::Bad(Malformed::MissingName, vec![]), text("after")]
        );
        assert_eq!(
            parse(SAMPLES[9].as_bytes()),
            vec![Ev::Bad(Malformed::MissingArgName, b"echo".to_vec())]
        );
        assert_eq!(
            parse(SAMPLES[10].as_bytes()),
            vec![Ev::Bad(Malformed::MissingArgName, b"echo".to_vec())]
        );
        assert_eq!(
            parse(SAMPLES[16].as_bytes()),
            vec![Ev::Bad(Malformed::Unterminated, b"echo".to_vec())]
        );
    }

    #[test]
    fn the_end_sequence_is_matched_without_backtracking_like_apache() {
        // "--->" after a name does not end it; the name runs to the space.
        assert_eq!(
            parse(SAMPLES[11].as_bytes()),
            vec![dir("a--b", &[("c--->", None), ("d", None)])]
        );
        // An unquoted value runs over "-->" to the next space.
        assert_eq!(
            parse(SAMPLES[12].as_bytes()),
            vec![Ev::Bad(Malformed::Unterminated, b"echo".to_vec())]
        );
        // "--" then a space is an attribute named "--".
        assert_eq!(
            parse(SAMPLES[13].as_bytes()),
            vec![dir("echo", &[("--", None)])]
        );
        // Inside quotes "-->" is data.
        assert_eq!(
            parse(SAMPLES[14].as_bytes()),
            vec![dir("echo", &[("var", Some("a-->b"))])]
        );
    }

    #[test]
    fn every_sample_parses_the_same_split_at_every_byte_and_byte_by_byte() {
        for s in SAMPLES {
            let page = s.as_bytes();
            let whole = parse(page);
            for cut in 0..=page.len() {
                let (a, b) = page.split_at(cut);
                assert_eq!(
                    run(&mut Parser::default(), &[a, b]),
                    whole,
                    "{s:?} cut at {cut}"
                );
            }
            for cut1 in 0..=page.len() {
                for cut2 in cut1..=page.len() {
                    let pieces = [&page[..cut1], &page[cut1..cut2], &page[cut2..]];
                    assert_eq!(
                        run(&mut Parser::default(), &pieces),
                        whole,
                        "{s:?} cut at {cut1},{cut2}"
                    );
                }
            }
            let bytes: Vec<&[u8]> = page.chunks(1).collect();
            assert_eq!(
                run(&mut Parser::default(), &bytes),
                whole,
                "{s:?} byte by byte"
            );
        }
    }

    #[test]
    fn text_passes_through_borrowed_before_the_page_ends() {
        let mut p = Parser::default();
        let chunk = b"hello <!--#echo var=x";
        let mut input = &chunk[..];
        let ev = p.next(&mut input);
        match ev {
            Some(Event::Text(t)) => assert!(std::ptr::eq(t.as_ptr(), chunk.as_ptr())),
            other => panic!("{other:?}"),
        }
        assert_eq!(p.next(&mut input), None);
        assert!(p.in_directive());
    }

    #[test]
    fn a_ten_megabyte_page_without_directives_holds_nothing() {
        let mut p = Parser::default();
        let chunk = vec![b'x'; 65536];
        let mut n = 0;
        for _ in 0..160 {
            let mut input = &chunk[..];
            while let Some(ev) = p.next(&mut input) {
                match ev {
                    Event::Text(t) => n += t.len(),
                    other => panic!("{other:?}"),
                }
                assert_eq!(p.buffered(), 0);
            }
        }
        assert_eq!(n, 160 * 65536);
    }

    #[test]
    fn an_unterminated_directive_in_a_ten_megabyte_page_stays_within_the_bound() {
        for filler in [&b"x"[..], b" a=b", b" v=\"", b"-", b" --"] {
            let mut p = Parser::new(1024);
            let mut input = &b"before <!--#echo"[..];
            assert_eq!(p.next(&mut input), Some(Event::Text(b"before ")));
            assert_eq!(p.next(&mut input), None);
            let chunk: Vec<u8> = filler.iter().copied().cycle().take(65536).collect();
            for _ in 0..160 {
                let mut input = &chunk[..];
                let ev = p.next(&mut input);
                assert_eq!(ev, None, "from {filler:?}");
                assert!(input.is_empty());
                assert!(p.buffered() <= 1024, "{} buffered", p.buffered());
            }
            assert!(matches!(
                p.finish(),
                Some(Event::Malformed {
                    error: Malformed::Unterminated,
                    ..
                })
            ));
        }
    }

    #[test]
    fn a_directive_longer_than_the_bound_is_too_long_and_parsing_resumes_after_it() {
        let long = format!("<!--#echo var=\"{}\" -->after", "v".repeat(100));
        let mut p = Parser::new(64);
        assert_eq!(
            run(&mut p, &[long.as_bytes()]),
            vec![Ev::Bad(Malformed::TooLong, vec![]), text("after")]
        );
        // Exactly at the bound is fine.
        let exact = "<!--#echo var=\"abcdef\" -->";
        let mut p = Parser::new(exact.len());
        assert_eq!(
            run(&mut p, &[exact.as_bytes()]),
            vec![dir("echo", &[("var", Some("abcdef"))])]
        );
        let mut p = Parser::new(exact.len() - 1);
        assert_eq!(
            run(&mut p, &[exact.as_bytes()]),
            vec![Ev::Bad(Malformed::TooLong, vec![])]
        );
    }

    #[test]
    fn all_white_space_kinds_separate_attributes() {
        assert_eq!(
            parse(b"<!--#echo\x0bvar=a\x0cencoding=none\r\n-->"),
            vec![dir(
                "echo",
                &[("var", Some("a")), ("encoding", Some("none"))]
            )]
        );
    }

    #[test]
    fn a_parser_is_reusable_after_finish() {
        let mut p = Parser::default();
        assert_eq!(
            run(&mut p, &[b"<!--#echo var="]),
            vec![Ev::Bad(Malformed::Unterminated, b"echo".to_vec())]
        );
        assert_eq!(run(&mut p, &[b"<!--#endif -->"]), vec![dir("endif", &[])]);
    }
}
