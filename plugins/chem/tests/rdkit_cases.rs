//! Replays every case of `fixtures/rdkit_cases.tsv` (real molecules from public sets, seeded
//! mutations of them, and hand-written hard SMILES, each with RDKit's verdict, recorded by
//! `tools/make_rdkit_cases.py`) through the plugin, and requires RDKit's answer: the same
//! validity and, for a valid SMILES, the same formula, atom count and weight. The only
//! exceptions are the deliberate differences of [`deliberate`], each with its reason (they are
//! listed in the plugin's README too). RDKit is not needed to run this test.
//!
//! `cargo test -p chem --test rdkit_cases -- --nocapture` prints the agreement by kind.

use std::collections::BTreeMap;

use chem::{molecular_weight, validate_smiles};

const CASES: &str = include_str!("fixtures/rdkit_cases.tsv");

/// RDKit's verdict on one SMILES.
#[derive(Debug, PartialEq)]
enum Rdkit<'a> {
    Invalid,
    Valid { formula: &'a str, atom_count: usize, weight: f64 },
}

struct Case<'a> {
    line: usize,
    kind: &'a str,
    smiles: &'a str,
    rdkit: Rdkit<'a>,
}

fn cases() -> Vec<Case<'static>> {
    let mut cases = Vec::new();
    for (i, line) in CASES.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let rdkit = match fields[..] {
            [_, _, "invalid"] => Rdkit::Invalid,
            [_, _, formula, atoms, weight] => Rdkit::Valid {
                formula,
                atom_count: atoms.parse().unwrap_or_else(|e| panic!("line {}: atom count {atoms:?}: {e}", i + 1)),
                weight: weight.parse().unwrap_or_else(|e| panic!("line {}: weight {weight:?}: {e}", i + 1)),
            },
            _ => panic!("line {} of rdkit_cases.tsv has {} fields: {line:?}", i + 1, fields.len()),
        };
        cases.push(Case { line: i + 1, kind: fields[0], smiles: fields[1], rdkit });
    }
    cases
}

/// The plugin's verdict, in RDKit's terms, or the error message when it calls the SMILES invalid.
fn plugin(smiles: &str) -> Result<(String, usize, f64), String> {
    let v = validate_smiles(smiles).map_err(|e| format!("tool error: {}", e.message))?;
    if !v.valid {
        return Err(v.error.unwrap_or_default());
    }
    let w = molecular_weight(smiles).map_err(|e| format!("molecular_weight fails on a valid SMILES: {}", e.message))?;
    let formula = v.formula.unwrap_or_default();
    if w.formula != formula {
        return Ok((format!("{formula} (molecular_weight says {})", w.formula), v.atom_count.unwrap_or(0), 0.0));
    }
    Ok((formula, v.atom_count.unwrap_or(0), w.molecular_weight))
}

/// Where the plugin deliberately answers differently from RDKit: the reason, and whether the
/// plugin's answer is the one intended (an invalid SMILES whose message says why).
fn deliberate(case: &Case<'_>, got: &Result<(String, usize, f64), String>) -> Option<(&'static str, bool)> {
    let trimmed = case.smiles.trim();
    if trimmed.contains(char::is_whitespace) {
        // RDKit stops at the first blank and reads the rest as the molecule's name, so
        // `CCO ethanol` is ethanol and `O C(C)C` is water. An agent that wrote a space inside a
        // SMILES meant something; the plugin refuses and says where the SMILES text stops.
        let intended = matches!(got, Err(e) if e.starts_with("text after the SMILES at position "));
        return Some(("whitespace inside the SMILES is refused; RDKit reads what follows it as a title", intended));
    }
    if matches!(case.rdkit, Rdkit::Valid { atom_count: 0, .. }) {
        // RDKit reads an empty string (or only dots) as a molecule without atoms.
        let intended = matches!(got, Err(e) if e.starts_with("empty SMILES at position "));
        return Some(("a SMILES without atoms is invalid; RDKit returns an empty molecule", intended));
    }
    None
}

fn agrees(case: &Case<'_>, got: &Result<(String, usize, f64), String>) -> bool {
    match (&case.rdkit, got) {
        (Rdkit::Invalid, Err(_)) => true,
        (Rdkit::Valid { formula, atom_count, weight }, Ok((f, n, w))) => {
            // The plugin rounds to 3 decimals; RDKit's value is recorded with 5.
            f == formula && n == atom_count && (w - weight).abs() < 0.0006
        }
        _ => false,
    }
}

#[test]
fn the_plugin_agrees_with_rdkit_on_every_recorded_case() {
    let cases = cases();
    assert!(cases.len() >= 20_000, "only {} cases", cases.len());
    let mut by_kind: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        let got = plugin(case.smiles);
        let group = case.kind.split('+').next().unwrap_or(case.kind).to_owned();
        let entry = by_kind.entry(group).or_default();
        entry.0 += 1;
        if let Some((reason, intended)) = deliberate(case, &got) {
            entry.2 += 1;
            if !intended {
                failures.push(format!(
                    "line {} {} {:?}: deliberate difference ({reason}) not as intended: got {got:?}",
                    case.line, case.kind, case.smiles
                ));
            }
        } else if !agrees(case, &got) {
            entry.1 += 1;
            failures.push(format!(
                "line {} {} {:?}: RDKit {:?}, plugin {got:?}",
                case.line, case.kind, case.smiles, case.rdkit
            ));
        }
    }
    let total = cases.len();
    let disagreements: usize = by_kind.values().map(|v| v.1).sum();
    let deliberate: usize = by_kind.values().map(|v| v.2).sum();
    println!("kind: cases, disagreements, deliberate differences");
    for (kind, (n, d, x)) in &by_kind {
        println!("{kind}: {n}, {d}, {x}");
    }
    println!(
        "total: {total} cases, {disagreements} disagreements ({:.2} %), {deliberate} deliberate differences",
        100.0 * disagreements as f64 / total as f64
    );
    assert!(failures.is_empty(), "{} of {total} cases differ from RDKit:\n{}", failures.len(), failures.join("\n"));
}

/// `molecular_weight` refuses, by its schema, what does not look like a SMILES ([`chem::SMILES_SHAPE`]):
/// that shape must never refuse a SMILES RDKit reads, or the tool could not weigh it.
#[test]
fn every_smiles_rdkit_reads_has_the_declared_shape() {
    let shape = regex::Regex::new(chem::SMILES_SHAPE).expect("SMILES_SHAPE compiles");
    let refused: Vec<String> = cases()
        .iter()
        .filter(|c| c.rdkit != Rdkit::Invalid && !shape.is_match(c.smiles))
        .map(|c| format!("line {}: {}", c.line, c.smiles))
        .collect();
    assert!(refused.is_empty(), "{} valid SMILES refused by the shape:\n{}", refused.len(), refused.join("\n"));
    for word in ["benzene", "12", "0.5", "round", "day", "SMILES", "aspirin"] {
        assert!(!shape.is_match(word), "{word:?} looks like a SMILES to the shape");
    }
}
