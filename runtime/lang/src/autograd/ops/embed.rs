//! Embedding lookup: rows of a table selected by constant ids.
//!
//! Backward: `scatter_add_rows(ids, g, V)`, which sums the gradients of rows
//! selected more than once.

use crate::autograd::tape::{Ctx, Reads, Rule, Tape, Var};
use mlpl_devices::{Result, Tensor};

/// Backward of [`Tape::gather_rows`]: the ids and the table's row count.
#[derive(Debug)]
struct GatherRule {
    ids: Tensor,
    vocab: usize,
}

impl Rule for GatherRule {
    fn backward(&self, cx: &Ctx<'_>, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let dt = cx.k.0.scatter_add_rows(&self.ids, g, self.vocab)?;
        Ok(vec![Some(dt)])
    }

    fn reads(&self) -> Reads {
        Reads::NONE
    }
}

impl Tape {
    /// Rows of `table: [V, d]` selected by the constant integer-valued `ids`
    /// (any shape, each in `[0, V)`, validated by the caller) → `[ids..., d]`.
    ///
    /// Panics if `table` is not of rank 2.
    pub fn gather_rows(&mut self, table: Var, ids: &Tensor) -> Result<Var> {
        let s = self.shape(table);
        assert_eq!(s.len(), 2, "gather_rows: table {s:?} is not [V, d]");
        let vocab = s[0];
        let y = self.backend().gather_rows(&self.value(table)?, ids)?;
        let rule = GatherRule {
            ids: ids.clone(),
            vocab,
        };
        Ok(self.record(y, &[table], Box::new(rule)))
    }
}
