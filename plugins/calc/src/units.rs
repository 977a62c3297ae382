//! Unit conversion as people ask for it: `3 hours in minutes`, `100 fahrenheit to celsius`,
//! `2.5 kg in pounds`. A whole expression of the form `QUANTITY UNIT (in|to|into|as) UNIT`,
//! the quantity any expression, is converted; anything else is arithmetic as before.
//!
//! Why in calc: a small model turns "how many minutes are in 6 hours?" into `6*6`, because the
//! factor is a fact it does not recall; it copies the request's own words reliably. With the
//! words as the expression, the factor is calc's, and exact.

use crate::error::{CalcError, ErrorKind};
use crate::lex::{Tok, Token};
use crate::number::{self, Num};
use crate::parse;

/// What a unit measures: only units of one kind convert into each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Time,
    Length,
    Mass,
    Volume,
    Temperature,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Time => "time",
            Kind::Length => "length",
            Kind::Mass => "mass",
            Kind::Volume => "volume",
            Kind::Temperature => "temperature",
        }
    }
}

/// A unit: its names, its kind, and its size in the kind's base unit (second, metre, gram,
/// litre; kelvin for temperatures, whose scales also have an offset), each an exact decimal
/// or a fraction of two (`5/9`), so that a conversion stays exact.
struct Unit {
    names: &'static [&'static str],
    kind: Kind,
    factor: &'static str,
    /// Added after scaling to reach kelvin: 273.15 for Celsius.
    offset: &'static str,
}

const fn unit(names: &'static [&'static str], kind: Kind, factor: &'static str) -> Unit {
    Unit { names, kind, factor, offset: "0" }
}

/// Every unit. A year is 365 days and a month is not a unit: both vary, and an answer that
/// silently picked one would be wrong for someone.
const UNITS: &[Unit] = &[
    unit(&["ms", "millisecond", "milliseconds"], Kind::Time, "0.001"),
    unit(&["s", "sec", "secs", "second", "seconds"], Kind::Time, "1"),
    unit(&["min", "mins", "minute", "minutes"], Kind::Time, "60"),
    unit(&["h", "hr", "hrs", "hour", "hours"], Kind::Time, "3600"),
    unit(&["day", "days"], Kind::Time, "86400"),
    unit(&["week", "weeks"], Kind::Time, "604800"),
    unit(&["year", "years"], Kind::Time, "31536000"),
    unit(&["mm", "millimeter", "millimeters", "millimetre", "millimetres"], Kind::Length, "0.001"),
    unit(&["cm", "centimeter", "centimeters", "centimetre", "centimetres"], Kind::Length, "0.01"),
    unit(&["m", "meter", "meters", "metre", "metres"], Kind::Length, "1"),
    unit(&["km", "kilometer", "kilometers", "kilometre", "kilometres"], Kind::Length, "1000"),
    unit(&["in", "inch", "inches"], Kind::Length, "0.0254"),
    unit(&["ft", "foot", "feet"], Kind::Length, "0.3048"),
    unit(&["yd", "yard", "yards"], Kind::Length, "0.9144"),
    unit(&["mi", "mile", "miles"], Kind::Length, "1609.344"),
    unit(&["mg", "milligram", "milligrams"], Kind::Mass, "0.001"),
    unit(&["g", "gram", "grams"], Kind::Mass, "1"),
    unit(&["kg", "kilogram", "kilograms", "kilo", "kilos"], Kind::Mass, "1000"),
    unit(&["t", "tonne", "tonnes"], Kind::Mass, "1000000"),
    unit(&["oz", "ounce", "ounces"], Kind::Mass, "28.349523125"),
    unit(&["lb", "lbs", "pound", "pounds"], Kind::Mass, "453.59237"),
    unit(&["ml", "milliliter", "milliliters", "millilitre", "millilitres"], Kind::Volume, "0.001"),
    unit(&["l", "liter", "liters", "litre", "litres"], Kind::Volume, "1"),
    unit(&["gal", "gallon", "gallons"], Kind::Volume, "3.785411784"),
    Unit { names: &["c", "celsius", "centigrade"], kind: Kind::Temperature, factor: "1", offset: "273.15" },
    // K = (F - 32) * 5/9 + 273.15 = F * 5/9 + 45967/180.
    Unit { names: &["f", "fahrenheit"], kind: Kind::Temperature, factor: "5/9", offset: "45967/180" },
    unit(&["k", "kelvin", "kelvins"], Kind::Temperature, "1"),
];

/// The unit of this name (any case: `Celsius`, `KM`), if it is one.
fn lookup(name: &str) -> Option<&'static Unit> {
    UNITS.iter().find(|u| u.names.iter().any(|n| n.eq_ignore_ascii_case(name)))
}

/// Whether `name` is a unit calc converts, for the hint of an unknown name.
pub(crate) fn is_unit(name: &str) -> bool {
    lookup(name).is_some()
}

/// Whether `name`, found where an operator belongs, is a unit: `km` in `240 km / 3 hours`.
/// Not a word that joins two units: `in` is also the inch, but in `mean(240, 3) in km/h` it
/// joins, and "`in` is a unit" would mislead.
pub(crate) fn is_stray(name: &str) -> bool {
    is_unit(name) && !is_join(name)
}

/// The words that join the two units.
const JOINS: &[&str] = &["in", "to", "into", "as"];

/// Whether `word` joins two units (any case).
fn is_join(word: &str) -> bool {
    JOINS.iter().any(|j| j.eq_ignore_ascii_case(word))
}

/// The conversion `tokens` ask for, if they end `UNIT JOIN UNIT` after a quantity (a
/// `degrees` before either unit is read past): the quantity's tokens end where its unit
/// starts. `None` when the expression is not a conversion.
pub(crate) fn convert(text: &str, tokens: &[Token<'_>]) -> Option<Result<Num, CalcError>> {
    let names = trailing_names(tokens);
    let (from_at, (from_name, from), (to_name, to)) = split(&names)?;
    let mut quantity = tokens[..from_at].to_vec();
    let unit_at = tokens[from_at].at;
    quantity.push(Token { tok: Tok::End, at: unit_at });
    if quantity.len() == 1 {
        return Some(Err(CalcError::new(unit_at, ErrorKind::NoQuantity)));
    }
    if from.kind != to.kind {
        let kinds = ErrorKind::UnitKinds(from_name.to_owned(), from.kind.name(), to_name.to_owned(), to.kind.name());
        return Some(Err(CalcError::new(unit_at, kinds)));
    }
    Some(parse::evaluate(text, &quantity).and_then(|value| scale(value, from, to, unit_at)))
}

/// The names the tokens end with (before `End`), as (index, name), in order.
fn trailing_names<'a>(tokens: &[Token<'a>]) -> Vec<(usize, &'a str)> {
    let last = tokens.len().saturating_sub(1);
    let mut start = last;
    while start > 0 && matches!(tokens[start - 1].tok, Tok::Name(_)) {
        start -= 1;
    }
    (start..last)
        .filter_map(|i| match tokens[i].tok {
            Tok::Name(name) => Some((i, name)),
            _ => None,
        })
        .collect()
}

/// A unit as the expression wrote it, and the unit.
type Written<'a> = (&'a str, &'static Unit);

/// Reads `[degrees] UNIT JOIN [degrees] UNIT` off the end of `names`: the index where the
/// first unit (or its `degrees`) starts, and the two units.
fn split<'a>(names: &[(usize, &'a str)]) -> Option<(usize, Written<'a>, Written<'a>)> {
    let (join, to) = unit_before(names, names.len())?;
    let join = join.checked_sub(1)?;
    if !is_join(names[join].1) {
        return None;
    }
    let (start, from) = unit_before(names, join)?;
    Some((names[start].0, from, to))
}

/// The unit that ends just before index `end` of `names`, a `degrees` before it read past:
/// the index where it starts, and the unit as written.
fn unit_before<'a>(names: &[(usize, &'a str)], end: usize) -> Option<(usize, Written<'a>)> {
    let at = end.checked_sub(1)?;
    let name = names[at].1;
    let unit = lookup(name)?;
    let degrees = |w: &str| ["degree", "degrees", "deg"].iter().any(|d| d.eq_ignore_ascii_case(w));
    let start = if at > 0 && degrees(names[at - 1].1) { at - 1 } else { at };
    Some((start, (name, unit)))
}

/// `value` in `from` as a number of `to`: through the base unit, exactly.
fn scale(value: Num, from: &Unit, to: &Unit, at: usize) -> Result<Num, CalcError> {
    let lit = |s: &str| match s.split_once('/') {
        Some((n, d)) => number::div(number::literal(n, at)?, number::literal(d, at)?, at),
        None => number::literal(s, at),
    };
    let base = number::add(number::mul(value, lit(from.factor)?, at)?, lit(from.offset)?, at)?;
    number::div(number::sub(base, lit(to.offset)?, at)?, lit(to.factor)?, at)
}

#[cfg(test)]
mod tests {
    use crate::evaluate;
    use crate::number::Num;

    fn value(expression: &str) -> Result<f64, String> {
        evaluate(expression).map(|n| n.to_f64(0).unwrap_or(f64::NAN)).map_err(|e| e.describe(expression))
    }

    #[test]
    fn converts_a_quantity_between_units_of_one_kind() {
        assert_eq!(value("6 hours in minutes"), Ok(360.0));
        assert_eq!(value("365 days in hours"), Ok(8760.0));
        assert_eq!(value("1 day to seconds"), Ok(86400.0));
        assert_eq!(value("2.5 kg in grams"), Ok(2500.0));
        assert_eq!(value("12 in in cm"), Ok(30.48));
        assert_eq!(value("(3+2)*2 km into m"), Ok(10000.0));
        assert_eq!(value("100 degrees Celsius in Fahrenheit"), Ok(212.0));
        assert_eq!(value("0 K in C"), Ok(-273.15));
        let f = value("100 fahrenheit to celsius").unwrap_or_default();
        assert!((f - 37.777_777_777_777_78).abs() < 1e-12, "{f}");
    }

    #[test]
    fn a_conversion_is_exact() {
        // (212 - 32) * 5/9 through kelvin: exactly 100, not a float near it.
        assert!(matches!(evaluate("212 F in C"), Ok(Num::Exact(_))));
        assert_eq!(value("212 F in C"), Ok(100.0));
    }

    #[test]
    fn says_what_is_wrong_with_a_conversion() {
        let kinds = value("3 hours in kg").unwrap_err();
        assert!(kinds.contains("`hours` is a unit of time and `kg` one of mass"), "{kinds}");
        // The units named are the conversion's, not a name before it or a `degrees`.
        let named = value("pi hours in degrees C").unwrap_err();
        assert!(named.contains("`hours` is a unit of time and `C` one of temperature"), "{named}");
        let nothing = value("hours in minutes").unwrap_err();
        assert!(nothing.contains("a conversion needs a quantity first"), "{nothing}");
        let stray = value("240 km / 3 hours").unwrap_err();
        assert!(stray.contains("`km` is a unit: calc converts a whole expression"), "{stray}");
        let joined = value("mean(240, 3) in km/h").unwrap_err();
        assert!(!joined.contains("is a unit"), "{joined}");
        let unknown = value("km / 3").unwrap_err();
        assert!(unknown.contains("a unit converts only as a whole expression"), "{unknown}");
    }

    #[test]
    fn arithmetic_that_only_ends_in_words_is_left_alone() {
        assert_eq!(value("2 to the power of 3"), Ok(8.0));
        assert_eq!(value("12 times 17"), Ok(204.0));
        assert!(value("3 apples in bags").is_err());
    }
}
