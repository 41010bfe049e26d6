//! How values print (LANGUAGE §7.2 and §7.3): numbers in float64 or float32
//! precision, arrays laid out by rank, and named shapes such as `[batch=32, 10]`.
//!
//! Everything here is plain formatting over slices; nothing depends on tensors or
//! interpreter types, and no input makes these functions panic.

/// The largest magnitude (exclusive) below which an integer-valued number prints
/// as plain integer digits: 2^53.
const INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// Formats a float64 number (an exact scalar) as LANGUAGE §7.2 prescribes.
///
/// Integer-valued numbers below 2^53 in magnitude print as integer digits; every
/// other finite number prints as the shortest decimal that reads back to the same
/// float64, never with an exponent (`1e24` prints `1000000000000000000000000`,
/// `5.7344e-5` prints `0.000057344`). Negative zero prints `-0`, infinities `inf`
/// and `-inf`, NaN `NaN`.
pub fn format_f64(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    if x.fract() == 0.0 && x.abs() < INTEGER_LIMIT {
        // Exact: |x| < 2^53 fits an i64 without rounding.
        return format!("{}", x as i64);
    }
    // Rust's `Display` for floats prints the shortest round-trip digits and never
    // uses an exponent.
    format!("{x}")
}

/// Formats a float32 number (an array element) as LANGUAGE §7.2 prescribes: the
/// shortest decimal that reads back to the same float32 (`2.7182817`,
/// `123456792`), with the same rules as [`format_f64`] otherwise.
pub fn format_f32(x: f32) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let wide = f64::from(x);
    if x.fract() == 0.0 && wide.abs() < INTEGER_LIMIT {
        return format!("{}", wide as i64);
    }
    format!("{x}")
}

/// The float64 whose shortest decimal form equals the float32 display of `x`
/// (`0.1f32` gives `0.1f64`, not `0.10000000149011612`).
///
/// Useful where a float32 array value becomes a float64 number that is printed
/// later, such as experiment metrics (LANGUAGE §17), so that it prints exactly as
/// the array element did. Non-finite values map to themselves.
pub fn f32_as_decimal_f64(x: f32) -> f64 {
    if !x.is_finite() {
        return f64::from(x);
    }
    format_f32(x).parse::<f64>().unwrap_or(f64::from(x))
}

/// Lays out a float32 array of the given shape as LANGUAGE §7.3 prescribes.
///
/// Rank 0 prints the number; rank 1 the elements separated by single spaces;
/// rank 2 one row per line; rank ≥ 3 the trailing matrices in row-major order,
/// separated by as many blank lines as leading indices changed between them. An
/// array with zero elements prints `[]`. If `data` does not hold exactly as many
/// elements as `shape` describes, the elements are printed as a rank-1 array
/// (after the same `[]` rule), so that no input panics.
pub fn format_array_f32(shape: &[usize], data: &[f32]) -> String {
    let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if count == Some(0) || data.is_empty() {
        return "[]".to_string();
    }
    if count != Some(data.len()) {
        return join_row(data);
    }
    match shape.len() {
        0 => format_f32(data[0]),
        1 => join_row(data),
        _ => format_high_rank(shape, data),
    }
}

/// Elements separated by single spaces.
fn join_row(row: &[f32]) -> String {
    let mut out = String::new();
    for (i, &x) in row.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&format_f32(x));
    }
    out
}

/// Rank ≥ 2 layout; `shape` and `data` agree and no axis is empty.
fn format_high_rank(shape: &[usize], data: &[f32]) -> String {
    let rank = shape.len();
    let (rows, cols) = (shape[rank - 2], shape[rank - 1]);
    let leading = &shape[..rank - 2];
    let matrix_len = rows * cols;
    let matrices = data.len() / matrix_len;
    let mut index = vec![0usize; leading.len()];
    let mut out = String::new();
    for m in 0..matrices {
        if m > 0 {
            let previous = index.clone();
            increment(&mut index, leading);
            let changed = previous.iter().zip(&index).filter(|(a, b)| a != b).count();
            out.push('\n');
            for _ in 0..changed {
                out.push('\n');
            }
        }
        let matrix = &data[m * matrix_len..(m + 1) * matrix_len];
        for (r, row) in matrix.chunks(cols).enumerate() {
            if r > 0 {
                out.push('\n');
            }
            out.push_str(&join_row(row));
        }
    }
    out
}

/// Advances a row-major multi-index over `dims` by one.
fn increment(index: &mut [usize], dims: &[usize]) {
    for axis in (0..index.len()).rev() {
        index[axis] += 1;
        if index[axis] < dims[axis] {
            return;
        }
        index[axis] = 0;
    }
}

/// Formats a shape with optional axis names as LANGUAGE §1 writes it:
/// `[batch=32, 10]`; a scalar's shape is `[]`.
///
/// `names` holds one entry per axis (`None` for an unnamed axis); missing entries
/// count as unnamed and extra entries are ignored.
pub fn format_named_shape(shape: &[usize], names: Option<&[Option<String>]>) -> String {
    let mut out = String::from("[");
    for (axis, size) in shape.iter().enumerate() {
        if axis > 0 {
            out.push_str(", ");
        }
        if let Some(Some(name)) = names.and_then(|n| n.get(axis)) {
            out.push_str(name);
            out.push('=');
        }
        out.push_str(&size.to_string());
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64_table_of_section_7_2() {
        assert_eq!(format_f64(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_f64(123456789.0), "123456789");
        assert_eq!(format_f64(std::f64::consts::E), "2.718281828459045");
        assert_eq!(format_f64(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_f64(f64::INFINITY), "inf");
        assert_eq!(format_f64(f64::NAN), "NaN");
        assert_eq!(format_f64(-0.0), "-0");
        assert_eq!(format_f64(0.0), "0");
        assert_eq!(format_f64(1.0), "1");
        assert_eq!(format_f64(-12.0), "-12");
        assert_eq!(format_f64(149520384.0), "149520384");
        assert_eq!(format_f64(0.1), "0.1");
        assert_eq!(format_f64(1.5), "1.5");
        assert_eq!(format_f64(0.000057344), "0.000057344");
        assert_eq!(format_f64(906.8756), "906.8756");
        assert_eq!(format_f64(1e24), "1000000000000000000000000");
        assert_eq!(format_f64(-1e24), "-1000000000000000000000000");
        assert_eq!(
            format_f64(1.7600987334276397e-10),
            "0.00000000017600987334276397"
        );
    }

    #[test]
    fn f64_integer_limit() {
        assert_eq!(format_f64(9007199254740991.0), "9007199254740991");
        assert_eq!(format_f64(-9007199254740991.0), "-9007199254740991");
        assert_eq!(format_f64(9007199254740992.0), "9007199254740992");
        assert_eq!(format_f64(f64::MAX).len(), 309);
        assert!(!format_f64(f64::MIN_POSITIVE).contains('e'));
        assert!(!format_f64(5e-324).contains('e'));
    }

    #[test]
    fn f32_table_of_section_7_2() {
        assert_eq!(format_f32(0.1f32 + 0.2f32), "0.3");
        assert_eq!(format_f32(123456789.0f32), "123456792");
        assert_eq!(format_f32(1f32.exp()), "2.7182817");
        assert_eq!(format_f32(f32::NEG_INFINITY), "-inf");
        assert_eq!(format_f32(f32::INFINITY), "inf");
        assert_eq!(format_f32(f32::NAN), "NaN");
        assert_eq!(format_f32(-0.0), "-0");
        assert_eq!(format_f32(0.25), "0.25");
        assert_eq!(format_f32(1e24), "1000000000000000000000000");
        assert_eq!(format_f32(0.000057344), "0.000057344");
        assert_eq!(format_f32(906.8756), "906.8756");
        assert_eq!(format_f32(-12.0), "-12");
    }

    #[test]
    fn decimal_f64_of_f32() {
        assert_eq!(f32_as_decimal_f64(0.1), 0.1);
        assert_eq!(f32_as_decimal_f64(0.5), 0.5);
        assert_eq!(f32_as_decimal_f64(123456789.0), 123456792.0);
        assert!(f32_as_decimal_f64(f32::NAN).is_nan());
        assert_eq!(f32_as_decimal_f64(f32::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(format_f64(f32_as_decimal_f64(1f32.exp())), "2.7182817");
    }

    #[test]
    fn layout_by_rank() {
        assert_eq!(format_array_f32(&[], &[3.5]), "3.5");
        assert_eq!(format_array_f32(&[3], &[1.0, 2.0, 3.0]), "1 2 3");
        let fractions: Vec<f32> = (0..6).map(|i| i as f32 / 4.0).collect();
        assert_eq!(
            format_array_f32(&[2, 3], &fractions),
            "0 0.25 0.5\n0.75 1 1.25"
        );
        let iota: Vec<f32> = (0..12).map(|i| i as f32).collect();
        assert_eq!(
            format_array_f32(&[2, 2, 3], &iota),
            "0 1 2\n3 4 5\n\n6 7 8\n9 10 11"
        );
        assert_eq!(format_array_f32(&[1, 3], &[1.0, 2.0, 3.0]), "1 2 3");
        assert_eq!(format_array_f32(&[3, 1], &[1.0, 2.0, 3.0]), "1\n2\n3");
    }

    #[test]
    fn blank_lines_count_changed_leading_indices() {
        let iota: Vec<f32> = (0..8).map(|i| i as f32).collect();
        assert_eq!(
            format_array_f32(&[2, 2, 1, 2], &iota),
            "0 1\n\n2 3\n\n\n4 5\n\n6 7"
        );
        // A leading axis of size 1 never changes.
        assert_eq!(format_array_f32(&[2, 1, 1, 2], &iota[..4]), "0 1\n\n2 3");
        assert_eq!(
            format_array_f32(&[2, 2, 2, 1, 1], &iota),
            "0\n\n1\n\n\n2\n\n3\n\n\n\n4\n\n5\n\n\n6\n\n7"
        );
    }

    #[test]
    fn empty_and_mismatched() {
        assert_eq!(format_array_f32(&[0], &[]), "[]");
        assert_eq!(format_array_f32(&[2, 0, 3], &[]), "[]");
        assert_eq!(format_array_f32(&[0, 5], &[]), "[]");
        assert_eq!(format_array_f32(&[2, 2], &[1.0, 2.0]), "1 2");
        assert_eq!(format_array_f32(&[], &[]), "[]");
        assert_eq!(format_array_f32(&[usize::MAX, 2], &[1.0]), "1");
    }

    #[test]
    fn named_shapes() {
        let names = [Some("batch".to_string()), None];
        assert_eq!(
            format_named_shape(&[32, 10], Some(&names)),
            "[batch=32, 10]"
        );
        assert_eq!(format_named_shape(&[32, 10], None), "[32, 10]");
        assert_eq!(format_named_shape(&[], None), "[]");
        assert_eq!(format_named_shape(&[4], Some(&names)), "[batch=4]");
        assert_eq!(
            format_named_shape(&[4, 5, 6], Some(&names)),
            "[batch=4, 5, 6]"
        );
    }
}
