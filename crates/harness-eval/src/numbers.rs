//! The numbers in an answer's text, found by one strict rule (docs/eval.md): an optional sign,
//! digits (with groups of exactly three after a comma), an optional fraction and exponent;
//! digits glued to a letter, digit, `_` or `.` before them belong to a word (`C9H8O4`), not a
//! number.

/// Every number in `text`, in order.
pub fn numbers_in(text: &str) -> Vec<f64> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let glued = i > 0 && is_word(chars[i - 1]);
        let signed = is_sign(chars[i]) && !glued && starts_digits(&chars, i + 1);
        if chars[i].is_ascii_digit() && glued {
            // Part of a word such as a formula: skip the rest of it.
            while i < chars.len() && is_word(chars[i]) && chars[i] != '.' {
                i += 1;
            }
            continue;
        }
        if signed || (!glued && starts_digits(&chars, i)) {
            let (value, end) = read_number(&chars, i);
            if let Some(value) = value {
                found.push(value);
            }
            i = end;
            continue;
        }
        i += 1;
    }
    found
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '.'
}

fn is_sign(c: char) -> bool {
    matches!(c, '-' | '+' | '\u{2212}')
}

/// Whether a number's digits start at `i`: a digit, or `.` and a digit.
fn starts_digits(chars: &[char], i: usize) -> bool {
    match chars.get(i) {
        Some(c) if c.is_ascii_digit() => true,
        Some('.') => chars.get(i + 1).is_some_and(char::is_ascii_digit),
        _ => false,
    }
}

fn digits(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(char::is_ascii_digit) {
        i += 1;
    }
    i
}

/// Reads the number starting at `start` (its sign or first digit); returns it and where it ends.
fn read_number(chars: &[char], start: usize) -> (Option<f64>, usize) {
    let mut text = String::new();
    let mut i = start;
    if is_sign(chars[i]) {
        text.push(if chars[i] == '+' { '+' } else { '-' });
        i += 1;
    }
    let int_start = i;
    i = digits(chars, i);
    push(&mut text, &chars[int_start..i]);
    // Thousands groups: a comma and exactly three digits, after a first group of one to three.
    if (1..=3).contains(&(i - int_start)) {
        while chars.get(i) == Some(&',') && digits(chars, i + 1) == i + 4 {
            push(&mut text, &chars[i + 1..i + 4]);
            i += 4;
        }
    }
    if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
        let end = digits(chars, i + 1);
        push(&mut text, &chars[i..end]);
        i = end;
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        let sign = usize::from(matches!(chars.get(i + 1), Some('-' | '+')));
        let end = digits(chars, i + 1 + sign);
        if end > i + 1 + sign {
            push(&mut text, &chars[i..end]);
            i = end;
        }
    }
    (text.parse::<f64>().ok().filter(|v| v.is_finite()), i)
}

fn push(text: &mut String, chars: &[char]) {
    text.extend(chars);
}

#[cfg(test)]
mod tests {
    use super::numbers_in;

    #[test]
    fn one_number_in_a_sentence() {
        for (text, want) in [
            ("42", 42.0),
            ("The answer is 42.", 42.0),
            ("$21.25", 21.25),
            ("12%", 12.0),
            ("180.16 g/mol", 180.16),
            ("1,157.63", 1157.63),
            ("1,000,000", 1e6),
            ("-5", -5.0),
            ("x = \u{2212}2.5", -2.5),
            ("1.5e3", 1500.0),
            ("2.5E-1", 0.25),
            (".5", 0.5),
            ("aspirin, C9H8O4, weighs 180.159", 180.159),
            ("99999999980000000001", 99999999980000000001.0),
        ] {
            assert_eq!(numbers_in(text), vec![want], "{text}");
        }
    }

    #[test]
    fn several_or_none() {
        assert_eq!(numbers_in("6*7 = 42"), vec![6.0, 7.0, 42.0]);
        assert_eq!(numbers_in("10-5"), vec![10.0, 5.0]);
        assert_eq!(numbers_in("3,5"), vec![3.0, 5.0]);
        assert_eq!(numbers_in("12, 15 and 21"), vec![12.0, 15.0, 21.0]);
        assert_eq!(numbers_in("12345,678"), vec![12345.0, 678.0]);
        assert!(numbers_in("no idea").is_empty());
        assert!(numbers_in("C9H8O4").is_empty());
        assert!(numbers_in("v1.2 x_3").is_empty());
        assert!(numbers_in("1e999").is_empty(), "an overflow is no number");
    }

    #[test]
    fn an_exponent_needs_digits_and_a_fraction_needs_digits() {
        assert_eq!(numbers_in("5eggs"), vec![5.0]);
        assert_eq!(numbers_in("42."), vec![42.0]);
        assert_eq!(numbers_in("7e+"), vec![7.0]);
    }
}
