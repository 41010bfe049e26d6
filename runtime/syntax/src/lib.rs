//! Lexing and parsing (LANGUAGE §3–4). The parser accepts any input, never panics,
//! recovers at statement and bracket boundaries and reports every problem it finds.

pub mod ast;
pub mod cells;
pub mod lexer;
pub mod parser;
pub mod token;
pub mod walk;

pub use ast::*;
pub use parser::{parse, Parsed};
