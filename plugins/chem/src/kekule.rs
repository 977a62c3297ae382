//! Perfect matching on a general graph (Edmonds' blossom algorithm), used to kekulize.
//!
//! Kekulizing an aromatic system means giving every aromatic atom that still has a free
//! valence exactly one double bond to a neighbour of the same kind: a perfect matching on
//! those atoms. Five-membered rings make the graph non-bipartite, hence blossoms.

/// Marks "no vertex" in the index arrays below.
const NONE: usize = usize::MAX;

/// Finds a perfect matching of the `n` vertices joined by `edges` (pairs of vertex indices).
///
/// Returns each vertex's partner, or `Err(v)` with a vertex `v` that no perfect matching covers.
pub(crate) fn perfect_matching(n: usize, edges: &[(usize, usize)]) -> Result<Vec<usize>, usize> {
    let mut adjacency = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a < n && b < n && a != b {
            adjacency[a].push(b);
            adjacency[b].push(a);
        }
    }
    let mut search = Search::new(adjacency);
    // A greedy start leaves few vertices for the (slower) augmenting-path search.
    for v in 0..n {
        if search.mate[v] == NONE
            && let Some(&w) = search.adjacency[v].iter().find(|&&w| search.mate[w] == NONE)
        {
            search.mate[v] = w;
            search.mate[w] = v;
        }
    }
    for v in 0..n {
        // If an exposed vertex has no augmenting path, no perfect matching exists: the
        // symmetric difference with a perfect matching would contain one.
        if search.mate[v] == NONE && !search.augment_from(v) {
            return Err(v);
        }
    }
    Ok(search.mate)
}

/// Finds a matching that covers every vertex not marked `optional`.
///
/// Returns each vertex's partner (`usize::MAX` for an optional vertex left out), or `Err(v)`
/// with a vertex that cannot be covered. An optional vertex is a `*` on an aromatic ring,
/// which RDKit lets take a double bond or not.
pub(crate) fn cover(n: usize, edges: &[(usize, usize)], optional: &[bool]) -> Result<Vec<usize>, usize> {
    if !optional.iter().any(|&o| o) {
        return perfect_matching(n, edges);
    }
    // Double the graph and join each optional vertex to its twin: the doubled graph has a
    // perfect matching exactly when the original has a matching covering all mandatory
    // vertices (an optional vertex left out on one side is matched to its twin).
    let mut doubled: Vec<(usize, usize)> = edges.to_vec();
    doubled.extend(edges.iter().map(|&(a, b)| (a + n, b + n)));
    doubled.extend((0..n).filter(|&v| optional.get(v).copied().unwrap_or(false)).map(|v| (v, v + n)));
    let mate = perfect_matching(2 * n, &doubled).map_err(|v| v % n.max(1))?;
    Ok(mate[..n].iter().map(|&w| if w < n { w } else { NONE }).collect())
}

/// State of the blossom search; see e.g. Edmonds (1965), "Paths, trees, and flowers".
struct Search {
    adjacency: Vec<Vec<usize>>,
    mate: Vec<usize>,
    /// Parent in the alternating tree, for vertices reached by an unmatched edge.
    parent: Vec<usize>,
    /// Base vertex of the blossom each vertex belongs to.
    base: Vec<usize>,
    /// Vertices that are in the queue or were already scanned.
    used: Vec<bool>,
    in_blossom: Vec<bool>,
}

impl Search {
    fn new(adjacency: Vec<Vec<usize>>) -> Self {
        let n = adjacency.len();
        Self {
            adjacency,
            mate: vec![NONE; n],
            parent: vec![NONE; n],
            base: (0..n).collect(),
            used: vec![false; n],
            in_blossom: vec![false; n],
        }
    }

    /// Grows an alternating tree from the exposed vertex `root`; flips the augmenting path
    /// found, if any.
    fn augment_from(&mut self, root: usize) -> bool {
        let n = self.adjacency.len();
        self.used.fill(false);
        self.parent.fill(NONE);
        for (i, b) in self.base.iter_mut().enumerate() {
            *b = i;
        }
        self.used[root] = true;
        let mut queue = std::collections::VecDeque::from([root]);
        while let Some(v) = queue.pop_front() {
            for i in 0..self.adjacency[v].len() {
                let to = self.adjacency[v][i];
                if self.base[v] == self.base[to] || self.mate[v] == to {
                    continue;
                }
                if to == root || (self.mate[to] != NONE && self.parent[self.mate[to]] != NONE) {
                    // An odd cycle: contract it into a blossom based at the common ancestor.
                    let current_base = self.common_ancestor(v, to);
                    self.in_blossom.fill(false);
                    self.mark_path(v, current_base, to);
                    self.mark_path(to, current_base, v);
                    for u in 0..n {
                        if self.in_blossom[self.base[u]] {
                            self.base[u] = current_base;
                            if !self.used[u] {
                                self.used[u] = true;
                                queue.push_back(u);
                            }
                        }
                    }
                } else if self.parent[to] == NONE {
                    self.parent[to] = v;
                    if self.mate[to] == NONE {
                        self.flip(to);
                        return true;
                    }
                    let next = self.mate[to];
                    self.used[next] = true;
                    queue.push_back(next);
                }
            }
        }
        false
    }

    /// The nearest common base of `a` and `b` on their paths to the root.
    fn common_ancestor(&self, a: usize, b: usize) -> usize {
        let mut on_path = vec![false; self.adjacency.len()];
        let mut a = a;
        loop {
            a = self.base[a];
            on_path[a] = true;
            if self.mate[a] == NONE || self.parent[self.mate[a]] == NONE {
                break;
            }
            a = self.parent[self.mate[a]];
        }
        let mut b = b;
        loop {
            b = self.base[b];
            if on_path[b] || self.mate[b] == NONE || self.parent[self.mate[b]] == NONE {
                return b;
            }
            b = self.parent[self.mate[b]];
        }
    }

    /// Marks the blossom path from `v` down to `blossom_base`, re-pointing parents so that the
    /// contracted cycle can later be expanded along either side.
    fn mark_path(&mut self, v: usize, blossom_base: usize, child: usize) {
        let (mut v, mut child) = (v, child);
        while self.base[v] != blossom_base && self.mate[v] != NONE {
            let m = self.mate[v];
            self.in_blossom[self.base[v]] = true;
            self.in_blossom[self.base[m]] = true;
            self.parent[v] = child;
            child = m;
            // In a well-formed tree an odd vertex always has a parent; the check only keeps a
            // logic error from becoming an out-of-bounds panic.
            if self.parent[m] == NONE {
                break;
            }
            v = self.parent[m];
        }
    }

    /// Flips matched and unmatched edges along the augmenting path that ends at `end`.
    fn flip(&mut self, end: usize) {
        let mut v = end;
        while v != NONE {
            let pv = self.parent[v];
            if pv == NONE {
                break;
            }
            let next = self.mate[pv];
            self.mate[v] = pv;
            self.mate[pv] = v;
            v = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exhaustive search, for checking the blossom algorithm on small graphs.
    fn has_perfect_matching(n: usize, edges: &[(usize, usize)], taken: &mut Vec<bool>) -> bool {
        let Some(v) = (0..n).find(|&v| !taken[v]) else { return true };
        taken[v] = true;
        for &(a, b) in edges {
            let w = if a == v {
                b
            } else if b == v {
                a
            } else {
                continue;
            };
            if !taken[w] {
                taken[w] = true;
                if has_perfect_matching(n, edges, taken) {
                    taken[w] = false;
                    taken[v] = false;
                    return true;
                }
                taken[w] = false;
            }
        }
        taken[v] = false;
        false
    }

    fn check(n: usize, edges: &[(usize, usize)]) {
        let expected = has_perfect_matching(n, edges, &mut vec![false; n]);
        match perfect_matching(n, edges) {
            Ok(mate) => {
                assert!(expected, "found a matching that cannot exist: {edges:?}");
                for v in 0..n {
                    let w = mate[v];
                    assert_eq!(mate[w], v);
                    assert!(edges.contains(&(v, w)) || edges.contains(&(w, v)), "{v}-{w} is not an edge");
                }
            }
            Err(_) => assert!(!expected, "missed a perfect matching: {n} vertices, {edges:?}"),
        }
    }

    #[test]
    fn rings() {
        let ring = |n: usize| (0..n).map(|i| (i, (i + 1) % n)).collect::<Vec<_>>();
        check(6, &ring(6));
        check(5, &ring(5));
        assert!(perfect_matching(5, &ring(5)).is_err());
        // Two fused five-membered rings (pentalene's skeleton) form an even system.
        check(8, &[(0, 1), (1, 2), (2, 3), (3, 0), (0, 4), (4, 5), (5, 6), (6, 7), (7, 3)]);
        check(0, &[]);
    }

    #[test]
    fn optional_vertices_may_stay_unmatched() {
        // A five-membered ring with one optional vertex is coverable; with none it is not.
        let ring: Vec<(usize, usize)> = (0..5).map(|i| (i, (i + 1) % 5)).collect();
        assert!(cover(5, &ring, &[false, false, true, false, false]).is_ok());
        assert!(cover(5, &ring, &[false; 5]).is_err());
        // A lone optional vertex needs nothing; a lone mandatory one cannot be covered.
        assert!(cover(1, &[], &[true]).is_ok());
        assert!(cover(1, &[], &[false]).is_err());
    }

    #[test]
    fn agrees_with_exhaustive_search_on_random_graphs() {
        // A fixed linear congruential generator keeps the test deterministic.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |bound: u64| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % bound
        };
        for _ in 0..3000 {
            let n = usize::try_from(next(11)).unwrap();
            let edge_count = next(20);
            let mut edges = Vec::new();
            for _ in 0..edge_count {
                let (a, b) = (next(n.max(1) as u64), next(n.max(1) as u64));
                let (a, b) = (usize::try_from(a).unwrap(), usize::try_from(b).unwrap());
                if a != b && !edges.contains(&(a, b)) && !edges.contains(&(b, a)) {
                    edges.push((a, b));
                }
            }
            check(n, &edges);
        }
    }
}
