//! How the server shows what the checker knows about a value (the runtime's
//! [`AbsValue`], from `mlpl_lang::check`): one line for hovers, completion
//! details, inlay hints and document symbols. Shapes print exactly as `mlpl check`
//! prints them ([`AbsArray::shape_text`](mlpl_lang::check::AbsArray::shape_text)).

use mlpl_lang::check::AbsValue;

/// A short description: `[batch=32, 10]`, `scalar 3`, `string "a"`, `model, 1,234
/// parameters`, `unknown`.
pub fn describe(v: &AbsValue) -> String {
    match v {
        AbsValue::Unknown => "unknown".into(),
        AbsValue::Array(a) => match (a.rank(), a.scalar_value()) {
            (Some(0), Some(x)) => format!("scalar {}", mlpl_lang::display::format_f64(x)),
            (Some(0), None) => "scalar".into(),
            _ => a.shape_text(),
        },
        AbsValue::Str(Some(s)) if s.chars().count() <= 40 => format!("string {s:?}"),
        AbsValue::Str(Some(s)) => format!("string of {} bytes", s.len()),
        AbsValue::Str(None) => "string".into(),
        AbsValue::Model(Some(m)) => {
            let p = mlpl_lang::nn::estimate::param_count(&m.0);
            format!("model, {} parameters", group_digits(p))
        }
        AbsValue::Model(None) => "model".into(),
        AbsValue::Tokenizer(_) => "tokenizer".into(),
    }
}

/// `1234567` → `1,234,567` (integers), other numbers with 4 significant digits.
pub fn group_digits(x: f64) -> String {
    if !(x.is_finite() && x.fract() == 0.0 && x.abs() < 1e18) {
        return format!("{x:.4}");
    }
    let s = format!("{}", x.abs() as u64);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlpl_lang::check::{AbsArray, Dim};

    #[test]
    fn values_print_like_the_checker() {
        let a = AbsArray::of_dims(vec![Dim::Known(32), Dim::Symbol("N".into()), Dim::Unknown])
            .with_names(Some(vec![Some("batch".into()), None, None]));
        assert_eq!(describe(&AbsValue::Array(a)), "[batch=32, N, ?]");
        assert_eq!(describe(&AbsValue::any_array()), "[*]");
        assert_eq!(describe(&AbsValue::scalar(3.0)), "scalar 3");
        assert_eq!(describe(&AbsValue::Str(Some("a".into()))), "string \"a\"");
        assert_eq!(group_digits(1234567.0), "1,234,567");
        assert_eq!(group_digits(800.0), "800");
    }
}
