//! An atom as the stages of reading hand it on: the reader finds it, sanitizing gives it its
//! hydrogens, the molecule weighs it.

use crate::elements::ELEMENTS;

/// An atom of the molecule as RDKit keeps it, with the hydrogens it carries.
#[derive(Debug, Clone)]
pub(crate) struct Atom {
    /// Atomic number; 0 for the wildcard `*`.
    pub(crate) z: u8,
    pub(crate) isotope: Option<u32>,
    pub(crate) charge: i8,
    /// Implicit, bracket and folded-in `[H]` hydrogens.
    pub(crate) hydrogens: u32,
}

/// The element symbol of atomic number `z`, or `*` for 0.
pub(crate) fn symbol(z: u8) -> &'static str {
    match z.checked_sub(1).and_then(|i| ELEMENTS.get(usize::from(i))) {
        Some(e) => e.symbol,
        None => "*",
    }
}
