//! `apply(model, x)` (LANGUAGE §11.2): the forward pass of every layer, with the
//! input checks of the catalog (E0211, E0212, E0402). Every computation goes
//! through `eval::ops` (or records itself the same way), so it is recorded on
//! the loss tape when one is live. In a `chain`, a `linear` layer (or a
//! LoRA-wrapped one) directly followed by an element-wise activation layer adds
//! its bias and applies the activation in one fused kernel (`bias_act`), with
//! the same values.

use mlpl_devices::{BinaryOp, UnaryOp};
use mlpl_diag::code;

use super::layers::*;
use super::{attention, dropout, engram, moe, rope};
use crate::eval::{loss, ops, Interp};
use crate::value::{named_shape, Array, Names};
use mlpl_diag::{Diagnostic, Span};

/// The element-wise function of an activation layer (`None` for softmax,
/// which works along an axis).
fn activation_op(a: Activation) -> Option<UnaryOp> {
    match a {
        Activation::Tanh => Some(UnaryOp::Tanh),
        Activation::Relu => Some(UnaryOp::Relu),
        Activation::Gelu => Some(UnaryOp::Gelu),
        Activation::Silu => Some(UnaryOp::Silu),
        Activation::Softmax => None,
    }
}

/// One forward pass in progress.
pub struct Forward<'a> {
    /// The interpreter (workspace, tape, devices).
    pub it: &'a mut Interp,
    /// The whole call, for operation errors.
    pub span: Span,
    /// The input argument, for input-shape errors.
    pub x_span: Span,
    /// Whether the attention probabilities of the first attention layer are wanted.
    pub capture: bool,
    /// Those probabilities, once reached, shaped as `attention_weights` returns them.
    pub weights: Option<Array>,
    /// The key/value cache while generating (`generate`), else `None`.
    pub cache: Option<super::generate::KvCache>,
}

/// Applies `model` to `x`. `span` is the call, `x_span` the input argument.
pub fn apply(
    it: &mut Interp,
    model: &Layer,
    x: &Array,
    span: Span,
    x_span: Span,
) -> Result<Array, Diagnostic> {
    Forward::new(it, span, x_span).layer(model, x)
}

impl<'a> Forward<'a> {
    /// A plain forward pass: no attention probabilities kept, no key/value cache.
    pub fn new(it: &'a mut Interp, span: Span, x_span: Span) -> Self {
        Forward {
            it,
            span,
            x_span,
            capture: false,
            weights: None,
            cache: None,
        }
    }
}

impl Forward<'_> {
    /// Applies one layer (and its children) to `x`.
    pub fn layer(&mut self, layer: &Layer, x: &Array) -> Result<Array, Diagnostic> {
        match layer {
            Layer::Linear(l) => self.linear(layer, l, x),
            Layer::Lora(l) => self.lora(layer, l, x),
            Layer::Embed(e) => self.embed(layer, e, x),
            Layer::Attention(a) => attention::forward(self, layer, a, x),
            Layer::RmsNorm(r) => self.rms_norm(layer, r, x),
            Layer::LayerNorm(l) => self.layer_norm(layer, l, x),
            Layer::Activation(a) => self.activation(layer, *a, x),
            Layer::Dropout(d) => dropout::forward(self, d, x),
            Layer::SwiGlu(s) => self.swiglu(layer, s, x),
            Layer::Rope(r) => {
                if x.rank() < 2 || x.shape().last() != Some(&r.head_dim) {
                    let pattern = format!("[…, T, {}]", r.head_dim);
                    return Err(self.wrong_input(layer, &pattern, x));
                }
                rope::rotate(self, r, x)
            }
            Layer::Moe(m) => moe::forward(self, layer, m, x),
            Layer::Unembed(e) => self.unembed(layer, e, x),
            Layer::PosEmbed(p) => {
                let start = self.cache.as_ref().map_or(0, |c| c.pos);
                self.pos_embed(layer, p, x, start)
            }
            Layer::Engram(g) => engram::forward(self, layer, g, x),
            Layer::Chain(children) => {
                self.it.check_cancel(self.span)?;
                let mut y = x.clone();
                let mut i = 0;
                while i < children.len() {
                    // A (LoRA-wrapped) linear layer directly followed by an
                    // element-wise activation adds its bias and applies the
                    // activation in one fused kernel.
                    let next = children.get(i + 1).and_then(|c| match c.as_ref() {
                        Layer::Activation(a) => activation_op(*a),
                        _ => None,
                    });
                    match (children[i].as_ref(), next) {
                        (c @ Layer::Linear(l), Some(op)) => {
                            y = self.linear_with(c, l, &y, Some(op))?;
                            i += 2;
                        }
                        (c @ Layer::Lora(l), Some(op)) => {
                            y = self.lora_with(c, l, &y, Some(op))?;
                            i += 2;
                        }
                        (c, _) => {
                            y = self.layer(c, &y)?;
                            i += 1;
                        }
                    }
                }
                Ok(y)
            }
            Layer::Residual(inner) => {
                self.it.check_cancel(self.span)?;
                let y = self.layer(inner, x)?;
                if y.shape() != x.shape() {
                    return Err(Diagnostic::of(code::E0212)
                        .at(
                            self.x_span,
                            format!(
                                "the block maps {} to {}",
                                named_shape(x),
                                named_shape(&y)
                            ),
                        )
                        .note("`residual(m)` computes x + m(x), so m must keep the shape of its input")
                        .help("make the block end with a layer that maps back to the input width"));
                }
                ops::arith(self.it, BinaryOp::Add, x, &y, self.span)
            }
        }
    }

    /// E0211 for `layer` given `x`, naming the expected `pattern`.
    pub fn wrong_input(&self, layer: &Layer, pattern: &str, x: &Array) -> Diagnostic {
        Diagnostic::of(code::E0211)
            .at(
                self.x_span,
                format!(
                    "`{}` expects {pattern}, got {}",
                    layer.describe(),
                    named_shape(x)
                ),
            )
            .note(format!(
                "the input of `{}` must have the shape {pattern}",
                layer.describe()
            ))
    }

    /// Reads parameter `name`, which must have `shape` (E0218 otherwise, when the
    /// variable was re-bound to an array of another shape).
    pub fn weight(&mut self, name: &str, shape: &[usize]) -> Result<Array, Diagnostic> {
        let a = super::param(self.it, name, self.span)?;
        if a.shape() != shape {
            return Err(Diagnostic::of(code::E0218)
                .at(
                    self.span,
                    format!("parameter `{name}` has shape {}", named_shape(&a)),
                )
                .note(format!(
                    "this layer needs `{name}` with shape {}",
                    crate::display::format_named_shape(shape, None)
                ))
                .help("the parameter variable was re-bound to an array of another shape"));
        }
        Ok(a)
    }

    /// The matrix product of two arrays whose shapes the caller has checked
    /// (rank ≥ 2, batch axes broadcast).
    pub fn mm(&mut self, a: &Array, b: &Array) -> Result<Array, Diagnostic> {
        self.product(a, b, false)
    }

    /// `a·bᵀ` (`b`'s last two axes swapped, `b` read in place) for arrays whose
    /// shapes the caller has checked (rank ≥ 2, batch axes broadcast).
    pub fn mm_nt(&mut self, a: &Array, b: &Array) -> Result<Array, Diagnostic> {
        self.product(a, b, true)
    }

    /// [`Forward::mm`], or [`Forward::mm_nt`] when `transpose_b`.
    fn product(&mut self, a: &Array, b: &Array, transpose_b: bool) -> Result<Array, Diagnostic> {
        let (ta, tb) = (a.tensor(), b.tensor());
        let mut shape: Vec<usize> = match (ta.rank(), tb.rank()) {
            (ra, rb) if ra >= 2 && rb >= 2 => {
                let (ba, bb) = (&ta.shape()[..ra - 2], &tb.shape()[..rb - 2]);
                mlpl_devices::broadcast_shapes(ba, bb).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        let n_axis = if transpose_b { 2 } else { 1 };
        shape.extend([
            ta.shape()[ta.rank().saturating_sub(2)],
            tb.shape()[tb.rank().saturating_sub(n_axis)],
        ]);
        ops::check_size("matmul", &shape, self.span)?;
        ops::product_raw(self.it, [(&ta, a), (&tb, b)], transpose_b, self.span)
    }

    /// `x` `[…, w]` as rows `[R, w]`, with its leading shape and names.
    pub fn rows(&mut self, x: &Array) -> Result<(Array, Vec<usize>, Names), Diagnostic> {
        let s = x.shape();
        let w = s[s.len() - 1];
        let lead = s[..s.len() - 1].to_vec();
        let names = x.names().map(|n| n[..n.len() - 1].to_vec());
        let r: usize = lead.iter().product();
        let x2 = ops::reshape(self.it, x, vec![r, w], self.span)?;
        Ok((x2, lead, names))
    }

    /// Rows `[R, w]` back to `lead ++ [w]`, the leading axes named `names`, the last
    /// unnamed.
    pub fn unrows(&mut self, y: &Array, lead: &[usize], names: Names) -> Result<Array, Diagnostic> {
        let w = y.shape()[y.rank() - 1];
        let mut shape = lead.to_vec();
        shape.push(w);
        let out = ops::reshape(self.it, y, shape, self.span)?;
        let names = names.map(|mut n| {
            n.push(None);
            n
        });
        Ok(out.with_names(names))
    }

    /// Checks rank ≥ 1 and a last axis of `width`.
    fn last_axis(&self, layer: &Layer, x: &Array, width: usize) -> Result<(), Diagnostic> {
        if x.rank() == 0 || x.shape()[x.rank() - 1] != width {
            return Err(self.wrong_input(layer, &format!("[…, {width}]"), x));
        }
        Ok(())
    }

    fn linear(&mut self, layer: &Layer, l: &Linear, x: &Array) -> Result<Array, Diagnostic> {
        self.linear_with(layer, l, x, None)
    }

    /// `x·W + b`, then `act` when given (fused with the bias: [`Forward::bias_act`]).
    fn linear_with(
        &mut self,
        layer: &Layer,
        l: &Linear,
        x: &Array,
        act: Option<UnaryOp>,
    ) -> Result<Array, Diagnostic> {
        self.last_axis(layer, x, l.inp)?;
        let w = self.weight(&l.w(), &[l.inp, l.out])?;
        let b = self.bias(l)?;
        let (x2, lead, names) = self.rows(x)?;
        let y = self.mm(&x2, &w)?;
        let y = self.add_bias(&y, b.as_ref(), act)?;
        self.unrows(&y, &lead, names)
    }

    /// A linear layer's bias `[1, out]`, when it has one.
    fn bias(&mut self, l: &Linear) -> Result<Option<Array>, Diagnostic> {
        if !l.bias {
            return Ok(None);
        }
        Ok(Some(self.weight(&l.b(), &[1, l.out])?))
    }

    /// `y + b`, or `act(y + b)` in one fused kernel ([`Forward::bias_act`]);
    /// without a bias `y` or `act(y)`.
    pub fn add_bias(
        &mut self,
        y: &Array,
        b: Option<&Array>,
        act: Option<UnaryOp>,
    ) -> Result<Array, Diagnostic> {
        match (b, act) {
            (Some(b), Some(op)) => self.bias_act(y, b, op),
            (Some(b), None) => ops::arith(self.it, BinaryOp::Add, y, b, self.span),
            (None, Some(op)) => ops::unary(self.it, op, y, self.span),
            (None, None) => Ok(y.clone()),
        }
    }

    /// `op(y + b)` for rows `y` `[R, n]` and a bias `b` `[1, n]`, as one backend
    /// kernel (`bias_act`; recorded as one op when either is on the loss tape):
    /// the values of `+` followed by the activation.
    fn bias_act(&mut self, y: &Array, b: &Array, op: UnaryOp) -> Result<Array, Diagnostic> {
        let span = self.span;
        let (backend, placement) = ops::placement_for(self.it, "+", &[(y, span), (b, span)])?;
        let out = if loss::any_live(self.it, &[y, b]) {
            let (vy, vb) = (loss::var_of(self.it, y), loss::var_of(self.it, b));
            loss::record(self.it, "+", span, |t| t.bias_act(vy, vb, op))?
        } else {
            Array::from_tensor(
                backend
                    .bias_act(&y.tensor(), &b.tensor(), op)
                    .map_err(|e| crate::errors::device_error(e, "+", span))?,
            )
        };
        Ok(out.with_placement(placement))
    }

    fn lora(&mut self, layer: &Layer, l: &Lora, x: &Array) -> Result<Array, Diagnostic> {
        self.lora_with(layer, l, x, None)
    }

    /// The LoRA-wrapped linear layer, then `act` when given (fused with the bias).
    fn lora_with(
        &mut self,
        layer: &Layer,
        l: &Lora,
        x: &Array,
        act: Option<UnaryOp>,
    ) -> Result<Array, Diagnostic> {
        let base = l.base;
        self.last_axis(layer, x, base.inp)?;
        let w = self.weight(&base.w(), &[base.inp, base.out])?;
        let b = self.bias(&base)?;
        let a = self.weight(&l.a(), &[base.inp, l.rank])?;
        let bb = self.weight(&l.b_adapter(), &[l.rank, base.out])?;
        let (x2, lead, names) = self.rows(x)?;
        let y = self.mm(&x2, &w)?;
        let xa = self.mm(&x2, &a)?;
        let xab = self.mm(&xa, &bb)?;
        let scale = Array::exact(l.alpha / l.rank as f64);
        let delta = ops::arith(self.it, BinaryOp::Mul, &xab, &scale, self.span)?;
        let y = ops::arith(self.it, BinaryOp::Add, &y, &delta, self.span)?;
        let y = self.add_bias(&y, b.as_ref(), act)?;
        self.unrows(&y, &lead, names)
    }

    fn embed(&mut self, layer: &Layer, e: &Embed, x: &Array) -> Result<Array, Diagnostic> {
        let table = self.weight(&format!("__embed_E_{}", e.id), &[e.vocab, e.d])?;
        for (i, &id) in x.to_f64().iter().enumerate() {
            if !(id.fract() == 0.0 && id >= 0.0 && id < e.vocab as f64) {
                return Err(Diagnostic::of(code::E0402)
                    .at(
                        self.x_span,
                        format!("id {} at position {i}", crate::display::format_f64(id)),
                    )
                    .note(format!(
                        "`{}` takes integer ids in [0, {})",
                        layer.describe(),
                        e.vocab
                    )));
            }
        }
        let mut shape = x.shape().to_vec();
        shape.push(e.d);
        ops::check_size("embed", &shape, self.span)?;
        let ids = x.clone().detached();
        ops::gather_rows(self.it, &table, &ids, self.span)
    }

    /// The tied head: `x` `[…, d]` times the embedding table transposed,
    /// `[…, vocab]`. The table is the `embed` layer's own parameter, so its
    /// gradient sums both uses.
    fn unembed(&mut self, layer: &Layer, e: &Embed, x: &Array) -> Result<Array, Diagnostic> {
        self.last_axis(layer, x, e.d)?;
        let table = self.weight(&format!("__embed_E_{}", e.id), &[e.vocab, e.d])?;
        let (x2, lead, names) = self.rows(x)?;
        // Read transposed where it is: no `[d, vocab]` copy a call (154 MB
        // a decoded token for GPT-2's head).
        let y = self.mm_nt(&x2, &table)?;
        self.unrows(&y, &lead, names)
    }

    /// Adds rows `start..start + T` of the position table to `x` `[…, T, d]`.
    pub fn pos_embed(
        &mut self,
        layer: &Layer,
        p: &PosEmbed,
        x: &Array,
        start: usize,
    ) -> Result<Array, Diagnostic> {
        let s = x.shape();
        if s.len() < 2 || s[s.len() - 1] != p.d || start + s[s.len() - 2] > p.max_pos {
            let pattern = format!(
                "[…, T, {}] with T ≤ {}",
                p.d,
                p.max_pos - start.min(p.max_pos)
            );
            return Err(self.wrong_input(layer, &pattern, x));
        }
        let t = s[s.len() - 2];
        let table = self.weight(&format!("__pos_P_{}", p.id), &[p.max_pos, p.d])?;
        let ids: Vec<f32> = (start..start + t).map(|i| i as f32).collect();
        let ids = Array::from_vec(vec![t], ids);
        let rows = ops::gather_rows(self.it, &table, &ids, self.span)?;
        ops::arith(self.it, BinaryOp::Add, x, &rows, self.span)
    }

    fn rms_norm(&mut self, layer: &Layer, r: &RmsNorm, x: &Array) -> Result<Array, Diagnostic> {
        match r.gain {
            Some(k) => {
                self.last_axis(layer, x, r.dim)?;
                let g = self.weight(&format!("__rms_g_{k}"), &[r.dim])?;
                let y = ops::norm(self.it, x, r.eps as f32, false, self.span)?;
                ops::arith(self.it, BinaryOp::Mul, &y, &g, self.span)
            }
            None => {
                if x.rank() == 0 {
                    return Err(self.wrong_input(layer, "[…, w] (rank 1 or more)", x));
                }
                ops::norm(self.it, x, r.eps as f32, false, self.span)
            }
        }
    }

    fn layer_norm(&mut self, layer: &Layer, l: &LayerNorm, x: &Array) -> Result<Array, Diagnostic> {
        self.last_axis(layer, x, l.d)?;
        let g = self.weight(&format!("__ln_g_{}", l.id), &[l.d])?;
        let b = self.weight(&format!("__ln_b_{}", l.id), &[l.d])?;
        let y = ops::norm(self.it, x, l.eps as f32, true, self.span)?;
        let y = ops::arith(self.it, BinaryOp::Mul, &y, &g, self.span)?;
        ops::arith(self.it, BinaryOp::Add, &y, &b, self.span)
    }

    fn activation(&mut self, layer: &Layer, a: Activation, x: &Array) -> Result<Array, Diagnostic> {
        if let Some(op) = activation_op(a) {
            return ops::unary(self.it, op, x, self.span);
        }
        if x.rank() == 0 {
            return Err(self.wrong_input(layer, "rank 1 or more", x));
        }
        let axis = x.rank() - 1;
        ops::softmax(self.it, x, axis, false, self.span)
    }

    fn swiglu(&mut self, layer: &Layer, s: &SwiGlu, x: &Array) -> Result<Array, Diagnostic> {
        self.last_axis(layer, x, s.d)?;
        let k = s.id;
        let wg = self.weight(&format!("__swiglu_Wg_{k}"), &[s.d, s.hidden])?;
        let wu = self.weight(&format!("__swiglu_Wu_{k}"), &[s.d, s.hidden])?;
        let wd = self.weight(&format!("__swiglu_Wd_{k}"), &[s.hidden, s.d])?;
        let (x2, lead, names) = self.rows(x)?;
        let g = self.mm(&x2, &wg)?;
        let u = self.mm(&x2, &wu)?;
        let g = ops::unary(self.it, UnaryOp::Silu, &g, self.span)?;
        let h = ops::arith(self.it, BinaryOp::Mul, &g, &u, self.span)?;
        let y = self.mm(&h, &wd)?;
        self.unrows(&y, &lead, names)
    }
}
