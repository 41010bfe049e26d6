//! Tokens produced by the [lexer](super::lexer) (LANGUAGE §3.3).

use mlpl_diag::Span;
use std::fmt;

/// One token with the byte span of its source text.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// What kind of token.
    pub kind: TokenKind,
    /// Where it is written.
    pub span: Span,
}

/// Token kinds (LANGUAGE §3.3).
#[derive(Clone, Debug, PartialEq)]
pub enum TokenKind {
    /// A line break (LF, CR LF or a lone CR).
    Newline,
    /// A number literal (a leading `-` joined by the negative-literal rule is included).
    Number(f64),
    /// A string literal with escapes resolved.
    Str(String),
    /// An identifier (never a keyword). `param` and `tensor` are identifiers too.
    Ident(String),
    /// `repeat`
    Repeat,
    /// `train`
    Train,
    /// `for`
    For,
    /// `in`
    In,
    /// `experiment`
    Experiment,
    /// `device`
    Device,
    /// `fn` (a function definition)
    Fn,
    /// `->` (a function's result shape)
    Arrow,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `,`
    Comma,
    /// `=`
    Eq,
    /// `:`
    Colon,
    /// `;`
    Semi,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Star,
    /// `/`
    Slash,
    /// Characters that start no token (`%`, `==`, `@`, a REPL `:command` line, ...).
    /// E0001 has already been reported for it; the parser treats it like an operator
    /// and reports nothing more.
    Unknown,
    /// A malformed number literal that has no usable value (`1e400`). E0002 has
    /// already been reported; the parser turns it into an error expression.
    BadNumber,
    /// End of input (an empty span at the end of the text).
    Eof,
}

/// The reserved keywords, each the text of one [`TokenKind`] (editors' grammars
/// are checked against this list).
pub const KEYWORDS: [&str; 7] = ["repeat", "train", "for", "in", "experiment", "device", "fn"];

impl TokenKind {
    /// The keyword for an identifier-shaped word, if it is one.
    pub fn keyword(word: &str) -> Option<TokenKind> {
        Some(match word {
            "repeat" => TokenKind::Repeat,
            "train" => TokenKind::Train,
            "for" => TokenKind::For,
            "in" => TokenKind::In,
            "experiment" => TokenKind::Experiment,
            "device" => TokenKind::Device,
            "fn" => TokenKind::Fn,
            _ => return None,
        })
    }

    /// Whether this is one of the seven reserved keywords.
    pub fn is_keyword(&self) -> bool {
        self.keyword_str().is_some()
    }

    /// The keyword's text, if this is a keyword.
    pub fn keyword_str(&self) -> Option<&'static str> {
        Some(match self {
            TokenKind::Repeat => "repeat",
            TokenKind::Train => "train",
            TokenKind::For => "for",
            TokenKind::In => "in",
            TokenKind::Experiment => "experiment",
            TokenKind::Device => "device",
            TokenKind::Fn => "fn",
            _ => return None,
        })
    }

    /// A *value token* for the negative-literal rule (LANGUAGE §3.5): an identifier,
    /// a number, a string, `)` or `]`.
    pub fn is_value(&self) -> bool {
        matches!(
            self,
            TokenKind::Ident(_)
                | TokenKind::Number(_)
                | TokenKind::BadNumber
                | TokenKind::Str(_)
                | TokenKind::RParen
                | TokenKind::RBracket
        )
    }

    /// Whether this opens a bracket: `(`, `[` or `{`.
    pub fn is_opener(&self) -> bool {
        matches!(
            self,
            TokenKind::LParen | TokenKind::LBracket | TokenKind::LBrace
        )
    }

    /// Whether this closes a bracket: `)`, `]` or `}`.
    pub fn is_closer(&self) -> bool {
        matches!(
            self,
            TokenKind::RParen | TokenKind::RBracket | TokenKind::RBrace
        )
    }

    /// For an opener, its closer; for a closer, its opener.
    pub fn partner(&self) -> Option<TokenKind> {
        Some(match self {
            TokenKind::LParen => TokenKind::RParen,
            TokenKind::RParen => TokenKind::LParen,
            TokenKind::LBracket => TokenKind::RBracket,
            TokenKind::RBracket => TokenKind::LBracket,
            TokenKind::LBrace => TokenKind::RBrace,
            TokenKind::RBrace => TokenKind::LBrace,
            _ => return None,
        })
    }

    /// The text of a punctuation or keyword token.
    pub fn symbol(&self) -> Option<&'static str> {
        Some(match self {
            TokenKind::LParen => "(",
            TokenKind::RParen => ")",
            TokenKind::LBracket => "[",
            TokenKind::RBracket => "]",
            TokenKind::LBrace => "{",
            TokenKind::RBrace => "}",
            TokenKind::Comma => ",",
            TokenKind::Eq => "=",
            TokenKind::Colon => ":",
            TokenKind::Semi => ";",
            TokenKind::Plus => "+",
            TokenKind::Minus => "-",
            TokenKind::Star => "*",
            TokenKind::Slash => "/",
            TokenKind::Arrow => "->",
            other => return other.keyword_str(),
        })
    }

    /// A short description for diagnostics: ``identifier `x` ``, `` `)` ``, `end of line`.
    pub fn describe(&self) -> String {
        match self {
            TokenKind::Newline => "end of line".to_string(),
            TokenKind::Eof => "end of input".to_string(),
            TokenKind::Number(_) | TokenKind::BadNumber => "number".to_string(),
            TokenKind::Str(_) => "string".to_string(),
            TokenKind::Ident(name) => format!("identifier `{name}`"),
            TokenKind::Unknown => "unexpected character".to_string(),
            other if other.is_keyword() => format!("keyword `{}`", other.symbol().unwrap_or("")),
            other => format!("`{}`", other.symbol().unwrap_or("?")),
        }
    }
}

impl fmt::Display for TokenKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}
