//! Holds the plugin's results against RDKit's, recorded in `fixtures/rdkit_reference.json` by
//! `fixtures/make_rdkit_reference.py` (RDKit itself is not needed to run these tests).

use chem::Chem;
use harness_sdk::serde_json::{Value, json};
use harness_sdk::{Plugin, Tool, ToolError};

fn reference() -> Value {
    harness_sdk::serde_json::from_str(include_str!("fixtures/rdkit_reference.json")).expect("fixture is JSON")
}

fn tool(name: &str) -> Tool<Chem> {
    Chem::tools().into_iter().find(|t| t.manifest().name == name).expect("tool exists")
}

fn call(name: &str, smiles: &str) -> Result<Value, ToolError> {
    tool(name).call(&Chem, json!({ "smiles": smiles }))
}

#[test]
fn every_reference_molecule_matches_rdkit() {
    let reference = reference();
    let molecules = reference["molecules"].as_array().expect("molecules");
    assert!(molecules.len() >= 40);
    let mut failures = Vec::new();
    for m in molecules {
        let smiles = m["smiles"].as_str().expect("smiles");
        let validation = call("validate_smiles", smiles).expect("validate_smiles succeeds");
        let weight = call("molecular_weight", smiles);
        let want_wt = m["mol_wt"].as_f64().expect("mol_wt");
        let got_wt = weight.as_ref().ok().and_then(|w| w["molecular_weight"].as_f64());
        let ok = validation["valid"] == json!(true)
            && validation["error"].is_null()
            && validation["formula"] == m["formula"]
            && validation["atom_count"] == m["atom_count"]
            && weight.as_ref().is_ok_and(|w| w["formula"] == m["formula"])
            && got_wt.is_some_and(|w| (w - want_wt).abs() < 0.01);
        if !ok {
            failures.push(format!(
                "{smiles} ({}): want {} / {} atoms / {want_wt}, got {validation} and {weight:?}",
                m["name"], m["formula"], m["atom_count"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ from RDKit:\n{}",
        failures.len(),
        molecules.len(),
        failures.join("\n")
    );
}

#[test]
fn smiles_rdkit_rejects_are_invalid_with_a_position() {
    let reference = reference();
    let rejected = reference["rejected"].as_array().expect("rejected");
    for smiles in rejected.iter().map(|s| s.as_str().expect("string")) {
        let v = call("validate_smiles", smiles).expect("validate_smiles succeeds");
        assert_eq!(v["valid"], json!(false), "{smiles} should be invalid: {v}");
        assert!(v["atom_count"].is_null() && v["formula"].is_null(), "{smiles}: {v}");
        let error = v["error"].as_str().expect("an error message");
        assert!(error.contains("at position "), "{smiles}: {error}");
        let e = call("molecular_weight", smiles).expect_err("molecular_weight of an invalid SMILES fails");
        assert_eq!(e.code, "tool_error", "{smiles}");
        assert!(e.message.contains(error), "{smiles}: {}", e.message);
    }
}

fn invalid(smiles: &str) -> String {
    let v = call("validate_smiles", smiles).expect("validate_smiles succeeds");
    assert_eq!(v["valid"], json!(false), "{smiles}: {v}");
    v["error"].as_str().expect("an error message").to_owned()
}

#[test]
fn invalid_smiles_name_the_position_and_the_reason() {
    assert_eq!(invalid("C1CC"), "unclosed ring at position 1: ring bond 1 is opened but never closed");
    assert_eq!(invalid("CC%10C"), "unclosed ring at position 2: ring bond %10 is opened but never closed");
    assert_eq!(invalid("CCXC"), "unexpected character at position 2: 'X'");
    assert_eq!(invalid("CC(C"), "unbalanced parentheses at position 2: this branch is never closed");
    assert_eq!(invalid("CC)C"), "unbalanced parentheses at position 2: ')' closes no open branch");
    assert_eq!(invalid(""), "empty SMILES at position 0: there are no atoms");
    assert_eq!(invalid("   "), "empty SMILES at position 0: there are no atoms");
    assert_eq!(invalid("CC="), "unexpected end of SMILES at position 3: an atom must follow '='");
    assert_eq!(invalid("C[NH4"), "unclosed bracket atom at position 1: no ']' follows");
    assert_eq!(invalid("C(C)(C)(C)(C)C"), "invalid valence at position 0: C has valence 5, more than the 4 allowed");
    assert_eq!(invalid("[NH4]"), "invalid valence at position 0: N has valence 4, more than the 3 allowed");
    assert_eq!(invalid("[CH4+]"), "invalid valence at position 0: C+1 has valence 4, more than the 3 allowed");
    assert!(invalid("c1cccc1").starts_with("cannot kekulize the aromatic system at position 0"));
    assert!(invalid("[tx]1cccc1").starts_with("unexpected character at position 1: 't' in the bracket atom"));
    assert_eq!(
        invalid("C%01CC%01"),
        "invalid ring number at position 1: a two-digit ring number cannot start with 0; write %10 to %99, or %(n) with one to five digits"
    );
    assert_eq!(invalid("CC~"), "unexpected end of SMILES at position 3: an atom must follow '~'");
    assert!(invalid("Cn=1ccnc1").starts_with("invalid valence at position 1: N has valence 4 once its aromatic bonds"));
    assert!(invalid("c1ccccc1c2c(Cl)cccc#2Cl").starts_with("invalid valence at position 8: C has valence 6"));
    assert!(invalid("CNC(=O)Oc1ccccc1c2OCCO2").starts_with("cannot kekulize the aromatic system at position 8"));
}

#[test]
fn text_after_the_smiles_is_refused_and_blanks_around_it_are_ignored() {
    let refusal = |smiles: &str, p: usize| {
        assert_eq!(
            invalid(smiles),
            format!(
                "text after the SMILES at position {p}: a SMILES cannot contain blanks; pass only the SMILES \
                 (RDKit would stop at the blank and read the rest as the molecule's name)"
            )
        );
    };
    refusal("CCO ethanol", 3);
    refusal("O C(C)C", 1);
    refusal("CCO\tx", 3);
    refusal("C[C@ H](N)O", 4);
    for smiles in [" CCO", "CCO ", "\tCCO\n", "  CCO  "] {
        let v = call("validate_smiles", smiles).expect("validate_smiles succeeds");
        assert_eq!(v["formula"], json!("C2H6O"), "{smiles:?}: {v}");
    }
    // Positions count from the start of the string as given, blanks included.
    refusal("  CCO x", 5);
}

#[test]
fn grammar_rdkit_reads() {
    for (smiles, formula) in [
        ("[te]1cccc1", "C4H4Te"),
        ("c1cc[si]cc1", "C5H5Si"),
        ("CC~C", "C3H10"),
        ("[O-0]", "O"),
        ("C%(123)CC%(123)", "C3H6"),
        ("C0CC0", "C3H6"),
        ("[C@SP](F)(Cl)(Br)I", "CBrClFI"),
        ("C\\\\C=C\\\\C", "C4H8"),
        ("C->[Fe]", "CH4Fe"),
        ("[Fe]<-N", "H3FeN"),
        ("[#6]", "C"),
        ("[C+256]", "C"),
        ("c1ccccc1:C", "C7H8"),
        ("CC:N1CCCC1", "C6H13N"),
        ("C[Cu@@H](C)C", "C3H9Cu"),
        ("C[Cu@H](F)Cl", "CH4ClCuF"),
    ] {
        let v = call("validate_smiles", smiles).expect("validate_smiles succeeds");
        assert_eq!(v["formula"], json!(formula), "{smiles}: {v}");
    }
}

#[test]
fn molecular_weight_of_an_invalid_smiles_is_a_tool_error() {
    let e = call("molecular_weight", "C1CC").expect_err("invalid");
    assert_eq!(e.code, "tool_error");
    assert_eq!(e.message, "invalid SMILES: unclosed ring at position 1: ring bond 1 is opened but never closed");
    assert_eq!(call("molecular_weight", "").expect_err("empty").code, "tool_error");
}

#[test]
fn unknown_arguments_are_refused() {
    let e = tool("validate_smiles").call(&Chem, json!({"smiles": "C", "extra": 1})).expect_err("unknown field");
    assert_eq!(e.code, "invalid_arguments");
}
