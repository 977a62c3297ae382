//! Argument objects drawn from a JSON Schema: valid ones ([`Generator`]) and ones that break
//! it on purpose ([`violations`]).
//!
//! The generator covers what `schemars` produces: `object` with `properties`, `required` and
//! `additionalProperties`; `string` with `minLength`, `maxLength`, `pattern` (see the
//! `pattern` module) and common `format`s; `integer` and `number` with `minimum`, `maximum`,
//! the exclusive bounds, `multipleOf` and the integer `format`s schemars writes (`uint8`,
//! `int32`, ...); `boolean`; `array` with `items`, `prefixItems`, `minItems`, `maxItems` and
//! `uniqueItems`; `enum` and `const`; `anyOf`, `oneOf` and `allOf`; `$ref` into the same
//! document (`$defs`); nullable types (`"type": ["string", "null"]`). Boundary values (the
//! minimum, the maximum, the empty string, zero) come up often on purpose.
//!
//! It is written here rather than taken from a crate for one reason: the same seed must give
//! the same cases in every release, and the only way to promise that is to own the code and
//! its random number generator ([`Rng`]). A draw is not guaranteed to be valid (a `not`, an
//! anchored pattern, a `patternProperties` clash): the caller validates each draw with the
//! harness's own validator and draws again when it is refused.
//!
//! ```
//! use harness_plugin_check::generate::{Generator, Rng};
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}},
//!     "required": ["n"],
//!     "additionalProperties": false
//! });
//! let args = Generator::new(&schema).draw(&mut Rng::for_case(1, "tool", 0)).unwrap();
//! assert!((1..=9).contains(&args["n"].as_i64().unwrap()));
//! ```

mod invalid;
mod pattern;
mod rng;

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

pub use invalid::{Violation, violations};
pub use rng::Rng;

use pattern::Pattern;

/// Why a schema gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawError {
    /// No value can satisfy it (`minLength` above `maxLength`, a `false` schema, an empty `enum`).
    #[error("no value satisfies the schema: {0}")]
    Unsatisfiable(String),
    /// It uses something the generator does not handle (a remote `$ref`, a lookaround pattern).
    #[error("the argument generator does not support this schema: {0}")]
    Unsupported(String),
}

/// Below this depth objects get only required properties and arrays their fewest items, so
/// that recursive types end.
const SOFT_DEPTH: usize = 6;
/// Past this depth the generator gives up.
const MAX_DEPTH: usize = 32;
/// The longest string drawn for a `maxLength` boundary.
const LONGEST_STRING: usize = 65_536;
/// The most characters, items or properties a schema may demand of one value; past it the
/// generator declines rather than fill the memory.
const MOST_DEMANDED: usize = 1 << 20;

fn too_much(what: &str, n: usize) -> DrawError {
    DrawError::Unsupported(format!("{what} {n} asks for more than the generator draws ({MOST_DEMANDED})"))
}

/// Draws values from one schema document; `$ref`s resolve against that document.
#[derive(Debug)]
pub struct Generator<'s> {
    root: &'s Value,
    patterns: HashMap<String, Result<Pattern, String>>,
    dictionary: Vec<String>,
}

fn num(obj: &Map<String, Value>, key: &str) -> Option<f64> {
    obj.get(key).and_then(Value::as_f64)
}

fn count(obj: &Map<String, Value>, key: &str) -> Option<usize> {
    obj.get(key).and_then(Value::as_u64).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Resolves a reference inside `root` (`#`, `#/$defs/Name`, `#/definitions/Name`).
pub(crate) fn resolve<'s>(root: &'s Value, reference: &str) -> Result<&'s Value, DrawError> {
    let Some(pointer) = reference.strip_prefix('#') else {
        return Err(DrawError::Unsupported(format!("$ref {reference:?} leaves the schema document")));
    };
    root.pointer(pointer).ok_or_else(|| DrawError::Unsatisfiable(format!("$ref {reference:?} points at nothing")))
}

/// Merges subschemas into one (properties and required united, other keywords overwritten).
fn merge(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (key, value) in from {
        match (key.as_str(), into.get_mut(key), value) {
            ("properties", Some(Value::Object(have)), Value::Object(more)) => {
                for (k, v) in more {
                    have.insert(k.clone(), v.clone());
                }
            }
            ("required", Some(Value::Array(have)), Value::Array(more)) => {
                for v in more {
                    if !have.contains(v) {
                        have.push(v.clone());
                    }
                }
            }
            _ => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The type a schema without `type` is about, from its other keywords.
fn implied_type(obj: &Map<String, Value>) -> Option<&'static str> {
    let has = |keys: &[&str]| keys.iter().any(|k| obj.contains_key(*k));
    if has(&["properties", "required", "additionalProperties", "minProperties", "maxProperties"]) {
        Some("object")
    } else if has(&["items", "prefixItems", "minItems", "maxItems", "uniqueItems"]) {
        Some("array")
    } else if has(&["minLength", "maxLength", "pattern", "format"]) {
        Some("string")
    } else if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
        Some("number")
    } else {
        None
    }
}

/// Characters for strings: mostly printable ASCII, some beyond it, a few controls.
const ASCII: &[u8] =
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;/()+*=!?'\"#@%&<>[]{}|\\^~`$";
const BEYOND_ASCII: &[char] = &['é', 'ß', 'Ω', 'я', '日', '本', '€', '🦀', '\u{200b}', '\u{fffd}'];
const CONTROLS: &[char] = &['\n', '\t', '\r', '\0', '\u{1b}'];

fn random_char(rng: &mut Rng) -> char {
    match rng.below(50) {
        0 => CONTROLS[rng.index(CONTROLS.len())],
        1..=4 => BEYOND_ASCII[rng.index(BEYOND_ASCII.len())],
        _ => char::from(ASCII[rng.index(ASCII.len())]),
    }
}

/// Strings of one flavour each: numbers and operators, words, or anything. Tools that parse
/// their input (expressions, identifiers) get past their first check now and then.
fn random_string(rng: &mut Rng, chars: usize) -> String {
    const NUMERIC: &[u8] = b"0123456789+-*/.()^% ";
    const WORDS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ";
    match rng.below(4) {
        0 => (0..chars).map(|_| char::from(NUMERIC[rng.index(NUMERIC.len())])).collect(),
        1 => (0..chars).map(|_| char::from(WORDS[rng.index(WORDS.len())])).collect(),
        _ => (0..chars).map(|_| random_char(rng)).collect(),
    }
}

/// A dictionary word as it is (half the time) or with one small change: a character taken
/// out, put in or doubled, or the end cut off.
fn mutate(word: &str, rng: &mut Rng) -> String {
    let mut chars: Vec<char> = word.chars().collect();
    if chars.is_empty() || rng.one_in(2) {
        return word.to_owned();
    }
    let at = rng.index(chars.len());
    match rng.below(4) {
        0 => {
            chars.remove(at);
        }
        1 => chars.insert(at, random_char(rng)),
        2 => chars.insert(at, chars[at]),
        _ => chars.truncate(at),
    }
    chars.into_iter().collect()
}

/// Every string inside a JSON value, for a generator's dictionary.
pub fn strings_in(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    out
}

/// A plausible value for a string `format`, when it is one the harness's tools meet.
fn format_sample(format: &str, rng: &mut Rng) -> Option<String> {
    let n = |rng: &mut Rng, lo: i128, hi: i128| rng.in_range(lo, hi);
    Some(match format {
        "date-time" => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            n(rng, 1970, 2100),
            n(rng, 1, 12),
            n(rng, 1, 28),
            n(rng, 0, 23),
            n(rng, 0, 59),
            n(rng, 0, 59)
        ),
        "date" => format!("{:04}-{:02}-{:02}", n(rng, 1970, 2100), n(rng, 1, 12), n(rng, 1, 28)),
        "time" => format!("{:02}:{:02}:{:02}Z", n(rng, 0, 23), n(rng, 0, 59), n(rng, 0, 59)),
        "email" | "idn-email" => format!("user{}@example.com", n(rng, 0, 9999)),
        "uri" | "url" | "iri" | "uri-reference" | "iri-reference" => {
            format!("https://example.com/{}", n(rng, 0, 9999))
        }
        "hostname" | "idn-hostname" => format!("host{}.example.com", n(rng, 0, 9999)),
        "ipv4" => format!("{}.{}.{}.{}", n(rng, 0, 255), n(rng, 0, 255), n(rng, 0, 255), n(rng, 0, 255)),
        "ipv6" => format!("2001:db8::{:x}", n(rng, 0, 0xffff)),
        "uuid" => {
            let hex: String = (0..32).map(|_| char::from(b"0123456789abcdef"[rng.index(16)])).collect();
            format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
        }
        "duration" => format!("P{}D", n(rng, 0, 30)),
        _ => return None,
    })
}

/// The range of an integer `format` as schemars writes them, within what JSON numbers here hold.
fn format_range(format: Option<&str>) -> (i128, i128) {
    let (lo, hi): (i128, i128) = match format {
        Some("int8") => (i8::MIN.into(), i8::MAX.into()),
        Some("int16") => (i16::MIN.into(), i16::MAX.into()),
        Some("int32") => (i32::MIN.into(), i32::MAX.into()),
        Some("uint8") => (0, u8::MAX.into()),
        Some("uint16") => (0, u16::MAX.into()),
        Some("uint32") => (0, u32::MAX.into()),
        Some("uint64" | "uint" | "uint128") => (0, u64::MAX.into()),
        _ => (i64::MIN.into(), i64::MAX.into()),
    };
    (lo, hi)
}

fn integer_value(v: i128) -> Value {
    if let Ok(u) = u64::try_from(v) {
        Value::Number(u.into())
    } else if let Ok(i) = i64::try_from(v) {
        Value::Number(i.into())
    } else {
        // Out of both ranges: only reachable from bounds beyond 64 bits, which are clamped.
        Value::Null
    }
}

/// Any JSON value, for schemas that accept anything.
fn any_value(rng: &mut Rng, depth: usize) -> Value {
    let kinds = if depth >= 2 { 5 } else { 7 };
    match rng.below(kinds) {
        0 => Value::Null,
        1 => Value::Bool(rng.one_in(2)),
        2 => integer_value(rng.in_range(-1000, 1000)),
        3 => Number::from_f64((rng.unit() - 0.5) * 2000.0).map_or(Value::Null, Value::Number),
        4 => {
            let len = rng.index(12);
            Value::String(random_string(rng, len))
        }
        5 => Value::Array((0..rng.below(4)).map(|_| any_value(rng, depth + 1)).collect()),
        _ => Value::Object((0..rng.below(4)).map(|i| (format!("k{i}"), any_value(rng, depth + 1))).collect()),
    }
}

impl<'s> Generator<'s> {
    /// A generator for the schema document `root`.
    pub fn new(root: &'s Value) -> Self {
        Self { root, patterns: HashMap::new(), dictionary: Vec::new() }
    }

    /// Strings to draw from now and then, whole or slightly changed: the string values of a
    /// tool's declared examples, say, so that a parser gets past its first character.
    pub fn with_dictionary(mut self, words: impl IntoIterator<Item = String>) -> Self {
        self.dictionary.extend(words);
        self.dictionary.sort();
        self.dictionary.dedup();
        self
    }

    /// Draws one value from the whole document.
    pub fn draw(&mut self, rng: &mut Rng) -> Result<Value, DrawError> {
        self.value(self.root, rng, 0)
    }

    fn value(&mut self, schema: &Value, rng: &mut Rng, depth: usize) -> Result<Value, DrawError> {
        if depth > MAX_DEPTH {
            return Err(DrawError::Unsupported(format!(
                "the schema nests deeper than {MAX_DEPTH} levels (a type that contains itself without an end?)"
            )));
        }
        let obj = match schema {
            Value::Bool(true) => return Ok(any_value(rng, depth)),
            Value::Bool(false) => return Err(DrawError::Unsatisfiable("a `false` schema accepts nothing".to_owned())),
            Value::Object(obj) => obj,
            other => return Err(DrawError::Unsatisfiable(format!("{other} is not a schema"))),
        };
        if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
            let target = resolve(self.root, reference)?;
            return self.value(target, rng, depth + 1);
        }
        if let Some(value) = obj.get("const") {
            return Ok(value.clone());
        }
        if let Some(Value::Array(options)) = obj.get("enum") {
            return options
                .get(rng.index(options.len()))
                .cloned()
                .ok_or_else(|| DrawError::Unsatisfiable("an empty `enum` allows no value".to_owned()));
        }
        if let Some(Value::Array(parts)) = obj.get("allOf") {
            let mut merged = obj.clone();
            merged.remove("allOf");
            for part in parts {
                let part = match part.get("$ref").and_then(Value::as_str) {
                    Some(reference) => resolve(self.root, reference)?,
                    None => part,
                };
                if let Value::Object(part) = part {
                    merge(&mut merged, part);
                }
            }
            return self.value(&Value::Object(merged), rng, depth + 1);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = obj.get(key) {
                if branches.is_empty() {
                    return Err(DrawError::Unsatisfiable(format!("an empty `{key}` allows no value")));
                }
                let branch = self.pick_branch(branches, rng, depth);
                let mut rest = obj.clone();
                rest.remove(key);
                // Keywords beside the branches (a `type`, a description) apply too.
                let merged = match branch {
                    Value::Object(b) if rest.keys().any(|k| !is_annotation(k)) => {
                        let mut merged = rest;
                        let b = match b.get("$ref").and_then(Value::as_str) {
                            Some(r) => resolve(self.root, r)?.as_object().cloned().unwrap_or_default(),
                            None => b.clone(),
                        };
                        merge(&mut merged, &b);
                        Value::Object(merged)
                    }
                    other => other.clone(),
                };
                return self.value(&merged, rng, depth + 1);
            }
        }
        let types: Vec<&str> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => implied_type(obj).into_iter().collect(),
        };
        if types.is_empty() {
            return Ok(any_value(rng, depth));
        }
        let chosen = self.pick_type(&types, rng, depth);
        match chosen {
            "null" => Ok(Value::Null),
            "boolean" => Ok(Value::Bool(rng.one_in(2))),
            "integer" => self.integer(obj, rng),
            "number" => self.number(obj, rng),
            "string" => self.string(obj, rng),
            "array" => self.array(obj, rng, depth),
            "object" => self.object(obj, rng, depth),
            other => Err(DrawError::Unsupported(format!("unknown type {other:?}"))),
        }
    }

    fn pick_type<'t>(&self, types: &[&'t str], rng: &mut Rng, depth: usize) -> &'t str {
        let others: Vec<&str> = types.iter().copied().filter(|t| *t != "null").collect();
        let nullable = others.len() < types.len();
        if others.is_empty() || (nullable && (depth >= SOFT_DEPTH || rng.one_in(4))) {
            return "null";
        }
        others[rng.index(others.len())]
    }

    /// One branch of `anyOf`/`oneOf`; deep down, a branch without a reference, so that
    /// recursive types end.
    fn pick_branch<'b>(&self, branches: &'b [Value], rng: &mut Rng, depth: usize) -> &'b Value {
        if depth >= SOFT_DEPTH {
            let flat: Vec<&Value> = branches.iter().filter(|b| b.get("$ref").is_none()).collect();
            if let Some(b) = flat.get(rng.index(flat.len())) {
                return b;
            }
        }
        &branches[rng.index(branches.len())]
    }

    fn integer(&mut self, obj: &Map<String, Value>, rng: &mut Rng) -> Result<Value, DrawError> {
        let (mut lo, mut hi) = format_range(obj.get("format").and_then(Value::as_str));
        // `as` saturates, so bounds beyond 128 bits stay bounds.
        if let Some(m) = num(obj, "minimum") {
            lo = lo.max(m.ceil() as i128);
        }
        if let Some(m) = num(obj, "exclusiveMinimum") {
            lo = lo.max(m.floor() as i128 + 1);
        }
        if let Some(m) = num(obj, "maximum") {
            hi = hi.min(m.floor() as i128);
        }
        if let Some(m) = num(obj, "exclusiveMaximum") {
            hi = hi.min(m.ceil() as i128 - 1);
        }
        if lo > hi {
            return Err(DrawError::Unsatisfiable(format!("no integer lies between {lo} and {hi}")));
        }
        let (lo, hi) = (lo.max(i64::MIN.into()), hi.min(u64::MAX.into()));
        if lo > hi {
            return Err(DrawError::Unsupported(format!("integers between {lo} and {hi} do not fit in 64 bits")));
        }
        let mut v = draw_integer(rng, lo, hi);
        if let Some(step) = num(obj, "multipleOf").filter(|m| m.fract() == 0.0 && *m >= 1.0) {
            let step = step as i128;
            v -= v.rem_euclid(step);
            if v < lo {
                v = v.saturating_add(step);
            }
        }
        Ok(integer_value(v))
    }

    fn number(&mut self, obj: &Map<String, Value>, rng: &mut Rng) -> Result<Value, DrawError> {
        let limit =
            if obj.get("format").and_then(Value::as_str) == Some("float") { f64::from(f32::MAX) } else { 1e300 };
        let lo = num(obj, "minimum").or_else(|| num(obj, "exclusiveMinimum")).unwrap_or(-limit).max(-limit);
        let hi = num(obj, "maximum").or_else(|| num(obj, "exclusiveMaximum")).unwrap_or(limit).min(limit);
        let open_lo = num(obj, "minimum").is_none() && num(obj, "exclusiveMinimum").is_some();
        let open_hi = num(obj, "maximum").is_none() && num(obj, "exclusiveMaximum").is_some();
        if lo > hi || (lo == hi && (open_lo || open_hi)) {
            return Err(DrawError::Unsatisfiable(format!("no number lies between {lo} and {hi}")));
        }
        // A third of the time a whole number, as models and people often write.
        if rng.one_in(3) && hi - lo >= 2.0 && num(obj, "multipleOf").is_none() {
            let ilo = ((lo.ceil() as i128) + i128::from(open_lo)).max(i64::MIN.into());
            let ihi = ((hi.floor() as i128) - i128::from(open_hi)).min(u64::MAX.into());
            if ilo <= ihi {
                return Ok(integer_value(draw_integer(rng, ilo, ihi)));
            }
        }
        let small = (lo.max(-1000.0), hi.min(1000.0));
        let v = match rng.below(8) {
            0 if !open_lo => lo,
            1 if !open_hi => hi,
            2 if lo <= 0.0 && 0.0 <= hi => 0.0,
            3..=5 if small.0 < small.1 => small.0 + rng.unit() * (small.1 - small.0),
            _ => lo + rng.unit() * (hi - lo),
        };
        let v =
            if let Some(step) = num(obj, "multipleOf").filter(|m| *m > 0.0) { (v / step).round() * step } else { v };
        let v = if (open_lo && v <= lo) || (open_hi && v >= hi) { lo / 2.0 + hi / 2.0 } else { v };
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| DrawError::Unsupported(format!("the bounds {lo} and {hi} give no finite number")))
    }

    fn string(&mut self, obj: &Map<String, Value>, rng: &mut Rng) -> Result<Value, DrawError> {
        if let Some(pattern) = obj.get("pattern").and_then(Value::as_str) {
            let parsed = self.patterns.entry(pattern.to_owned()).or_insert_with(|| Pattern::parse(pattern));
            return match parsed {
                Ok(p) => Ok(Value::String(p.draw(rng))),
                Err(why) => Err(DrawError::Unsupported(why.clone())),
            };
        }
        let min = count(obj, "minLength").unwrap_or(0);
        let max = count(obj, "maxLength");
        if min > MOST_DEMANDED {
            return Err(too_much("minLength", min));
        }
        if max.is_some_and(|max| min > max) {
            return Err(DrawError::Unsatisfiable(format!("minLength {min} is above maxLength {}", max.unwrap_or(0))));
        }
        if let Some(format) = obj.get("format").and_then(Value::as_str)
            && let Some(sample) = format_sample(format, rng)
        {
            let n = sample.chars().count();
            if n >= min && max.is_none_or(|max| n <= max) {
                return Ok(Value::String(sample));
            }
        }
        if !self.dictionary.is_empty() && rng.one_in(3) {
            let word = mutate(&self.dictionary[rng.index(self.dictionary.len())], rng);
            let n = word.chars().count();
            if n >= min && max.is_none_or(|max| n <= max) {
                return Ok(Value::String(word));
            }
        }
        let max = max.unwrap_or(if rng.one_in(16) { min + 256 } else { min + 24 });
        let len = match rng.below(6) {
            0 => min,
            1 => max.min(min + LONGEST_STRING),
            _ => min + rng.index(max.min(min + 24) - min + 1),
        };
        Ok(Value::String(random_string(rng, len)))
    }

    fn array(&mut self, obj: &Map<String, Value>, rng: &mut Rng, depth: usize) -> Result<Value, DrawError> {
        let min = count(obj, "minItems").unwrap_or(0);
        let max = count(obj, "maxItems");
        if min > MOST_DEMANDED {
            return Err(too_much("minItems", min));
        }
        if max.is_some_and(|max| min > max) {
            return Err(DrawError::Unsatisfiable(format!("minItems {min} is above maxItems {}", max.unwrap_or(0))));
        }
        let prefix: Vec<Value> = match (obj.get("prefixItems"), obj.get("items")) {
            (Some(Value::Array(p)), _) | (None, Some(Value::Array(p))) => p.clone(),
            _ => Vec::new(),
        };
        let rest = match obj.get("items") {
            Some(Value::Array(_)) | None => obj.get("additionalItems").cloned().unwrap_or(Value::Bool(true)),
            Some(items) => items.clone(),
        };
        let max = max.unwrap_or(min + 4);
        let mut len = if depth >= SOFT_DEPTH {
            min
        } else {
            match rng.below(5) {
                0 => min,
                1 if max - min <= 64 => max,
                _ => min + rng.index(max.min(min + 4) - min + 1),
            }
        };
        if rest == Value::Bool(false) {
            if min > prefix.len() {
                return Err(DrawError::Unsatisfiable(format!(
                    "minItems {min} needs more items than the {} that `items: false` allows",
                    prefix.len()
                )));
            }
            len = len.min(prefix.len());
        }
        let unique = obj.get("uniqueItems") == Some(&Value::Bool(true));
        let mut items = Vec::with_capacity(len);
        for i in 0..len {
            let schema = prefix.get(i).unwrap_or(&rest);
            let mut item = self.value(schema, rng, depth + 1)?;
            for _ in 0..8 {
                if !unique || !items.contains(&item) {
                    break;
                }
                item = self.value(schema, rng, depth + 1)?;
            }
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn object(&mut self, obj: &Map<String, Value>, rng: &mut Rng, depth: usize) -> Result<Value, DrawError> {
        let empty = Map::new();
        let properties = obj.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let additional = obj.get("additionalProperties").cloned().unwrap_or(Value::Bool(true));
        let extra_allowed = additional != Value::Bool(false);
        let mut out = Map::new();
        for (name, schema) in properties {
            if required.contains(&name.as_str()) || (depth < SOFT_DEPTH && rng.one_in(2)) {
                out.insert(name.clone(), self.value(schema, rng, depth + 1)?);
            }
        }
        for name in required.iter().filter(|n| !properties.contains_key(**n)) {
            out.insert((*name).to_owned(), self.value(&additional, rng, depth + 1)?);
        }
        let min = count(obj, "minProperties").unwrap_or(0);
        if min > MOST_DEMANDED {
            return Err(too_much("minProperties", min));
        }
        let want_extra = extra_allowed && depth < SOFT_DEPTH && rng.one_in(4);
        let mut extra = 0;
        while (want_extra && extra < 1 + rng.index(2)) || out.len() < min {
            if let Some((name, schema)) = properties.iter().find(|(n, _)| !out.contains_key(*n)) {
                out.insert(name.clone(), self.value(schema, rng, depth + 1)?);
            } else if extra_allowed {
                let name = (0..).map(|i| format!("extra_{i}")).find(|n| !out.contains_key(n)).unwrap_or_default();
                out.insert(name, self.value(&additional, rng, depth + 1)?);
            } else {
                return Err(DrawError::Unsatisfiable(format!(
                    "minProperties {min} is more than the properties the schema allows"
                )));
            }
            extra += 1;
        }
        if let Some(max) = count(obj, "maxProperties") {
            let optional: Vec<String> = out.keys().filter(|k| !required.contains(&k.as_str())).cloned().collect();
            for name in optional {
                if out.len() <= max {
                    break;
                }
                out.remove(&name);
            }
        }
        Ok(Value::Object(out))
    }
}

/// Keywords that say something about a schema without constraining values.
fn is_annotation(key: &str) -> bool {
    matches!(
        key,
        "description" | "title" | "default" | "examples" | "$comment" | "deprecated" | "readOnly" | "writeOnly"
    )
}

/// An integer in `lo..=hi`, with the ends, zero and small numbers often (`lo` when empty).
fn draw_integer(rng: &mut Rng, lo: i128, hi: i128) -> i128 {
    if hi < lo {
        return lo;
    }
    let small = (lo.max(-100), hi.min(100));
    match rng.below(8) {
        0 => lo,
        1 => hi,
        2 => 0.clamp(lo, hi),
        3..=5 if small.0 <= small.1 => rng.in_range(small.0, small.1),
        _ => rng.in_range(lo, hi),
    }
}

/// A short description of a value for messages: whole when short, cut with its size when long.
pub(crate) fn describe_value(value: &Value, limit: usize) -> String {
    let text = value.to_string();
    if text.len() <= limit {
        return text;
    }
    let cut = (0..=limit).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    format!("{}... ({} bytes)", &text[..cut], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn draws(schema: &Value, n: u64) -> Vec<Value> {
        (0..n).map(|i| Generator::new(schema).draw(&mut Rng::for_case(1, "t", i)).unwrap()).collect()
    }

    #[test]
    fn same_seed_same_values_other_seed_other_values() {
        let schema = json!({"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"}}});
        assert_eq!(draws(&schema, 20), draws(&schema, 20));
        let other: Vec<Value> =
            (0..20).map(|i| Generator::new(&schema).draw(&mut Rng::for_case(2, "t", i)).unwrap()).collect();
        assert_ne!(draws(&schema, 20), other);
    }

    #[test]
    fn bounds_lengths_and_formats_hold() {
        let schema = json!({
            "type": "object",
            "properties": {
                "u8": {"type": "integer", "format": "uint8", "minimum": 0},
                "i": {"type": "integer", "minimum": -5, "exclusiveMaximum": 5},
                "x": {"type": "number", "minimum": 0.5, "maximum": 2.5},
                "s": {"type": "string", "minLength": 2, "maxLength": 4},
                "tags": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2},
                "mode": {"enum": ["a", "b"]},
                "opt": {"type": ["string", "null"]}
            },
            "required": ["u8", "i", "x", "s", "tags", "mode", "opt"],
            "additionalProperties": false
        });
        for v in draws(&schema, 300) {
            let o = v.as_object().unwrap();
            assert_eq!(o.len(), 7, "{v}");
            assert!(o["u8"].as_u64().unwrap() <= 255);
            assert!((-5..5).contains(&o["i"].as_i64().unwrap()), "{v}");
            assert!((0.5..=2.5).contains(&o["x"].as_f64().unwrap()), "{v}");
            assert!((2..=4).contains(&o["s"].as_str().unwrap().chars().count()), "{v}");
            assert!((1..=2).contains(&o["tags"].as_array().unwrap().len()));
            assert!(["a", "b"].contains(&o["mode"].as_str().unwrap()));
            assert!(o["opt"].is_null() || o["opt"].is_string());
        }
    }

    #[test]
    fn boundaries_come_up() {
        let schema = json!({"type": "integer", "minimum": 3, "maximum": 1000});
        let all = draws(&schema, 64);
        assert!(all.contains(&json!(3)) && all.contains(&json!(1000)), "{all:?}");
    }

    #[test]
    fn references_and_one_of_as_schemars_writes_them() {
        let schema = json!({
            "type": "object",
            "properties": {
                "unit": {"$ref": "#/$defs/Unit"},
                "node": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}
            },
            "required": ["unit", "node"],
            "$defs": {
                "Unit": {"oneOf": [{"type": "string", "const": "m"}, {"type": "string", "const": "s"}]},
                "Node": {
                    "type": "object",
                    "properties": {"next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
                    "required": ["next"]
                }
            }
        });
        for v in draws(&schema, 100) {
            assert!(v["unit"] == "m" || v["unit"] == "s", "{v}");
        }
    }

    #[test]
    fn hostile_schemas_are_declined_not_obeyed() {
        for schema in [
            json!({"type": "string", "minLength": 1_000_000_000u64}),
            json!({"type": "array", "minItems": 1_000_000_000u64}),
            json!({"type": "integer", "maximum": -1e30}),
            json!({"type": "number", "maximum": -1e30}),
            json!({"type": "string", "pattern": "((a{1000}){1000}){1000}"}),
        ] {
            let got = Generator::new(&schema).draw(&mut Rng::for_case(1, "t", 0));
            if let Ok(v) = got {
                assert!(v.to_string().len() < 4 << 20, "{schema}");
            }
        }
    }

    #[test]
    fn impossible_and_unsupported_schemas_say_which() {
        let bad = json!({"type": "string", "minLength": 5, "maxLength": 2});
        let e = Generator::new(&bad).draw(&mut Rng::for_case(1, "t", 0)).unwrap_err();
        assert!(matches!(e, DrawError::Unsatisfiable(_)), "{e}");
        let remote = json!({"$ref": "https://example.com/s.json"});
        let e = Generator::new(&remote).draw(&mut Rng::for_case(1, "t", 0)).unwrap_err();
        assert!(matches!(e, DrawError::Unsupported(_)), "{e}");
    }

    #[test]
    fn patterns_are_followed() {
        let schema = json!({"type": "string", "pattern": "^[A-Z]{3}[0-9]$"});
        for v in draws(&schema, 50) {
            let s = v.as_str().unwrap();
            assert!(s.len() == 4 && s[..3].bytes().all(|b| b.is_ascii_uppercase()), "{s}");
        }
    }

    #[test]
    fn dictionary_words_come_up_whole_and_changed() {
        let schema = json!({"type": "string", "maxLength": 40});
        let all: Vec<Value> = (0..64)
            .map(|i| {
                let mut g = Generator::new(&schema).with_dictionary(strings_in(&json!({"s": ["c1ccccc1"]})));
                g.draw(&mut Rng::for_case(1, "t", i)).unwrap()
            })
            .collect();
        assert!(all.contains(&json!("c1ccccc1")), "{all:?}");
        assert!(all.iter().any(|v| v.as_str().is_some_and(|s| s != "c1ccccc1" && s.contains("ccc"))), "{all:?}");
    }

    /// A random schema-like value: real keywords, with values of the right type or not.
    fn random_schema(rng: &mut Rng, depth: usize) -> Value {
        const KEYS: &[&str] = &[
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "prefixItems",
            "minLength",
            "maxLength",
            "pattern",
            "format",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
            "minItems",
            "maxItems",
            "uniqueItems",
            "enum",
            "const",
            "anyOf",
            "oneOf",
            "allOf",
            "$ref",
            "minProperties",
            "maxProperties",
            "not",
        ];
        const TYPES: &[&str] = &["object", "string", "integer", "number", "boolean", "array", "null", "bogus"];
        if depth > 3 || rng.one_in(6) {
            return [json!(true), json!(false), json!({}), json!(5), json!("x")][rng.index(5)].clone();
        }
        let mut obj = Map::new();
        for _ in 0..rng.below(5) {
            let key = KEYS[rng.index(KEYS.len())];
            let value = match rng.below(9) {
                0 => json!(TYPES[rng.index(TYPES.len())]),
                1 => json!([TYPES[rng.index(TYPES.len())], "null"]),
                2 => json!(rng.in_range(-5, 40) as i64),
                3 => json!(-1e30),
                4 => json!(["a", "b"]),
                5 => json!({"a": random_schema(rng, depth + 1), "b": random_schema(rng, depth + 1)}),
                6 => json!([random_schema(rng, depth + 1), random_schema(rng, depth + 1)]),
                7 => json!(["#", "#/$defs/X", "#/nope", "(", "^[a-z]{2}$", "https://x"][rng.index(6)]),
                _ => random_schema(rng, depth + 1),
            };
            obj.insert(key.to_owned(), value);
        }
        if rng.one_in(3) {
            obj.insert("$defs".to_owned(), json!({"X": random_schema(rng, depth + 1)}));
        }
        Value::Object(obj)
    }

    #[test]
    fn arbitrary_schemas_never_panic_the_generator_or_the_violations() {
        for case in 0..3000 {
            let schema = random_schema(&mut Rng::for_case(9, "schema", case), 0);
            let mut generator = Generator::new(&schema).with_dictionary(["seed".to_owned()]);
            for draw in 0..4 {
                if let Ok(v) = generator.draw(&mut Rng::for_case(1, "t", case * 4 + draw)) {
                    let _ = violations(&schema, &v);
                }
            }
        }
    }

    #[test]
    fn long_values_are_described_with_their_size() {
        let v = Value::String("x".repeat(500));
        let d = describe_value(&v, 20);
        assert!(d.ends_with("(502 bytes)"), "{d}");
        assert_eq!(describe_value(&json!({"a": 1}), 20), r#"{"a":1}"#);
    }
}
