//! A small dense linear program solver (two-phase simplex, Bland's rule), for timing a
//! counterexample's replay: which step-cost coefficients and arrival times make the
//! simulator perform the trace's events in the trace's order ([`super::trace`]). The
//! programs are tiny (a few dozen constraints over ≤ 20 variables) with small integer
//! coefficients, so `f64` with a tolerance is exact enough; every answer is checked
//! again, by the caller, on the simulator's own integer nanoseconds.

/// Tolerance of the pivoting decisions.
const EPS: f64 = 1e-9;
/// Pivots before giving up (never reached on the programs of a counterexample).
const MAX_PIVOTS: usize = 10_000;

/// A simplex tableau: `rows` constraint rows and one objective row (reduced costs), each
/// `cols` coefficients followed by the right-hand side.
struct Tableau {
    t: Vec<Vec<f64>>,
    basis: Vec<usize>,
    cols: usize,
}

impl Tableau {
    fn rows(&self) -> usize {
        self.basis.len()
    }

    fn pivot(&mut self, row: usize, col: usize) {
        let p = self.t[row][col];
        for v in self.t[row].iter_mut() {
            *v /= p;
        }
        let pivot_row = self.t[row].clone();
        for (i, r) in self.t.iter_mut().enumerate() {
            if i == row {
                continue;
            }
            let f = r[col];
            if f.abs() > 0.0 {
                for (v, &pv) in r.iter_mut().zip(&pivot_row) {
                    *v -= f * pv;
                }
            }
        }
        self.basis[row] = col;
    }

    /// Set the objective row to the reduced costs of `cost` under the current basis.
    fn price(&mut self, cost: &[f64]) {
        let m = self.rows();
        let mut obj = vec![0.0; self.cols + 1];
        obj[..self.cols].copy_from_slice(cost);
        for i in 0..m {
            let cb = cost[self.basis[i]];
            if cb != 0.0 {
                for (o, &v) in obj.iter_mut().zip(&self.t[i]) {
                    *o -= cb * v;
                }
            }
        }
        self.t[m] = obj;
    }

    /// Pivot to optimality over the columns `allowed`; `false` if the pivot budget ran
    /// out. An unbounded direction stops the search (the basis stays feasible).
    fn optimise(&mut self, allowed: usize) -> bool {
        let m = self.rows();
        for _ in 0..MAX_PIVOTS {
            // Bland: the lowest-index improving column, the lowest-index basic variable
            // among the tied ratios.
            let Some(col) = (0..allowed).find(|&j| self.t[m][j] < -EPS) else { return true };
            let mut best: Option<(f64, usize, usize)> = None;
            for i in 0..m {
                let a = self.t[i][col];
                if a > EPS {
                    let ratio = self.t[i][self.cols] / a;
                    let better = match best {
                        None => true,
                        Some((r, _, b)) => ratio < r - EPS || (ratio <= r + EPS && self.basis[i] < b),
                    };
                    if better {
                        best = Some((ratio, i, self.basis[i]));
                    }
                }
            }
            let Some((_, row, _)) = best else { return true };
            self.pivot(row, col);
        }
        false
    }
}

/// Minimise `cost · x` subject to `rows[i] · x ≥ rhs[i]` (every `rhs[i] ≥ 0`) and `x ≥ 0`.
/// `None` when no `x` satisfies the constraints (or the pivot budget ran out).
pub fn minimise(cost: &[f64], rows: &[Vec<f64>], rhs: &[f64]) -> Option<Vec<f64>> {
    let (n, m) = (cost.len(), rows.len());
    debug_assert!(rows.iter().all(|r| r.len() == n) && rhs.len() == m && rhs.iter().all(|&b| b >= 0.0));
    // Columns: x (n), surplus (m), artificial (m); row i: rows[i]·x − s_i + a_i = rhs_i.
    let cols = n + 2 * m;
    let mut t = vec![vec![0.0; cols + 1]; m + 1];
    for i in 0..m {
        t[i][..n].copy_from_slice(&rows[i]);
        t[i][n + i] = -1.0;
        t[i][n + m + i] = 1.0;
        t[i][cols] = rhs[i];
    }
    let mut tab = Tableau { t, basis: (n + m..n + 2 * m).collect(), cols };
    // Phase 1: minimise the artificial variables' sum.
    let mut phase1 = vec![0.0; cols];
    phase1[n + m..].iter_mut().for_each(|c| *c = 1.0);
    tab.price(&phase1);
    if !tab.optimise(cols) {
        return None;
    }
    let infeasibility: f64 = (0..m).filter(|&i| tab.basis[i] >= n + m).map(|i| tab.t[i][cols]).sum();
    if infeasibility > 1e-7 {
        return None;
    }
    // Drive artificial variables (at zero) out of the basis; a row with no other nonzero
    // entry is redundant and keeps its artificial at zero for good.
    for i in 0..m {
        if tab.basis[i] >= n + m {
            if let Some(j) = (0..n + m).find(|&j| tab.t[i][j].abs() > EPS) {
                tab.pivot(i, j);
            }
        }
    }
    // Phase 2 over the original and surplus columns.
    let mut phase2 = vec![0.0; cols];
    phase2[..n].copy_from_slice(cost);
    tab.price(&phase2);
    if !tab.optimise(n + m) {
        return None;
    }
    let mut x = vec![0.0; n];
    for i in 0..m {
        if tab.basis[i] < n {
            x[tab.basis[i]] = tab.t[i][cols].max(0.0);
        }
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn satisfies(x: &[f64], rows: &[Vec<f64>], rhs: &[f64]) -> bool {
        rows.iter().zip(rhs).all(|(r, &b)| r.iter().zip(x).map(|(a, v)| a * v).sum::<f64>() >= b - 1e-7)
            && x.iter().all(|&v| v >= 0.0)
    }

    #[test]
    fn finds_the_optimum_of_a_small_program() {
        // min x + y, x + 2y ≥ 4, 3x + y ≥ 6 → x = 1.6, y = 1.2.
        let rows = vec![vec![1.0, 2.0], vec![3.0, 1.0]];
        let x = minimise(&[1.0, 1.0], &rows, &[4.0, 6.0]).unwrap();
        assert!((x[0] - 1.6).abs() < 1e-9 && (x[1] - 1.2).abs() < 1e-9, "{x:?}");
        assert!(satisfies(&x, &rows, &[4.0, 6.0]));
    }

    #[test]
    fn reports_infeasible_programs() {
        // x − y ≥ 1 and y − x ≥ 1 cannot both hold.
        let rows = vec![vec![1.0, -1.0], vec![-1.0, 1.0]];
        assert_eq!(minimise(&[1.0, 1.0], &rows, &[1.0, 1.0]), None);
    }

    #[test]
    fn degenerate_and_repeated_rows() {
        // y ≥ 2, x − y ≥ 0 twice (a repeated, degenerate row); min x → x = 2.
        let rows = vec![vec![0.0, 1.0], vec![1.0, -1.0], vec![1.0, -1.0]];
        let x = minimise(&[1.0, 0.0], &rows, &[2.0, 0.0, 0.0]).unwrap();
        assert!((x[0] - 2.0).abs() < 1e-9 && satisfies(&x, &rows, &[2.0, 0.0, 0.0]), "{x:?}");
    }
}
