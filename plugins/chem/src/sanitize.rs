//! What RDKit's `MolFromSmiles` does to a parsed graph, reproduced so that hydrogens, atom
//! counts and validity match it (the steps and rules follow RDKit's `SmilesToMol`, `RemoveHs`,
//! `cleanUp`, `cleanUpOrganometallics`, valence code, `Kekulize`, `setAromaticity`, `adjustHs`
//! and `assignStereochemistry`):
//!
//! 1. a bond written without a symbol (or with `/`, `\`) between two aromatic atoms is
//!    aromatic, on a ring or not (biphenyl's link becomes single only in step 6); between an
//!    aromatic atom and `*` it is aromatic on a ring and single otherwise; `:` is always
//!    aromatic, even between upper-case atoms; `~` counts nothing toward valences;
//! 2. `RemoveHs`, which runs *before* sanitization: a plain `[H]` bonded to one ordinary atom
//!    is deleted and counted as an explicit hydrogen of that atom, whatever the bond order or
//!    the hydrogen's charge (RDKit drops the charge of a bonded `[H+]`);
//! 3. `cleanUp`: five-valent N with `=O` or `#N`, five-valent P with `=O` and `=C`/`=N`, and
//!    Cl, Br, I bonded only to O with valence 3, 5 or 7 are made charge-separated (nitro groups
//!    written `N(=O)=O`, perchloric acid written `OCl(=O)(=O)=O`); the net charge is unchanged;
//! 4. `cleanUpOrganometallics`: one single bond from an over-bonded non-metal (or an aromatic
//!    carbon with four neighbours) to a metal becomes dative and stops counting toward the
//!    non-metal's valence (`[NH3][Pt]`); ring perception leaves dative bonds out;
//! 5. valences are checked and implicit hydrogens assigned with RDKit's model: an aromatic
//!    bond counts 1.5, a charged atom is judged by the element with as many electrons (`[N+]`
//!    like C, `[O-]` like F; negative P, S, As, Se keep their own hypervalent valences); a
//!    lower-case atom counts as aromatic even without aromatic bonds;
//! 6. `Kekulize`, ring system by ring system: lower-case atoms must lie on a ring; the
//!    aromatic bonds of aromatic atoms become single, and the atoms with a free valence each
//!    get one double bond along the system's aromatic bonds (a perfect matching, where RDKit
//!    backtracks; a `*` may or may not take one);
//! 7. `setAromaticity` on the Kekulé structure (smallest rings, electron donors, Hückel on
//!    fused combinations), `adjustHs`, and the valence check and hydrogen count again on the
//!    result: `Cn=1ccnc1` fails it (N valence 4 in a ring no longer aromatic), `c1ccccc1:C` is
//!    toluene, `C1CC=sCC1` has an SH, `C1=Cs2C=CC=CC2=CC=C1` an S without one;
//! 8. `assignStereochemistry`'s clean-up: a tetrahedral mark that marks no stereocentre is
//!    dropped with the one hydrogen written for it (`C[Cu@@H](C)C` is C3H9Cu).

use crate::atom::Atom;
use crate::elements::ELEMENTS;
use crate::error::SmilesError;
use crate::reader::Chirality;

mod aromaticity;
mod kekulization;
mod rings;
mod stereo;

use kekulization::{final_hydrogens, kekulize};
use rings::ring_bonds;

/// An atom as written in the SMILES.
pub(crate) struct WrittenAtom {
    /// Atomic number; 0 for `*`.
    pub(crate) z: u8,
    /// Written with a lower-case symbol.
    pub(crate) aromatic: bool,
    /// Written in brackets: it has exactly the hydrogens written and no implicit ones.
    pub(crate) bracket: bool,
    pub(crate) isotope: Option<u32>,
    pub(crate) hcount: u8,
    pub(crate) charge: i8,
    pub(crate) chirality: Chirality,
    /// Where the atom starts in the SMILES (0-based, in characters).
    pub(crate) position: usize,
}

/// A bond symbol as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// No symbol.
    Implicit,
    Single,
    Double,
    Triple,
    Quadruple,
    /// `:`
    Aromatic,
    /// `/` or `\`
    Directional,
    /// `~`: any order; it counts nothing toward either atom's valence.
    Any,
    /// `->` or `<-`, from the bond's first atom (the donor) to its second.
    Dative,
}

/// A bond as written: its two atoms and its symbol.
pub(crate) struct WrittenBond {
    pub(crate) a: usize,
    pub(crate) b: usize,
    pub(crate) written: Written,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Single,
    Double,
    Triple,
    Quadruple,
    Aromatic,
    /// `~`: counts nothing toward valences.
    Any,
    /// Dative from `donor` to the other atom: counts only toward the acceptor's valence.
    Dative {
        donor: usize,
    },
}

struct Bond {
    a: usize,
    b: usize,
    order: Order,
    directional: bool,
    in_ring: bool,
    present: bool,
}

impl Order {
    /// RDKit's valence contribution to `atom`, in half units (an aromatic bond is 3).
    fn halves(self, atom: usize) -> u32 {
        match self {
            Order::Single => 2,
            Order::Double => 4,
            Order::Triple => 6,
            Order::Quadruple => 8,
            Order::Aromatic => 3,
            Order::Any => 0,
            Order::Dative { donor } if donor == atom => 0,
            Order::Dative { .. } => 2,
        }
    }
}

impl Bond {
    /// RDKit's valence contribution to `atom`, in half units (an aromatic bond is 3).
    fn halves(&self, atom: usize) -> u32 {
        self.order.halves(atom)
    }
}

struct Node {
    z: u8,
    aromatic: bool,
    bracket: bool,
    isotope: Option<u32>,
    charge: i8,
    /// Bracket hydrogens plus `[H]` atoms folded into this atom.
    explicit_h: u32,
    /// `@SP`, `@TB` or `@OH` stereo: RDKit keeps `[H]` atoms bonded to such a centre.
    non_tetrahedral: bool,
    chirality: Chirality,
    position: usize,
    present: bool,
}

struct Mol {
    atoms: Vec<Node>,
    bonds: Vec<Bond>,
    /// For each atom, (neighbour, bond index) over present bonds.
    adjacency: Vec<Vec<(usize, usize)>>,
}

impl Mol {
    fn rebuild_adjacency(&mut self) {
        self.adjacency = vec![Vec::new(); self.atoms.len()];
        for (i, bond) in self.bonds.iter().enumerate().filter(|(_, b)| b.present) {
            self.adjacency[bond.a].push((bond.b, i));
            self.adjacency[bond.b].push((bond.a, i));
        }
    }

    /// The adjacency RDKit's ring perception sees: dative bonds are left out.
    fn ring_adjacency(&self) -> Vec<Vec<(usize, usize)>> {
        self.adjacency
            .iter()
            .map(|list| {
                list.iter().copied().filter(|&(_, b)| !matches!(self.bonds[b].order, Order::Dative { .. })).collect()
            })
            .collect()
    }

    /// Sets `in_ring` on every bond from the current bonds.
    fn mark_rings(&mut self) {
        let ring = ring_bonds(&self.ring_adjacency(), self.bonds.len());
        for (bond, in_ring) in self.bonds.iter_mut().zip(ring) {
            bond.in_ring = in_ring && !matches!(bond.order, Order::Dative { .. });
        }
    }

    fn degree(&self, i: usize) -> usize {
        self.adjacency[i].len()
    }

    /// RDKit's `isAromaticAtom` before kekulization: written lower-case, or bearing an
    /// aromatic bond.
    fn is_aromatic_atom(&self, i: usize) -> bool {
        self.atoms[i].aromatic || self.adjacency[i].iter().any(|&(_, b)| self.bonds[b].order == Order::Aromatic)
    }

    /// RDKit's `calculateExplicitValence`, without its checks.
    fn explicit_valence(&self, i: usize, aromatic: bool) -> u32 {
        let halves = self.adjacency[i].iter().map(|&(_, b)| self.bonds[b].halves(i)).sum::<u32>();
        self.valence_from_halves(i, aromatic, halves + 2 * self.atoms[i].explicit_h)
    }

    /// [`Mol::explicit_valence`] with the bond orders `orders` (indexed like `bonds`).
    fn explicit_valence_with(&self, i: usize, aromatic: bool, orders: &[Order]) -> u32 {
        self.explicit_valence_hydrogens(i, aromatic, orders, self.atoms[i].explicit_h)
    }

    /// [`Mol::explicit_valence_with`] as if atom `i` had `hydrogens` written hydrogens.
    fn explicit_valence_hydrogens(&self, i: usize, aromatic: bool, orders: &[Order], hydrogens: u32) -> u32 {
        let halves = self.adjacency[i].iter().map(|&(_, b)| orders[b].halves(i)).sum::<u32>();
        self.valence_from_halves(i, aromatic, halves + 2 * hydrogens)
    }

    /// The explicit valence of atom `i` from its bonds and hydrogens counted in half units.
    fn valence_from_halves(&self, i: usize, aromatic: bool, halves: u32) -> u32 {
        let atom = &self.atoms[i];
        let mut halves = halves;
        let list = valences(effective_z(atom.z, atom.charge));
        let default = i64::from(list.first().copied().unwrap_or(-1));
        // An aromatic atom whose bond orders overshoot its default valence is taken down to
        // the allowed valence just below, if within 1.5 (RDKit's words: the N of c1cccn1C
        // kekulizes to valence 3).
        if aromatic && default >= 0 && i64::from(halves) > 2 * default {
            let mut below = default;
            for &v in list {
                if v == -1 || 2 * i64::from(v) > i64::from(halves) {
                    break;
                }
                below = i64::from(v);
            }
            if i64::from(halves) - 2 * below <= 3 {
                halves = u32::try_from(2 * below).unwrap_or(halves);
            }
        }
        // x.5 rounds up (RDKit adds 0.1 before rounding).
        halves.div_ceil(2)
    }

    /// RDKit's strict explicit-valence check; `Err` holds the largest valence allowed.
    fn check_valence(&self, i: usize, valence: u32) -> Result<(), i64> {
        let atom = &self.atoms[i];
        if atom.z == 0 {
            return Ok(());
        }
        let own = valences(atom.z);
        let effective = effective_z(atom.z, atom.charge);
        let mut max = last(valences(effective));
        let mut offset = 0;
        // Negative P, S, As and Se are isoelectronic with non-hypervalent Cl/Ar or Br/Kr,
        // but keep their own hypervalent valences.
        if can_be_hypervalent(atom.z, effective) {
            max = last(own);
            offset = -i64::from(atom.charge);
        }
        // RDKit has always accepted two-coordinate hydride.
        if atom.z == 1 && atom.charge == -1 {
            max = 2;
        }
        if max >= 0 && last(own) >= 0 && i64::from(valence) + offset > max {
            return Err(max - offset);
        }
        Ok(())
    }

    /// RDKit's `calculateImplicitValence` for an organic-subset atom, strict.
    fn implicit_hydrogens(&self, i: usize, valence: u32, aromatic: bool) -> Result<u32, ()> {
        let atom = &self.atoms[i];
        if atom.bracket || atom.z == 0 {
            return Ok(0);
        }
        let own = valences(atom.z);
        let effective = effective_z(atom.z, atom.charge);
        if effective == 0 {
            return Ok(0);
        }
        let mut list = valences(effective);
        let default = i64::from(list.first().copied().unwrap_or(-1));
        if default == -1 {
            return Ok(0);
        }
        let mut valence = i64::from(valence);
        if can_be_hypervalent(atom.z, effective) {
            list = own;
            valence -= i64::from(atom.charge);
        }
        let hydrogens = if aromatic {
            if valence <= default {
                default - valence
            } else if list.iter().take_while(|&&v| v > 0).any(|&v| i64::from(v) == valence) {
                0
            } else {
                return Err(());
            }
        } else {
            match list.iter().take_while(|&&v| v >= 0).map(|&v| i64::from(v)).find(|&v| valence <= v) {
                Some(v) => v - valence,
                None if last(list) != -1 && last(own) > 0 => return Err(()),
                None => 0,
            }
        };
        u32::try_from(hydrogens).map_err(|_| ())
    }
}

fn valences(z: u8) -> &'static [i8] {
    match z.checked_sub(1).and_then(|i| ELEMENTS.get(usize::from(i))) {
        Some(e) => e.valences,
        None => &[-1],
    }
}

/// RDKit's `GetNOuterElecs`; 0 for `*`.
fn outer_electrons(z: u8) -> u8 {
    z.checked_sub(1).and_then(|i| ELEMENTS.get(usize::from(i))).map_or(0, |e| e.outer_electrons)
}

fn last(list: &[i8]) -> i64 {
    i64::from(list.last().copied().unwrap_or(-1))
}

/// RDKit's `getEffectiveAtomicNum`: the element with as many electrons, unless the element
/// has no valence rules at all (metals).
fn effective_z(z: u8, charge: i8) -> u8 {
    if valences(z) == [-1] {
        return z;
    }
    u8::try_from((i16::from(z) - i16::from(charge)).clamp(0, 118)).unwrap_or(z)
}

fn can_be_hypervalent(z: u8, effective: u8) -> bool {
    (effective > 16 && matches!(z, 15 | 16)) || (effective > 34 && matches!(z, 33 | 34))
}

/// Whether RDKit counts element `z` as a metal: everything but the 22 non-metals (and `*`).
fn is_metal(z: u8) -> bool {
    !matches!(z, 0..=2 | 5..=10 | 14..=18 | 33..=36 | 52..=54 | 85 | 86)
}

/// RDKit's `isEarlyAtom` (left of carbon), which flips the sign of a charge in `Kekulize`.
fn is_early(z: u8) -> bool {
    matches!(
        z,
        3..=5 | 11..=13 | 19..=22 | 30..=32 | 37..=41 | 48..=51 | 55..=61 | 72 | 73 | 80..=83 | 87..=93 | 104..=118
    )
}

fn symbol(z: u8) -> &'static str {
    crate::atom::symbol(z)
}

fn err(position: usize, message: String) -> SmilesError {
    SmilesError { position, message }
}

/// Runs the steps listed in the module documentation and returns the atoms RDKit keeps.
pub(crate) fn sanitize(
    written_atoms: Vec<WrittenAtom>,
    written_bonds: Vec<WrittenBond>,
) -> Result<Vec<Atom>, SmilesError> {
    let atoms: Vec<Node> = written_atoms
        .into_iter()
        .map(|a| Node {
            z: a.z,
            aromatic: a.aromatic,
            bracket: a.bracket,
            isotope: a.isotope,
            charge: a.charge,
            explicit_h: u32::from(a.hcount),
            non_tetrahedral: a.chirality == Chirality::NonTetrahedral,
            chirality: a.chirality,
            position: a.position,
            present: true,
        })
        .collect();
    let mut bonds = Vec::with_capacity(written_bonds.len());
    let mut implicit_aromatic = Vec::with_capacity(written_bonds.len());
    for w in &written_bonds {
        let both_aromatic = atoms[w.a].aromatic && atoms[w.b].aromatic;
        let aromatic_or_star = |x: usize, y: usize| atoms[x].aromatic && (atoms[y].aromatic || atoms[y].z == 0);
        let order = match w.written {
            // RDKit reads `/` and `\` between aromatic atoms as aromatic bonds with a direction.
            Written::Implicit | Written::Directional
                if both_aromatic || aromatic_or_star(w.a, w.b) || aromatic_or_star(w.b, w.a) =>
            {
                Order::Aromatic
            }
            Written::Implicit | Written::Single | Written::Directional => Order::Single,
            Written::Double => Order::Double,
            Written::Triple => Order::Triple,
            Written::Quadruple => Order::Quadruple,
            Written::Aromatic => Order::Aromatic,
            Written::Any => Order::Any,
            Written::Dative => Order::Dative { donor: w.a },
        };
        implicit_aromatic.push(w.written != Written::Aromatic && order == Order::Aromatic);
        bonds.push(Bond {
            a: w.a,
            b: w.b,
            order,
            directional: w.written == Written::Directional,
            in_ring: false,
            present: true,
        });
    }
    let mut mol = Mol { atoms, bonds, adjacency: Vec::new() };
    mol.rebuild_adjacency();

    // 1. Ring bonds; an unwritten bond between an aromatic atom and `*` off any ring is single.
    // (Between two aromatic atoms it stays aromatic until kekulization, as in RDKit.)
    mol.mark_rings();
    for (i, bond) in mol.bonds.iter_mut().enumerate() {
        if implicit_aromatic[i] && !bond.in_ring && (mol.atoms[bond.a].z == 0 || mol.atoms[bond.b].z == 0) {
            bond.order = Order::Single;
        }
    }

    fold_hydrogens(&mut mol);
    clean_up(&mut mol);
    clean_up_organometallics(&mut mol);
    mol.mark_rings();

    // 5. Valences and implicit hydrogens.
    let n = mol.atoms.len();
    let mut valence = vec![0u32; n];
    let mut implicit = vec![0u32; n];
    for i in (0..n).filter(|&i| mol.atoms[i].present) {
        let aromatic = mol.is_aromatic_atom(i);
        let v = mol.explicit_valence(i, aromatic);
        let atom = &mol.atoms[i];
        let what =
            if atom.charge == 0 { symbol(atom.z).to_owned() } else { format!("{}{:+}", symbol(atom.z), atom.charge) };
        if let Err(max) = mol.check_valence(i, v) {
            let p = atom.position;
            return Err(err(
                p,
                format!("invalid valence at position {p}: {what} has valence {v}, more than the {max} allowed"),
            ));
        }
        implicit[i] = mol.implicit_hydrogens(i, v, aromatic).map_err(|()| {
            let p = atom.position;
            err(p, format!("invalid valence at position {p}: {what} cannot have valence {v}"))
        })?;
        valence[i] = v;
    }

    let orders = kekulize(&mol, &valence, &implicit)?;
    let aromaticity = aromaticity::perceive(&mol, &orders, &valence, &implicit);
    let mut implicit = final_hydrogens(&mol, &orders, &aromaticity, &implicit)?;
    stereo::drop_stereo_hydrogens(&mut mol, &orders, &mut implicit);

    Ok(mol
        .atoms
        .iter()
        .zip(implicit)
        .filter(|(a, _)| a.present)
        .map(|(a, h)| Atom { z: a.z, isotope: a.isotope, charge: a.charge, hydrogens: a.explicit_h + h })
        .collect())
}

/// 2. RDKit's default `RemoveHs`: which `[H]` atoms become a hydrogen count on their neighbour.
///
/// RDKit keeps isotopic, unbonded and multiply bonded hydrogens, hydride, hydrogens bonded to
/// H or `*`, those on an `@SP`/`@TB`/`@OH` centre, and a hydrogen written with `/` or `\`
/// that is its atom's only substituent besides a double bond (`[H]/C=C/F`).
fn fold_hydrogens(mol: &mut Mol) {
    let mut folded = Vec::new();
    for i in 0..mol.atoms.len() {
        let atom = &mol.atoms[i];
        if atom.z != 1 || atom.isotope.is_some() || atom.charge == -1 {
            continue;
        }
        let [(other, bond)] = mol.adjacency[i][..] else { continue };
        let neighbour = &mol.atoms[other];
        if matches!(neighbour.z, 0 | 1) || neighbour.non_tetrahedral {
            continue;
        }
        let defines_stereo = mol.bonds[bond].directional
            && mol.degree(other) == 2
            && mol.adjacency[other].iter().any(|&(_, b)| mol.bonds[b].order == Order::Double);
        if !defines_stereo {
            folded.push((i, other, bond));
        }
    }
    for (h, other, bond) in folded {
        // A hydrogen folded into another folded hydrogen cannot happen: H-H pairs are kept.
        mol.atoms[h].present = false;
        mol.bonds[bond].present = false;
        mol.atoms[other].explicit_h += 1;
    }
    mol.rebuild_adjacency();
}

/// 3. RDKit's `cleanUp`: charge-separates hypervalent N, P and halogen groups.
fn clean_up(mol: &mut Mol) {
    for i in 0..mol.atoms.len() {
        let atom = &mol.atoms[i];
        if !atom.present || atom.charge != 0 {
            continue;
        }
        // RDKit computes these valences as if the atom were not aromatic.
        let aromatic = mol.adjacency[i].iter().any(|&(_, b)| mol.bonds[b].order == Order::Aromatic);
        let valence = mol.explicit_valence(i, aromatic);
        match atom.z {
            7 if valence == 5 => {
                let found = mol.adjacency[i].iter().find_map(|&(j, b)| {
                    let (z, charge, order) = (mol.atoms[j].z, mol.atoms[j].charge, mol.bonds[b].order);
                    match (z, charge, order) {
                        (8, 0, Order::Double) => Some((j, b, Order::Single)),
                        (7, 0, Order::Triple) => Some((j, b, Order::Double)),
                        _ => None,
                    }
                });
                if let Some((j, b, order)) = found {
                    mol.bonds[b].order = order;
                    mol.atoms[i].charge = 1;
                    mol.atoms[j].charge = -1;
                }
            }
            15 if valence == 5 && mol.degree(i) == 3 => {
                let mut double_to_o = None;
                let mut double_to_c_or_n = false;
                for &(j, b) in &mol.adjacency[i] {
                    let other = &mol.atoms[j];
                    if mol.bonds[b].order == Order::Double {
                        if other.z == 8 && other.charge == 0 {
                            double_to_o = Some((j, b));
                        } else if matches!(other.z, 6 | 7) && mol.degree(j) >= 2 {
                            double_to_c_or_n = true;
                        }
                    }
                }
                if let (true, Some((j, b))) = (double_to_c_or_n, double_to_o) {
                    mol.bonds[b].order = Order::Single;
                    mol.atoms[i].charge = 1;
                    mol.atoms[j].charge = -1;
                }
            }
            17 | 35 | 53
                if matches!(valence, 3 | 5 | 7) && mol.adjacency[i].iter().all(|&(j, _)| mol.atoms[j].z == 8) =>
            {
                let doubles: Vec<(usize, usize)> =
                    mol.adjacency[i].iter().copied().filter(|&(_, b)| mol.bonds[b].order == Order::Double).collect();
                for &(j, b) in &doubles {
                    mol.bonds[b].order = Order::Single;
                    mol.atoms[j].charge = -1;
                }
                mol.atoms[i].charge = i8::try_from(doubles.len()).unwrap_or(0);
            }
            _ => {}
        }
    }
}

/// 4. RDKit's `cleanUpOrganometallics`.
fn clean_up_organometallics(mol: &mut Mol) {
    for i in 0..mol.atoms.len() {
        let atom = &mol.atoms[i];
        if !atom.present || is_metal(atom.z) || matches!(atom.z, 1 | 2 | 9 | 10) {
            continue;
        }
        let effective = i16::from(atom.z) - i16::from(atom.charge);
        let Some(max) = u8::try_from(effective).ok().filter(|&e| e > 0).map(|e| last(valences(e))) else {
            continue;
        };
        let aromatic = mol.is_aromatic_atom(i);
        let v = mol.explicit_valence(i, aromatic);
        let valence = i64::from(v);
        // RDKit's special case for an aromatic carbon bonded to a metal (cyclopentadienyl):
        // at its maximum valence with four neighbours and hydrogens, it is hypervalent too.
        let total_degree = mol.degree(i) as u64
            + u64::from(atom.explicit_h)
            + u64::from(mol.implicit_hydrogens(i, v, aromatic).unwrap_or(0));
        let crowded_aromatic = atom.aromatic && valence == max && total_degree == 4;
        if max <= 0 || (valence <= max && !crowded_aromatic) {
            continue;
        }
        let to_metal = mol.adjacency[i]
            .iter()
            .find(|&&(j, b)| mol.bonds[b].order == Order::Single && is_metal(mol.atoms[j].z))
            .map(|&(_, b)| b);
        if let Some(b) = to_metal {
            mol.bonds[b].order = Order::Dative { donor: i };
        }
    }
}
