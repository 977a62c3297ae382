//! A tool function's doc comment split into the tool's description and its parameters' docs.
//!
//! The convention is rustdoc's own: the text before a `# Arguments` heading describes the
//! tool; under it, one bullet per parameter, `` * `name` - what it is `` (or `-` bullets, or
//! `:` after the name), continued on the lines below. Another heading ends the section.

use std::collections::BTreeMap;

use syn::{Attribute, Expr, ExprLit, Lit, Meta};

/// The description and the parameters' docs.
pub(crate) struct Docs {
    pub(crate) description: String,
    pub(crate) params: BTreeMap<String, String>,
}

/// The lines of the `#[doc = "..."]` attributes (which `///` comments are), without the one
/// space after `///`.
fn lines(attrs: &[Attribute]) -> Vec<String> {
    let mut lines = Vec::new();
    for attr in attrs {
        if let Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("doc")
            && let Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) = &nv.value
        {
            for line in text.value().split('\n') {
                lines.push(line.strip_prefix(' ').unwrap_or(line).to_owned());
            }
        }
    }
    lines
}

/// `` * `name` - text `` as `(name, text)`.
fn bullet(line: &str) -> Option<(String, String)> {
    let rest = line.trim_start().strip_prefix(['*', '-'])?.trim_start().strip_prefix('`')?;
    let (name, text) = rest.split_once('`')?;
    let text = text.trim_start().trim_start_matches([':', '-', '\u{2013}', '\u{2014}']).trim();
    Some((name.trim().to_owned(), text.to_owned()))
}

/// Splits the doc comment of `attrs`.
pub(crate) fn split(attrs: &[Attribute]) -> Docs {
    let mut description = Vec::new();
    let mut params: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut in_arguments = false;
    for line in lines(attrs) {
        let trimmed = line.trim();
        if let Some(heading) = trimmed.strip_prefix('#') {
            let heading = heading.trim_start_matches('#').trim();
            in_arguments = heading.eq_ignore_ascii_case("arguments") || heading.eq_ignore_ascii_case("parameters");
            current = None;
            if in_arguments {
                continue;
            }
        }
        if !in_arguments {
            description.push(line);
        } else if let Some((name, text)) = bullet(&line) {
            params.insert(name.clone(), text);
            current = Some(name);
        } else if let (Some(name), false) = (&current, trimmed.is_empty()) {
            let doc = params.entry(name.clone()).or_default();
            doc.push(' ');
            doc.push_str(trimmed);
        }
    }
    Docs { description: description.join("\n").trim().to_owned(), params }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(text: &str) -> Docs {
        let attrs: Vec<Attribute> = text.lines().map(|l| syn::parse_quote!(#[doc = #l])).collect();
        split(&attrs)
    }

    #[test]
    fn description_and_parameters() {
        let d = docs(
            " Greets a person.\n\n Politely.\n\n # Arguments\n * `name` - whom to greet,\n   by name.\n - `times`: how often\n\n # Examples\n more",
        );
        assert_eq!(d.description, "Greets a person.\n\nPolitely.\n\n# Examples\nmore");
        assert_eq!(d.params["name"], "whom to greet, by name.");
        assert_eq!(d.params["times"], "how often");
    }

    #[test]
    fn no_arguments_section() {
        let d = docs(" Only a description.");
        assert_eq!(d.description, "Only a description.");
        assert!(d.params.is_empty());
    }
}
