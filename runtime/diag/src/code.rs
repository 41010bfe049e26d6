//! Every diagnostic code as a constant, so that a code written at an emission
//! site is checked by the compiler: `Diagnostic::error(code::E0201, …)`. A test
//! keeps the list equal to the catalog's data files.

macro_rules! codes {
    ($($code:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($code), "` (see `mlpl explain ", stringify!($code), "`).")]
            pub const $code: &str = stringify!($code);
        )*
        /// Every constant of this module, in code order.
        pub const ALL: &[&str] = &[$($code),*];
    };
}

codes! {
    E0001, E0002, E0003, E0004, E0005, E0006, E0007, E0008, E0009, E0010, E0011, E0012,
    E0101, E0102, E0103, E0104, E0105, E0106, E0107, E0108, E0109, E0110, E0111, E0112, E0201, E0202,
    E0203, E0204, E0205, E0206, E0207, E0208, E0209, E0210, E0211, E0212, E0213, E0214,
    E0215, E0216, E0217, E0218, E0219, E0220, E0221, E0222, E0230, E0231, E0301, E0302, E0303, E0304, E0305, E0306, E0307, E0308,
    E0309, E0310, E0311, E0401, E0402, E0403, E0404, E0405, E0406, E0407, E0408, E0409,
    E0410, E0411, E0412, E0501, E0502, E0503, E0504, W0001, W0002, W0003, W0101, W0102, W0103, W0104,
    W0105, W0106, W0201, W0202, W0203, W0204, W0301, W0302, W0401, W0402, W0403, W0404, W0501,
    W0502, W0503, W0504,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_constants_are_the_catalog() {
        let catalog: Vec<&str> = crate::codes::all().iter().map(|c| c.code).collect();
        assert_eq!(super::ALL, &catalog[..]);
    }
}
