//! Variable substitution and mod_include's legacy expression language
//! (`SSILegacyExprParser on`, the only syntax before httpd 2.3.13).
//!
//! The parser rebuilds Apache's parse tree the way `parse_expr` does, node
//! by node, because its quirks are the language's definition:
//!
//! - `&&` and `||` have the same precedence and group to the right:
//!   `a && b || c` is `a && (b || c)`;
//! - comparisons (`=`/`==`, `!=`, `<`, `<=`, `>`, `>=`) bind tighter than
//!   `&&`/`||`; their operands are strings, a regex `/.../` only on the
//!   right of `=` and `!=`;
//! - `!` applies to a string or a parenthesised group, so `!$a = b` is an
//!   error (write `!($a = b)`);
//! - adjacent strings join with one space: `$a = foo bar` compares with
//!   `"foo bar"`; a string alone is true when it is not empty after
//!   substitution;
//! - a backslash escapes any character in a token (so a regex needs `\\d`
//!   for `\d`, and `\/` for a slash); an unclosed quote or regex is an
//!   empty string;
//! - `&&`/`||` short-circuit only when no regex is left to evaluate (so
//!   every regex sets `$0`..`$9` in order).
//!
//! Regexes: Apache compiles them with PCRE; here the `regex` crate in byte
//! mode without Unicode classes, the nearest to PCRE's default mode. Not
//! supported: backreferences (`\1`), look-around, possessive and atomic
//! groups; `$` matches only at the very end (PCRE also before a final
//! newline). A pattern that does not compile is an error (Apache logs it
//! and counts the comparison as true).

use std::borrow::Cow;

/// The captures of the last regex evaluated, for `$0`..`$9`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backrefs {
    source: Vec<u8>,
    /// Index 0 is the whole match; at most 10 entries, one per group the
    /// pattern has (matched or not).
    groups: Vec<Option<(usize, usize)>>,
    matched: bool,
}

impl Backrefs {
    /// `$idx`: `None` when the last regex did not match, has no such
    /// group, or the group took no part in the match.
    pub fn get(&self, idx: usize) -> Option<&[u8]> {
        if !self.matched {
            return None;
        }
        let (a, b) = (*self.groups.get(idx)?)?;
        self.source.get(a..b)
    }
}

/// What evaluating an expression needs from the page.
pub(crate) trait Scope {
    /// A variable's value (`$0`..`$9` included).
    fn var(&mut self, name: &[u8]) -> Option<Cow<'_, [u8]>>;
    /// The last regex's captures change.
    fn set_backrefs(&mut self, b: Backrefs);
    /// `-A uri`: whether a subrequest for `uri` would be allowed; `None`
    /// when the server does not answer such questions.
    fn access(&mut self, uri: &[u8]) -> Option<bool>;
}

/// mod_include's `ap_ssi_parse_string`: `$name` and `${name}` replaced by
/// the variable's value (`name` is `[A-Za-z0-9_]+`); `\$` is a literal `$`
/// and every other backslash stays; a `$` without a name stays. An unset
/// variable is empty, or with `leave_name` kept as written (`exec cmd`).
/// A `${` without `}` ends the string there (Apache logs it).
pub(crate) fn expand(
    s: &[u8],
    leave_name: bool,
    lookup: &mut dyn FnMut(&[u8]) -> Option<Vec<u8>>,
) -> Vec<u8> {
    if memchr::memchr2(b'$', b'\\', s).is_none() {
        return s.to_vec();
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\\' => {
                if s.get(i + 1) == Some(&b'$') {
                    out.push(b'$');
                    i += 2;
                } else {
                    out.push(b'\\');
                    i += 1;
                }
            }
            b'$' => {
                let (name, next) = if s.get(i + 1) == Some(&b'{') {
                    match memchr::memchr(b'}', &s[i + 2..]) {
                        None => break,
                        Some(0) => (None, i + 1),
                        Some(n) => (Some(&s[i + 2..i + 2 + n]), i + 3 + n),
                    }
                } else {
                    let n = s[i + 1..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                        .count();
                    if n == 0 {
                        (None, i + 1)
                    } else {
                        (Some(&s[i + 1..i + 1 + n]), i + 1 + n)
                    }
                };
                match name {
                    None => out.push(b'$'),
                    Some(name) => match lookup(name) {
                        Some(v) => out.extend_from_slice(&v),
                        None if leave_name => {
                            // Apache keeps `${name` without its `}`.
                            let end = if s[i + 1] == b'{' { next - 1 } else { next };
                            out.extend_from_slice(&s[i..end]);
                        }
                        None => {}
                    },
                }
                i = next;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Str,
    Re,
    And,
    Or,
    Not,
    Eq,
    Ne,
    RBrace,
    LBrace,
    Group,
    Ge,
    Le,
    Gt,
    Lt,
    Access,
}

#[derive(Debug)]
struct Node {
    tok: Tok,
    text: Vec<u8>,
    parent: Option<usize>,
    left: Option<usize>,
    right: Option<usize>,
    value: bool,
    done: bool,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// The next token from `s[*pos..]` (`get_ptoken`); `None` at the end.
fn token(s: &[u8], pos: &mut usize, prev: Option<Tok>) -> Option<(Tok, Vec<u8>)> {
    while *pos < s.len() && is_space(s[*pos]) {
        *pos += 1;
    }
    let start = *pos;
    let c = *s.get(start)?;
    *pos += 1;
    let next = s.get(*pos).copied();
    let mut op = |t: Tok, two: bool| {
        if two {
            *pos += 1;
        }
        Some((t, Vec::new()))
    };
    let (tok, quote) = match c {
        b'(' => return op(Tok::LBrace, false),
        b')' => return op(Tok::RBrace, false),
        b'=' => return op(Tok::Eq, next == Some(b'=')),
        b'!' if next == Some(b'=') => return op(Tok::Ne, true),
        b'!' => return op(Tok::Not, false),
        b'>' if next == Some(b'=') => return op(Tok::Ge, true),
        b'>' => return op(Tok::Gt, false),
        b'<' if next == Some(b'=') => return op(Tok::Le, true),
        b'<' => return op(Tok::Lt, false),
        b'|' if next == Some(b'|') => return op(Tok::Or, true),
        b'&' if next == Some(b'&') => return op(Tok::And, true),
        b'-' if next == Some(b'A') => return op(Tok::Access, true),
        b'\'' => (Tok::Str, Some(b'\'')),
        b'/' if prev != Some(Tok::Access) => (Tok::Re, Some(b'/')),
        _ => (Tok::Str, None),
    };
    let from = if quote.is_some() { *pos } else { start };
    let mut i = from;
    let mut end = s.len();
    let mut closed = false;
    while i < s.len() {
        let c = s[i];
        if c == b'\\' {
            if i + 1 == s.len() {
                break;
            }
            i += 2;
            continue;
        }
        if let Some(q) = quote {
            if c == q {
                end = i;
                closed = true;
                i += 1;
                break;
            }
        } else if is_space(c)
            || matches!(c, b'(' | b')' | b'=' | b'!' | b'<' | b'>')
            || (matches!(c, b'|' | b'&') && s.get(i + 1) == Some(&c))
        {
            end = i;
            break;
        }
        i += 1;
    }
    *pos = if quote.is_some() && !closed {
        s.len()
    } else {
        i.min(s.len())
    };
    if quote.is_some() && !closed {
        return Some((tok, Vec::new()));
    }
    // Every backslash escapes the next byte; a final one stays.
    let raw = &s[from..end];
    let mut text = Vec::with_capacity(raw.len());
    let mut k = 0;
    while k < raw.len() {
        if raw[k] == b'\\' && k + 1 < raw.len() {
            text.push(raw[k + 1]);
            k += 2;
        } else {
            text.push(raw[k]);
            k += 1;
        }
    }
    Some((tok, text))
}

/// Why an expression could not be evaluated (the log line).
pub type ExprError = String;

/// Parses and evaluates `expr` as `<!--#if expr="..." -->` would.
pub(crate) fn evaluate(expr: &[u8], scope: &mut dyn Scope) -> Result<bool, ExprError> {
    let invalid = || format!("invalid expression \"{}\"", String::from_utf8_lossy(expr));
    let mut nodes: Vec<Node> = Vec::new();
    let mut root: Option<usize> = None;
    let mut current: Option<usize> = None;
    let mut regexes = 0usize;
    let mut pos = 0;

    // Build the tree (Apache's `parse_expr`, first half).
    loop {
        let prev = current.map(|c| nodes[c].tok);
        let Some((tok, text)) = token(expr, &mut pos, prev) else {
            break;
        };
        let new = nodes.len();
        nodes.push(Node {
            tok,
            text,
            parent: None,
            left: None,
            right: None,
            value: false,
            done: false,
        });
        let Some(cur) = current else {
            match tok {
                Tok::Str | Tok::Not | Tok::Access | Tok::LBrace => {
                    root = Some(new);
                    current = Some(new);
                    continue;
                }
                _ => return Err(invalid()),
            }
        };
        let cur_tok = nodes[cur].tok;
        match tok {
            Tok::Str => match cur_tok {
                Tok::Str => {
                    let text = std::mem::take(&mut nodes[new].text);
                    nodes.pop();
                    let t = &mut nodes[cur].text;
                    if !t.is_empty() {
                        t.push(b' ');
                    }
                    t.extend_from_slice(&text);
                }
                Tok::Re | Tok::RBrace | Tok::Group => return Err(invalid()),
                _ => {
                    nodes[new].parent = Some(cur);
                    nodes[cur].right = Some(new);
                    current = Some(new);
                }
            },
            Tok::Re => match cur_tok {
                Tok::Eq | Tok::Ne => {
                    nodes[new].parent = Some(cur);
                    nodes[cur].right = Some(new);
                    current = Some(new);
                    regexes += 1;
                }
                _ => return Err(invalid()),
            },
            Tok::And | Tok::Or => match cur_tok {
                Tok::Str | Tok::Re | Tok::Group => {
                    // Up to the nearest && / || / ( above.
                    let mut up = nodes[cur].parent;
                    while let Some(u) = up {
                        if matches!(nodes[u].tok, Tok::And | Tok::Or | Tok::LBrace) {
                            break;
                        }
                        up = nodes[u].parent;
                    }
                    match up {
                        None => {
                            let r = root.ok_or_else(invalid)?;
                            nodes[new].left = Some(r);
                            nodes[r].parent = Some(new);
                            root = Some(new);
                        }
                        Some(u) => {
                            let l = nodes[u].right.ok_or_else(invalid)?;
                            nodes[new].left = Some(l);
                            nodes[l].parent = Some(new);
                            nodes[new].parent = Some(u);
                            nodes[u].right = Some(new);
                        }
                    }
                    current = Some(new);
                }
                _ => return Err(invalid()),
            },
            Tok::Eq | Tok::Ne | Tok::Ge | Tok::Gt | Tok::Le | Tok::Lt => {
                if cur_tok != Tok::Str {
                    return Err(invalid());
                }
                match nodes[cur].parent {
                    None => {
                        let r = root.ok_or_else(invalid)?;
                        nodes[new].left = Some(r);
                        nodes[r].parent = Some(new);
                        root = Some(new);
                    }
                    Some(u) if matches!(nodes[u].tok, Tok::LBrace | Tok::And | Tok::Or) => {
                        let l = nodes[u].right.ok_or_else(invalid)?;
                        nodes[new].left = Some(l);
                        nodes[l].parent = Some(new);
                        nodes[new].parent = Some(u);
                        nodes[u].right = Some(new);
                    }
                    Some(_) => return Err(invalid()),
                }
                current = Some(new);
            }
            Tok::RBrace => {
                nodes.pop();
                let mut up = Some(cur);
                while let Some(u) = up {
                    if nodes[u].tok == Tok::LBrace {
                        break;
                    }
                    up = nodes[u].parent;
                }
                let Some(u) = up else {
                    return Err(format!(
                        "unmatched ')' in \"{}\"",
                        String::from_utf8_lossy(expr)
                    ));
                };
                nodes[u].tok = Tok::Group;
                current = Some(u);
            }
            Tok::Not | Tok::Access | Tok::LBrace => match cur_tok {
                Tok::Str | Tok::Re | Tok::RBrace | Tok::Group => return Err(invalid()),
                _ => {
                    nodes[cur].right = Some(new);
                    nodes[new].parent = Some(cur);
                    current = Some(new);
                }
            },
            Tok::Group => return Err(invalid()),
        }
    }

    // Evaluate it (the second half), bottom-up without recursion, so that
    // deep nesting cannot overflow the stack.
    let mut current = root;
    while let Some(c) = current {
        match nodes[c].tok {
            Tok::Str => {
                let v = substitute(&nodes[c].text, scope);
                nodes[c].value = !v.is_empty();
            }
            tok @ (Tok::And | Tok::Or) => {
                let (Some(l), Some(r)) = (nodes[c].left, nodes[c].right) else {
                    return Err(invalid());
                };
                if !nodes[l].done {
                    if nodes[l].tok == Tok::Str {
                        let v = substitute(&nodes[l].text, scope);
                        nodes[l].value = !v.is_empty();
                        nodes[l].done = true;
                    } else {
                        current = Some(l);
                        continue;
                    }
                }
                let lv = nodes[l].value;
                if !nodes[r].done && regexes == 0 && ((tok == Tok::And) != lv) {
                    nodes[c].value = lv;
                } else {
                    if !nodes[r].done {
                        if nodes[r].tok == Tok::Str {
                            let v = substitute(&nodes[r].text, scope);
                            nodes[r].value = !v.is_empty();
                            nodes[r].done = true;
                        } else {
                            current = Some(r);
                            continue;
                        }
                    }
                    let rv = nodes[r].value;
                    nodes[c].value = if tok == Tok::And { lv && rv } else { lv || rv };
                }
            }
            tok @ (Tok::Eq | Tok::Ne) => {
                let (Some(l), Some(r)) = (nodes[c].left, nodes[c].right) else {
                    return Err(invalid());
                };
                if nodes[l].tok != Tok::Str || !matches!(nodes[r].tok, Tok::Str | Tok::Re) {
                    return Err(invalid());
                }
                let lv = substitute(&nodes[l].text, scope);
                let rv = substitute(&nodes[r].text, scope);
                let eq = if nodes[r].tok == Tok::Re {
                    regexes = regexes.saturating_sub(1);
                    regex_match(&lv, &rv, scope)?
                } else {
                    lv == rv
                };
                nodes[c].value = eq == (tok == Tok::Eq);
            }
            tok @ (Tok::Ge | Tok::Gt | Tok::Le | Tok::Lt) => {
                let (Some(l), Some(r)) = (nodes[c].left, nodes[c].right) else {
                    return Err(invalid());
                };
                if nodes[l].tok != Tok::Str || nodes[r].tok != Tok::Str {
                    return Err(invalid());
                }
                let lv = substitute(&nodes[l].text, scope);
                let rv = substitute(&nodes[r].text, scope);
                let ord = lv.cmp(&rv);
                nodes[c].value = match tok {
                    Tok::Ge => ord.is_ge(),
                    Tok::Gt => ord.is_gt(),
                    Tok::Le => ord.is_le(),
                    _ => ord.is_lt(),
                };
            }
            tok @ (Tok::Not | Tok::Group) => {
                let v = match nodes[c].right {
                    Some(r) if !nodes[r].done => {
                        current = Some(r);
                        continue;
                    }
                    Some(r) => nodes[r].value,
                    None => true,
                };
                nodes[c].value = if tok == Tok::Not { !v } else { v };
            }
            Tok::Access => {
                let r = match nodes[c].right {
                    Some(r)
                        if nodes[c].left.is_none()
                            && matches!(nodes[r].tok, Tok::Str | Tok::Re) =>
                    {
                        r
                    }
                    _ => {
                        return Err(format!(
                            "invalid expression \"{}\": -A must be followed by a URI",
                            String::from_utf8_lossy(expr)
                        ))
                    }
                };
                let uri = substitute(&nodes[r].text, scope);
                nodes[c].value = scope
                    .access(&uri)
                    .ok_or_else(|| "-A is not supported by this server".to_owned())?;
            }
            Tok::Re => {
                return Err(format!(
                    "no operator before regex in \"{}\"",
                    String::from_utf8_lossy(expr)
                ))
            }
            Tok::LBrace => {
                return Err(format!(
                    "unmatched '(' in \"{}\"",
                    String::from_utf8_lossy(expr)
                ))
            }
            Tok::RBrace => return Err(invalid()),
        }
        nodes[c].done = true;
        current = nodes[c].parent;
    }
    Ok(root.is_some_and(|r| nodes[r].value))
}

fn substitute(text: &[u8], scope: &mut dyn Scope) -> Vec<u8> {
    expand(text, false, &mut |name| {
        scope.var(name).map(Cow::into_owned)
    })
}

/// Bounds on a page's regex, so that one pattern cannot take the worker's
/// memory (the page author is trusted with content, not with the server).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// `string =~ pattern`, recording the captures as Apache's `re_check`.
fn regex_match(string: &[u8], pattern: &[u8], scope: &mut dyn Scope) -> Result<bool, ExprError> {
    let bad = |e: &dyn std::fmt::Display| {
        format!(
            "unable to compile pattern \"{}\": {e}",
            String::from_utf8_lossy(pattern)
        )
    };
    let pat = std::str::from_utf8(pattern).map_err(|e| bad(&e))?;
    let re = regex::bytes::RegexBuilder::new(pat)
        .unicode(false)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| bad(&e))?;
    let mut b = Backrefs {
        source: string.to_vec(),
        groups: Vec::new(),
        matched: false,
    };
    if let Some(caps) = re.captures(string) {
        b.matched = true;
        b.groups = (0..caps.len().min(10))
            .map(|i| caps.get(i).map(|m| (m.start(), m.end())))
            .collect();
    }
    let matched = b.matched;
    scope.set_backrefs(b);
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Vars {
        vars: Vec<(&'static str, &'static str)>,
        refs: Backrefs,
        accessed: Vec<Vec<u8>>,
    }

    impl Scope for Vars {
        fn var(&mut self, name: &[u8]) -> Option<Cow<'_, [u8]>> {
            if let [d @ b'0'..=b'9'] = name {
                return self.refs.get(usize::from(d - b'0')).map(Cow::Borrowed);
            }
            self.vars
                .iter()
                .find(|(n, _)| n.as_bytes() == name)
                .map(|(_, v)| Cow::Borrowed(v.as_bytes()))
        }
        fn set_backrefs(&mut self, b: Backrefs) {
            self.refs = b;
        }
        fn access(&mut self, uri: &[u8]) -> Option<bool> {
            self.accessed.push(uri.to_vec());
            Some(uri.starts_with(b"/ok"))
        }
    }

    fn vars() -> Vars {
        Vars {
            vars: vec![("a", "1"), ("b", "2"), ("s", "hello world"), ("empty", "")],
            ..Vars::default()
        }
    }

    fn ev(e: &str) -> Result<bool, ExprError> {
        evaluate(e.as_bytes(), &mut vars())
    }

    fn t(e: &str) -> bool {
        ev(e).unwrap_or_else(|err| panic!("{e}: {err}"))
    }

    #[test]
    fn strings_are_true_when_not_empty_after_substitution() {
        assert!(t("$a"));
        assert!(t("x"));
        assert!(!t("$empty"));
        assert!(!t("$undefined"));
        assert!(!t("''"));
        assert!(!t(""));
        assert!(t("${a}"));
    }

    #[test]
    fn comparisons_compare_bytes_after_substitution() {
        assert!(t("$a = 1"));
        assert!(t("$a == 1"));
        assert!(t("$a != 2"));
        assert!(t("$a < $b"));
        assert!(t("$a <= 1"));
        assert!(t("$b > $a"));
        assert!(t("$b >= 2"));
        assert!(t("10 < 9"), "string order, not numeric");
        assert!(t("'$s' = 'hello world'"));
        assert!(t("$s = hello world"), "adjacent strings join with a space");
        assert!(t("${a}x = 1x"));
        assert!(
            t(r"\$a = 1"),
            "a backslash in a token only protects from the tokenizer"
        );
        assert!(t(r"\\\$a = '\\\$a'"), "a literal $ needs both escapes");
    }

    #[test]
    fn and_and_or_share_one_precedence_and_group_to_the_right() {
        // a && (b || c): false && ... is false; Apache's grouping.
        assert!(!t("$empty && $a || $b"));
        // (a || b) && c would be false here; Apache says a || (b && c).
        assert!(t("$a || $b && $empty"));
        assert!(t("($a || $b) && $a"));
        assert!(!t("($a || $b) && $empty"));
        assert!(t("$a = 1 && $b = 2"));
        assert!(!t("$a = 1 && $b = 3"));
        assert!(t("$a = 2 || $b = 2"));
    }

    #[test]
    fn not_and_groups_work_as_in_apache() {
        assert!(t("!$empty"));
        assert!(!t("!$a"));
        assert!(t("!($a = 2)"));
        assert!(
            ev("!$a = 2").is_err(),
            "Apache refuses ! before a comparison"
        );
        assert!(t("()"));
        assert!(!t("!"));
        assert!(t("((($a)))"));
    }

    #[test]
    fn regexes_match_and_set_captures() {
        let mut v = vars();
        assert!(evaluate(b"$s = /^(h\\\\w+) (w)(x)?/", &mut v).unwrap());
        assert_eq!(v.refs.get(0), Some(&b"hello w"[..]));
        assert_eq!(v.refs.get(1), Some(&b"hello"[..]));
        assert_eq!(v.refs.get(2), Some(&b"w"[..]));
        assert_eq!(v.refs.get(3), None);
        assert_eq!(v.refs.get(4), None);
        assert!(evaluate(b"$s != /xyz/", &mut v).unwrap());
        assert_eq!(v.refs.get(0), None, "a failed match clears the captures");
        assert!(evaluate(b"$s = /o w/ && $0 = 'o w'", &mut v).unwrap());
        assert!(evaluate(b"'a/b' = /a\\/b/", &mut v).unwrap());
    }

    #[test]
    fn with_a_regex_left_both_sides_are_evaluated() {
        let mut v = vars();
        assert!(evaluate(b"$a || $s = /(wor)ld/", &mut v).unwrap());
        assert_eq!(v.refs.get(1), Some(&b"wor"[..]));
        let mut v = vars();
        assert!(evaluate(b"$a || $b", &mut v).unwrap());
    }

    #[test]
    fn malformed_expressions_are_errors_not_panics() {
        for e in [
            "= a",
            "a =",
            "a = (b)",
            "/re/",
            "a && ",
            "&& a",
            "(a",
            "a)",
            "a = b = c",
            "a /x/",
            "(a) b",
            "a < /x/",
            "-A",
            "x = /(/",
            "x = /[/",
            "||",
            "((",
            "))",
            "! !",
            "a = 'x' 'y' /z/",
        ] {
            let _ = ev(e);
        }
        assert!(ev("(a").is_err());
        assert!(ev("a)").is_err());
        assert!(ev("x = /(/").is_err());
        assert!(ev("= a").is_err());
        assert!(ev("a =").is_err());
        let deep = "(".repeat(5000) + "a" + &")".repeat(5000);
        assert!(t(&deep));
        let deep_not = "!(".repeat(5000) + "a" + &")".repeat(5000);
        assert!(t(&deep_not), "an even number of !");
    }

    #[test]
    fn unclosed_quotes_are_empty_strings() {
        assert!(!t("'abc"));
        assert!(t("'' = 'abc"), "'abc is an empty string");
    }

    #[test]
    fn access_asks_the_server() {
        let mut v = vars();
        assert!(evaluate(b"-A /ok/$a", &mut v).unwrap());
        assert_eq!(v.accessed, vec![b"/ok/1".to_vec()]);
        assert!(!evaluate(b"-A /no", &mut v).unwrap());
    }

    #[test]
    fn substitution_follows_ap_ssi_parse_string() {
        let mut look = |n: &[u8]| match n {
            b"x" => Some(b"X".to_vec()),
            b"x_1" => Some(b"Y".to_vec()),
            _ => None,
        };
        let e = |s: &str, leave: bool, look: &mut dyn FnMut(&[u8]) -> Option<Vec<u8>>| {
            String::from_utf8(expand(s.as_bytes(), leave, look)).unwrap()
        };
        assert_eq!(e("a$x.$x_1|${x}y", false, &mut look), "aX.Y|Xy");
        assert_eq!(
            e("\\$x \\n $ $. ${} $", false, &mut look),
            "$x \\n $ $. ${} $"
        );
        assert_eq!(e("[$nope]", false, &mut look), "[]");
        // Apache drops the closing brace of an unset ${name} it leaves.
        assert_eq!(e("[$nope ${nope}]", true, &mut look), "[$nope ${nope]");
        assert_eq!(e("a${x", false, &mut look), "a");
    }
}
