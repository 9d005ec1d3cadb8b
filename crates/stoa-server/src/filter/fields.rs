//! A response's header fields as the exchange encoded them (`Name:
//! value\r\n` lines in the carrier's buffer), read and edited in place by
//! filters: the head is never built twice, and a response without
//! filters never pays for a field list.

/// The header lines of one response: `buf[at..]`.
pub(crate) struct Fields<'b> {
    buf: &'b mut Vec<u8>,
    at: usize,
}

impl<'b> Fields<'b> {
    /// The lines from `at` to the end of `buf`.
    pub(crate) fn new(buf: &'b mut Vec<u8>, at: usize) -> Fields<'b> {
        let at = at.min(buf.len());
        Fields { buf, at }
    }

    /// Each line's (start, end of value, end with CRLF).
    fn lines(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let mut pos = self.at;
        std::iter::from_fn(move || {
            let l = self.lines_from(pos)?;
            pos = l.2;
            Some(l)
        })
    }

    /// The name and value of the line at `start..value_end`.
    fn split(&self, start: usize, value_end: usize) -> (&[u8], &[u8]) {
        let line = &self.buf[start..value_end];
        match line.iter().position(|&b| b == b':') {
            Some(c) => (&line[..c], stoa_h1::trim(&line[c + 1..])),
            None => (line, &[]),
        }
    }

    /// The first value of a field.
    pub(crate) fn get(&self, name: &str) -> Option<&[u8]> {
        self.lines().find_map(|(s, v, _)| {
            let (n, value) = self.split(s, v);
            n.eq_ignore_ascii_case(name.as_bytes()).then_some(value)
        })
    }

    /// Whether a field is present.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Whether any value of a list-valued field holds `token` (case
    /// insensitive), as in `Cache-Control: no-transform` or `Vary`.
    pub(crate) fn has_token(&self, name: &str, token: &str) -> bool {
        self.lines().any(|(s, v, _)| {
            let (n, value) = self.split(s, v);
            n.eq_ignore_ascii_case(name.as_bytes())
                && stoa_h1::list_items(value).any(|item| {
                    // A directive's argument (`max-age=60`) is not its name.
                    let name = item.split(|&b| b == b'=').next().unwrap_or(item);
                    stoa_h1::trim(name).eq_ignore_ascii_case(token.as_bytes())
                })
        })
    }

    /// Removes every line of a field; whether there was one.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        let mut found = false;
        let mut pos = self.at;
        while pos < self.buf.len() {
            let Some((s, v, e)) = self.lines_from(pos) else {
                break;
            };
            let (n, _) = self.split(s, v);
            if n.eq_ignore_ascii_case(name.as_bytes()) {
                self.buf.drain(s..e);
                found = true;
                pos = s;
            } else {
                pos = e;
            }
        }
        found
    }

    /// The line starting at `pos`: (start, end of value, end with CRLF).
    fn lines_from(&self, pos: usize) -> Option<(usize, usize, usize)> {
        let rest = self.buf.get(pos..)?;
        if rest.is_empty() {
            return None;
        }
        Some(match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let v = if i > 0 && rest[i - 1] == b'\r' {
                    i - 1
                } else {
                    i
                };
                (pos, pos + v, pos + i + 1)
            }
            None => (pos, self.buf.len(), self.buf.len()),
        })
    }

    /// Adds a line (another one, when the field is there already).
    pub(crate) fn append(&mut self, name: &str, value: &[u8]) {
        stoa_h1::response::push_header(self.buf, name, value);
    }

    /// Replaces every line of a field with one.
    pub(crate) fn set(&mut self, name: &str, value: &[u8]) {
        self.remove(name);
        self.append(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> Vec<u8> {
        b"HTTP/1.1 200 OK\r\nDate: x\r\nContent-Type: text/html\r\nVary: Origin\r\nvary: Accept-Encoding\r\nCache-Control: public, max-age=60\r\n".to_vec()
    }

    #[test]
    fn fields_are_found_by_name_whatever_the_case_and_the_status_line_is_not_a_field() {
        let mut b = block();
        let f = Fields::new(&mut b, 17);
        assert_eq!(f.get("content-type"), Some(&b"text/html"[..]));
        assert_eq!(f.get("VARY"), Some(&b"Origin"[..]));
        assert!(!f.has("HTTP/1.1 200 OK"));
    }

    #[test]
    fn a_token_is_found_in_any_line_of_a_list_field_but_not_inside_an_argument() {
        let mut b = block();
        let f = Fields::new(&mut b, 17);
        assert!(f.has_token("Vary", "accept-encoding"));
        assert!(f.has_token("Cache-Control", "max-age"));
        assert!(!f.has_token("Cache-Control", "60"));
        assert!(!f.has_token("Cache-Control", "no-transform"));
    }

    #[test]
    fn removing_a_field_takes_every_line_of_it_and_keeps_the_others_in_order() {
        let mut b = block();
        let mut f = Fields::new(&mut b, 17);
        assert!(f.remove("vary"));
        assert!(!f.remove("vary"));
        f.set("Content-Type", b"text/plain");
        f.append("Vary", b"Accept-Encoding");
        assert_eq!(
            b,
            b"HTTP/1.1 200 OK\r\nDate: x\r\nCache-Control: public, max-age=60\r\nContent-Type: text/plain\r\nVary: Accept-Encoding\r\n"
        );
    }
}
