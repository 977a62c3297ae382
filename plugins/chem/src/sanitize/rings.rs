//! Ring perception as RDKit's sanitization uses it: which bonds lie on a ring, and which atoms
//! form a ring system (rings joined by shared bonds). Both come from one walk: Tarjan's
//! low-link depth-first search, iterative so that long chains cannot overflow the stack.

/// What the walk reports, in order.
enum Event {
    /// An edge from `v` to a new atom `w`, or back to an earlier atom `w` on `v`'s path.
    Edge(usize, usize),
    /// The walk is done with `child`, reached from `parent` by `bond`; `low` is the earliest
    /// atom (by discovery time) reachable from `child`'s subtree without `bond`, `parent_time`
    /// the parent's discovery time.
    Finished { parent: usize, child: usize, bond: usize, low: usize, parent_time: usize },
}

/// Walks every component of the graph once, telling `on` each [`Event`].
fn low_link(adjacency: &[Vec<(usize, usize)>], mut on: impl FnMut(Event)) {
    const UNSEEN: usize = usize::MAX;
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
                    on(Event::Edge(v, w));
                    discovered[w] = time;
                    low[w] = time;
                    time += 1;
                    stack.push((w, Some(bond), 0));
                } else if discovered[w] < discovered[v] {
                    on(Event::Edge(v, w));
                    low[v] = low[v].min(discovered[w]);
                }
            } else {
                stack.pop();
                if let (Some(&(parent, ..)), Some(bond)) = (stack.last(), via) {
                    low[parent] = low[parent].min(low[v]);
                    on(Event::Finished { parent, child: v, bond, low: low[v], parent_time: discovered[parent] });
                }
            }
        }
    }
}

/// The ring systems: the atoms of each biconnected block with a ring, i.e. of rings joined by
/// shared bonds (spiro rings, which share only an atom, are separate systems).
pub(super) fn ring_systems(adjacency: &[Vec<(usize, usize)>]) -> Vec<Vec<usize>> {
    let mut edges: Vec<(usize, usize)> = Vec::new();
    let mut systems = Vec::new();
    low_link(adjacency, |event| match event {
        Event::Edge(v, w) => edges.push((v, w)),
        Event::Finished { parent, child, low, parent_time, .. } if low >= parent_time => {
            // The edges pushed since (parent, child) form one block.
            let at = edges.iter().rposition(|&e| e == (parent, child)).unwrap_or(0);
            let block: Vec<(usize, usize)> = edges.split_off(at);
            if block.len() > 1 {
                let mut atoms: Vec<usize> = block.iter().flat_map(|&(a, b)| [a, b]).collect();
                atoms.sort_unstable();
                atoms.dedup();
                systems.push(atoms);
            }
        }
        Event::Finished { .. } => {}
    });
    systems
}

/// Which bonds lie on a ring: every bond but the bridges.
pub(super) fn ring_bonds(adjacency: &[Vec<(usize, usize)>], bond_count: usize) -> Vec<bool> {
    let mut in_ring = vec![true; bond_count];
    low_link(adjacency, |event| {
        if let Event::Finished { bond, low, parent_time, .. } = event
            && low > parent_time
        {
            in_ring[bond] = false;
        }
    });
    in_ring
}
