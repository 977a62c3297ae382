//! RDKit's clean-up of stereo marks that mark nothing (`assignStereochemistry` with
//! `cleanIt`), which can change a hydrogen count.
//!
//! A tetrahedral mark (`@`, `@@`) on an atom with four neighbours, hydrogens included, that is
//! not a stereocentre (two of its neighbours are alike) is dropped; if the atom then has one
//! written hydrogen and no charge, RDKit drops that hydrogen too and gives the atom its
//! implicit hydrogens instead, reasoning that it was written only for the stereo mark. For a
//! metal, which takes no implicit hydrogens, the hydrogen is lost: `C[Cu@@H](C)C` is C3H9Cu,
//! while `C[Cu@H](F)Cl`, a true stereocentre, keeps it.

use super::aromaticity::radicals;
use super::{Mol, Order};
use crate::reader::Chirality;

/// Adjusts `hydrogens` (each atom's implicit hydrogens; written ones are in the atoms) for
/// the hydrogens RDKit removes with meaningless stereo marks, given the final bond `orders`.
pub(super) fn drop_stereo_hydrogens(mol: &mut Mol, orders: &[Order], hydrogens: &mut [u32]) {
    let candidates: Vec<usize> = (0..mol.atoms.len())
        .filter(|&i| {
            let atom = &mol.atoms[i];
            atom.present
                && atom.chirality == Chirality::Tetrahedral
                && atom.bracket
                && !atom.aromatic
                && atom.explicit_h == 1
                && atom.charge == 0
                && is_sp3(mol, orders, i, hydrogens[i])
        })
        .collect();
    if candidates.is_empty() {
        return;
    }
    let class = symmetry_classes(mol, orders, hydrogens);
    for i in candidates {
        if is_stereocentre(mol, &class, i) {
            continue;
        }
        let aromatic = mol.adjacency[i].iter().any(|&(_, b)| orders[b] == Order::Aromatic);
        // RDKit counts the implicit hydrogens from the valence plus the radical electrons it
        // found with the hydrogen still written (so the I of `[I@H]C` gets it back).
        let radicals = u32::try_from(radicals(mol, i, orders)).unwrap_or(0);
        let valence = (mol.explicit_valence_with(i, aromatic, orders) + radicals).saturating_sub(1);
        mol.atoms[i].explicit_h = 0;
        mol.atoms[i].bracket = false;
        hydrogens[i] = mol.implicit_hydrogens(i, valence, aromatic).unwrap_or(0);
    }
}

/// RDKit's hybridization test, as far as it decides SP3: a tetrahedral mark with four
/// neighbours (hydrogens included), or four bonds and lone pairs (`numBondsPlusLonePairs`).
fn is_sp3(mol: &Mol, orders: &[Order], i: usize, implicit: u32) -> bool {
    let atom = &mol.atoms[i];
    let hydrogens = i64::from(atom.explicit_h + implicit);
    let total_degree = i64::try_from(mol.degree(i)).unwrap_or(i64::MAX).saturating_add(hydrogens);
    if total_degree == 4 {
        return true;
    }
    if atom.z >= 89 {
        return false;
    }
    let donated = mol.adjacency[i].iter().filter(|&&(_, b)| orders[b] == Order::Dative { donor: i }).count();
    let degree = total_degree - i64::try_from(donated).unwrap_or(0);
    let outer = i64::from(super::outer_electrons(atom.z));
    let aromatic = mol.adjacency[i].iter().any(|&(_, b)| orders[b] == Order::Aromatic);
    let valence = i64::from(mol.explicit_valence_with(i, aromatic, orders)) + i64::from(implicit);
    let charge = i64::from(atom.charge);
    // Lone pairs, counted as RDKit does (integer division truncating toward zero).
    let lone_pairs = (outer - (valence + charge)) / 2;
    degree + lone_pairs == 4
}

/// Whether RDKit would keep atom `i`'s tetrahedral mark: at least three neighbours besides
/// its hydrogen, all different, or two alike ring neighbours (possible ring stereo, as in a
/// 1,4-disubstituted cyclohexane, which RDKit keeps).
fn is_stereocentre(mol: &Mol, class: &[usize], i: usize) -> bool {
    let neighbours = &mol.adjacency[i];
    if neighbours.len() < 3 {
        return false;
    }
    for (k, &(a, bond_a)) in neighbours.iter().enumerate() {
        for &(b, bond_b) in &neighbours[k + 1..] {
            if class[a] == class[b] && !(mol.bonds[bond_a].in_ring && mol.bonds[bond_b].in_ring) {
                return false;
            }
        }
    }
    true
}

/// Classes of atoms that are alike in the whole graph (iterated neighbourhood refinement, as
/// canonical ranking does before breaking ties): equal classes, equal environments.
fn symmetry_classes(mol: &Mol, orders: &[Order], hydrogens: &[u32]) -> Vec<usize> {
    let n = mol.atoms.len();
    let initial: Vec<(u8, u32, i8, u32, usize)> = (0..n)
        .map(|i| {
            let a = &mol.atoms[i];
            (a.z, a.isotope.unwrap_or(0), a.charge, a.explicit_h + hydrogens[i], mol.degree(i))
        })
        .collect();
    let mut class = ranks(&initial);
    let mut count = distinct(&class);
    loop {
        let keys: Vec<(usize, Vec<(u8, usize)>)> = (0..n)
            .map(|i| {
                let mut around: Vec<(u8, usize)> =
                    mol.adjacency[i].iter().map(|&(j, b)| (order_code(orders[b]), class[j])).collect();
                around.sort_unstable();
                (class[i], around)
            })
            .collect();
        let next = ranks(&keys);
        let next_count = distinct(&next);
        if next_count == count {
            return next;
        }
        class = next;
        count = next_count;
    }
}

fn order_code(order: Order) -> u8 {
    match order {
        Order::Single => 1,
        Order::Double => 2,
        Order::Triple => 3,
        Order::Quadruple => 4,
        Order::Aromatic => 5,
        Order::Any => 6,
        Order::Dative { .. } => 7,
    }
}

/// Each key's position among the distinct keys, in sorted order.
fn ranks<K: Ord + Clone>(keys: &[K]) -> Vec<usize> {
    let mut sorted: Vec<K> = keys.to_vec();
    sorted.sort();
    sorted.dedup();
    keys.iter().map(|k| sorted.binary_search(k).unwrap_or(0)).collect()
}

fn distinct(class: &[usize]) -> usize {
    let mut c = class.to_vec();
    c.sort_unstable();
    c.dedup();
    c.len()
}
