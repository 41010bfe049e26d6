//! Model signatures for the checker (LANGUAGE §11.10): a model whose every size is
//! a constant is described by the runtime's own layer tree (`nn::Layer`, with
//! placeholder parameter ids), so its input pattern, output shape, parameter
//! shapes and count, FLOPs and activation elements come from the same code the
//! interpreter and the estimator use. `apply` runs the layers over abstract
//! arrays with the interpreter's input checks (E0211, E0212, E0402).

use mlpl_diag::code;
use std::sync::Arc;

use super::abstract_value::{AbsArray, AxisName, Dim};
use crate::display::format_f64;
use crate::nn::layers::{Activation, Layer, ParamSpec};
use mlpl_diag::{Diagnostic, Span};

/// A model known statically: its layer tree. Two values are the same model when
/// they share the tree (as model handles do at run time).
#[derive(Clone, Debug)]
pub struct AbsModel(pub Arc<Layer>);

impl PartialEq for AbsModel {
    fn eq(&self, other: &AbsModel) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What the checker (and the editor, and the estimator) know about a model.
#[derive(Clone, Debug, PartialEq)]
pub struct Signature {
    /// The input the model accepts, e.g. `[…, 64]`, `ids […]`, `[T, 64] or [B, T, 64]`.
    pub input: String,
    /// The output for that input, e.g. `[…, 10]`.
    pub output: String,
    /// The distinct parameters in parameter order, with their shapes.
    pub params: Vec<ParamSpec>,
    /// Their total element count.
    pub param_count: f64,
    /// Forward FLOPs per item (one row or token).
    pub flops_per_item: f64,
    /// Activation elements kept for the backward pass, per item.
    pub activations_per_item: f64,
}

/// The width a layer requires of its input's last axis, and what it does to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The required last-axis size, if the layer fixes one.
    pub input: Option<usize>,
    /// The last-axis size it outputs (`None`: the input's).
    pub output: Option<usize>,
    /// Whether the input is ids (an `embed` first): any shape, one axis added.
    pub ids: bool,
}

/// A stage mismatch inside a `chain`: child `index` requires `expected` but
/// receives `got`.
#[derive(Clone, Debug, PartialEq)]
pub struct StageMismatch {
    /// Which child (0-based).
    pub index: usize,
    /// Its required width.
    pub expected: usize,
    /// The width the previous stages produce.
    pub got: usize,
}

impl AbsModel {
    /// The model's signature (LANGUAGE §11.10).
    pub fn signature(&self) -> Signature {
        let f = flow(&self.0).unwrap_or(Flow {
            input: None,
            output: None,
            ids: false,
        });
        let input = match (&*self.0, f.ids, f.input) {
            (_, true, _) => "ids […]".to_string(),
            (Layer::Attention(a), _, _) => format!("[T, {0}] or [B, T, {0}]", a.d),
            (_, _, Some(w)) => format!("[…, {w}]"),
            _ => "[…]".to_string(),
        };
        let output = match (f.ids, f.output.or(f.input)) {
            (true, Some(w)) => format!("[…, {w}]"),
            (false, Some(w)) => format!("[…, {w}]"),
            _ => "[…]".to_string(),
        };
        let cost = crate::nn::estimate::cost(&self.0, 1.0, 1.0);
        Signature {
            input,
            output,
            params: self.0.param_specs(),
            param_count: crate::nn::estimate::param_count(&self.0),
            flops_per_item: cost.flops,
            activations_per_item: cost.activations,
        }
    }
}

/// The width flow of a layer; `Err` for a `chain` whose stages do not fit.
pub fn flow(layer: &Layer) -> Result<Flow, StageMismatch> {
    flow_in(layer, &mut std::collections::HashMap::new())
}

/// The flow of a child, each shared node computed once (a model that uses a
/// sub-model n times costs one visit, not n).
fn child_flow(
    c: &std::sync::Arc<Layer>,
    memo: &mut std::collections::HashMap<usize, Result<Flow, StageMismatch>>,
) -> Result<Flow, StageMismatch> {
    let key = std::sync::Arc::as_ptr(c) as usize;
    if let Some(r) = memo.get(&key) {
        return r.clone();
    }
    let r = flow_in(c, memo);
    memo.insert(key, r.clone());
    r
}

fn flow_in(
    layer: &Layer,
    memo: &mut std::collections::HashMap<usize, Result<Flow, StageMismatch>>,
) -> Result<Flow, StageMismatch> {
    let f = |input: Option<usize>, output: Option<usize>| Flow {
        input,
        output,
        ids: false,
    };
    Ok(match layer {
        Layer::Linear(l) => f(Some(l.inp), Some(l.out)),
        Layer::Lora(l) => f(Some(l.base.inp), Some(l.base.out)),
        Layer::Embed(e) => Flow {
            input: None,
            output: Some(e.d),
            ids: true,
        },
        Layer::Attention(a) => f(Some(a.d), Some(a.d)),
        Layer::Unembed(e) => f(Some(e.d), Some(e.vocab)),
        Layer::PosEmbed(p) => f(Some(p.d), Some(p.d)),
        Layer::RmsNorm(r) => match r.gain {
            Some(_) => f(Some(r.dim), Some(r.dim)),
            None => f(None, None),
        },
        Layer::LayerNorm(l) => f(Some(l.d), Some(l.d)),
        Layer::SwiGlu(s) => f(Some(s.d), Some(s.d)),
        Layer::Rope(r) => f(Some(r.head_dim), Some(r.head_dim)),
        Layer::Moe(m) => f(Some(m.d), Some(m.d)),
        Layer::Engram(g) => Flow {
            input: None,
            output: Some(g.d),
            ids: g.vocab.is_some(),
        },
        Layer::Activation(_) | Layer::Dropout(_) => f(None, None),
        Layer::Residual(inner) => {
            let i = child_flow(inner, memo)?;
            let w = i.input.or(i.output);
            f(w, w)
        }
        Layer::Chain(children) => {
            let mut out = f(None, None);
            // The width entering the next child, once an earlier child fixed it.
            let mut current: Option<usize> = None;
            for (index, c) in children.iter().enumerate() {
                let cf = child_flow(c, memo).map_err(|mut e| {
                    e.index = index;
                    e
                })?;
                match current {
                    None => {
                        out.ids |= cf.ids;
                        if out.input.is_none() && !out.ids {
                            out.input = cf.input;
                        }
                    }
                    Some(have) => {
                        if let Some(need) = cf.input {
                            if have != need {
                                return Err(StageMismatch {
                                    index,
                                    expected: need,
                                    got: have,
                                });
                            }
                        }
                    }
                }
                current = cf.output.or(cf.input).or(current);
            }
            out.output = current;
            out
        }
    })
}

/// One abstract forward pass (`apply` or `attention_weights`).
pub struct Forward {
    /// The input argument's span, where input errors point.
    pub x_span: Span,
    /// The input of the first attention layer reached, with its head count.
    pub first_attention: Option<(AbsArray, usize)>,
}

impl Forward {
    /// A pass whose input is written at `x_span`.
    pub fn new(x_span: Span) -> Forward {
        Forward {
            x_span,
            first_attention: None,
        }
    }

    /// E0211 for `layer` given `x`, worded as `nn::apply`.
    fn wrong_input(&self, layer: &Layer, pattern: &str, x: &AbsArray) -> Diagnostic {
        Diagnostic::of(code::E0211)
            .at(
                self.x_span,
                format!(
                    "`{}` expects {pattern}, got {}",
                    layer.describe(),
                    x.shape_text()
                ),
            )
            .note(format!(
                "the input of `{}` must have the shape {pattern}",
                layer.describe()
            ))
    }

    /// Checks rank ≥ 1 and a last axis of `width` when provable.
    fn last_axis(&self, layer: &Layer, x: &AbsArray, width: usize) -> Result<(), Diagnostic> {
        if let Some(d) = &x.dims {
            let bad = d.is_empty() || d[d.len() - 1].provably_ne(&Dim::Known(width));
            if bad {
                return Err(self.wrong_input(layer, &format!("[…, {width}]"), x));
            }
        }
        Ok(())
    }

    /// `x` with its last axis replaced by an unnamed axis of size `w` (leading
    /// axes and their names kept).
    fn with_last(x: &AbsArray, w: usize) -> AbsArray {
        match &x.dims {
            Some(d) if !d.is_empty() => {
                let mut dims = d.clone();
                let last = dims.len() - 1;
                dims[last] = Dim::Known(w);
                let mut out = AbsArray::of_dims(dims);
                out.names = x.names.clone();
                if let Some(n) = out.names.last_mut() {
                    *n = AxisName::Unnamed;
                }
                out.origin = x.origin;
                out
            }
            _ => AbsArray::unknown(),
        }
    }

    /// The same shape, names dropped.
    fn unnamed(x: &AbsArray) -> AbsArray {
        match &x.dims {
            Some(d) => AbsArray::of_dims(d.clone()),
            None => AbsArray::unknown(),
        }
    }

    /// The same shape and names, no constant.
    fn same(x: &AbsArray) -> AbsArray {
        AbsArray {
            constant: None,
            placed: None,
            ..x.clone()
        }
    }

    /// An embedding lookup of ids `x` (any shape; constant ids checked
    /// against `vocab`, E0402) → `[…, d]`.
    fn ids_to_rows(
        &self,
        layer: &Layer,
        vocab: usize,
        width: usize,
        x: &AbsArray,
    ) -> Result<AbsArray, Diagnostic> {
        if let Some(c) = &x.constant {
            for (i, &id) in c.iter().enumerate() {
                if !(id.fract() == 0.0 && id >= 0.0 && id < vocab as f64) {
                    return Err(Diagnostic::of(code::E0402)
                        .at(
                            self.x_span,
                            format!("id {} at position {i}", format_f64(id)),
                        )
                        .note(format!(
                            "`{}` takes integer ids in [0, {})",
                            layer.describe(),
                            vocab
                        )));
                }
            }
        }
        Ok(match &x.dims {
            Some(d) => {
                let mut dims = d.clone();
                dims.push(Dim::Known(width));
                AbsArray::of_dims(dims)
            }
            None => AbsArray::unknown(),
        })
    }

    /// `engram_apply(m, h, ids)` of the Engram layer `g`: `h`'s shape and names
    /// when `h` is `ids.shape ++ [d]`; E0230 when provably not.
    pub fn engram_mix(
        &self,
        layer: &Layer,
        g: &crate::nn::layers::Engram,
        h: &AbsArray,
        ids: &AbsArray,
    ) -> Result<AbsArray, Diagnostic> {
        if let (Some(hd), Some(idd)) = (&h.dims, &ids.dims) {
            let bad = idd.is_empty()
                || hd.len() != idd.len() + 1
                || hd.iter().zip(idd).any(|(a, b)| a.provably_ne(b))
                || hd[hd.len() - 1].provably_ne(&Dim::Known(g.d));
            if bad {
                return Err(crate::nn::engram::misaligned(
                    layer,
                    g.d,
                    &h.shape_text(),
                    &ids.shape_text(),
                    self.x_span,
                ));
            }
        }
        Ok(Self::same(h))
    }

    /// Applies `layer` to `x`.
    pub fn layer(&mut self, layer: &Layer, x: &AbsArray) -> Result<AbsArray, Diagnostic> {
        match layer {
            Layer::Linear(l) => {
                self.last_axis(layer, x, l.inp)?;
                Ok(Self::with_last(x, l.out))
            }
            Layer::Lora(l) => {
                self.last_axis(layer, x, l.base.inp)?;
                Ok(Self::with_last(x, l.base.out))
            }
            Layer::Embed(e) => self.ids_to_rows(layer, e.vocab, e.d, x),
            Layer::Engram(g) => match g.vocab {
                Some(vocab) => self.ids_to_rows(layer, vocab, g.d, x),
                None => Err(crate::nn::engram::needs_ids(layer, self.x_span)),
            },
            Layer::Attention(a) => {
                if let Some(d) = &x.dims {
                    let bad = !(d.len() == 2 || d.len() == 3)
                        || d[d.len() - 1].provably_ne(&Dim::Known(a.d));
                    if bad {
                        let pattern = format!("[T, {0}] or [B, T, {0}]", a.d);
                        return Err(self.wrong_input(layer, &pattern, x));
                    }
                }
                if self.first_attention.is_none() {
                    self.first_attention = Some((x.clone(), a.heads));
                }
                Ok(Self::unnamed(x))
            }
            Layer::Unembed(e) => {
                self.last_axis(layer, x, e.d)?;
                Ok(Self::with_last(x, e.vocab))
            }
            Layer::PosEmbed(p) => {
                if let Some(d) = &x.dims {
                    let long =
                        d.len() >= 2 && matches!(d[d.len() - 2], Dim::Known(t) if t > p.max_pos);
                    if d.len() < 2 || d[d.len() - 1].provably_ne(&Dim::Known(p.d)) || long {
                        let pattern = format!("[…, T, {}] with T ≤ {}", p.d, p.max_pos);
                        return Err(self.wrong_input(layer, &pattern, x));
                    }
                }
                Ok(Self::same(x))
            }
            Layer::RmsNorm(r) => {
                match r.gain {
                    Some(_) => self.last_axis(layer, x, r.dim)?,
                    None => {
                        if x.rank() == Some(0) {
                            return Err(self.wrong_input(layer, "[…, w] (rank 1 or more)", x));
                        }
                    }
                }
                Ok(Self::unnamed(x))
            }
            Layer::LayerNorm(l) => {
                self.last_axis(layer, x, l.d)?;
                Ok(Self::unnamed(x))
            }
            Layer::Activation(Activation::Softmax) => {
                if x.rank() == Some(0) {
                    return Err(self.wrong_input(layer, "rank 1 or more", x));
                }
                Ok(Self::unnamed(x))
            }
            Layer::Activation(_) | Layer::Dropout(_) => Ok(Self::same(x)),
            Layer::SwiGlu(s) => {
                self.last_axis(layer, x, s.d)?;
                Ok(Self::with_last(x, s.d))
            }
            Layer::Rope(r) => {
                if let Some(d) = &x.dims {
                    if d.len() < 2 || d[d.len() - 1].provably_ne(&Dim::Known(r.head_dim)) {
                        let pattern = format!("[…, T, {}]", r.head_dim);
                        return Err(self.wrong_input(layer, &pattern, x));
                    }
                }
                Ok(Self::same(x))
            }
            Layer::Moe(m) => {
                if let Some(d) = &x.dims {
                    if d.is_empty() || d[d.len() - 1].provably_ne(&Dim::Known(m.d)) {
                        return Err(self.wrong_input(layer, &format!("[…, {}]", m.d), x));
                    }
                }
                Ok(Self::with_last(x, m.d))
            }
            Layer::Chain(children) => {
                let mut y = x.clone();
                for c in children {
                    y = self.layer(c, &y)?;
                }
                Ok(y)
            }
            Layer::Residual(inner) => {
                let y = self.layer(inner, x)?;
                if let (Some(dx), Some(dy)) = (&x.dims, &y.dims) {
                    let differs =
                        dx.len() != dy.len() || dx.iter().zip(dy).any(|(p, q)| p.provably_ne(q));
                    if differs {
                        return Err(residual_error(
                            self.x_span,
                            &x.shape_text(),
                            &y.shape_text(),
                        ));
                    }
                }
                let l = super::broadcast::Operand {
                    array: x,
                    expr: &mlpl_syntax::Expr {
                        kind: mlpl_syntax::ExprKind::Error,
                        span: self.x_span,
                    },
                };
                let merged = super::broadcast::broadcast(
                    "+",
                    l,
                    super::broadcast::Operand {
                        array: &y,
                        expr: l.expr,
                    },
                );
                Ok(merged.map(|b| b.array).unwrap_or_else(|_| Self::unnamed(x)))
            }
        }
    }
}

/// E0212, worded as `nn::apply`: the block maps `from` to `to`.
pub fn residual_error(span: Span, from: &str, to: &str) -> Diagnostic {
    Diagnostic::of(code::E0212)
        .at(span, format!("the block maps {from} to {to}"))
        .note("`residual(m)` computes x + m(x), so m must keep the shape of its input")
        .help("make the block end with a layer that maps back to the input width")
}

/// The shape `attention_weights` returns for the first attention layer's input
/// `x` with `heads` heads: `[T, T]`, `[heads, T, T]`, with a leading B when
/// batched.
pub fn attention_weights_shape(x: &AbsArray, heads: usize) -> AbsArray {
    let Some(d) = &x.dims else {
        return AbsArray::unknown();
    };
    let (b, t) = match d.len() {
        2 => (None, d[0].clone()),
        3 => (Some(d[0].clone()), d[1].clone()),
        _ => return AbsArray::unknown(),
    };
    let mut dims = Vec::new();
    dims.extend(b);
    if heads > 1 {
        dims.push(Dim::Known(heads));
    }
    dims.push(t.clone());
    dims.push(t);
    AbsArray::of_dims(dims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::layers::Linear;

    fn linear(i: usize, o: usize) -> Arc<Layer> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Arc::new(Layer::Linear(Linear {
            id,
            inp: i,
            out: o,
            bias: true,
        }))
    }

    #[test]
    fn chains_compose_and_mismatches_are_found() {
        let ok = Layer::Chain(vec![
            linear(4, 8),
            Arc::new(Layer::Activation(Activation::Relu)),
            linear(8, 2),
        ]);
        let f = flow(&ok).unwrap();
        assert_eq!((f.input, f.output), (Some(4), Some(2)));
        let bad = Layer::Chain(vec![linear(4, 8), linear(16, 2)]);
        assert_eq!(
            flow(&bad).unwrap_err(),
            StageMismatch {
                index: 1,
                expected: 16,
                got: 8
            }
        );
        let m = AbsModel(Arc::new(ok));
        let s = m.signature();
        assert_eq!((s.input.as_str(), s.output.as_str()), ("[…, 4]", "[…, 2]"));
        assert_eq!(s.param_count, (4 * 8 + 8 + 8 * 2 + 2) as f64);
    }

    #[test]
    fn forward_checks_the_last_axis() {
        let m = Layer::Chain(vec![linear(4, 8), linear(8, 2)]);
        let mut f = Forward::new(Span::new(0, 1));
        let x = AbsArray::of_dims(vec![Dim::Symbol("N".into()), Dim::Known(4)]);
        assert_eq!(f.layer(&m, &x).unwrap().shape_text(), "[N, 2]");
        let y = AbsArray::of_shape(&[3, 5]);
        assert_eq!(f.layer(&m, &y).unwrap_err().code, code::E0211);
        let r = Layer::Residual(linear(4, 8));
        assert_eq!(f.layer(&r, &x).unwrap_err().code, code::E0212);
        let r = Layer::Residual(Arc::new(Layer::Chain(vec![linear(4, 4)])));
        assert_eq!(f.layer(&r, &x).unwrap().shape_text(), "[N, 4]");
    }
}
