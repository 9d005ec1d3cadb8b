//! `application/x-www-form-urlencoded` bodies (the WHATWG URL standard's
//! parser: `+` is a space, `%XX` a byte, a malformed `%` stays as it is).

/// The body was not UTF-8 once decoded.
#[derive(Debug, PartialEq, Eq)]
pub struct NotUtf8;

/// The name-value pairs of a form body, in order.
pub fn parse(body: &[u8]) -> Result<Vec<(String, String)>, NotUtf8> {
    body.split(|&b| b == b'&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = match part.iter().position(|&b| b == b'=') {
                Some(i) => (&part[..i], &part[i + 1..]),
                None => (part, &b""[..]),
            };
            Ok((decode(name)?, decode(value)?))
        })
        .collect()
}

/// True when a Content-Type names a form body (parameters such as
/// `charset` are allowed; the type is compared ignoring case).
pub fn is_form_type(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/x-www-form-urlencoded")
}

fn decode(s: &[u8]) -> Result<String, NotUtf8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' => match (s.get(i + 1).and_then(hex), s.get(i + 2).and_then(hex)) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| NotUtf8)
}

fn hex(b: &u8) -> Option<u8> {
    (*b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(body: &str) -> Vec<(String, String)> {
        parse(body.as_bytes()).expect("utf-8")
    }

    #[test]
    fn plus_is_a_space_and_percent_escapes_are_bytes() {
        assert_eq!(
            pairs("name=Ann+Lee&comment=a%26b%3Dc%0D%0Ad%C3%BC"),
            [
                ("name".to_owned(), "Ann Lee".to_owned()),
                ("comment".to_owned(), "a&b=c\r\ndü".to_owned())
            ]
        );
    }

    #[test]
    fn malformed_escapes_stay_and_empty_parts_are_skipped() {
        assert_eq!(
            pairs("a=%&&b=%zz%4&c"),
            [
                ("a".to_owned(), "%".to_owned()),
                ("b".to_owned(), "%zz%4".to_owned()),
                ("c".to_owned(), String::new())
            ]
        );
    }

    #[test]
    fn a_body_that_is_not_utf8_is_refused() {
        assert_eq!(parse(b"name=%FF"), Err(NotUtf8));
    }

    #[test]
    fn the_form_type_may_carry_parameters_and_any_case() {
        assert!(is_form_type("application/x-www-form-urlencoded"));
        assert!(is_form_type(
            "Application/X-WWW-Form-URLEncoded; charset=UTF-8"
        ));
        assert!(!is_form_type("multipart/form-data; boundary=x"));
        assert!(!is_form_type(""));
    }
}
