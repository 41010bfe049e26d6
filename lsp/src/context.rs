//! The syntactic context at the cursor, for completion and signature help: inside
//! a string or a comment, the enclosing call and argument, inside an axis
//! annotation. Computed by one forward scan of the text up to the cursor, so it
//! works on half-typed code that does not parse.

use mlpl_diag::Span;

/// An enclosing call `name(` of the cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallCtx {
    /// The callee.
    pub name: String,
    /// Where the callee is written.
    pub name_span: Span,
    /// Offset of the `(`.
    pub open: usize,
    /// 0-based index of the argument the cursor is in.
    pub arg_index: usize,
    /// Whether the cursor is inside a `[ … ]` list within that argument.
    pub in_list: bool,
}

/// The context at a cursor offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// Inside a comment.
    pub in_comment: bool,
    /// Inside a string literal: the offset just after its opening quote.
    pub string_start: Option<usize>,
    /// The innermost enclosing call (through a list, see [`CallCtx::in_list`]).
    pub call: Option<CallCtx>,
    /// Inside the brackets of an axis annotation `X : [ … ]`.
    pub in_annotation: bool,
    /// Start of the identifier being typed (the cursor when none).
    pub word_start: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    Paren,
    Bracket,
    Brace,
}

struct Frame {
    kind: FrameKind,
    open: usize,
    callee: Option<(String, Span)>,
    commas: usize,
    annotation: bool,
}

#[derive(Clone, PartialEq)]
enum Sig {
    None,
    Ident(String, Span),
    Colon,
    Other,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Computes the context at byte `offset` of `text`.
pub fn context(text: &str, offset: usize) -> Context {
    let offset = crate::lines::floor_char_boundary(text, offset);
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut prev = Sig::None;
    let mut prev2 = Sig::None;
    let mut i = 0;
    let mut ctx = Context::default();
    let push_sig = |prev: &mut Sig, prev2: &mut Sig, s: Sig| {
        *prev2 = std::mem::replace(prev, s);
    };
    while i < offset {
        let c = bytes[i];
        match c {
            b'#' => {
                let mut j = i;
                while j < bytes.len() && bytes[j] != b'\n' && bytes[j] != b'\r' {
                    j += 1;
                }
                if j >= offset {
                    ctx.in_comment = true;
                    break;
                }
                i = j;
                continue;
            }
            b'"' => {
                let start = i + 1;
                let mut j = start;
                let mut closed = false;
                while j < bytes.len() {
                    match bytes[j] {
                        b'\\' => j += 2,
                        b'"' => {
                            closed = true;
                            break;
                        }
                        _ => j += 1,
                    }
                }
                if !closed || j >= offset {
                    ctx.string_start = Some(start);
                    break;
                }
                push_sig(&mut prev, &mut prev2, Sig::Other);
                i = j + 1;
                continue;
            }
            b'(' | b'[' | b'{' => {
                let kind = match c {
                    b'(' => FrameKind::Paren,
                    b'[' => FrameKind::Bracket,
                    _ => FrameKind::Brace,
                };
                let callee = match (&prev, kind) {
                    (Sig::Ident(n, s), FrameKind::Paren) => Some((n.clone(), *s)),
                    _ => None,
                };
                let annotation = kind == FrameKind::Bracket
                    && prev == Sig::Colon
                    && matches!(prev2, Sig::Ident(..));
                stack.push(Frame {
                    kind,
                    open: i,
                    callee,
                    commas: 0,
                    annotation,
                });
                push_sig(&mut prev, &mut prev2, Sig::Other);
            }
            b')' | b']' | b'}' => {
                let want = match c {
                    b')' => FrameKind::Paren,
                    b']' => FrameKind::Bracket,
                    _ => FrameKind::Brace,
                };
                if let Some(p) = stack.iter().rposition(|f| f.kind == want) {
                    stack.truncate(p);
                }
                push_sig(&mut prev, &mut prev2, Sig::Other);
            }
            b',' => {
                if let Some(f) = stack.last_mut() {
                    f.commas += 1;
                }
                push_sig(&mut prev, &mut prev2, Sig::Other);
            }
            b':' => push_sig(&mut prev, &mut prev2, Sig::Colon),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ if (c as char).is_ascii_alphabetic() || c == b'_' => {
                let mut j = i;
                while j < bytes.len() && is_ident_char(bytes[j] as char) {
                    j += 1;
                }
                push_sig(
                    &mut prev,
                    &mut prev2,
                    Sig::Ident(text[i..j].to_string(), Span::new(i, j)),
                );
                i = j;
                continue;
            }
            _ => push_sig(&mut prev, &mut prev2, Sig::Other),
        }
        i += 1;
    }
    // The innermost call, looking through list brackets.
    let mut in_list = false;
    for f in stack.iter().rev() {
        match f.kind {
            FrameKind::Bracket if f.annotation => {
                if !in_list && ctx.call.is_none() {
                    ctx.in_annotation = true;
                }
                break;
            }
            FrameKind::Bracket => in_list = true,
            FrameKind::Brace => break,
            FrameKind::Paren => {
                if let Some((name, span)) = &f.callee {
                    ctx.call = Some(CallCtx {
                        name: name.clone(),
                        name_span: *span,
                        open: f.open,
                        arg_index: f.commas,
                        in_list,
                    });
                }
                break;
            }
        }
    }
    if ctx.in_annotation {
        ctx.call = None;
    }
    let mut ws = offset;
    while ws > 0 && is_ident_char(bytes[ws - 1] as char) {
        ws -= 1;
    }
    ctx.word_start = ws;
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(src: &str) -> Context {
        let off = src.find('|').unwrap();
        let text = src.replace('|', "");
        context(&text, off)
    }

    #[test]
    fn calls_and_arguments() {
        let c = at("y = matmul(x, tr|");
        let call = c.call.unwrap();
        assert_eq!(
            (call.name.as_str(), call.arg_index, call.in_list),
            ("matmul", 1, false)
        );
        assert_eq!(c.word_start, "y = matmul(x, ".len());
        let c = at("m = chain(\n  linear(2, 3, 0),\n  |");
        assert_eq!(c.call.unwrap().arg_index, 1);
        let c = at("label(x, [\"a\", \"|");
        assert!(c.string_start.is_some());
        let call = c.call.unwrap();
        assert_eq!(
            (call.name.as_str(), call.arg_index, call.in_list),
            ("label", 1, true)
        );
    }

    #[test]
    fn strings_comments_annotations() {
        assert!(at("x = 1 # a comment |").in_comment);
        assert!(!at("x = \"# no\" |").in_comment);
        let c = at("y = device(\"cu|");
        assert_eq!(c.call.unwrap().name, "device");
        assert!(c.string_start.is_some());
        assert!(at("X : [batch, |").in_annotation);
        assert!(!at("X = [1, |").in_annotation);
        assert!(at("f(a)\n|").call.is_none());
    }
}
