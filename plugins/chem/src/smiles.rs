//! Reading a SMILES string into a molecule whose hydrogens, formula and weight match RDKit's.
//!
//! `purr` reads the syntax: it reports each atom, bond, branch and ring-closure digit with its
//! position, or the position of a syntax error. This module pairs ring-closure digits itself,
//! from the digits as written (purr's ring-number conversion maps `%73` to 74), rejecting a
//! ring bond from an atom to itself or one that doubles a bond; it also rejects the few
//! spellings purr accepts and RDKit does not. Hydrogens, valences and aromaticity are then
//! worked out as RDKit's `MolFromSmiles` does, in [`crate::sanitize`]: purr's own
//! implicit-hydrogen rules are OpenSMILES', which differ from RDKit's (purr lets a neutral
//! nitrogen take 5 bonds and iodine only 1; RDKit allows N 3 and I 1, 3 or 5).

use std::collections::{HashMap, HashSet};
use std::fmt;

use purr::feature::{Aliphatic, Aromatic, AtomKind, BondKind, BracketAromatic, BracketSymbol, Configuration, Rnum};
use purr::read::{Error as ReadError, Trace, read};
use purr::walk::Follower;

use crate::elements::ELEMENTS;
use crate::sanitize::{self, Written, WrittenAtom, WrittenBond};

/// The longest SMILES accepted, in characters.
pub const MAX_SMILES_CHARS: usize = 4096;

/// Why a SMILES string is not valid: where, and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmilesError {
    /// 0-based index, in characters, of the problem in the SMILES string.
    pub position: usize,
    /// The problem and its position, e.g. `unexpected character at position 1: 'X'`.
    pub message: String,
}

impl SmilesError {
    pub(crate) fn new(position: usize, message: String) -> Self {
        Self { position, message }
    }
}

impl fmt::Display for SmilesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SmilesError {}

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

/// An atom of the molecule as RDKit keeps it, with the hydrogens it carries.
#[derive(Debug, Clone)]
pub(crate) struct Atom {
    /// Atomic number; 0 for the wildcard `*`.
    pub(crate) z: u8,
    pub(crate) isotope: Option<u16>,
    pub(crate) charge: i8,
    /// Implicit, bracket and folded-in `[H]` hydrogens.
    pub(crate) hydrogens: u32,
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

/// The element symbol of atomic number `z`, or `*` for 0.
pub(crate) fn symbol(z: u8) -> &'static str {
    match z.checked_sub(1).and_then(|i| ELEMENTS.get(usize::from(i))) {
        Some(e) => e.symbol,
        None => "*",
    }
}

/// The weight RDKit gives one atom: 0 for `*`; an isotope's exact mass if RDKit knows it,
/// else the mass number (as RDKit does, e.g. `[100C]` weighs 100); else the average weight.
fn atom_weight(z: u8, isotope: Option<u16>) -> f64 {
    let Some(element) = z.checked_sub(1).and_then(|i| ELEMENTS.get(usize::from(i))) else {
        return 0.0;
    };
    match isotope {
        None => element.weight,
        Some(a) => a
            .checked_sub(element.first_isotope)
            .and_then(|i| element.isotope_masses.get(usize::from(i)))
            .copied()
            .unwrap_or(f64::from(a)),
    }
}

/// Reads `smiles` (trailing whitespace ignored) into a [`Molecule`].
pub fn parse(smiles: &str) -> Result<Molecule, ParseError> {
    let smiles = smiles.trim_end();
    let chars: Vec<char> = smiles.chars().collect();
    if chars.len() > MAX_SMILES_CHARS {
        return Err(ParseError::Invalid(SmilesError::new(
            MAX_SMILES_CHARS,
            format!(
                "SMILES too long at position {MAX_SMILES_CHARS}: at most {MAX_SMILES_CHARS} characters are accepted"
            ),
        )));
    }
    // purr's reader recurses once per atom and per branch (about 1 KiB of stack per
    // character in a debug build), so it runs on a thread whose stack fits the input rather
    // than on whatever thread the host calls us on.
    let stack_size = 256 * 1024 + 2048 * chars.len();
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("chem-smiles".to_owned())
            .stack_size(stack_size)
            .spawn_scoped(scope, || read_molecule(smiles, &chars));
        match spawned {
            Ok(handle) => match handle.join() {
                Ok(result) => result.map_err(ParseError::Invalid),
                Err(_) => Err(ParseError::Internal("the SMILES reader panicked".to_owned())),
            },
            Err(e) => Err(ParseError::Internal(format!("cannot start the SMILES reader thread: {e}"))),
        }
    })
}

/// An atom as purr reports it, converted to atomic numbers.
struct ParsedAtom {
    z: u8,
    aromatic: bool,
    bracket: bool,
    isotope: Option<u16>,
    hcount: u8,
    charge: i8,
    stereo: bool,
    non_tetrahedral: bool,
}

impl ParsedAtom {
    fn organic(z: u8, aromatic: bool) -> Self {
        Self { z, aromatic, bracket: false, isotope: None, hcount: 0, charge: 0, stereo: false, non_tetrahedral: false }
    }
}

/// Turns purr's atom into ours; the atomic number comes from purr's `Element` order (H first).
fn parsed_atom(kind: AtomKind) -> ParsedAtom {
    match kind {
        AtomKind::Star => ParsedAtom::organic(0, false),
        AtomKind::Aliphatic(a) => ParsedAtom::organic(
            match a {
                Aliphatic::B => 5,
                Aliphatic::C => 6,
                Aliphatic::N => 7,
                Aliphatic::O => 8,
                Aliphatic::F => 9,
                Aliphatic::P => 15,
                Aliphatic::S => 16,
                Aliphatic::Cl => 17,
                Aliphatic::Br => 35,
                Aliphatic::I => 53,
                Aliphatic::At => 85,
                Aliphatic::Ts => 117,
            },
            false,
        ),
        AtomKind::Aromatic(a) => ParsedAtom::organic(
            match a {
                Aromatic::B => 5,
                Aromatic::C => 6,
                Aromatic::N => 7,
                Aromatic::O => 8,
                Aromatic::P => 15,
                Aromatic::S => 16,
            },
            true,
        ),
        AtomKind::Bracket { isotope, symbol, configuration, hcount, charge, map: _ } => {
            let (z, aromatic) = match symbol {
                BracketSymbol::Star => (0, false),
                // `Element` lists the elements in atomic-number order, starting at H.
                BracketSymbol::Element(e) => (e as u8 + 1, false),
                BracketSymbol::Aromatic(a) => (
                    match a {
                        BracketAromatic::B => 5,
                        BracketAromatic::C => 6,
                        BracketAromatic::N => 7,
                        BracketAromatic::O => 8,
                        BracketAromatic::P => 15,
                        BracketAromatic::S => 16,
                        BracketAromatic::As => 33,
                        BracketAromatic::Se => 34,
                    },
                    true,
                ),
            };
            ParsedAtom {
                z,
                aromatic,
                bracket: true,
                // RDKit reads isotope 0 as "no isotope".
                isotope: isotope.as_ref().map(u16::from).filter(|&a| a != 0),
                hcount: hcount.as_ref().map_or(0, Into::into),
                charge: charge.as_ref().map_or(0, Into::into),
                stereo: configuration.is_some(),
                non_tetrahedral: matches!(
                    configuration,
                    Some(c) if !matches!(c, Configuration::TH1 | Configuration::TH2 | Configuration::AL1 | Configuration::AL2)
                ),
            }
        }
    }
}

/// Collects purr's parse events into atoms, chain bonds and ring-closure digits.
#[derive(Default)]
struct Collector {
    atoms: Vec<ParsedAtom>,
    /// Chain and branch bonds: (from, to, kind as written).
    bonds: Vec<(usize, usize, BondKind)>,
    /// Ring-closure digits in reading order: (atom, bond kind written before the digit).
    closures: Vec<(usize, BondKind)>,
    /// The open path of atoms; its last entry is the atom the next bond starts from.
    path: Vec<usize>,
}

impl Follower for Collector {
    fn root(&mut self, root: AtomKind) {
        self.path.push(self.atoms.len());
        self.atoms.push(parsed_atom(root));
    }

    fn extend(&mut self, bond_kind: BondKind, atom_kind: AtomKind) {
        let to = self.atoms.len();
        // purr only extends from an existing atom; without one the bond is simply dropped.
        if let Some(&from) = self.path.last() {
            self.bonds.push((from, to, bond_kind));
        }
        self.path.push(to);
        self.atoms.push(parsed_atom(atom_kind));
    }

    fn join(&mut self, bond_kind: BondKind, _: Rnum) {
        // purr's `Rnum` conversion maps 73 to R74, so the digits are re-read from the string
        // (with the position purr's `Trace` records for every join, in the same order).
        if let Some(&atom) = self.path.last() {
            self.closures.push((atom, bond_kind));
        }
    }

    fn pop(&mut self, depth: usize) {
        let keep = self.path.len().saturating_sub(depth);
        self.path.truncate(keep);
    }
}

fn written(kind: &BondKind) -> Written {
    match kind {
        BondKind::Elided => Written::Implicit,
        BondKind::Single => Written::Single,
        BondKind::Double => Written::Double,
        BondKind::Triple => Written::Triple,
        BondKind::Quadruple => Written::Quadruple,
        BondKind::Aromatic => Written::Aromatic,
        BondKind::Up | BondKind::Down => Written::Directional,
    }
}

fn read_molecule(smiles: &str, chars: &[char]) -> Result<Molecule, SmilesError> {
    let mut collector = Collector::default();
    let mut trace = Trace::new();
    read(smiles, &mut collector, Some(&mut trace)).map_err(|e| syntax_error(chars, e))?;
    check_spelling(chars)?;
    let atom_position = |i: usize| trace.atom(i).map_or(0, |r| r.start);

    for (i, atom) in collector.atoms.iter().enumerate() {
        let p = atom_position(i);
        if !atom.bracket && matches!(atom.z, 85 | 117) {
            return Err(SmilesError::new(
                p,
                format!("unsupported atom at position {p}: {} must be written in brackets, as [{0}]", symbol(atom.z)),
            ));
        }
        if atom.z == 1 && atom.stereo {
            return Err(SmilesError::new(
                p,
                format!("invalid stereo at position {p}: a hydrogen atom cannot be a stereocentre"),
            ));
        }
    }

    let mut bonds: Vec<WrittenBond> =
        collector.bonds.iter().map(|(a, b, kind)| WrittenBond { a: *a, b: *b, written: written(kind) }).collect();

    // Pair ring-closure digits. When both ends give a bond symbol, RDKit keeps the opening one.
    let mut pairs: HashSet<(usize, usize)> = bonds.iter().map(|b| (b.a.min(b.b), b.a.max(b.b))).collect();
    let mut open: HashMap<u16, (usize, BondKind, usize)> = HashMap::new();
    for (rid, (atom, kind)) in collector.closures.into_iter().enumerate() {
        let range = trace.rnum(rid).unwrap_or(0..0);
        let position = range.start;
        let digits: String = chars.get(range).unwrap_or_default().iter().filter(|c| c.is_ascii_digit()).collect();
        let number: u16 = digits.parse().unwrap_or(0);
        match open.remove(&number) {
            None => {
                open.insert(number, (atom, kind, position));
            }
            Some((first, first_kind, _)) => {
                let label = ring_label(number);
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
                let kind = if first_kind == BondKind::Elided { kind } else { first_kind };
                bonds.push(WrittenBond { a: first, b: atom, written: written(&kind) });
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

    let atoms = collector
        .atoms
        .into_iter()
        .enumerate()
        .map(|(i, a)| WrittenAtom {
            z: a.z,
            aromatic: a.aromatic,
            bracket: a.bracket,
            isotope: a.isotope,
            hcount: a.hcount,
            charge: a.charge,
            non_tetrahedral: a.non_tetrahedral,
            position: atom_position(i),
        })
        .collect();
    Ok(Molecule { atoms: sanitize::sanitize(atoms, bonds)? })
}

/// Rejects what purr reads but RDKit does not: a branch opening with `.` and an isotope
/// written with a leading zero (`[01C]`; a lone `[0C]` is fine).
fn check_spelling(chars: &[char]) -> Result<(), SmilesError> {
    let mut in_bracket = false;
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '[' => {
                in_bracket = true;
                if matches!(chars.get(i + 1..i + 3), Some(['0', d]) if d.is_ascii_digit()) {
                    let p = i + 1;
                    return Err(SmilesError::new(
                        p,
                        format!("invalid isotope at position {p}: a mass number cannot start with 0"),
                    ));
                }
            }
            ']' => in_bracket = false,
            '(' if !in_bracket && chars.get(i + 1) == Some(&'.') => {
                let p = i + 1;
                return Err(SmilesError::new(
                    p,
                    format!("unexpected character at position {p}: '.' cannot open a branch"),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// `1` or `%10`, as a ring-closure number is written.
fn ring_label(number: u16) -> String {
    if number < 10 { number.to_string() } else { format!("%{number}") }
}

/// Describes a purr syntax error, adding what the string shows about its cause.
fn syntax_error(chars: &[char], error: ReadError) -> SmilesError {
    match error {
        ReadError::EndOfLine => end_of_input(chars),
        ReadError::Character(p) => {
            let Some(&c) = chars.get(p) else { return end_of_input(chars) };
            let scan = scan_to(chars, p);
            if let Some(open) = scan.bracket {
                return SmilesError::new(
                    p,
                    format!(
                        "unexpected character at position {p}: '{c}' in the bracket atom that starts at position {open} \
                         (expected [isotope]symbol[chirality][H count][charge][:class]; the aromatic symbols \
                         read are b, c, n, o, p, s, se and as)"
                    ),
                );
            }
            // purr reads `A` and `T` hoping for `At`/`Ts`, so it stops one character late.
            if p > 0 && matches!(chars.get(p - 1), Some('A' | 'T')) {
                let q = p - 1;
                return SmilesError::new(
                    q,
                    format!(
                        "unexpected character at position {q}: '{}' (outside brackets only B, C, N, O, P, S, F, Cl, Br, I, *, and aromatic b, c, n, o, p, s are atoms)",
                        chars[q]
                    ),
                );
            }
            let previous = p.checked_sub(1).and_then(|q| chars.get(q));
            match c {
                '>' if previous == Some(&'-') => SmilesError::new(
                    p - 1,
                    format!(
                        "unsupported bond at position {}: dative bonds '->' and '<-' are an RDKit extension this tool does not read",
                        p - 1
                    ),
                ),
                '<' if chars.get(p + 1) == Some(&'-') => SmilesError::new(
                    p,
                    format!(
                        "unsupported bond at position {p}: dative bonds '->' and '<-' are an RDKit extension this tool does not read"
                    ),
                ),
                ')' if scan.branches.is_empty() => {
                    SmilesError::new(p, format!("unbalanced parentheses at position {p}: ')' closes no open branch"))
                }
                ')' if p > 0 && chars[p - 1] == '(' => {
                    SmilesError::new(p, format!("empty branch at position {p}: '()' holds no atom"))
                }
                _ => SmilesError::new(p, format!("unexpected character at position {p}: '{c}'")),
            }
        }
    }
}

/// What is open at position `end`: a bracket atom, and branches, by their start positions.
struct Scan {
    bracket: Option<usize>,
    branches: Vec<usize>,
}

fn scan_to(chars: &[char], end: usize) -> Scan {
    let mut scan = Scan { bracket: None, branches: Vec::new() };
    for (i, &c) in chars.iter().enumerate().take(end) {
        match (c, scan.bracket) {
            ('[', None) => scan.bracket = Some(i),
            (']', Some(_)) => scan.bracket = None,
            ('(', None) => scan.branches.push(i),
            (')', None) => {
                scan.branches.pop();
            }
            _ => {}
        }
    }
    scan
}

fn end_of_input(chars: &[char]) -> SmilesError {
    let n = chars.len();
    let Some(last) = chars.last() else {
        return SmilesError::new(0, "empty SMILES at position 0: there are no atoms".to_owned());
    };
    let scan = scan_to(chars, n);
    if let Some(open) = scan.bracket {
        SmilesError::new(open, format!("unclosed bracket atom at position {open}: no ']' follows"))
    } else if let Some(&open) = scan.branches.last() {
        SmilesError::new(open, format!("unbalanced parentheses at position {open}: this branch is never closed"))
    } else {
        SmilesError::new(n, format!("unexpected end of SMILES at position {n}: an atom must follow '{last}'"))
    }
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
        assert_eq!(error("C[Xx]").position, 3);
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
        let alphabet: Vec<char> = "CcNnOoSsPBrlIF[]()=#$:/\\@+-123%0H.*Aaeit ".chars().collect();
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
