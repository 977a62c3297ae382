//! Why a SMILES string is not valid: the error every stage of reading gives.

use std::fmt;

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
