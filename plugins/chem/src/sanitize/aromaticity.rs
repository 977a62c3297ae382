//! RDKit's aromaticity perception (`setAromaticity`, RDKit model), run on the Kekulé
//! structure as `MolFromSmiles` runs it after kekulization: the smallest set of smallest rings,
//! each atom's electron donation, and Hückel's 4n+2 rule on single rings and on fused
//! combinations of up to six of them.
//!
//! As in RDKit, atoms are judged by the valences and hydrogens found before kekulization
//! (RDKit's cached values) and by the Kekulé bond orders.

use super::rings::ring_systems;
use super::{Mol, Order, outer_electrons, valences};

/// What RDKit's perception finds: aromatic atoms and aromatic bonds.
pub(super) struct Aromaticity {
    pub(super) atoms: Vec<bool>,
    pub(super) bonds: Vec<bool>,
}

/// How many pi electrons an atom can give a ring (RDKit's `ElectronDonorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Donor {
    Vacant,
    One,
    Two,
    Any,
    None,
}

impl Donor {
    fn range(self) -> (i64, i64) {
        match self {
            Donor::Any => (1, 2),
            Donor::One => (1, 1),
            Donor::Two => (2, 2),
            Donor::Vacant | Donor::None => (0, 0),
        }
    }
}

/// A ring: its atoms and its bonds.
struct Ring {
    atoms: Vec<usize>,
    bonds: Vec<usize>,
    /// Which ring system (block) it belongs to; rings of different systems share no bond.
    system: usize,
}

/// Perceives aromaticity on the Kekulé structure `orders`; `valence` and `hydrogens` are each
/// atom's explicit valence and implicit hydrogens from before kekulization.
pub(super) fn perceive(mol: &Mol, orders: &[Order], valence: &[u32], hydrogens: &[u32]) -> Aromaticity {
    let mut found = Aromaticity { atoms: vec![false; mol.atoms.len()], bonds: vec![false; mol.bonds.len()] };
    let adjacency = mol.ring_adjacency();
    let rings = smallest_rings(mol, &adjacency);
    if rings.is_empty() {
        return found;
    }
    let judge = Judge { mol, orders, valence, hydrogens };
    let mut donor = vec![Donor::None; mol.atoms.len()];
    let mut candidate = vec![false; mol.atoms.len()];
    let mut seen = vec![false; mol.atoms.len()];
    let mut candidates: Vec<&Ring> = Vec::new();
    for ring in &rings {
        let mut all = true;
        for &i in &ring.atoms {
            if !seen[i] {
                seen[i] = true;
                donor[i] = judge.donor(i, ring.atoms.len());
                candidate[i] = judge.is_candidate(i, donor[i]);
            }
            all &= candidate[i];
        }
        if all && ring.atoms.iter().any(|&i| mol.atoms[i].z != 0) {
            candidates.push(ring);
        }
    }
    for system in fused_systems(&candidates) {
        huckel_on_fused(mol, orders, &candidates, &system, &donor, &mut found);
    }
    found
}

/// The atom-level tests, with RDKit's cached valences.
struct Judge<'a> {
    mol: &'a Mol,
    orders: &'a [Order],
    valence: &'a [u32],
    hydrogens: &'a [u32],
}

impl Judge<'_> {
    fn contribution(&self, i: usize, b: usize) -> u32 {
        self.orders[b].halves(i)
    }

    /// Neighbours plus hydrogens, leaving out bonds that count nothing (`~`, a donor's dative).
    fn degree(&self, i: usize) -> i64 {
        let atom = &self.mol.atoms[i];
        let mut degree =
            i64::try_from(self.mol.degree(i)).unwrap_or(0) + i64::from(atom.explicit_h + self.hydrogens[i]);
        degree -= i64::try_from(self.mol.adjacency[i].iter().filter(|&&(_, b)| self.contribution(i, b) == 0).count())
            .unwrap_or(0);
        degree
    }

    /// RDKit's `countAtomElec`: electrons the atom can give a pi system, or -1.
    fn count_electrons(&self, i: usize) -> i64 {
        let atom = &self.mol.atoms[i];
        let default = i64::from(valences(atom.z).first().copied().unwrap_or(-1));
        if default <= 1 {
            return -1;
        }
        let degree = self.degree(i);
        if degree > 3 {
            return -1;
        }
        let lone = (i64::from(outer_electrons(atom.z)) - default - i64::from(atom.charge)).max(0);
        let mut electrons = default - degree + lone - self.radicals(i);
        let unsaturations = i64::from(self.valence[i]) - i64::try_from(self.mol.degree(i)).unwrap_or(0);
        if electrons > 1 && unsaturations > 1 {
            electrons = 1;
        }
        electrons
    }

    fn radicals(&self, i: usize) -> i64 {
        radicals(self.mol, i, self.orders)
    }

    /// A multiple bond off any ring, and the atom at its other end.
    fn exocyclic_multiple(&self, i: usize) -> Option<usize> {
        self.mol.adjacency[i]
            .iter()
            .find(|&&(_, b)| !self.mol.bonds[b].in_ring && self.contribution(i, b) >= 4)
            .map(|&(j, _)| j)
    }

    fn cyclic_multiple(&self, i: usize) -> bool {
        self.mol.adjacency[i].iter().any(|&(_, b)| self.mol.bonds[b].in_ring && self.contribution(i, b) >= 4)
    }

    /// RDKit's `incidentMultipleBond`: the cached valence exceeds the bonds and written Hs.
    fn any_multiple(&self, i: usize) -> bool {
        let atom = &self.mol.atoms[i];
        let mut degree = i64::try_from(self.mol.degree(i)).unwrap_or(0) + i64::from(atom.explicit_h);
        degree -= i64::try_from(
            self.mol.adjacency[i].iter().filter(|&&(_, b)| self.contribution(i, b).div_ceil(2) == 0).count(),
        )
        .unwrap_or(0);
        i64::from(self.valence[i]) != degree
    }

    /// RDKit's `getAtomDonorTypeArom`.
    fn donor(&self, i: usize, ring_size: usize) -> Donor {
        let atom = &self.mol.atoms[i];
        if atom.z == 0 {
            return if self.cyclic_multiple(i) { Donor::One } else { Donor::Any };
        }
        let mut electrons = self.count_electrons(i);
        let exocyclic = self.exocyclic_multiple(i);
        let steals = |j: usize| more_electronegative(self.mol.atoms[j].z, atom.z);
        let donor = match electrons {
            e if e < 0 => Donor::None,
            0 if exocyclic.is_some() => Donor::Vacant,
            0 if self.cyclic_multiple(i) => Donor::One,
            0 => Donor::None,
            1 => match exocyclic {
                Some(j) if steals(j) => Donor::Vacant,
                Some(_) => Donor::One,
                None if self.any_multiple(i) => Donor::One,
                None if atom.charge == 1 => Donor::Vacant,
                None => Donor::None,
            },
            _ => {
                if exocyclic.is_some_and(steals) {
                    electrons -= 1;
                }
                if electrons % 2 == 1 { Donor::One } else { Donor::Two }
            }
        };
        // An ether O or S in a macrocycle is a bridge, not a donor.
        let plain_bridge = matches!(atom.z, 8 | 16)
            && self.mol.degree(i) == 2
            && atom.charge == 0
            && !self.mol.adjacency[i].iter().any(|&(_, b)| matches!(self.orders[b], Order::Double | Order::Triple));
        if donor == Donor::Two && ring_size >= 9 && plain_bridge { Donor::None } else { donor }
    }

    /// RDKit's `isAtomCandForArom` with its defaults.
    fn is_candidate(&self, i: usize, donor: Donor) -> bool {
        let atom = &self.mol.atoms[i];
        if atom.z > 18 && atom.z != 34 && atom.z != 52 {
            return false;
        }
        if donor == Donor::None {
            return false;
        }
        let own_default = i64::from(valences(atom.z).first().copied().unwrap_or(-1));
        let effective = i16::from(atom.z) - i16::from(atom.charge);
        let effective_default =
            u8::try_from(effective).ok().and_then(|e| valences(e).first().copied()).map_or(-1, i64::from);
        let total = i64::from(self.valence[i] + self.hydrogens[i]);
        if own_default > 0 && total > effective_default {
            return false;
        }
        if self.radicals(i) > 0 && (atom.z != 6 || atom.charge != 0) {
            return false;
        }
        let unsaturations = i64::from(self.valence[i]) - i64::try_from(self.mol.degree(i)).unwrap_or(0);
        if unsaturations > 1 {
            let multiple = self.mol.adjacency[i]
                .iter()
                .filter(|&&(_, b)| matches!(self.orders[b], Order::Double | Order::Triple))
                .count();
            if multiple > 1 {
                return false;
            }
        }
        true
    }
}

/// RDKit's `assignRadicals` for bracket atom `i` with bond orders `orders`: the electrons left
/// unpaired by its bonds and written hydrogens (`[C]`, `[CH]`, `[nH++]`, the I of `[IH]C`).
pub(super) fn radicals(mol: &Mol, i: usize, orders: &[Order]) -> i64 {
    let atom = &mol.atoms[i];
    if !atom.bracket || atom.z == 0 || valences(atom.z) == [-1] {
        return 0;
    }
    let halves: u32 = mol.adjacency[i].iter().map(|&(_, b)| orders[b].halves(i)).sum();
    let total = i64::from((halves + 2 * atom.explicit_h).div_ceil(2));
    let charge = i64::from(atom.charge);
    let outer = i64::from(outer_electrons(atom.z));
    let base = if atom.z <= 2 { 2 } else { 8 };
    let mut radicals = base - outer - total + charge;
    if radicals < 0 {
        radicals = 0;
        let list = valences(atom.z);
        if list.len() > 1
            && let Some(&v) = list.iter().find(|&&v| i64::from(v) - total + charge >= 0)
        {
            radicals = i64::from(v) - total + charge;
        }
    }
    let early = outer - total - charge;
    if early >= 0 { radicals.min(early) } else { radicals }
}

/// RDKit's `moreElectroNegative`: more valence electrons, or as many and a lower number.
fn more_electronegative(a: u8, b: u8) -> bool {
    let (ea, eb) = (outer_electrons(a), outer_electrons(b));
    ea > eb || (ea == eb && a < b)
}

/// The smallest set of smallest rings: shortest cycles through each bond and each atom pair
/// (Horton's candidates), kept while independent (Gaussian elimination over GF(2)).
fn smallest_rings(mol: &Mol, adjacency: &[Vec<(usize, usize)>]) -> Vec<Ring> {
    let mut rings = Vec::new();
    let mut in_system = vec![false; mol.atoms.len()];
    let mut index = vec![usize::MAX; mol.bonds.len()];
    let mut previous = vec![usize::MAX; mol.atoms.len()];
    for (id, system) in ring_systems(adjacency).into_iter().enumerate() {
        for &a in &system {
            in_system[a] = true;
        }
        let mut edges: Vec<usize> =
            system.iter().flat_map(|&a| adjacency[a].iter().filter(|&&(b, _)| in_system[b]).map(|&(_, e)| e)).collect();
        edges.sort_unstable();
        edges.dedup();
        for (k, &e) in edges.iter().enumerate() {
            index[e] = k;
        }
        let rank = edges.len() + 1 - system.len();
        let mut candidates: Vec<Ring> = edges
            .iter()
            .filter_map(|&e| {
                let bond = &mol.bonds[e];
                shortest_path(adjacency, &in_system, &mut previous, (bond.a, bond.b), e)
                    .map(|path| ring_from_path(adjacency, &path, id))
            })
            .collect();
        candidates.sort_by_key(|r| r.bonds.len());
        let mut basis: Vec<Vec<u64>> = Vec::new();
        for ring in candidates {
            if basis.len() == rank {
                break;
            }
            let mut vector = vec![0u64; edges.len().div_ceil(64)];
            for &b in &ring.bonds {
                let k = index[b];
                vector[k / 64] |= 1 << (k % 64);
            }
            if independent(&mut basis, vector) {
                rings.push(ring);
            }
        }
        for &a in &system {
            in_system[a] = false;
        }
    }
    rings
}

/// Adds `vector` to the row-reduced `basis` if it is independent of it.
fn independent(basis: &mut Vec<Vec<u64>>, mut vector: Vec<u64>) -> bool {
    for row in basis.iter() {
        let pivot = lead(row);
        if let Some(p) = pivot
            && vector[p / 64] & (1 << (p % 64)) != 0
        {
            for (v, r) in vector.iter_mut().zip(row) {
                *v ^= r;
            }
        }
    }
    if lead(&vector).is_none() {
        return false;
    }
    // Keep the basis reduced: clear the new pivot from the rows above.
    let p = lead(&vector).unwrap_or(0);
    for row in basis.iter_mut() {
        if row[p / 64] & (1 << (p % 64)) != 0 {
            for (r, v) in row.iter_mut().zip(&vector) {
                *r ^= v;
            }
        }
    }
    basis.push(vector);
    true
}

fn lead(vector: &[u64]) -> Option<usize> {
    vector.iter().enumerate().find(|(_, w)| **w != 0).map(|(k, w)| k * 64 + w.trailing_zeros() as usize)
}

/// Shortest path between the two atoms of `ends` inside `system`, not using bond `skip`;
/// `previous` is scratch space, all `usize::MAX`, and left so.
fn shortest_path(
    adjacency: &[Vec<(usize, usize)>],
    system: &[bool],
    previous: &mut [usize],
    ends: (usize, usize),
    skip: usize,
) -> Option<Vec<usize>> {
    let (from, to) = ends;
    let mut queue = std::collections::VecDeque::from([from]);
    let mut touched = vec![from];
    previous[from] = from;
    let mut path = None;
    while let Some(v) = queue.pop_front() {
        if v == to {
            let mut p = vec![to];
            let mut at = to;
            while at != from {
                at = previous[at];
                p.push(at);
            }
            path = Some(p);
            break;
        }
        for &(w, b) in &adjacency[v] {
            if b != skip && system[w] && previous[w] == usize::MAX {
                previous[w] = v;
                touched.push(w);
                queue.push_back(w);
            }
        }
    }
    for t in touched {
        previous[t] = usize::MAX;
    }
    path
}

/// The ring closed by a path whose ends are bonded.
fn ring_from_path(adjacency: &[Vec<(usize, usize)>], path: &[usize], system: usize) -> Ring {
    let mut bonds = Vec::with_capacity(path.len());
    for k in 0..path.len() {
        let (a, b) = (path[k], path[(k + 1) % path.len()]);
        if let Some(&(_, e)) = adjacency[a].iter().find(|&&(w, _)| w == b) {
            bonds.push(e);
        }
    }
    let mut atoms = path.to_vec();
    atoms.sort_unstable();
    bonds.sort_unstable();
    Ring { atoms, bonds, system }
}

/// Groups candidate rings that share exactly one bond (RDKit's ring neighbour map, rings of
/// at most 24 bonds), as lists of indices into `rings`.
fn fused_systems(rings: &[&Ring]) -> Vec<Vec<usize>> {
    let n = rings.len();
    let neighbours = |a: usize, b: usize| {
        rings[a].system == rings[b].system
            && rings[a].bonds.len() <= 24
            && rings[b].bonds.len() <= 24
            && rings[a].bonds.iter().filter(|x| rings[b].bonds.binary_search(x).is_ok()).count() == 1
    };
    let mut done = vec![false; n];
    let mut systems = Vec::new();
    for start in 0..n {
        if done[start] {
            continue;
        }
        done[start] = true;
        let mut system = vec![start];
        let mut k = 0;
        while k < system.len() {
            let r = system[k];
            let joined: Vec<usize> = (0..n).filter(|&other| !done[other] && neighbours(r, other)).collect();
            for other in joined {
                done[other] = true;
                system.push(other);
            }
            k += 1;
        }
        systems.push(system);
    }
    systems
}

/// Hückel's rule on every connected combination of one to six rings of `system`; marks the
/// atoms and bonds of those that pass.
fn huckel_on_fused(
    mol: &Mol,
    orders: &[Order],
    rings: &[&Ring],
    system: &[usize],
    donor: &[Donor],
    found: &mut Aromaticity,
) {
    let size = system.len();
    let max = size.min(6);
    let mut all_bonds: Vec<usize> = system.iter().flat_map(|&r| rings[r].bonds.iter().copied()).collect();
    all_bonds.sort_unstable();
    all_bonds.dedup();
    let mut done_bonds = vec![false; mol.bonds.len()];
    let mut done = 0;
    for k in 1..=max {
        if done >= all_bonds.len() || (k > 2 && size > 300) {
            break;
        }
        for combination in combinations(size, k) {
            let chosen: Vec<usize> = combination.iter().map(|&c| system[c]).collect();
            if !connected(rings, &chosen) {
                continue;
            }
            let mut all: Vec<usize> = chosen.iter().flat_map(|&r| rings[r].atoms.iter().copied()).collect();
            all.sort_unstable();
            // Atoms in one or two of the chosen rings (not the centre of acepentalene).
            let atoms: Vec<usize> =
                all.chunk_by(|a, b| a == b).filter(|run| matches!(run.len(), 1 | 2)).map(|run| run[0]).collect();
            if !huckel(&atoms, donor) {
                continue;
            }
            let mut bond_count: Vec<(usize, u8)> = Vec::new();
            for &r in &chosen {
                for &b in &rings[r].bonds {
                    match bond_count.iter_mut().find(|(x, _)| *x == b) {
                        Some((_, c)) => *c += 1,
                        None => bond_count.push((b, 1)),
                    }
                }
            }
            for &(b, c) in &bond_count {
                if c != 1 {
                    continue;
                }
                found.bonds[b] = true;
                if matches!(orders[b], Order::Single | Order::Double | Order::Aromatic) {
                    found.atoms[mol.bonds[b].a] = true;
                    found.atoms[mol.bonds[b].b] = true;
                }
                if !std::mem::replace(&mut done_bonds[b], true) {
                    done += 1;
                }
            }
        }
    }
}

/// RDKit's `applyHuckel`: some electron count in the ring's range is 4n+2 (n >= 1), or the
/// ring has at most 2 (cyclopropenyl cation); at most one atom may give 1 or 2.
fn huckel(atoms: &[usize], donor: &[Donor]) -> bool {
    let (mut low, mut high) = (0, 0);
    let mut any = 0;
    for &a in atoms {
        if donor[a] == Donor::Any {
            any += 1;
            if any > 1 {
                return false;
            }
        }
        let (l, h) = donor[a].range();
        low += l;
        high += h;
    }
    if high >= 6 { (low..=high).any(|e| (e - 2) % 4 == 0) } else { high == 2 }
}

/// Whether the chosen rings form one fused piece through rings sharing exactly one bond.
fn connected(rings: &[&Ring], chosen: &[usize]) -> bool {
    if chosen.len() == 1 {
        return true;
    }
    let shares =
        |a: usize, b: usize| rings[a].bonds.iter().filter(|x| rings[b].bonds.binary_search(x).is_ok()).count() == 1;
    let mut reached = vec![chosen[0]];
    let mut k = 0;
    while k < reached.len() {
        let r = reached[k];
        for &other in chosen {
            if !reached.contains(&other) && shares(r, other) {
                reached.push(other);
            }
        }
        k += 1;
    }
    reached.len() == chosen.len()
}

/// All `k`-element combinations of `0..n`, in lexicographic order.
fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    let mut all = Vec::new();
    if k > n {
        return all;
    }
    let mut c: Vec<usize> = (0..k).collect();
    loop {
        all.push(c.clone());
        let Some(i) = (0..k).rev().find(|&i| c[i] < n - k + i) else { return all };
        c[i] += 1;
        for j in i + 1..k {
            c[j] = c[j - 1] + 1;
        }
        // A bound, as RDKit bounds its own search on large ring systems.
        if all.len() > 20_000 {
            return all;
        }
    }
}
