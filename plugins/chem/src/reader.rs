//! The SMILES grammar as RDKit's `MolFromSmiles` reads it, turned into atoms, chain bonds and
//! ring-closure numbers, each with the character position it was written at.
//!
//! The grammar follows RDKit's lexer and parser (`smiles.ll`, `smiles.yy`) rather than
//! OpenSMILES where they differ: bracket atoms may be aromatic `si`, `as`, `se` or `te` and
//! may be written by atomic number (`[#6]`); a charge may be `-0`; ring numbers are a digit
//! (`0` included), `%` and two digits not starting with 0, or `%(` one to five digits `)`;
//! bonds include `~` (any order), `$` (quadruple), a doubled `\\` (one `\`) and the dative
//! `->`/`<-`; stereo marks include the classes `@TH`, `@AL`, `@SP`, `@TB`, `@OH` with or
//! without a permutation number. A bracket's H count and charge wrap as RDKit stores them (a
//! byte each: `[C+256]` is neutral). The input is read iteratively, so deep nesting cannot
//! overflow the stack.

use crate::elements::ELEMENTS;
use crate::error::SmilesError;

/// A bond symbol as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Symbol {
    /// `-`
    Single,
    /// `=`
    Double,
    /// `#`
    Triple,
    /// `$`
    Quadruple,
    /// `:`
    Aromatic,
    /// `~`: a bond of any order, which RDKit counts as zero toward valences.
    Any,
    /// `/` or `\`
    Directional,
    /// `->`: the atom before donates to the atom after.
    DativeRight,
    /// `<-`: the atom after donates to the atom before.
    DativeLeft,
}

/// Stereo written on a bracket atom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chirality {
    None,
    /// `@`, `@@`, `@TH`, `@AL` with or without a number.
    Tetrahedral,
    /// `@SP`, `@TB` or `@OH`: square planar, trigonal bipyramidal, octahedral.
    NonTetrahedral,
}

/// An atom as written.
#[derive(Debug, Clone)]
pub(crate) struct ReadAtom {
    /// Atomic number; 0 for `*`.
    pub(crate) z: u8,
    /// Written with a lower-case symbol.
    pub(crate) aromatic: bool,
    pub(crate) bracket: bool,
    /// The mass number; RDKit reads 0 as none.
    pub(crate) isotope: Option<u32>,
    pub(crate) hcount: u8,
    pub(crate) charge: i8,
    pub(crate) chirality: Chirality,
    /// 0-based character position of the atom's first character.
    pub(crate) position: usize,
}

/// A chain or branch bond: atoms `a` then `b`, and the symbol written between them.
#[derive(Debug, Clone)]
pub(crate) struct ReadBond {
    pub(crate) a: usize,
    pub(crate) b: usize,
    pub(crate) symbol: Option<Symbol>,
}

/// A ring-closure number written after atom `atom`, with the bond symbol before it.
#[derive(Debug, Clone)]
pub(crate) struct Closure {
    pub(crate) atom: usize,
    pub(crate) symbol: Option<Symbol>,
    pub(crate) number: u32,
    /// Where the number (its first digit, or its `%`) starts.
    pub(crate) position: usize,
}

/// Everything read from a SMILES string.
#[derive(Debug, Default)]
pub(crate) struct Read {
    pub(crate) atoms: Vec<ReadAtom>,
    pub(crate) bonds: Vec<ReadBond>,
    pub(crate) closures: Vec<Closure>,
}

/// What was read last, which decides what may follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Start,
    Atom,
    Ring,
    Close,
    Open,
    Dot,
    /// A bond symbol; `after_open` when it directly follows `(`.
    Bond {
        after_open: bool,
    },
}

fn err(position: usize, message: String) -> SmilesError {
    SmilesError::new(position, message)
}

/// Reads `chars[start..end]`; positions in errors and atoms index `chars`.
pub(crate) fn read(chars: &[char], start: usize, end: usize) -> Result<Read, SmilesError> {
    let mut reader = Reader { chars, i: start, end, out: Read::default(), prev: None, branches: Vec::new() };
    reader.run()?;
    Ok(reader.out)
}

struct Reader<'a> {
    chars: &'a [char],
    i: usize,
    end: usize,
    out: Read,
    /// The atom the next bond starts from.
    prev: Option<usize>,
    /// Open branches: (atom they leave from, position of `(`).
    branches: Vec<(usize, usize)>,
}

impl Reader<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        let j = self.i + k;
        if j < self.end { self.chars.get(j).copied() } else { None }
    }

    fn unexpected(&self, p: usize) -> SmilesError {
        match self.chars.get(p) {
            Some(c) => err(p, format!("unexpected character at position {p}: '{c}'")),
            None => err(p, format!("unexpected end of SMILES at position {p}")),
        }
    }

    fn run(&mut self) -> Result<(), SmilesError> {
        let mut last = Last::Start;
        let mut bond: Option<Symbol> = None;
        while let Some(c) = self.peek(0) {
            let after_atom = matches!(last, Last::Atom | Last::Ring | Last::Close);
            last = match c {
                '[' | 'B' | 'C' | 'N' | 'O' | 'P' | 'S' | 'F' | 'I' | 'b' | 'c' | 'n' | 'o' | 'p' | 's' | '*' => {
                    self.atom(c, last, bond.take())?
                }
                '-' | '=' | '#' | '$' | ':' | '~' | '/' | '\\' | '<' if after_atom || last == Last::Open => {
                    bond = Some(self.bond_symbol()?);
                    Last::Bond { after_open: last == Last::Open }
                }
                '0'..='9' | '%' if after_atom || last == Last::Bond { after_open: false } => {
                    let position = self.i;
                    let number = self.ring_number()?;
                    if let Some(atom) = self.prev {
                        self.out.closures.push(Closure { atom, symbol: bond.take(), number, position });
                    }
                    Last::Ring
                }
                _ => self.punctuation(c, last)?,
            };
        }
        self.finish(last)
    }

    /// Reads an atom and bonds it to the previous one (unless a `.` or nothing precedes it).
    fn atom(&mut self, c: char, last: Last, bond: Option<Symbol>) -> Result<Last, SmilesError> {
        let atom = if c == '[' { self.bracket_atom()? } else { self.organic_atom() };
        let index = self.out.atoms.len();
        self.out.atoms.push(atom);
        if let (Some(a), false) = (self.prev, matches!(last, Last::Dot | Last::Start)) {
            self.out.bonds.push(ReadBond { a, b: index, symbol: bond });
        }
        self.prev = Some(index);
        Ok(Last::Atom)
    }

    /// Reads a bond symbol; `->`, `<-` and a doubled `\\` take two characters.
    fn bond_symbol(&mut self) -> Result<Symbol, SmilesError> {
        let c = self.peek(0).unwrap_or(' ');
        let (symbol, len) = match (c, self.peek(1)) {
            ('-', Some('>')) => (Symbol::DativeRight, 2),
            ('<', Some('-')) => (Symbol::DativeLeft, 2),
            ('<', _) => return Err(self.unexpected(self.i)),
            ('-', _) => (Symbol::Single, 1),
            ('=', _) => (Symbol::Double, 1),
            ('#', _) => (Symbol::Triple, 1),
            ('$', _) => (Symbol::Quadruple, 1),
            (':', _) => (Symbol::Aromatic, 1),
            ('~', _) => (Symbol::Any, 1),
            // RDKit reads `\\` as one `\`, as some writers escape it.
            ('\\', Some('\\')) => (Symbol::Directional, 2),
            _ => (Symbol::Directional, 1),
        };
        self.i += len;
        Ok(symbol)
    }

    /// `(`, `)` and `.`, where they may stand; anything else is unexpected here.
    fn punctuation(&mut self, c: char, last: Last) -> Result<Last, SmilesError> {
        let p = self.i;
        let after_atom = matches!(last, Last::Atom | Last::Ring | Last::Close);
        let next = match c {
            '(' if after_atom => {
                if let Some(atom) = self.prev {
                    self.branches.push((atom, p));
                }
                Last::Open
            }
            ')' if after_atom => {
                let Some((atom, _)) = self.branches.pop() else {
                    return Err(err(p, format!("unbalanced parentheses at position {p}: ')' closes no open branch")));
                };
                self.prev = Some(atom);
                Last::Close
            }
            ')' if last == Last::Open => {
                return Err(err(p, format!("empty branch at position {p}: '()' holds no atom")));
            }
            '.' if after_atom => Last::Dot,
            '.' if last == Last::Open => {
                return Err(err(p, format!("unexpected character at position {p}: '.' cannot open a branch")));
            }
            _ => return Err(self.unexpected(p)),
        };
        self.i += 1;
        Ok(next)
    }

    fn finish(&self, last: Last) -> Result<(), SmilesError> {
        let n = self.end;
        match last {
            Last::Start => Err(err(0, "empty SMILES at position 0: there are no atoms".to_owned())),
            Last::Bond { .. } | Last::Dot | Last::Open => {
                let c = self.chars.get(n.saturating_sub(1)).copied().unwrap_or(' ');
                Err(err(n, format!("unexpected end of SMILES at position {n}: an atom must follow '{c}'")))
            }
            Last::Atom | Last::Ring | Last::Close => match self.branches.last() {
                Some(&(_, open)) => {
                    Err(err(open, format!("unbalanced parentheses at position {open}: this branch is never closed")))
                }
                None => Ok(()),
            },
        }
    }

    /// An atom of the organic subset, written without brackets.
    fn organic_atom(&mut self) -> ReadAtom {
        let position = self.i;
        let c = self.peek(0).unwrap_or('*');
        let (z, aromatic, len) = match (c, self.peek(1)) {
            ('C', Some('l')) => (17, false, 2),
            ('B', Some('r')) => (35, false, 2),
            ('B', _) => (5, false, 1),
            ('C', _) => (6, false, 1),
            ('N', _) => (7, false, 1),
            ('O', _) => (8, false, 1),
            ('P', _) => (15, false, 1),
            ('S', _) => (16, false, 1),
            ('F', _) => (9, false, 1),
            ('I', _) => (53, false, 1),
            ('b', _) => (5, true, 1),
            ('c', _) => (6, true, 1),
            ('n', _) => (7, true, 1),
            ('o', _) => (8, true, 1),
            ('p', _) => (15, true, 1),
            ('s', _) => (16, true, 1),
            _ => (0, false, 1),
        };
        self.i += len;
        ReadAtom {
            z,
            aromatic,
            bracket: false,
            isotope: None,
            hcount: 0,
            charge: 0,
            chirality: Chirality::None,
            position,
        }
    }

    /// A ring-closure number: a digit, `%nn` (not starting with 0) or `%(n)` to `%(nnnnn)`.
    fn ring_number(&mut self) -> Result<u32, SmilesError> {
        let p = self.i;
        let Some('%') = self.peek(0) else {
            let d = self.peek(0).and_then(|c| c.to_digit(10)).unwrap_or(0);
            self.i += 1;
            return Ok(d);
        };
        let bad = |what: &str| {
            err(
                p,
                format!(
                    "invalid ring number at position {p}: {what}; write %10 to %99, or %(n) with one to five digits"
                ),
            )
        };
        match (self.peek(1), self.peek(2)) {
            (Some('0'), Some(d)) if d.is_ascii_digit() => Err(bad("a two-digit ring number cannot start with 0")),
            (Some(a), Some(b)) if a.is_ascii_digit() && b.is_ascii_digit() => {
                self.i += 3;
                Ok(a.to_digit(10).unwrap_or(0) * 10 + b.to_digit(10).unwrap_or(0))
            }
            (Some('('), _) => {
                let digits: String =
                    (2..).map_while(|k| self.peek(k)).take_while(char::is_ascii_digit).take(6).collect();
                if digits.is_empty() || digits.len() > 5 || self.peek(2 + digits.len()) != Some(')') {
                    return Err(bad("'%(' must be followed by one to five digits and ')'"));
                }
                self.i += 3 + digits.len();
                digits.parse().map_err(|_| bad("not a number"))
            }
            _ => Err(bad("'%' must be followed by two digits or by (digits)")),
        }
    }

    /// RDKit's `number`: `0` alone, or digits not starting with 0, below 2^31 - 1.
    fn number(&mut self) -> Result<Option<u32>, SmilesError> {
        let p = self.i;
        match self.peek(0) {
            Some('0') => {
                self.i += 1;
                Ok(Some(0))
            }
            Some(c) if c.is_ascii_digit() => {
                let mut value: i64 = 0;
                let max = i64::from(i32::MAX);
                while let Some(d) = self.peek(0).and_then(|c| c.to_digit(10)).map(i64::from) {
                    if value >= max / 10 || value * 10 >= max - d {
                        return Err(err(p, format!("number too large at position {p}")));
                    }
                    value = value * 10 + d;
                    self.i += 1;
                }
                Ok(u32::try_from(value).ok())
            }
            _ => Ok(None),
        }
    }

    fn in_bracket_error(&self, open: usize) -> SmilesError {
        let p = self.i;
        match self.peek(0) {
            None => err(open, format!("unclosed bracket atom at position {open}: no ']' follows")),
            Some(c) => err(
                p,
                format!(
                    "unexpected character at position {p}: '{c}' in the bracket atom that starts at position {open} \
                     (expected [isotope]symbol[chirality][H count][charge][:class]; the aromatic symbols read \
                     are b, c, n, o, p, s, si, as, se and te)"
                ),
            ),
        }
    }

    /// `[` isotope? symbol chirality? hydrogens? charge? (`:` class)? `]`
    fn bracket_atom(&mut self) -> Result<ReadAtom, SmilesError> {
        let open = self.i;
        self.i += 1;
        let isotope_at = self.i;
        let isotope = self.number()?;
        if isotope == Some(0) && self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            return Err(err(
                isotope_at,
                format!("invalid isotope at position {isotope_at}: a mass number cannot start with 0"),
            ));
        }
        let (z, aromatic) = self.bracket_symbol(open)?;
        let mut atom = ReadAtom {
            z,
            aromatic,
            bracket: true,
            isotope: isotope.filter(|&a| a != 0),
            hcount: 0,
            charge: 0,
            chirality: Chirality::None,
            position: open,
        };
        if self.peek(0) == Some('@') {
            if z == 1 {
                return Err(err(
                    open,
                    format!("invalid stereo at position {open}: a hydrogen atom cannot be a stereocentre"),
                ));
            }
            atom.chirality = self.chirality()?;
        }
        if self.peek(0) == Some('H') {
            self.i += 1;
            let count = self.number()?.unwrap_or(1);
            // RDKit keeps the count in a byte (`[FeH300]` has 44 hydrogens).
            atom.hcount = u8::try_from(count % 256).unwrap_or(0);
        }
        if let Some(sign @ ('+' | '-')) = self.peek(0) {
            self.i += 1;
            let magnitude = if self.peek(0) == Some(sign) {
                self.i += 1;
                2
            } else {
                self.number()?.unwrap_or(1)
            };
            // RDKit keeps the charge in a signed byte (`[C+256]` is neutral).
            let byte = u8::try_from(magnitude % 256).unwrap_or(0);
            let byte = if sign == '-' { byte.wrapping_neg() } else { byte };
            atom.charge = i8::from_ne_bytes([byte]);
        }
        if self.peek(0) == Some(':') {
            self.i += 1;
            if self.number()?.is_none() {
                return Err(self.in_bracket_error(open));
            }
        }
        if self.peek(0) != Some(']') {
            return Err(self.in_bracket_error(open));
        }
        self.i += 1;
        Ok(atom)
    }

    /// The element of a bracket atom: `*`, `#n`, a quoted symbol, or the longest symbol that
    /// names an element (`Sc` is scandium, not S and c).
    fn bracket_symbol(&mut self, open: usize) -> Result<(u8, bool), SmilesError> {
        match self.peek(0) {
            Some('*') => {
                self.i += 1;
                Ok((0, false))
            }
            Some('#') => {
                self.i += 1;
                let p = self.i;
                match self.number()? {
                    Some(z @ 0..=118) => Ok((u8::try_from(z).unwrap_or(0), false)),
                    Some(z) => Err(err(p, format!("invalid atomic number at position {p}: {z} is not an element"))),
                    None => Err(self.in_bracket_error(open)),
                }
            }
            // A few writers quote the newest elements: `['Rf']`.
            Some('\'') => {
                let name: String = [self.peek(1), self.peek(2)].into_iter().flatten().collect();
                match element(&name).filter(|&z| z >= 104) {
                    Some(z) if self.peek(3) == Some('\'') => {
                        self.i += 4;
                        Ok((z, false))
                    }
                    _ => Err(self.in_bracket_error(open)),
                }
            }
            _ => match self.lettered_symbol() {
                Some((found, len)) => {
                    self.i += len;
                    Ok(found)
                }
                None => Err(self.in_bracket_error(open)),
            },
        }
    }

    /// The longest element symbol (or aromatic symbol) starting here, and its length.
    fn lettered_symbol(&self) -> Option<((u8, bool), usize)> {
        let c0 = self.peek(0)?;
        let c1 = self.peek(1);
        // IUPAC's temporary names, which RDKit still reads.
        let temporary = ["Uun", "Uuu", "Uub", "Uut", "Uuq", "Uup", "Uuh", "Uus", "Uuo"];
        let three: String = [Some(c0), c1, self.peek(2)].into_iter().flatten().collect();
        if let Some(k) = temporary.iter().position(|t| *t == three) {
            return Some(((u8::try_from(110 + k).unwrap_or(0), false), 3));
        }
        if let Some(c1) = c1.filter(char::is_ascii_lowercase) {
            let two: String = [c0, c1].into_iter().collect();
            let found = match two.as_str() {
                "si" => Some((14, true)),
                "as" => Some((33, true)),
                "se" => Some((34, true)),
                "te" => Some((52, true)),
                _ if c0.is_ascii_uppercase() => element(&two).map(|z| (z, false)),
                _ => None,
            };
            if let Some(found) = found {
                return Some((found, 2));
            }
        }
        let found = match c0 {
            'b' => (5, true),
            'c' => (6, true),
            'n' => (7, true),
            'o' => (8, true),
            'p' => (15, true),
            's' => (16, true),
            c if c.is_ascii_uppercase() => (element(&c.to_string())?, false),
            _ => return None,
        };
        Some((found, 1))
    }

    /// `@`, `@@`, or `@` and a class (TH, AL, SP, TB, OH) with an optional permutation number.
    fn chirality(&mut self) -> Result<Chirality, SmilesError> {
        let p = self.i;
        self.i += 1;
        if self.peek(0) == Some('@') {
            self.i += 1;
            return Ok(Chirality::Tetrahedral);
        }
        let class: String = [self.peek(0), self.peek(1)].into_iter().flatten().collect();
        let (chirality, max) = match class.as_str() {
            "TH" => (Chirality::Tetrahedral, 2),
            "AL" => (Chirality::Tetrahedral, 2),
            "SP" => (Chirality::NonTetrahedral, 3),
            "TB" => (Chirality::NonTetrahedral, 20),
            "OH" => (Chirality::NonTetrahedral, 30),
            _ => return Ok(Chirality::Tetrahedral),
        };
        self.i += 2;
        match self.number()? {
            None => Ok(chirality),
            Some(n) if (1..=max).contains(&n) => Ok(chirality),
            Some(n) => Err(err(
                p,
                format!("invalid stereo at position {p}: @{class}{n} is not a permutation; @{class} takes 1 to {max}"),
            )),
        }
    }
}

/// The atomic number of an element symbol such as `Cl`.
fn element(symbol: &str) -> Option<u8> {
    let index = ELEMENTS.iter().position(|e| e.symbol == symbol)?;
    u8::try_from(index + 1).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(smiles: &str) -> Result<Read, SmilesError> {
        let chars: Vec<char> = smiles.chars().collect();
        read(&chars, 0, chars.len())
    }

    fn error(smiles: &str) -> SmilesError {
        match read_all(smiles) {
            Err(e) => e,
            Ok(r) => panic!("{smiles}: expected an error, read {} atoms", r.atoms.len()),
        }
    }

    #[test]
    fn ring_numbers_as_rdkit_writes_them() {
        for (smiles, number) in [("C0CC0", 0), ("C%10CC%10", 10), ("C%(7)CC%(7)", 7), ("C%(99999)CC%(99999)", 99_999)] {
            let r = read_all(smiles).unwrap_or_else(|e| panic!("{smiles}: {e}"));
            assert!(r.closures.iter().all(|c| c.number == number), "{smiles}");
        }
        assert_eq!(error("C%01CC%01").position, 1);
        assert!(error("C%(123456)CC").message.contains("one to five digits"));
        assert!(error("C%1CC").message.starts_with("invalid ring number at position 1"));
    }

    #[test]
    fn bracket_atoms_as_rdkit_reads_them() {
        let atom = |smiles: &str| read_all(smiles).unwrap_or_else(|e| panic!("{smiles}: {e}")).atoms[0].clone();
        assert_eq!((atom("[si]").z, atom("[si]").aromatic), (14, true));
        assert_eq!((atom("[te]").z, atom("[te]").aromatic), (52, true));
        assert_eq!(atom("[#6]").z, 6);
        assert_eq!(atom("[Uuo]").z, 118);
        assert_eq!(atom("['Rf']").z, 104);
        assert_eq!(atom("[Sc]").z, 21);
        assert_eq!(atom("[O-0]").charge, 0);
        assert_eq!(atom("[C+256]").charge, 0);
        assert_eq!(atom("[C+1000]").charge, -24);
        assert_eq!(atom("[FeH300]").hcount, 44);
        assert_eq!(atom("[C@SP]").chirality, Chirality::NonTetrahedral);
        assert_eq!(atom("[C@TH2]").chirality, Chirality::Tetrahedral);
        assert_eq!(atom("[13CH4:7]").isotope, Some(13));
        assert!(error("[C@TB21]").message.starts_with("invalid stereo at position 2: @TB21"));
        assert!(error("[#119]").message.starts_with("invalid atomic number at position 2"));
        assert!(error("[C+00]").message.starts_with("unexpected character at position 4: '0'"));
        assert!(error("[2147483647C]").message.starts_with("number too large at position 1"));
        assert!(error("[H@]").message.starts_with("invalid stereo at position 0: a hydrogen"));
        assert!(error("[sc]").message.starts_with("unexpected character at position 2: 'c'"));
    }

    #[test]
    fn bonds_as_rdkit_reads_them() {
        let symbols = |smiles: &str| -> Vec<Option<Symbol>> {
            read_all(smiles).unwrap_or_else(|e| panic!("{smiles}: {e}")).bonds.iter().map(|b| b.symbol).collect()
        };
        assert_eq!(symbols("C~C$C"), [Some(Symbol::Any), Some(Symbol::Quadruple)]);
        assert_eq!(symbols("C->[Fe]<-N"), [Some(Symbol::DativeRight), Some(Symbol::DativeLeft)]);
        assert_eq!(
            symbols("C\\\\C=C\\C"),
            [Some(Symbol::Directional), Some(Symbol::Double), Some(Symbol::Directional)]
        );
        assert_eq!(error("C\\\\\\C").position, 3);
        assert_eq!(error("C=-C").position, 2);
        assert_eq!(error("C(.C)C").position, 2);
        assert_eq!(error("C..C").position, 2);
    }
}
