//! Ring perception as RDKit's sanitization uses it: which bonds lie on a ring, and which atoms
//! form a ring system (rings joined by shared bonds).

/// The ring systems: the atoms of each biconnected block with a ring, i.e. of rings joined by
/// shared bonds (spiro rings, which share only an atom, are separate systems). Tarjan's
/// algorithm with a stack of edges, iteratively so that long chains cannot overflow the stack.
pub(super) fn ring_systems(adjacency: &[Vec<(usize, usize)>], atom_count: usize) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let mut discovered = vec![UNSEEN; atom_count];
    let mut low = vec![0; atom_count];
    let mut time = 0;
    let mut edges: Vec<(usize, usize)> = Vec::new();
    let mut systems = Vec::new();
    for start in 0..atom_count {
        if discovered[start] != UNSEEN {
            continue;
        }
        discovered[start] = time;
        low[start] = time;
        time += 1;
        let mut stack: Vec<(usize, Option<usize>, usize)> = vec![(start, None, 0)];
        while let Some(top) = stack.last_mut() {
            let (v, via, next) = *top;
            if let Some(&(w, bond)) = adjacency[v].get(next) {
                top.2 += 1;
                if Some(bond) == via {
                    continue;
                }
                if discovered[w] == UNSEEN {
                    edges.push((v, w));
                    discovered[w] = time;
                    low[w] = time;
                    time += 1;
                    stack.push((w, Some(bond), 0));
                } else if discovered[w] < discovered[v] {
                    edges.push((v, w));
                    low[v] = low[v].min(discovered[w]);
                }
            } else {
                stack.pop();
                let Some(&(parent, ..)) = stack.last() else { continue };
                low[parent] = low[parent].min(low[v]);
                if low[v] >= discovered[parent] {
                    // The edges pushed since (parent, v) form one block.
                    let at = edges.iter().rposition(|&e| e == (parent, v)).unwrap_or(0);
                    let block: Vec<(usize, usize)> = edges.split_off(at);
                    if block.len() > 1 {
                        let mut atoms: Vec<usize> = block.iter().flat_map(|&(a, b)| [a, b]).collect();
                        atoms.sort_unstable();
                        atoms.dedup();
                        systems.push(atoms);
                    }
                }
            }
        }
    }
    systems
}

/// Which bonds lie on a ring (are not bridges), by Tarjan's low-link DFS, iteratively so that
/// long chains cannot overflow the stack.
pub(super) fn ring_bonds(adjacency: &[Vec<(usize, usize)>], bond_count: usize) -> Vec<bool> {
    const UNSEEN: usize = usize::MAX;
    let mut in_ring = vec![true; bond_count];
    let mut discovered = vec![UNSEEN; adjacency.len()];
    let mut low = vec![0; adjacency.len()];
    let mut time = 0;
    for start in 0..adjacency.len() {
        if discovered[start] != UNSEEN {
            continue;
        }
        discovered[start] = time;
        low[start] = time;
        time += 1;
        // (atom, bond it was reached by, index of the next neighbour to look at)
        let mut stack: Vec<(usize, Option<usize>, usize)> = vec![(start, None, 0)];
        while let Some(top) = stack.last_mut() {
            let (v, via, next) = *top;
            if let Some(&(w, bond)) = adjacency[v].get(next) {
                top.2 += 1;
                if Some(bond) == via {
                    continue;
                }
                if discovered[w] == UNSEEN {
                    discovered[w] = time;
                    low[w] = time;
                    time += 1;
                    stack.push((w, Some(bond), 0));
                } else {
                    low[v] = low[v].min(discovered[w]);
                }
            } else {
                stack.pop();
                if let (Some(&(parent, ..)), Some(bond)) = (stack.last(), via) {
                    low[parent] = low[parent].min(low[v]);
                    if low[v] > discovered[parent] {
                        in_ring[bond] = false;
                    }
                }
            }
        }
    }
    in_ring
}
