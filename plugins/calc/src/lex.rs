//! Splits an expression into tokens, each with the byte offset where it starts.

use crate::error::{CalcError, ErrorKind};

/// One token of the notation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Tok<'a> {
    /// A number literal as written (digits, `_`, `.`, exponent); parsed by [`crate::number`].
    Num(&'a str),
    /// A function or constant name, `math::` prefix included when written.
    Name(&'a str),
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    /// `^` or `**`.
    Power,
    Open,
    Close,
    Comma,
    End,
}

/// A token and its byte offset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Token<'a> {
    pub(crate) tok: Tok<'a>,
    pub(crate) at: usize,
}

impl Tok<'_> {
    /// How an error message names this token.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Num(s) => format!("the number {s}"),
            Tok::Name(s) => format!("the name `{s}`"),
            Tok::Plus => "`+`".into(),
            Tok::Minus => "`-`".into(),
            Tok::Star => "`*`".into(),
            Tok::Slash => "`/`".into(),
            Tok::Percent => "`%`".into(),
            Tok::Power => "the power operator".into(),
            Tok::Open => "`(`".into(),
            Tok::Close => "`)`".into(),
            Tok::Comma => "`,`".into(),
            Tok::End => "the end of the expression".into(),
        }
    }
}

/// All tokens of `text`, ending with [`Tok::End`].
pub(crate) fn tokens(text: &str) -> Result<Vec<Token<'_>>, CalcError> {
    let bytes = text.as_bytes();
    // Every token but the end takes at least one byte: one allocation, never a regrowth.
    let mut out = Vec::with_capacity(text.len() + 1);
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        let at = i;
        let single = |tok| (tok, c.len_utf8());
        let (tok, len) = match c {
            c if c.is_whitespace() => {
                i += c.len_utf8();
                continue;
            }
            // A currency sign before a number (`$85`, `€12.50`): the amount is the number.
            '$' | '€' | '£' | '¥'
                if text[at + c.len_utf8()..].starts_with(|d: char| d.is_ascii_digit() || d == '.') =>
            {
                i += c.len_utf8();
                continue;
            }
            '0'..='9' => number(text, at)?,
            '.' if bytes.get(at + 1).is_some_and(u8::is_ascii_digit) => number(text, at)?,
            'a'..='z' | 'A'..='Z' | '_' => match operator_words(text, at) {
                Some(operator) => operator,
                None => {
                    let word = name(text, at);
                    (Tok::Name(word), word.len())
                }
            },
            '*' if bytes.get(at + 1) == Some(&b'*') => (Tok::Power, 2),
            '+' => single(Tok::Plus),
            '-' | '\u{2212}' => single(Tok::Minus),
            '*' | '\u{d7}' => single(Tok::Star),
            '/' | '\u{f7}' => single(Tok::Slash),
            '%' => single(Tok::Percent),
            '^' => single(Tok::Power),
            '(' => single(Tok::Open),
            ')' => single(Tok::Close),
            ',' => single(Tok::Comma),
            other => return Err(CalcError::new(at, ErrorKind::UnexpectedChar(other, hint(other)))),
        };
        out.push(Token { tok, at });
        i += len;
    }
    out.push(Token { tok: Tok::End, at: text.len() });
    Ok(out)
}

/// Why a character is refused, and what to write instead.
fn hint(c: char) -> &'static str {
    match c {
        '=' | '<' | '>' | '&' | '|' => "calc only does arithmetic: no comparison, logic or assignment",
        '"' | '\'' | '`' => "calc only does arithmetic: no strings",
        '!' => "there is no factorial; multiply the factors",
        '[' | ']' | '{' | '}' => "group with parentheses ( )",
        ';' => "one expression per call",
        _ => "write numbers, + - * / % ^ **, parentheses and the functions and constants in the tool's description",
    }
}

/// The operators and functions people write as words (`12 times 17`, `144 divided by 12`, `2
/// to the power of 10`, `100 mod 7`, `cube root of 64`), and the bytes they take: a small
/// model copies the request's words into the expression (SmolLM2-135M wrote `100 mod 7` for
/// "the remainder when 100 is divided by 7", Gemma 3 270M `cube root of 64`). `mod` before a
/// `(` is the name, which is no function (its error says what to write).
fn operator_words(text: &str, at: usize) -> Option<(Tok<'static>, usize)> {
    const PHRASES: [(&[&str], Tok<'static>); 10] = [
        (&["times"], Tok::Star),
        (&["plus"], Tok::Plus),
        (&["minus"], Tok::Minus),
        (&["multiplied", "by"], Tok::Star),
        (&["divided", "by"], Tok::Slash),
        (&["to", "the", "power", "of"], Tok::Power),
        (&["mod"], Tok::Percent),
        (&["modulo"], Tok::Percent),
        (&["square", "root"], Tok::Name("sqrt")),
        (&["cube", "root"], Tok::Name("cbrt")),
    ];
    let (tok, len) = PHRASES.iter().find_map(|(words, tok)| phrase(text, at, words).map(|len| (*tok, len)))?;
    let called = text[at + len..].trim_start().starts_with('(');
    (tok != Tok::Percent || !called).then_some((tok, len))
}

/// The bytes from `at` that `words` take, each a whole word, one or more blanks between them.
fn phrase(text: &str, at: usize, words: &[&str]) -> Option<usize> {
    let mut end = at;
    for (k, word) in words.iter().enumerate() {
        if k > 0 {
            let blanks = text[end..].len() - text[end..].trim_start().len();
            if blanks == 0 {
                return None;
            }
            end += blanks;
        }
        if name(text, end) != *word {
            return None;
        }
        end += word.len();
    }
    Some(end - at)
}

/// A name: letters, digits and `_`, optionally `math::` first (the old spelling of functions).
fn name(text: &str, at: usize) -> &str {
    let bytes = text.as_bytes();
    let word = |from: usize| {
        let mut end = from;
        while bytes.get(end).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') {
            end += 1;
        }
        end
    };
    let mut end = word(at);
    if bytes.get(end..end + 2) == Some(b"::") && bytes.get(end + 2).is_some_and(u8::is_ascii_alphabetic) {
        end = word(end + 2);
    }
    &text[at..end]
}

/// A number literal at `at`: digits with `_` between them, an optional fraction and exponent.
fn number(text: &str, at: usize) -> Result<(Tok<'_>, usize), CalcError> {
    let bytes = text.as_bytes();
    let digits = |mut i: usize| {
        while bytes.get(i).is_some_and(|b| b.is_ascii_digit() || *b == b'_') {
            i += 1;
        }
        i
    };
    let mut end = digits(at);
    let integer_end = end;
    if bytes.get(end) == Some(&b'.') {
        end = digits(end + 1);
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        if bytes.get(end + 1 + sign).is_some_and(u8::is_ascii_digit) {
            end = digits(end + 1 + sign);
        }
    }
    let literal = &text[at..end];
    for (k, b) in literal.bytes().enumerate() {
        let digit_at = |j: Option<usize>| j.and_then(|j| literal.as_bytes().get(j)).is_some_and(u8::is_ascii_digit);
        if b == b'_' && !(digit_at(k.checked_sub(1)) && digit_at(Some(k + 1))) {
            return Err(CalcError::new(at + k, ErrorKind::MisplacedUnderscore));
        }
    }
    if end == integer_end && (1..=3).contains(&literal.len()) && !literal.contains('_') {
        thousands_group(text, at, end)?;
    }
    Ok((Tok::Num(literal), end - at))
}

/// Refuses `1,000` and `12,500.5`: a leading group of 1 to 3 digits, `,` and exactly three
/// digits with no space reads as a thousands separator as much as two arguments.
fn thousands_group(text: &str, at: usize, end: usize) -> Result<(), CalcError> {
    let bytes = text.as_bytes();
    let group = bytes.get(end + 1..end + 4);
    let three_digits = bytes.get(end) == Some(&b',') && group.is_some_and(|g| g.iter().all(u8::is_ascii_digit));
    if three_digits && !bytes.get(end + 4).is_some_and(u8::is_ascii_digit) {
        let written = &text[at..end + 4];
        let number = written.replace(',', "");
        return Err(CalcError::new(end, ErrorKind::AmbiguousComma(written.to_owned(), number)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<Tok<'_>> {
        tokens(text).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_names_and_operators() {
        assert_eq!(
            kinds("1_000.5e-3 ** math::sqrt(x)×2"),
            vec![
                Tok::Num("1_000.5e-3"),
                Tok::Power,
                Tok::Name("math::sqrt"),
                Tok::Open,
                Tok::Name("x"),
                Tok::Close,
                Tok::Star,
                Tok::Num("2"),
                Tok::End
            ]
        );
        assert_eq!(kinds("2e"), vec![Tok::Num("2"), Tok::Name("e"), Tok::End]);
        assert_eq!(kinds(".5"), vec![Tok::Num(".5"), Tok::End]);
        assert_eq!(tokens(" 1 + 2").unwrap()[1].at, 3);
    }

    #[test]
    fn separators_are_checked() {
        assert_eq!(tokens("1__0").unwrap_err().kind, ErrorKind::MisplacedUnderscore);
        assert_eq!(tokens("10_").unwrap_err().kind, ErrorKind::MisplacedUnderscore);
        assert_eq!(tokens("1_.5").unwrap_err().at, 1);
        let e = tokens("max(1,000)").unwrap_err();
        assert_eq!((e.at, e.kind), (5, ErrorKind::AmbiguousComma("1,000".into(), "1000".into())));
        assert!(tokens("max(1, 000)").is_ok());
        assert!(tokens("max(1000,200)").is_ok());
        assert!(tokens("max(1,2000)").is_ok());
        assert!(tokens("round(2.5,100)").is_ok());
    }
}
