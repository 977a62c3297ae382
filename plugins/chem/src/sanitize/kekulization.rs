//! Steps 6 and 7: RDKit's `Kekulize`, ring system by ring system, and the valence check and
//! hydrogen counts RDKit repeats on the Kekulé structure.

use super::aromaticity::Aromaticity;
use super::rings::ring_systems;
use super::{Mol, Node, Order, err, is_early, symbol, valences};
use crate::error::SmilesError;
use crate::kekule;

/// Step 6, RDKit's `Kekulize`: gives the aromatic atoms Kekulé double bonds, ring system by
/// ring system (rings that share a bond), and returns every bond's order afterwards.
///
/// In a ring system with an aromatic atom, every aromatic bond of its aromatic atoms becomes
/// single (the link of biphenyl, a `:` to a chain atom), then each atom with a free valence
/// gets one double bond along the system's aromatic bonds (a perfect matching, where RDKit
/// backtracks; a `*` may or may not take one). Aromatic bonds outside ring systems (`C:C`)
/// stay aromatic.
pub(super) fn kekulize(mol: &Mol, valence: &[u32], implicit: &[u32]) -> Result<Vec<Order>, SmilesError> {
    let n = mol.atoms.len();
    for i in (0..n).filter(|&i| mol.atoms[i].present) {
        let atom = &mol.atoms[i];
        let on_ring = mol.adjacency[i].iter().any(|&(_, b)| mol.bonds[b].in_ring);
        if atom.aromatic && !on_ring {
            let p = atom.position;
            return Err(err(
                p,
                format!("invalid aromatic atom at position {p}: aromatic (lower-case) atoms must be in a ring"),
            ));
        }
    }
    let mut orders: Vec<Order> = mol.bonds.iter().map(|b| b.order).collect();
    let aromatic_atom = |i: usize| mol.atoms[i].aromatic || mol.is_aromatic_atom(i);
    // Per-atom scratch space, filled for one ring system at a time and cleared after it.
    let mut candidate = vec![false; n];
    let mut optional = vec![false; n];
    let mut index: Vec<Option<usize>> = vec![None; n];
    for system in ring_systems(&mol.ring_adjacency()) {
        if !system.iter().any(|&i| aromatic_atom(i) || mol.atoms[i].z == 0) {
            continue;
        }
        let mut to_single = Vec::new();
        for &i in &system {
            if mol.atoms[i].z == 0 {
                // A `*` on an aromatic ring may or may not take a double bond.
                optional[i] = mol.adjacency[i]
                    .iter()
                    .any(|&(_, b)| mol.bonds[b].in_ring && mol.bonds[b].order == Order::Aromatic);
                candidate[i] = optional[i];
            } else if aromatic_atom(i) {
                to_single.extend(
                    mol.adjacency[i].iter().filter(|&&(_, b)| mol.bonds[b].order == Order::Aromatic).map(|&(_, b)| b),
                );
                candidate[i] = takes_double_bond(mol, i, valence[i], implicit[i]);
            }
        }
        let members: Vec<usize> = system.iter().copied().filter(|&i| candidate[i]).collect();
        for (k, &i) in members.iter().enumerate() {
            index[i] = Some(k);
        }
        let mut edges: Vec<(usize, usize, usize)> = Vec::new();
        for &i in &members {
            for &(j, k) in &mol.adjacency[i] {
                let b = &mol.bonds[k];
                let eligible = b.order == Order::Aromatic || mol.atoms[b.a].z == 0 || mol.atoms[b.b].z == 0;
                if let (true, true, Some(x), Some(y)) = (eligible, i < j, index[i], index[j]) {
                    edges.push((x, y, k));
                }
            }
        }
        let member_optional: Vec<bool> = members.iter().map(|&i| optional[i]).collect();
        for &i in &system {
            candidate[i] = false;
            optional[i] = false;
            index[i] = None;
        }
        let pairs: Vec<(usize, usize)> = edges.iter().map(|&(a, b, _)| (a, b)).collect();
        let mate = kekule::cover(members.len(), &pairs, &member_optional).map_err(|k| {
            let failed = members.get(k).copied().unwrap_or(0);
            let p = aromatic_system(mol, failed).into_iter().map(|i| mol.atoms[i].position).min().unwrap_or(0);
            err(
                p,
                format!(
                    "cannot kekulize the aromatic system at position {p}: its atoms cannot be given alternating double bonds (a pyrrole-type nitrogen must be written [nH])"
                ),
            )
        })?;
        for b in to_single {
            orders[b] = Order::Single;
        }
        for &(a, b, k) in &edges {
            if mate.get(a) == Some(&b) {
                orders[k] = Order::Double;
            } else if orders[k] == Order::Aromatic {
                orders[k] = Order::Single;
            }
        }
    }
    Ok(orders)
}

/// RDKit's `markDbondCands`: whether aromatic atom `i` needs one double bond, i.e. one more
/// bond order would bring it to its (charge-adjusted) valence.
fn takes_double_bond(mol: &Mol, i: usize, valence: u32, implicit: u32) -> bool {
    let atom = &mol.atoms[i];
    let mut sum = 0i64;
    let mut ignored = 0i64;
    for &(_, b) in &mol.adjacency[i] {
        let bond = &mol.bonds[b];
        if bond.order == Order::Aromatic {
            sum += 1;
        } else {
            let contribution = i64::from(bond.halves(i) / 2);
            sum += contribution;
            if contribution == 0 {
                ignored += 1;
            }
        }
    }
    sum += i64::from(atom.explicit_h + implicit);
    let list = valences(atom.z);
    let mut charge = i64::from(atom.charge);
    if is_early(atom.z) {
        charge = -charge;
    }
    if atom.z == 6 && charge > 0 {
        charge = -charge;
    }
    let mut default = i64::from(list.first().copied().unwrap_or(-1)) + charge;
    let total = i64::from(valence + implicit);
    for &v in list.iter().skip(1) {
        if total <= default || v <= 0 {
            break;
        }
        default = i64::from(v) + charge;
    }
    let degree = i64::try_from(mol.degree(i)).unwrap_or(i64::MAX) + i64::from(implicit) - ignored;
    if degree >= default {
        return false;
    }
    default == sum + 1 || (atom.bracket && default == sum + 2)
}

/// Step 7: what RDKit does after kekulization: it perceives aromaticity again (`aromaticity`),
/// keeps the hydrogens an aromatic atom had before (`adjustHs`), and checks valences and
/// counts implicit hydrogens once more on the result.
///
/// So `c1ccccc1:C` is toluene (the chain carbon's `:` became single), the N of `Cn=1ccnc1`
/// fails (valence 4 in a ring that is no longer aromatic), and `C1CC=sCC1` has an SH.
pub(super) fn final_hydrogens(
    mol: &Mol,
    orders: &[Order],
    aromaticity: &Aromaticity,
    first: &[u32],
) -> Result<Vec<u32>, SmilesError> {
    let final_orders: Vec<Order> = orders
        .iter()
        .zip(&aromaticity.bonds)
        .map(|(&o, &aromatic)| if aromatic && matches!(o, Order::Single | Order::Double) { Order::Aromatic } else { o })
        .collect();
    let mut hydrogens = first.to_vec();
    for i in (0..mol.atoms.len()).filter(|&i| mol.atoms[i].present) {
        let atom = &mol.atoms[i];
        let aromatic = aromaticity.atoms[i]
            || mol.adjacency[i].iter().any(|&(_, b)| aromaticity.bonds[b] || final_orders[b] == Order::Aromatic);
        let v = mol.explicit_valence_with(i, aromatic, &final_orders);
        if let Err(max) = mol.check_valence(i, v) {
            let p = atom.position;
            return Err(err(
                p,
                format!(
                    "invalid valence at position {p}: {} has valence {v} once its aromatic bonds are made single and double (Kekulé form), more than the {max} allowed",
                    describe(atom)
                ),
            ));
        }
        let new = mol.implicit_hydrogens(i, v, aromatic).map_err(|()| {
            let p = atom.position;
            err(p, format!("invalid valence at position {p}: {} cannot have valence {v}", describe(atom)))
        })?;
        // `adjustHs`: an aromatic atom that would lose implicit hydrogens gets them back as
        // written ones, and its implicit hydrogens are counted again with them.
        hydrogens[i] = new;
        if (aromatic || mol.is_aromatic_atom(i)) && new < first[i] {
            let added = first[i] - new;
            let v = mol.explicit_valence_hydrogens(i, aromatic, &final_orders, atom.explicit_h + added);
            hydrogens[i] = added + mol.implicit_hydrogens(i, v, aromatic).unwrap_or(0);
        }
    }
    Ok(hydrogens)
}

/// `N` or `N+1`: an atom's element and charge, for messages.
fn describe(atom: &Node) -> String {
    if atom.charge == 0 { symbol(atom.z).to_owned() } else { format!("{}{:+}", symbol(atom.z), atom.charge) }
}

/// The atoms connected to `start` through aromatic bonds.
fn aromatic_system(mol: &Mol, start: usize) -> Vec<usize> {
    let mut seen = vec![false; mol.atoms.len()];
    let mut system = Vec::new();
    let mut todo = vec![start];
    while let Some(i) = todo.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        system.push(i);
        todo.extend(mol.adjacency[i].iter().filter(|&&(_, b)| mol.bonds[b].order == Order::Aromatic).map(|&(j, _)| j));
    }
    system
}
