//! HTML escaping of text from visitors.

/// `text` with `&`, `<`, `>`, `"` and `'` replaced by character
/// references: safe in element content and in quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_and_quotes_become_character_references() {
        assert_eq!(
            escape(r#"<script>alert("x" + 'y') & </script>"#),
            "&lt;script&gt;alert(&quot;x&quot; + &#39;y&#39;) &amp; &lt;/script&gt;"
        );
    }

    #[test]
    fn other_text_is_unchanged() {
        assert_eq!(escape("Grüße, 日本 #1"), "Grüße, 日本 #1");
    }
}
