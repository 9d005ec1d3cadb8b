//! Routes that can never be chosen, for `stoa check`'s warnings.
//!
//! A route is tried only when every route before it (in routing order)
//! passed, so it is dead when the routes before it together match every
//! path it matches. Every matcher is a regular language over paths (a
//! prefix `P` is `^P`, a suffix `.php` is `(?i-u:\.php)$`), so this is
//! decided exactly, not guessed from the text: the lazy DFAs of the two
//! sides are walked together over every byte a normalized path may hold,
//! looking for a path the later route takes and the earlier ones do not.
//! A walk that grows too large or meets what a DFA cannot decide (a
//! Unicode `\b` on non-ASCII text) gives up: then no warning, never a
//! wrong one.

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::util::start;
use regex_automata::Anchored;
use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

/// A route's matcher, as the analysis sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pattern<'a> {
    Prefix(&'a str),
    /// ASCII case ignored; with `split`, `suffix/` anywhere after the
    /// first character matches too (`split_at`).
    Suffix {
        suffix: &'a str,
        split: bool,
    },
    Regex(&'a str),
}

impl Pattern<'_> {
    /// The regex matching exactly the paths the route takes (matched as
    /// `Regex::is_match` does: anywhere in the path).
    fn source(&self) -> String {
        match self {
            Pattern::Prefix(p) => format!("^{}", regex::escape(p)),
            Pattern::Suffix {
                suffix,
                split: false,
            } => format!("(?i-u:{})$", regex::escape(suffix)),
            Pattern::Suffix {
                suffix,
                split: true,
            } => format!("(?s:.)(?i-u:{})(?:/|$)", regex::escape(suffix)),
            Pattern::Regex(r) => (*r).to_owned(),
        }
    }
}

/// States of one product walk before it gives up.
const MAX_STATES: usize = 20_000;

/// What the analysis of one route may take, and of a whole site: past
/// them a route gets no verdict (and no warning), so that a reload never
/// waits long on many large Unicode patterns and one hard route does not
/// starve the others. Simple configurations take a few milliseconds.
/// The step bound decides in practice (the same on every machine); the
/// clock only guards against a slow DFA construction.
const ROUTE_STEPS: usize = 200_000;
const ROUTE_TIME: Duration = Duration::from_millis(100);
const SITE_TIME: Duration = Duration::from_secs(1);

/// What is left of the analysis's budget.
struct Budget {
    steps: usize,
    until: Instant,
}

impl Budget {
    /// One transition more; None when the budget is spent.
    fn take(&mut self) -> Option<()> {
        self.steps = self.steps.checked_sub(1)?;
        // The clock is read once every 4096 steps.
        if self.steps.is_multiple_of(4096) && Instant::now() > self.until {
            self.steps = 0;
            return None;
        }
        Some(())
    }
}

/// Lazy DFA memory for one matcher.
const CACHE_BYTES: usize = 1 << 20;

/// One side of a walk: a lazy DFA and its cache.
struct Lazy {
    dfa: DFA,
    cache: Cache,
}

impl Lazy {
    /// The DFA of one pattern, or of several at once (then every match
    /// state knows all the patterns that match there: `MatchKind::All`).
    fn new(patterns: &[String]) -> Option<Lazy> {
        let dfa = DFA::builder()
            .configure(
                DFA::config()
                    .match_kind(regex_automata::MatchKind::All)
                    .cache_capacity(CACHE_BYTES * patterns.len().clamp(1, 8))
                    // Non-ASCII bytes become "quit" bytes for `\b`
                    // rather than failing the build: the walk gives up
                    // only when it meets one.
                    .unicode_word_boundary(true),
            )
            .build_many(patterns)
            .ok()?;
        let cache = dfa.create_cache();
        Some(Lazy { dfa, cache })
    }

    /// The state after a leading `/` (every normalized path has one).
    fn start(&mut self) -> Option<LazyStateID> {
        let cfg = start::Config::new().anchored(Anchored::No);
        let s = self.dfa.start_state(&mut self.cache, &cfg).ok()?;
        self.next(s, b'/')
    }

    /// The state after byte `b`. None when the DFA cannot go on: a quit
    /// byte, or a full cache that was cleared (every state id held from
    /// before is then stale, and using one may panic: the walk stops).
    fn next(&mut self, s: LazyStateID, b: u8) -> Option<LazyStateID> {
        let clears = self.cache.clear_count();
        let n = self.dfa.next_state(&mut self.cache, s, b).ok()?;
        (!n.is_quit() && self.cache.clear_count() == clears).then_some(n)
    }

    /// Whether the path read so far (having matched before or not) is a
    /// match once it ends here, of a pattern `set` holds.
    fn ends_matched(&mut self, s: LazyStateID, matched: bool, set: &[bool]) -> Option<bool> {
        if matched {
            return Some(true);
        }
        let clears = self.cache.clear_count();
        let e = self.dfa.next_eoi_state(&mut self.cache, s).ok()?;
        if e.is_quit() || self.cache.clear_count() != clears {
            return None;
        }
        Some(self.matches_in(e, set))
    }

    /// Whether state `s` is a match of a pattern `set` holds.
    fn matches_in(&self, s: LazyStateID, set: &[bool]) -> bool {
        s.is_match()
            && (0..self.dfa.match_len(&self.cache, s)).any(|i| {
                set.get(self.dfa.match_pattern(&self.cache, s, i).as_usize()) == Some(&true)
            })
    }
}

/// The UTF-8 decoder's state after a byte (RFC 3629 §4): 0 between
/// characters, 1..=3 continuation bytes still due, 5..=8 the constrained
/// second byte of E0, ED, F0 and F4 sequences; None: not UTF-8. Paths
/// are `String`s, so only UTF-8 texts are looked at: a byte string no
/// path can be would otherwise "reach" a route (`(?s:.)` takes no
/// lone `\xff`, a byte literal does).
fn utf8_step(state: u8, x: u8) -> Option<u8> {
    let cont = |lo: u8, hi: u8, then: u8| (lo..=hi).contains(&x).then_some(then);
    match state {
        0 => match x {
            0x00..=0x7f => Some(0),
            0xc2..=0xdf => Some(1),
            0xe0 => Some(5),
            0xe1..=0xec | 0xee..=0xef => Some(2),
            0xed => Some(6),
            0xf0 => Some(7),
            0xf1..=0xf3 => Some(3),
            0xf4 => Some(8),
            _ => None,
        },
        1 => cont(0x80, 0xbf, 0),
        2 => cont(0x80, 0xbf, 1),
        3 => cont(0x80, 0xbf, 2),
        5 => cont(0xa0, 0xbf, 1),
        6 => cont(0x80, 0x9f, 1),
        7 => cont(0x90, 0xbf, 2),
        8 => cont(0x80, 0x8f, 2),
        _ => None,
    }
}

/// Bytes that [`utf8_step`] treats alike.
fn utf8_class(x: u8) -> u8 {
    match x {
        0x00..=0x7f => 0,
        0x80..=0x8f => 1,
        0x90..=0x9f => 2,
        0xa0..=0xbf => 3,
        0xc0..=0xc1 | 0xf5..=0xff => 4,
        0xc2..=0xdf => 5,
        0xe0 => 6,
        0xe1..=0xec | 0xee..=0xef => 7,
        0xed => 8,
        0xf0 => 9,
        0xf1..=0xf3 => 10,
        0xf4 => 11,
    }
}

/// Whether some path is taken by `b` and, as `want_a` says, by one of
/// the patterns of `a` that `set` holds, or by none of them. None:
/// undecided (the walk gave up).
fn exists(
    b: &mut Lazy,
    a: &mut Lazy,
    set: &[bool],
    want_a: bool,
    budget: &mut Budget,
) -> Option<bool> {
    let clears = (b.cache.clear_count(), a.cache.clear_count());
    // Bytes that lead to different states in either DFA or the UTF-8
    // decoder; control characters are refused by normalization and never
    // reach routing.
    let mut seen = HashSet::new();
    let bytes: Vec<u8> = (0x20..=0xffu8)
        .filter(|&x| x != 0x7f)
        .filter(|&x| {
            let key = (
                b.dfa.byte_classes().get(x),
                a.dfa.byte_classes().get(x),
                utf8_class(x),
            );
            seen.insert(key)
        })
        .collect();
    // (b's state, a's state, b matched, a matched, UTF-8 state)
    let start = (b.start()?, a.start()?, false, false, 0u8);
    let mut visited = HashSet::from([start]);
    let mut queue = VecDeque::from([start]);
    let mut found = false;
    while let Some((sb, sa, mb, ma, u)) = queue.pop_front() {
        let mb = mb || sb.is_match();
        let ma = ma || a.matches_in(sa, set);
        if u == 0 {
            let eb = b.ends_matched(sb, mb, &[true])?;
            let ea = a.ends_matched(sa, ma, set)?;
            if eb && ea == want_a {
                found = true;
                break;
            }
        }
        // Paths no longer worth extending: `b` can never match, or the
        // answer cannot change any more on `a`'s side.
        if (!mb && sb.is_dead()) || (!want_a && ma) || (want_a && !ma && sa.is_dead()) {
            continue;
        }
        for &x in &bytes {
            let Some(u) = utf8_step(u, x) else {
                continue;
            };
            budget.take()?;
            let next = (b.next(sb, x)?, a.next(sa, x)?, mb, ma, u);
            if visited.insert(next) {
                if visited.len() > MAX_STATES {
                    return None;
                }
                queue.push_back(next);
            }
        }
    }
    // A cleared cache reuses state ids: what was visited means nothing.
    if (b.cache.clear_count(), a.cache.clear_count()) != clears {
        return None;
    }
    Some(found)
}

/// Whether every path `b` takes is taken by one of the patterns `by` of
/// `all` (`set`: scratch space, one flag per pattern).
fn covered_by(
    b: &mut Lazy,
    all: &mut Lazy,
    set: &mut [bool],
    by: &[usize],
    budget: &mut Budget,
) -> Option<bool> {
    set.iter_mut().for_each(|x| *x = false);
    by.iter().for_each(|&i| set[i] = true);
    exists(b, all, set, false, budget).map(|found| !found)
}

/// For each route, in routing order: None when it can be chosen (or
/// the analysis could not tell), else the earlier routes (indices into
/// `routes`) that together take every path it would: one route when one
/// is enough, else a set of them none of which could be left out.
pub(crate) fn never_chosen(routes: &[Pattern<'_>]) -> Vec<Option<Vec<usize>>> {
    let mut out = vec![None; routes.len()];
    let sources: Vec<String> = routes.iter().map(Pattern::source).collect();
    // Each pattern is compiled twice in all: alone, and in the DFA of
    // every route (which answers "taken by the routes before it").
    // Compiling a union per route instead cost seconds for forty Unicode
    // patterns.
    let Some(mut all) = Lazy::new(&sources) else {
        return out;
    };
    let mut singles: Vec<Option<Lazy>> = sources
        .iter()
        .map(|s| Lazy::new(std::slice::from_ref(s)))
        .collect();
    let site_until = Instant::now() + SITE_TIME;
    // Two rounds: every route first gets a short try, so that a few hard
    // ones cannot spend the time the easy ones need; the undecided then
    // share what is left.
    let mut undecided: Vec<usize> = (1..routes.len()).collect();
    for round_time in [ROUTE_TIME / 10, ROUTE_TIME] {
        let mut still = Vec::new();
        for &k in &undecided {
            let now = Instant::now();
            if now > site_until {
                break;
            }
            let mut budget = Budget {
                steps: ROUTE_STEPS,
                until: now + round_time,
            };
            match dead_route(&mut singles, &mut all, k, &mut budget) {
                Some(v) => out[k] = v,
                None => still.push(k),
            }
        }
        undecided = still;
    }
    out
}

/// Route `k`'s verdict: Some(None) reachable, Some(Some(takers)) never
/// chosen, None undecided. `singles`: each route's own DFA.
fn dead_route(
    singles: &mut [Option<Lazy>],
    all: &mut Lazy,
    k: usize,
    budget: &mut Budget,
) -> Option<Option<Vec<usize>>> {
    let mut b = singles[k].take()?;
    let verdict = dead_route_with(&mut b, singles, all, k, budget);
    singles[k] = Some(b);
    verdict
}

fn dead_route_with(
    b: &mut Lazy,
    singles: &mut [Option<Lazy>],
    all: &mut Lazy,
    k: usize,
    budget: &mut Budget,
) -> Option<Option<Vec<usize>>> {
    let mut set = vec![false; singles.len()];
    let before: Vec<usize> = (0..k).collect();
    if !covered_by(b, all, &mut set, &before, budget)? {
        return Some(None);
    }
    // The routes that take some of its paths (each walked alone: in the
    // DFA of all routes the others keep every state alive); then, latest
    // first, those the rest can do without (so the earliest routes are
    // named). Past the budget the list stays longer than it need be,
    // never wrong.
    const ONE: &[bool] = &[true];
    let mut takers = Vec::new();
    for (i, a) in singles.iter_mut().enumerate().take(k) {
        let meets = match a {
            Some(a) => exists(b, a, ONE, true, budget),
            None => None,
        };
        if meets != Some(false) {
            takers.push(i);
        }
    }
    for j in (0..takers.len()).rev() {
        if takers.len() == 1 {
            break;
        }
        let mut rest = takers.clone();
        rest.remove(j);
        if covered_by(b, all, &mut set, &rest, budget) == Some(true) {
            takers = rest;
        }
    }
    Some(Some(takers))
}

#[cfg(test)]
mod tests {
    use super::{never_chosen, Pattern};

    fn dead(routes: &[Pattern<'_>]) -> Vec<Option<Vec<usize>>> {
        never_chosen(routes)
    }

    /// The sources the analysis uses take what `Matcher::matches` takes.
    #[test]
    fn a_patterns_regex_takes_what_its_matcher_takes() {
        let cases: &[(Pattern<'_>, &str, bool)] = &[
            (Pattern::Prefix("/a.b/"), "/a.b/c", true),
            (Pattern::Prefix("/a.b/"), "/axb/c", false),
            (Pattern::Prefix("/a.b/"), "/x/a.b/", false),
            (
                Pattern::Suffix {
                    suffix: ".php",
                    split: false,
                },
                "/X.PHP",
                true,
            ),
            (
                Pattern::Suffix {
                    suffix: ".php",
                    split: false,
                },
                "/x.php/y",
                false,
            ),
            (
                Pattern::Suffix {
                    suffix: ".php",
                    split: true,
                },
                "/x.php/y",
                true,
            ),
            (
                Pattern::Suffix {
                    suffix: ".php",
                    split: true,
                },
                "/x.PHP",
                true,
            ),
            (
                Pattern::Suffix {
                    suffix: ".php",
                    split: true,
                },
                "/x.phpy",
                false,
            ),
            (
                Pattern::Suffix {
                    suffix: "é.txt",
                    split: false,
                },
                "/aé.TXT",
                true,
            ),
            (
                Pattern::Suffix {
                    suffix: "é.txt",
                    split: false,
                },
                "/aÉ.txt",
                false,
            ),
        ];
        for (p, path, want) in cases {
            let re = regex::Regex::new(&p.source()).unwrap();
            assert_eq!(re.is_match(path), *want, "{p:?} {path}");
        }
    }

    /// nginx's classic mistake, caught: an extension location written
    /// after one that already takes every `.css`.
    #[test]
    fn a_regex_covered_by_an_earlier_suffix_is_never_chosen() {
        let r = dead(&[
            Pattern::Suffix {
                suffix: ".css",
                split: false,
            },
            Pattern::Regex(r"\.css$"),
            Pattern::Regex(r"(?i-u)\.CSS$"),
            Pattern::Regex(r"\.(css|js)$"),
            // Unicode case folding takes `/a.cſs` (U+017F), which the
            // ASCII-insensitive suffix does not: reachable.
            Pattern::Regex(r"(?i)\.CSS$"),
        ]);
        assert_eq!(r, [None, Some(vec![0]), Some(vec![0]), None, None]);
    }

    #[test]
    fn a_deny_prefix_hides_the_longer_prefixes_under_it() {
        // Routing order: deny routes first.
        let r = dead(&[
            Pattern::Prefix("/private/"),
            Pattern::Prefix("/private/docs/"),
            Pattern::Prefix("/privateer/"),
            Pattern::Prefix("/"),
        ]);
        assert_eq!(r, [None, Some(vec![0]), None, None]);
    }

    #[test]
    fn a_regex_that_takes_every_path_hides_everything_after_it() {
        for every in ["", ".*", "^/", "/", "(?s).?"] {
            let r = dead(&[
                Pattern::Regex(every),
                Pattern::Regex(r"\.png$"),
                Pattern::Prefix("/a/"),
            ]);
            assert_eq!(r, [None, Some(vec![0]), Some(vec![0])], "{every:?}");
        }
    }

    /// Neither `\.(png|jpg)$` nor `\.(gif|jpg)$` alone takes every
    /// `\.(gif|png)$`; together they do.
    #[test]
    fn routes_that_cover_a_later_one_only_together_are_all_named() {
        let r = dead(&[
            Pattern::Regex(r"\.(png|jpg)$"),
            Pattern::Prefix("/other/"),
            Pattern::Regex(r"\.(gif|jpg)$"),
            Pattern::Regex(r"\.(gif|png)$"),
        ]);
        assert_eq!(r[3], Some(vec![0, 2]));
        assert_eq!(r[..3], [None, None, None]);
    }

    #[test]
    fn reachable_routes_give_no_warning() {
        let r = dead(&[
            Pattern::Suffix {
                suffix: ".php",
                split: false,
            },
            // `/x.php/info` reaches it: the earlier route has no split.
            Pattern::Suffix {
                suffix: ".php",
                split: true,
            },
            Pattern::Regex(r"^/wp-content/.*\.(css|js)$"),
            Pattern::Regex(r"\.css$"),
            Pattern::Prefix("/wp-content/"),
            Pattern::Prefix("/"),
        ]);
        assert_eq!(r, vec![None; 6]);
    }

    /// Split suffix routes take `x.php` and `x.php/...`; a later plain one
    /// is left nothing.
    #[test]
    fn a_split_suffix_covers_the_same_suffix_without_split() {
        let r = dead(&[
            Pattern::Suffix {
                suffix: ".php",
                split: true,
            },
            Pattern::Suffix {
                suffix: ".PHP",
                split: false,
            },
            Pattern::Suffix {
                suffix: "index.php",
                split: false,
            },
        ]);
        assert_eq!(r, [None, Some(vec![0]), Some(vec![0])]);
    }

    /// A Unicode `\b` cannot be decided on non-ASCII text by a DFA: no
    /// warning rather than a wrong one.
    #[test]
    fn what_the_dfa_cannot_decide_gives_no_warning() {
        let r = dead(&[Pattern::Regex(r"\bx"), Pattern::Regex(r"\bxy")]);
        assert_eq!(r, [None, None]);
        // An ASCII-only boundary is decided.
        let r = dead(&[Pattern::Regex(r"(?-u:\b)x"), Pattern::Regex(r"(?-u:\b)xy")]);
        assert_eq!(r, [None, Some(vec![0])]);
    }

    /// Many Unicode patterns: the lazy DFAs' caches fill and are cleared
    /// (a stale state id once panicked here), and the walks are cut by
    /// the budget. What is reported is still right, and it ends.
    #[test]
    fn many_unicode_regexes_end_within_the_budget_and_report_nothing_false() {
        let srcs: Vec<String> = (0..40)
            .map(|i| format!(r"(?i)^/section{i}/\w+/.*\.(css|js|png|jpe?g|gif)$"))
            .collect();
        let mut pats: Vec<Pattern<'_>> = srcs.iter().map(|s| Pattern::Regex(s)).collect();
        pats.push(Pattern::Regex(r"\.php$"));
        pats.push(Pattern::Regex(r"(?i)^/section3/\w+/x\.css$"));
        pats.push(Pattern::Prefix("/"));
        pats.push(Pattern::Prefix("/section1/"));
        let t = std::time::Instant::now();
        let r = dead(&pats);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            t.elapsed()
        );
        assert!(r[..41].iter().all(Option::is_none), "{r:?}");
        assert!(r[41].as_ref().is_none_or(|v| v == &[3]), "{r:?}");
        assert!(r[42].is_none(), "{r:?}");
        assert!(r[43].as_ref().is_none_or(|v| v == &[42]), "{r:?}");
    }
}
