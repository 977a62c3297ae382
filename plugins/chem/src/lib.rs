//! `chem`: a harness plugin that checks SMILES strings and computes molecular formulas and
//! weights, matching RDKit (the field's reference toolkit) on what it reports.
//!
//! Two pure tools:
//!
//! * `validate_smiles {smiles}` returns `{valid, atom_count, formula, error}`. An invalid
//!   SMILES is not a tool error: `valid` is false and `error` gives the 0-based character
//!   position and the reason.
//! * `molecular_weight {smiles}` returns `{molecular_weight, formula}`; here an invalid SMILES
//!   is a tool error, with the same position and reason, and a string without the shape of a
//!   SMILES ([`SMILES_SHAPE`]: a name, a number) is refused by the schema before it is read.
//!
//! What is counted:
//!
//! * `atom_count` is RDKit's `Chem.MolFromSmiles(s).GetNumAtoms()`: the atoms of the graph,
//!   i.e. every non-hydrogen atom and `*`, plus the `[H]` atoms RDKit keeps (isotopic like
//!   `[2H]`, hydride `[H-]`, unbonded, bonded to H or `*`, or needed for stereo as in
//!   `[H]/C=C/F`). Implicit hydrogens, bracket counts like the H3 of `[NH3+]`, and a plain
//!   `[H]` bonded to one other atom are not atoms of the graph.
//! * `formula` is RDKit's `CalcMolFormula`: all hydrogens included, C first, then H, then the
//!   other elements alphabetically, then the net charge (`C6H6`, `H4N+`, `Fe+3`). RDKit puts H
//!   right after C, or first when there is no carbon (`H2O`, `H4B-`): not strict Hill order,
//!   which would write `BH4-`.
//! * `molecular_weight` is RDKit's `Descriptors.MolWt` rounded to 3 decimals: average atomic
//!   weights from RDKit's periodic table (H 1.008, C 12.011, N 14.007, O 15.999, S 32.067, ...)
//!   for all 118 elements, and an isotope's exact mass on a labelled atom (`[13CH4]` is
//!   17.035; an isotope RDKit does not know weighs its mass number, as in RDKit); `*` weighs 0.
//!
//! The SMILES grammar is read as RDKit's `MolFromSmiles` reads it, by the private `reader`
//! module (bracket aromatics `si`, `as`, `se`, `te`; `[#6]`; `%(n)` ring numbers; `~`, `$`,
//! `->`, `<-` bonds; `@SP`/`@TB`/`@OH` stereo classes). Hydrogens, valences and aromaticity
//! are then worked out as RDKit does (hydrogen removal, clean-up of nitro-like groups, dative
//! bonds to metals, RDKit's valence model, kekulization, aromaticity perceived again on the
//! Kekulé structure with the valence check after it, stereo marks that mark nothing), in
//! [`smiles`] and the private `sanitize` module. RDKit quirks are kept, e.g. a bonded `[H+]`
//! is folded into its neighbour and its charge is lost (`[H+]C` is `CH4`).
//!
//! Deliberate differences from RDKit (see the plugin's README): a blank inside the SMILES is
//! refused with `text after the SMILES at position N` (RDKit reads what follows it as the
//! molecule's name), and the empty string is invalid (RDKit reads it as an empty molecule).
#![forbid(unsafe_code)]

mod atom;
mod elements;
mod error;
mod kekule;
mod reader;
mod sanitize;
pub mod smiles;

use harness_sdk::schemars::JsonSchema;
use harness_sdk::serde::{Deserialize, Serialize};
use harness_sdk::serde_json::json;
use harness_sdk::{Effects, NoConfig, Plugin, Tool, ToolError};

use crate::smiles::{MAX_SMILES_CHARS, ParseError};

/// Arguments of `validate_smiles`: any string, since saying that one is no SMILES is its job.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct SmilesArgs {
    /// A SMILES string, e.g. `c1ccccc1` (benzene) or `CC(=O)O` (acetic acid).
    #[schemars(length(max = MAX_SMILES_CHARS))]
    pub smiles: String,
}

/// The shape of a SMILES as `molecular_weight` declares it: an atom first, then only the
/// characters SMILES is written in (atoms, bonds, RDKit's dative `->` and any-bond `~`,
/// branches, ring digits, bracket atoms), up to a blank, after which RDKit reads a name. It
/// refuses a name or a number before the parser sees it, and it tells a harness which words
/// of a request could be the SMILES: given "round 2/3 to 2 decimal places", a small model
/// asked for the weight of `2`, and Gemma 3 270M for that of `benzene`, where the request
/// held `c1ccccc1`. A string of this shape may still be invalid (`CC(C`): that is the
/// parser's tool error, with the position.
pub const SMILES_SHAPE: &str = r"^\s*(?:Cl|Br|[BCNOPSFIbcnops*]|\[[^\]]*\])(?:Cl|Br|[BCNOPSFIbcnops*]|\[[^\]]*\]|[0-9%=#$:/\\().@+\-~<>])*(?:\s.*)?$";

/// Arguments of `molecular_weight`: a SMILES of [`SMILES_SHAPE`].
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "harness_sdk::schemars")]
pub struct WeightArgs {
    /// A SMILES string, e.g. `c1ccccc1` (benzene) or `CC(=O)O` (acetic acid); not a name.
    #[schemars(length(max = MAX_SMILES_CHARS), regex(pattern = SMILES_SHAPE))]
    pub smiles: String,
}

/// Result of `validate_smiles`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde")]
#[schemars(crate = "harness_sdk::schemars")]
pub struct Validation {
    /// Whether the SMILES describes a molecule.
    pub valid: bool,
    /// Atoms in the molecular graph as RDKit's GetNumAtoms() counts them: non-hydrogen atoms
    /// plus [H] atoms RDKit keeps (e.g. [2H]); implicit hydrogens are not counted. Null when
    /// invalid.
    pub atom_count: Option<usize>,
    /// Molecular formula with all hydrogens and the net charge, in RDKit's order (C, H, then
    /// alphabetical), e.g. C6H6 or H4N+. Null when invalid.
    pub formula: Option<String>,
    /// Null when valid; otherwise the problem and its 0-based character position.
    pub error: Option<String>,
}

/// Result of `molecular_weight`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(crate = "harness_sdk::serde")]
#[schemars(crate = "harness_sdk::schemars")]
pub struct MolecularWeight {
    /// Average molecular weight in g/mol (daltons), rounded to 3 decimals.
    pub molecular_weight: f64,
    /// Molecular formula, as `validate_smiles` gives it.
    pub formula: String,
}

/// The `chem` plugin; it holds no state.
pub struct Chem;

/// Checks `smiles`; an invalid SMILES is a `valid: false` result, not an error.
pub fn validate_smiles(smiles: &str) -> Result<Validation, ToolError> {
    match smiles::parse(smiles) {
        Ok(molecule) => Ok(Validation {
            valid: true,
            atom_count: Some(molecule.atom_count()),
            formula: Some(molecule.formula()),
            error: None,
        }),
        Err(ParseError::Invalid(e)) => {
            Ok(Validation { valid: false, atom_count: None, formula: None, error: Some(e.message) })
        }
        Err(ParseError::Internal(message)) => Err(ToolError::tool_error(message)),
    }
}

/// Computes the average molecular weight and formula of `smiles`; an invalid SMILES is a tool error.
pub fn molecular_weight(smiles: &str) -> Result<MolecularWeight, ToolError> {
    let molecule = smiles::parse(smiles).map_err(|e| match e {
        ParseError::Invalid(e) => ToolError::tool_error(format!("invalid SMILES: {e}")),
        ParseError::Internal(message) => ToolError::tool_error(message),
    })?;
    // RDKit's average weights have 3 decimals; more digits would only be floating-point noise.
    let weight = (molecule.molecular_weight() * 1000.0).round() / 1000.0;
    Ok(MolecularWeight { molecular_weight: weight, formula: molecule.formula() })
}

impl Plugin for Chem {
    const NAME: &'static str = "chem";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "Chemistry: check SMILES strings and compute molecular formulas and weights.";
    type Config = NoConfig;

    fn init(_: NoConfig) -> Result<Self, String> {
        Ok(Chem)
    }

    fn tools() -> Vec<Tool<Self>> {
        vec![
            Tool::new(
                "validate_smiles",
                "Check a SMILES string. Returns {valid, atom_count, formula, error}. atom_count counts the \
                 atoms of the molecular graph as RDKit's GetNumAtoms() does: every non-hydrogen atom, plus \
                 hydrogens written as bracket atoms that RDKit keeps (e.g. [2H], [H][H]); implicit \
                 hydrogens are not counted (benzene c1ccccc1 has 6). formula includes all hydrogens and \
                 the net charge, in RDKit's order: C, H, then alphabetical (C6H6, H4N+). An invalid \
                 SMILES is not an error: valid is false and error gives the 0-based character position \
                 and the reason. The argument is the SMILES alone: blanks around it are ignored, but a \
                 blank inside it makes it invalid ('text after the SMILES at position N'), so write \
                 nothing after it.",
                Effects::Pure,
                |_: &Chem, args: SmilesArgs| validate_smiles(&args.smiles),
            )
            .output::<Validation>()
            // Shown to a small model as worked exchanges: a yes and a no, answered by `valid`.
            .worked_example(
                "Is CCN a valid SMILES?",
                json!({"smiles": "CCN"}),
                json!({"valid": true, "atom_count": 3, "formula": "C2H7N", "error": null}),
            )
            .worked_example(
                "Is CC(C a valid SMILES?",
                json!({"smiles": "CC(C"}),
                json!({
                    "valid": false,
                    "atom_count": null,
                    "formula": null,
                    "error": "unbalanced parentheses at position 2: this branch is never closed"
                }),
            )
            .example(
                json!({"smiles": "c1ccccc1"}),
                json!({"valid": true, "atom_count": 6, "formula": "C6H6", "error": null}),
            )
            .example(
                json!({"smiles": "C1CC"}),
                json!({
                    "valid": false,
                    "atom_count": null,
                    "formula": null,
                    "error": "unclosed ring at position 1: ring bond 1 is opened but never closed"
                }),
            ),
            Tool::new(
                "molecular_weight",
                "Average molecular weight (g/mol, rounded to 3 decimals) and formula of a SMILES string, \
                 as RDKit's Descriptors.MolWt computes it: standard atomic weights (H 1.008, C 12.011, \
                 N 14.007, O 15.999, ...) with implicit hydrogens included; an isotope-labelled atom \
                 such as [13C] or [2H] weighs its isotope's exact mass. An invalid SMILES is a tool \
                 error giving the 0-based character position and the reason. The argument is the SMILES alone: a \
                 blank inside it (e.g. a name after it) makes it invalid, and a name or a number is \
                 refused before it is read.",
                Effects::Pure,
                |_: &Chem, args: WeightArgs| molecular_weight(&args.smiles),
            )
            .output::<MolecularWeight>()
            // Shown to a small model as worked exchanges: the SMILES alone, the member asked for; the
            // weight last, as most requests ask it (a small model follows the last one shown).
            .worked_example(
                "What is the formula of carbon dioxide (O=C=O)?",
                json!({"smiles": "O=C=O"}),
                json!({"molecular_weight": 44.009, "formula": "CO2"}),
            )
            .worked_example(
                "What is the molecular weight of propane, CCC?",
                json!({"smiles": "CCC"}),
                json!({"molecular_weight": 44.097, "formula": "C3H8"}),
            )
            .worked_example(
                "How heavy is ethylene (C=C), in g/mol?",
                json!({"smiles": "C=C"}),
                json!({"molecular_weight": 28.054, "formula": "C2H4"}),
            )
            .example(json!({"smiles": "c1ccccc1"}), json!({"molecular_weight": 78.114, "formula": "C6H6"}))
            .example(
                json!({"smiles": "CC(=O)Oc1ccccc1C(=O)O"}),
                json!({"molecular_weight": 180.159, "formula": "C9H8O4"}),
            )
            .example_error(json!({"smiles": "CC(C"}), "tool_error"),
        ]
    }
}

harness_sdk::export_plugin!(Chem);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_examples_hold() {
        let chem = Chem;
        for tool in Chem::tools() {
            assert!(!tool.manifest().examples.is_empty());
            for ex in &tool.manifest().examples {
                let got = tool.call(&chem, ex.arguments.clone());
                match (&ex.result, &ex.error_code) {
                    (Some(want), _) => assert_eq!(got.as_ref().ok(), Some(want), "{:?}", ex.arguments),
                    (None, Some(code)) => assert_eq!(&got.unwrap_err().code, code),
                    (None, None) => panic!("example without an expectation"),
                }
            }
        }
    }

    #[test]
    fn invalid_smiles_is_a_result_for_validate_and_an_error_for_weight() {
        let v = validate_smiles("CXC").unwrap();
        assert!(!v.valid);
        assert_eq!(v.error.as_deref(), Some("unexpected character at position 1: 'X'"));
        let e = molecular_weight("CXC").unwrap_err();
        assert_eq!(e.code, "tool_error");
        assert_eq!(e.message, "invalid SMILES: unexpected character at position 1: 'X'");
    }

    #[test]
    fn surrounding_whitespace_is_ignored_and_inner_whitespace_refused() {
        assert_eq!(validate_smiles("CCO\n").unwrap().formula.as_deref(), Some("C2H6O"));
        assert_eq!(validate_smiles(" CCO").unwrap().formula.as_deref(), Some("C2H6O"));
        let v = validate_smiles("CCO ethanol").unwrap();
        assert!(!v.valid);
        assert!(v.error.unwrap().starts_with("text after the SMILES at position 3: "));
        let e = molecular_weight("CCO ethanol").unwrap_err();
        assert!(e.message.starts_with("invalid SMILES: text after the SMILES at position 3"), "{}", e.message);
    }

    #[test]
    fn the_descriptions_tell_a_model_about_blanks() {
        for tool in Chem::tools() {
            assert!(tool.manifest().description.contains("blank inside"), "{}", tool.manifest().name);
        }
    }

    #[test]
    fn the_descriptions_use_no_verb_of_an_arithmetic_request() {
        // A small model's shortlist matches the request's words against the descriptions:
        // "Pass the SMILES alone" and "do not add a name" offered only the chem tools for "One
        // bus pass costs $23. What do 4 passes cost?" and "add 8% sales tax to $25", and both
        // small models asked whether `4` and `8%` were valid SMILES.
        for tool in Chem::tools() {
            let manifest = tool.manifest();
            let words: Vec<String> =
                manifest.description.split(|c: char| !c.is_alphanumeric()).map(str::to_lowercase).collect();
            for verb in ["add", "pass", "sum", "total", "divide"] {
                assert!(!words.iter().any(|w| w == verb), "{}: {verb}", manifest.name);
            }
        }
    }
}
