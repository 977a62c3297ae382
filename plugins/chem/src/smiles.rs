//! Reading a SMILES string into a molecule whose hydrogens, formula and weight match RDKit's.
//!
//! [`crate::reader`] reads the syntax as RDKit does: each atom, bond, branch and ring-closure
//! number with its position, or the position of a syntax error. This module pairs the
//! ring-closure numbers, rejecting a ring bond from an atom to itself or one that doubles a
//! bond. Hydrogens, valences and aromaticity are then worked out as RDKit's `MolFromSmiles`
//! does, in [`crate::sanitize`].

use std::collections::{HashMap, HashSet};

use crate::atom::{Atom, symbol};
use crate::elements::ELEMENTS;
pub use crate::error::SmilesError;
use crate::reader::{self, Symbol};
use crate::sanitize::{self, Written, WrittenAtom, WrittenBond};

/// The longest SMILES accepted, in characters.
pub const MAX_SMILES_CHARS: usize = 4096;

/// Why [`parse`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The SMILES string is not valid (or uses a feature this crate does not support).
    Invalid(SmilesError),
    /// The SMILES could not be examined at all (the parser thread did not start).
    Internal(String),
}

/// A molecule read from SMILES: its atoms and, on each, its implicit or bracket hydrogens.
#[derive(Debug, Clone)]
pub struct Molecule {
    atoms: Vec<Atom>,
}

impl Molecule {
    /// Atoms in the graph as RDKit's `GetNumAtoms()` counts them after `MolFromSmiles`:
    /// every non-hydrogen atom (and `*`), plus `[H]` atoms RDKit keeps (isotopic, hydride,
    /// unbonded, bonded to H or `*`, or needed for stereo); implicit hydrogens never count.
    pub fn atom_count(&self) -> usize {
        self.atoms.len()
    }

    /// The molecular formula in RDKit's `CalcMolFormula` order: C, then H, then the other
    /// symbols alphabetically (`*` first among them), then the net charge (`H4N+`, `O-2`).
    ///
    /// Unlike strict Hill order, RDKit puts H first even without carbon (`H4B-`, `HCl`).
    /// Isotopes are not written separately: `[13CH4]` is `CH4`.
    pub fn formula(&self) -> String {
        let mut counts: HashMap<&str, u64> = HashMap::new();
        let mut charge: i64 = 0;
        for atom in &self.atoms {
            *counts.entry(symbol(atom.z)).or_default() += 1;
            if atom.hydrogens > 0 {
                *counts.entry("H").or_default() += u64::from(atom.hydrogens);
            }
            charge += i64::from(atom.charge);
        }
        let mut rest: Vec<(&str, u64)> =
            counts.iter().filter(|(s, _)| !matches!(**s, "C" | "H")).map(|(s, n)| (*s, *n)).collect();
        rest.sort_unstable();
        let mut formula = String::new();
        let leading = ["C", "H"].into_iter().filter_map(|s| counts.get(s).map(|n| (s, *n)));
        for (s, n) in leading.chain(rest) {
            formula.push_str(s);
            if n > 1 {
                formula.push_str(&n.to_string());
            }
        }
        match charge {
            0 => {}
            1 => formula.push('+'),
            -1 => formula.push('-'),
            c if c > 0 => formula.push_str(&format!("+{c}")),
            c => formula.push_str(&format!("-{}", -c)),
        }
        formula
    }

    /// Average molecular weight in daltons, as RDKit's `Descriptors.MolWt` computes it:
    /// RDKit's atomic weights, plus an isotope's exact mass on an isotope-labelled atom.
    pub fn molecular_weight(&self) -> f64 {
        let hydrogen = ELEMENTS[0].weight;
        self.atoms.iter().map(|a| atom_weight(a.z, a.isotope) + f64::from(a.hydrogens) * hydrogen).sum()
    }
}

/// The weight RDKit gives one atom: 0 for `*`; an isotope's exact mass if RDKit knows it,
/// else the mass number (as RDKit does, e.g. `[100C]` weighs 100); else the average weight.
fn atom_weight(z: u8, isotope: Option<u32>) -> f64 {
    let Some(element) = z.checked_sub(1).and_then(|i| ELEMENTS.get(usize::from(i))) else {
        return 0.0;
    };
    match isotope {
        None => element.weight,
        Some(a) => a
            .checked_sub(u32::from(element.first_isotope))
            .and_then(|i| element.isotope_masses.get(usize::try_from(i).ok()?))
            .copied()
            .unwrap_or(f64::from(a)),
    }
}

/// Reads `smiles` into a [`Molecule`]. Blanks around the SMILES are ignored, as RDKit ignores
/// them; a blank inside it is refused (RDKit would read the rest as a title).
pub fn parse(smiles: &str) -> Result<Molecule, ParseError> {
    let chars: Vec<char> = smiles.chars().collect();
    let end = chars.iter().rposition(|c| !c.is_whitespace()).map_or(0, |i| i + 1);
    let start = chars.iter().position(|c| !c.is_whitespace()).unwrap_or(end);
    if end - start > MAX_SMILES_CHARS {
        let p = start + MAX_SMILES_CHARS;
        return Err(ParseError::Invalid(SmilesError::new(
            p,
            format!("SMILES too long at position {p}: at most {MAX_SMILES_CHARS} characters are accepted"),
        )));
    }
    if let Some(p) = (start..end).find(|&i| chars[i].is_whitespace()) {
        return Err(ParseError::Invalid(SmilesError::new(
            p,
            format!(
                "text after the SMILES at position {p}: a SMILES cannot contain blanks; pass only the SMILES \
                 (RDKit would stop at the blank and read the rest as the molecule's name)"
            ),
        )));
    }
    read_molecule(&chars, start, end).map_err(ParseError::Invalid)
}

fn written(symbol: Option<Symbol>) -> Written {
    match symbol {
        None => Written::Implicit,
        Some(Symbol::Single) => Written::Single,
        Some(Symbol::Double) => Written::Double,
        Some(Symbol::Triple) => Written::Triple,
        Some(Symbol::Quadruple) => Written::Quadruple,
        Some(Symbol::Aromatic) => Written::Aromatic,
        Some(Symbol::Any) => Written::Any,
        Some(Symbol::Directional) => Written::Directional,
        Some(Symbol::DativeRight | Symbol::DativeLeft) => Written::Dative,
    }
}

/// A chain bond in [`WrittenBond`] form: a dative bond's donor comes first.
fn chain_bond(a: usize, b: usize, symbol: Option<Symbol>) -> WrittenBond {
    match symbol {
        Some(Symbol::DativeLeft) => WrittenBond { a: b, b: a, written: Written::Dative },
        _ => WrittenBond { a, b, written: written(symbol) },
    }
}

fn read_molecule(chars: &[char], start: usize, end: usize) -> Result<Molecule, SmilesError> {
    let read = reader::read(chars, start, end)?;
    let mut bonds: Vec<WrittenBond> = read.bonds.iter().map(|b| chain_bond(b.a, b.b, b.symbol)).collect();

    // Pair ring-closure numbers. When both ends give a bond symbol, RDKit keeps the opening one.
    let mut pairs: HashSet<(usize, usize)> = bonds.iter().map(|b| (b.a.min(b.b), b.a.max(b.b))).collect();
    let mut open: HashMap<u32, (usize, Option<Symbol>, usize)> = HashMap::new();
    for closure in &read.closures {
        let (atom, position) = (closure.atom, closure.position);
        match open.remove(&closure.number) {
            None => {
                open.insert(closure.number, (atom, closure.symbol, position));
            }
            Some((first, first_symbol, _)) => {
                let label = ring_label(closure.number);
                if first == atom {
                    return Err(SmilesError::new(
                        position,
                        format!(
                            "invalid ring closure at position {position}: ring bond {label} would bond an atom to itself"
                        ),
                    ));
                }
                if !pairs.insert((first.min(atom), first.max(atom))) {
                    return Err(SmilesError::new(
                        position,
                        format!(
                            "invalid ring closure at position {position}: ring bond {label} duplicates a bond between the same two atoms"
                        ),
                    ));
                }
                bonds.push(ring_bond(first, first_symbol, atom, closure.symbol));
            }
        }
    }
    if let Some((number, (_, _, position))) = open.iter().min_by_key(|(_, (_, _, p))| *p) {
        let label = ring_label(*number);
        return Err(SmilesError::new(
            *position,
            format!("unclosed ring at position {position}: ring bond {label} is opened but never closed"),
        ));
    }

    let atoms = read
        .atoms
        .into_iter()
        .map(|a| WrittenAtom {
            z: a.z,
            aromatic: a.aromatic,
            bracket: a.bracket,
            isotope: a.isotope,
            hcount: a.hcount,
            charge: a.charge,
            chirality: a.chirality,
            position: a.position,
        })
        .collect();
    Ok(Molecule { atoms: sanitize::sanitize(atoms, bonds)? })
}

/// The bond a ring closure makes between `first` (where the number opened) and `last`.
///
/// As in RDKit, the opening end's symbol wins, unless it is `/` or `\` (which leave the order
/// open); `~` on a ring closure reads as no symbol (RDKit keeps `~` only on chain bonds); a
/// dative arrow donates from the atom it is written at (`->`) or toward it (`<-`).
fn ring_bond(first: usize, first_symbol: Option<Symbol>, last: usize, last_symbol: Option<Symbol>) -> WrittenBond {
    let (symbol, at_first) = match first_symbol {
        None | Some(Symbol::Directional) if last_symbol.is_some() => (last_symbol, false),
        _ => (first_symbol, true),
    };
    let (written_at, other) = if at_first { (first, last) } else { (last, first) };
    match symbol {
        Some(Symbol::Any) => WrittenBond { a: first, b: last, written: Written::Implicit },
        Some(Symbol::DativeRight) => WrittenBond { a: written_at, b: other, written: Written::Dative },
        Some(Symbol::DativeLeft) => WrittenBond { a: other, b: written_at, written: Written::Dative },
        _ => WrittenBond { a: first, b: last, written: written(symbol) },
    }
}

/// `1` or `%10`, as a ring-closure number is written.
fn ring_label(number: u32) -> String {
    if number < 10 { number.to_string() } else { format!("%{number}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn molecule(smiles: &str) -> Molecule {
        match parse(smiles) {
            Ok(m) => m,
            Err(e) => panic!("{smiles}: {e:?}"),
        }
    }

    fn error(smiles: &str) -> SmilesError {
        match parse(smiles) {
            Err(ParseError::Invalid(e)) => e,
            other => panic!("{smiles}: expected an invalid SMILES, got {other:?}"),
        }
    }

    #[test]
    fn every_element_symbol_reads_as_its_atomic_number() {
        for (i, element) in ELEMENTS.iter().enumerate() {
            let m = molecule(&format!("[{}]", element.symbol));
            assert_eq!(usize::from(m.atoms[0].z), i + 1, "{}", element.symbol);
            assert_eq!(m.formula(), element.symbol);
        }
    }

    #[test]
    fn aromatic_hydrogens() {
        for (smiles, formula) in [
            ("c1ccccc1", "C6H6"),
            ("c1ccncc1", "C5H5N"),
            ("c1cc[nH]c1", "C4H5N"),
            ("Cn1cccc1", "C5H7N"),
            ("c1ccoc1", "C4H4O"),
            ("c1ccsc1", "C4H4S"),
            ("c1ccc2ccccc2c1", "C10H8"),
            ("O=c1cccc[nH]1", "C5H5NO"),
            ("[H]c1ccccc1", "C6H6"),
            ("c1ccpcc1", "C5H5P"),
            // RDKit reads ':' between aliphatic atoms as an aromatic (1.5) bond.
            ("C1:C:C:C:C:C1", "C6H6"),
            // An aromatic atom with only single bonds just fills its valence.
            ("C1cCC=C1", "C5H8"),
        ] {
            assert_eq!(molecule(smiles).formula(), formula, "{smiles}");
        }
    }

    #[test]
    fn positions_of_errors() {
        assert_eq!(error("").position, 0);
        assert!(error("").message.starts_with("empty SMILES"));
        assert_eq!(error("CCXC").position, 2);
        assert_eq!(error("CAC").position, 1);
        assert_eq!(error("C1CC").position, 1);
        assert!(error("C1CC").message.contains("unclosed ring"));
        assert_eq!(error("CC%12CC").position, 2);
        assert_eq!(error("CC(C").position, 2);
        assert!(error("CC(C").message.contains("unbalanced parentheses"));
        assert_eq!(error("CC)C").position, 2);
        assert!(error("CC)C").message.contains("unbalanced parentheses"));
        assert_eq!(error("C()C").position, 2);
        assert_eq!(error("C[CH3").position, 1);
        assert_eq!(error("CC=").position, 3);
        assert_eq!(error("C[Xx]").position, 2);
        assert_eq!(error("C11").position, 2);
        assert_eq!(error("C12CC12").position, 6);
        assert_eq!(error("CN(C)(C)C").position, 1);
        assert!(error("CN(C)(C)C").message.contains("invalid valence"), "{}", error("CN(C)(C)C").message);
        assert_eq!(error("c1ccnc1").position, 0);
        assert!(error("c1ccnc1").message.contains("kekulize"));
        assert_eq!(error("Cc").position, 1);
        assert!(error("Cc").message.contains("ring"));
        assert_eq!(error("CAt").position, 1);
        assert_eq!(error("C(.C)C").position, 2);
        assert_eq!(error("[05C]").position, 1);
        assert_eq!(error("C[H@]").position, 1);
    }

    #[test]
    fn ring_numbers_are_read_from_the_string() {
        // purr maps %73 to the same ring number as %74; the digits as written decide here.
        assert!(error("C%73CC%74").message.contains("unclosed ring"));
        assert_eq!(molecule("C%73CC%73").formula(), "C3H6");
    }

    #[test]
    fn long_input_does_not_exhaust_the_stack() {
        let chain = "C".repeat(MAX_SMILES_CHARS);
        assert_eq!(molecule(&chain).atom_count(), MAX_SMILES_CHARS);
        let half = MAX_SMILES_CHARS / 3;
        let nested = "C(".repeat(half) + "C" + &")".repeat(half);
        assert_eq!(molecule(&nested).atom_count(), half + 1);
        assert!(error(&"C".repeat(MAX_SMILES_CHARS + 1)).message.contains("too long"));
    }

    #[test]
    fn arbitrary_strings_never_panic() {
        let alphabet: Vec<char> = "CcNnOoSsPBrlIF[]()=#$:~<>/\\@+-123%0H.*Aaeit ".chars().collect();
        let mut state: u64 = 42;
        for _ in 0..4000 {
            let mut s = String::new();
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let len = (state >> 59) as usize;
            for _ in 0..len {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                s.push(alphabet[(state >> 33) as usize % alphabet.len()]);
            }
            match parse(&s) {
                Ok(m) => {
                    let _ = (m.formula(), m.atom_count(), m.molecular_weight());
                }
                Err(ParseError::Invalid(e)) => {
                    assert!(e.position <= s.chars().count(), "{s:?}: {e:?}");
                    assert!(e.message.contains(&format!("position {}", e.position)), "{s:?}: {e:?}");
                }
                Err(ParseError::Internal(e)) => panic!("{s:?}: {e}"),
            }
        }
    }
}
