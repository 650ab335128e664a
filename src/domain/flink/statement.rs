//! Flink's catalog statements, parsed: `CREATE`, `ALTER`, `DROP`, `SHOW`,
//! `DESCRIBE` and `SHOW CREATE CATALOG`, so that what a Flink user types
//! in the SQL client works over HTTP too.
//!
//! A hand-written recursive-descent parser over a tokenizer that keeps each
//! token's line and column: a syntax error says where, in Flink's words
//! (`Encountered ... at line L, column C`). The grammar has no nesting, so
//! no input can make it recurse; sizes are bounded by the request body.

use std::collections::BTreeMap;
use std::fmt;

/// One catalog statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogStatement {
    Create {
        name: String,
        if_not_exists: bool,
        comment: Option<String>,
        options: BTreeMap<String, String>,
    },
    AlterSet {
        name: String,
        options: BTreeMap<String, String>,
    },
    AlterReset {
        name: String,
        keys: Vec<String>,
    },
    AlterComment {
        name: String,
        comment: String,
    },
    Drop {
        name: String,
        if_exists: bool,
    },
    ShowCatalogs,
    Describe {
        name: String,
        extended: bool,
    },
    ShowCreate {
        name: String,
    },
}

impl CatalogStatement {
    /// Whether the statement changes anything (and so needs the right to
    /// manage catalogs rather than to read them).
    pub fn writes(&self) -> bool {
        !matches!(
            self,
            Self::ShowCatalogs | Self::Describe { .. } | Self::ShowCreate { .. }
        )
    }
}

/// Where a statement stops making sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SQL parse failed. {message} at line {line}, column {column}.{expected}")]
pub struct SyntaxError {
    pub line: usize,
    pub column: usize,
    /// `Encountered "FOO"`, or what is wrong with the token.
    pub message: String,
    /// `\nWas expecting one of: ...`, or nothing.
    expected: Expected,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Expected(Vec<&'static str>);

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [] => Ok(()),
            [one] => write!(f, "\nWas expecting:\n    {one} ..."),
            many => {
                write!(f, "\nWas expecting one of:")?;
                many.iter().try_for_each(|e| write!(f, "\n    {e} ..."))
            }
        }
    }
}

/// Parses one statement; a trailing `;` is allowed.
pub fn parse(sql: &str) -> Result<CatalogStatement, SyntaxError> {
    let tokens = tokenize(sql)?;
    let mut parser = Parser { tokens, at: 0 };
    let statement = parser.statement()?;
    parser.accept_symbol(';');
    parser.expect_end()?;
    Ok(statement)
}

/// Quotes a name for a statement: `` `name` ``, backticks doubled.
pub fn quote_identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Quotes a string literal: `'value'`, quotes doubled.
pub fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A bare word: a keyword or an unquoted name.
    Word(String),
    /// `` `a name` ``.
    Quoted(String),
    /// `'a string'`.
    Literal(String),
    Symbol(char),
    End,
}

/// An error echoes at most this much of a token.
const SHOWN_CHARS: usize = 64;

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    line: usize,
    column: usize,
}

impl Token {
    /// The token as an error names it, at most [`SHOWN_CHARS`] long. A
    /// string literal is named, never quoted: it may be an option's value,
    /// such as a password, and an error is answered, logged and may be kept
    /// with an `Idempotency-Key`; its line and column say which one.
    fn shown(&self) -> String {
        let text = match &self.kind {
            Kind::Word(w) => w.to_ascii_uppercase(),
            Kind::Quoted(q) => quote_identifier(q),
            Kind::Literal(_) => return "a string literal".to_owned(),
            Kind::Symbol(c) => c.to_string(),
            Kind::End => "<EOF>".to_owned(),
        };
        match text.char_indices().nth(SHOWN_CHARS) {
            Some((cut, _)) => format!("\"{}...\"", &text[..cut]),
            None => format!("\"{text}\""),
        }
    }
}

fn tokenize(sql: &str) -> Result<Vec<Token>, SyntaxError> {
    let mut tokens = Vec::new();
    let mut chars = sql.chars().peekable();
    let (mut line, mut column) = (1, 1);
    let advance = |c: char, line: &mut usize, column: &mut usize| {
        if c == '\n' {
            *line += 1;
            *column = 1;
        } else {
            *column += 1;
        }
    };
    while let Some(&c) = chars.peek() {
        let (start_line, start_column) = (line, column);
        let at = |kind| Token {
            kind,
            line: start_line,
            column: start_column,
        };
        if c.is_whitespace() {
            chars.next();
            advance(c, &mut line, &mut column);
        } else if c == '-' && sql_rest_starts_with(&chars, "--") {
            // A comment to the end of the line.
            while let Some(c) = chars.next_if(|c| *c != '\n') {
                advance(c, &mut line, &mut column);
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut word = String::new();
            while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_') {
                word.push(c);
                advance(c, &mut line, &mut column);
            }
            tokens.push(at(Kind::Word(word)));
        } else if c == '`' || c == '\'' {
            chars.next();
            advance(c, &mut line, &mut column);
            let mut text = String::new();
            loop {
                match chars.next() {
                    Some(q) if q == c => {
                        advance(q, &mut line, &mut column);
                        if chars.next_if_eq(&c).is_some() {
                            advance(c, &mut line, &mut column);
                            text.push(c);
                        } else {
                            break;
                        }
                    }
                    Some(other) => {
                        advance(other, &mut line, &mut column);
                        text.push(other);
                    }
                    None => {
                        let what = if c == '`' {
                            "identifier"
                        } else {
                            "string literal"
                        };
                        return Err(SyntaxError {
                            line: start_line,
                            column: start_column,
                            message: format!("Unterminated {what}"),
                            expected: Expected::default(),
                        });
                    }
                }
            }
            tokens.push(at(if c == '`' {
                Kind::Quoted(text)
            } else {
                Kind::Literal(text)
            }));
        } else if "(),;=".contains(c) {
            chars.next();
            advance(c, &mut line, &mut column);
            tokens.push(at(Kind::Symbol(c)));
        } else {
            return Err(SyntaxError {
                line,
                column,
                message: format!("Lexical error: encountered \"{c}\""),
                expected: Expected::default(),
            });
        }
    }
    tokens.push(Token {
        kind: Kind::End,
        line,
        column,
    });
    Ok(tokens)
}

fn sql_rest_starts_with(chars: &std::iter::Peekable<std::str::Chars<'_>>, prefix: &str) -> bool {
    chars.clone().take(prefix.len()).eq(prefix.chars())
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        self.at += 1;
        token
    }

    fn unexpected(&self, expected: &[&'static str]) -> SyntaxError {
        let token = self.peek();
        SyntaxError {
            line: token.line,
            column: token.column,
            message: format!("Encountered {}", token.shown()),
            expected: Expected(expected.to_vec()),
        }
    }

    fn is_keyword(&self, keyword: &str) -> bool {
        matches!(&self.peek().kind, Kind::Word(w) if w.eq_ignore_ascii_case(keyword))
    }

    fn accept_keyword(&mut self, keyword: &str) -> bool {
        let found = self.is_keyword(keyword);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect_keyword(&mut self, keyword: &'static str) -> Result<(), SyntaxError> {
        if self.accept_keyword(keyword) {
            Ok(())
        } else {
            Err(self.unexpected(&[keyword]))
        }
    }

    fn accept_symbol(&mut self, symbol: char) -> bool {
        let found = self.peek().kind == Kind::Symbol(symbol);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect_symbol(&mut self, symbol: char, shown: &'static str) -> Result<(), SyntaxError> {
        if self.accept_symbol(symbol) {
            Ok(())
        } else {
            Err(self.unexpected(&[shown]))
        }
    }

    fn expect_end(&self) -> Result<(), SyntaxError> {
        match self.peek().kind {
            Kind::End => Ok(()),
            _ => Err(self.unexpected(&["<EOF>"])),
        }
    }

    fn statement(&mut self) -> Result<CatalogStatement, SyntaxError> {
        if self.accept_keyword("CREATE") {
            self.expect_keyword("CATALOG")?;
            self.create()
        } else if self.accept_keyword("ALTER") {
            self.expect_keyword("CATALOG")?;
            self.alter()
        } else if self.accept_keyword("DROP") {
            self.expect_keyword("CATALOG")?;
            let if_exists = self.if_("EXISTS")?;
            let name = self.identifier()?;
            Ok(CatalogStatement::Drop { name, if_exists })
        } else if self.accept_keyword("SHOW") {
            if self.accept_keyword("CATALOGS") {
                Ok(CatalogStatement::ShowCatalogs)
            } else if self.accept_keyword("CREATE") {
                self.expect_keyword("CATALOG")?;
                let name = self.identifier()?;
                Ok(CatalogStatement::ShowCreate { name })
            } else {
                Err(self.unexpected(&["CATALOGS", "CREATE"]))
            }
        } else if self.accept_keyword("DESCRIBE") || self.accept_keyword("DESC") {
            self.expect_keyword("CATALOG")?;
            let extended = self.accept_keyword("EXTENDED");
            let name = self.identifier()?;
            Ok(CatalogStatement::Describe { name, extended })
        } else {
            Err(self.unexpected(&["ALTER", "CREATE", "DESC", "DESCRIBE", "DROP", "SHOW"]))
        }
    }

    /// `[IF NOT EXISTS] name [COMMENT '...'] WITH (...)`
    fn create(&mut self) -> Result<CatalogStatement, SyntaxError> {
        let if_not_exists = if self.accept_keyword("IF") {
            self.expect_keyword("NOT")?;
            self.expect_keyword("EXISTS")?;
            true
        } else {
            false
        };
        let name = self.identifier()?;
        let comment = if self.accept_keyword("COMMENT") {
            Some(self.literal()?)
        } else {
            None
        };
        if !self.accept_keyword("WITH") {
            let expected: &[&str] = if comment.is_some() {
                &["WITH"]
            } else {
                &["COMMENT", "WITH"]
            };
            return Err(self.unexpected(expected));
        }
        let options = self.properties()?;
        Ok(CatalogStatement::Create {
            name,
            if_not_exists,
            comment,
            options,
        })
    }

    /// `name SET (...)`, `name RESET ('k', ...)` or `name COMMENT '...'`.
    fn alter(&mut self) -> Result<CatalogStatement, SyntaxError> {
        let name = self.identifier()?;
        if self.accept_keyword("SET") {
            let options = self.properties()?;
            Ok(CatalogStatement::AlterSet { name, options })
        } else if self.accept_keyword("RESET") {
            self.expect_symbol('(', "\"(\"")?;
            let mut keys = vec![self.literal()?];
            while self.accept_symbol(',') {
                keys.push(self.literal()?);
            }
            self.expect_symbol(')', "\")\"")?;
            Ok(CatalogStatement::AlterReset { name, keys })
        } else if self.accept_keyword("COMMENT") {
            let comment = self.literal()?;
            Ok(CatalogStatement::AlterComment { name, comment })
        } else {
            Err(self.unexpected(&["COMMENT", "RESET", "SET"]))
        }
    }

    /// `IF EXISTS`, when it is there.
    fn if_(&mut self, what: &'static str) -> Result<bool, SyntaxError> {
        if self.accept_keyword("IF") {
            self.expect_keyword(what)?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// `('k' = 'v', ...)`; a key given twice is an error, as in Flink.
    fn properties(&mut self) -> Result<BTreeMap<String, String>, SyntaxError> {
        self.expect_symbol('(', "\"(\"")?;
        let mut properties = BTreeMap::new();
        if self.accept_symbol(')') {
            return Ok(properties);
        }
        loop {
            let key_token = self.peek().clone();
            let key = self.literal()?;
            self.expect_symbol('=', "\"=\"")?;
            let value = self.literal()?;
            if properties.insert(key.clone(), value).is_some() {
                return Err(SyntaxError {
                    line: key_token.line,
                    column: key_token.column,
                    message: format!("Duplicate property key {}", quote_literal(&key)),
                    expected: Expected::default(),
                });
            }
            if self.accept_symbol(')') {
                return Ok(properties);
            }
            if !self.accept_symbol(',') {
                return Err(self.unexpected(&["\")\"", "\",\""]));
            }
        }
    }

    fn identifier(&mut self) -> Result<String, SyntaxError> {
        match self.peek().kind.clone() {
            Kind::Word(w) if !RESERVED.iter().any(|r| r.eq_ignore_ascii_case(&w)) => {
                self.at += 1;
                Ok(w)
            }
            Kind::Quoted(q) => {
                self.at += 1;
                Ok(q)
            }
            _ => Err(self.unexpected(&["<IDENTIFIER>", "<QUOTED_IDENTIFIER>"])),
        }
    }

    fn literal(&mut self) -> Result<String, SyntaxError> {
        match self.next().kind {
            Kind::Literal(l) => Ok(l),
            _ => {
                self.at -= 1;
                Err(self.unexpected(&["<STRING_LITERAL>"]))
            }
        }
    }
}

/// Words that are never a bare catalog name here (quote them to use them).
const RESERVED: &[&str] = &[
    "CATALOG", "COMMENT", "CREATE", "EXISTS", "IF", "NOT", "RESET", "SET", "WITH",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_every_catalog_statement() {
        let cases = [
            (
                "CREATE CATALOG IF NOT EXISTS `my cat` COMMENT 'it''s mine' WITH ('type' = 'jdbc', 'x' = '1');",
                CatalogStatement::Create {
                    name: "my cat".into(),
                    if_not_exists: true,
                    comment: Some("it's mine".into()),
                    options: options(&[("type", "jdbc"), ("x", "1")]),
                },
            ),
            (
                "create catalog c with ()",
                CatalogStatement::Create {
                    name: "c".into(),
                    if_not_exists: false,
                    comment: None,
                    options: BTreeMap::new(),
                },
            ),
            (
                "ALTER CATALOG c SET ('a' = 'b')",
                CatalogStatement::AlterSet {
                    name: "c".into(),
                    options: options(&[("a", "b")]),
                },
            ),
            (
                "ALTER CATALOG c RESET ('a', 'b')",
                CatalogStatement::AlterReset {
                    name: "c".into(),
                    keys: vec!["a".into(), "b".into()],
                },
            ),
            (
                "ALTER CATALOG c COMMENT ''",
                CatalogStatement::AlterComment {
                    name: "c".into(),
                    comment: String::new(),
                },
            ),
            (
                "DROP CATALOG IF EXISTS c",
                CatalogStatement::Drop {
                    name: "c".into(),
                    if_exists: true,
                },
            ),
            ("SHOW CATALOGS", CatalogStatement::ShowCatalogs),
            (
                "-- a comment\nDESC CATALOG EXTENDED c",
                CatalogStatement::Describe {
                    name: "c".into(),
                    extended: true,
                },
            ),
            (
                "SHOW CREATE CATALOG c",
                CatalogStatement::ShowCreate { name: "c".into() },
            ),
        ];
        for (sql, expected) in cases {
            assert_eq!(parse(sql), Ok(expected), "{sql}");
        }
    }

    #[test]
    fn a_syntax_error_names_line_column_and_what_was_expected() {
        let error = parse("CREATE CATALOG c\n  WITH ('type' = 'jdbc'\n  'x' = 'y')").unwrap_err();
        assert_eq!((error.line, error.column), (3, 3));
        assert_eq!(
            error.to_string(),
            "SQL parse failed. Encountered a string literal at line 3, column 3.\n\
             Was expecting one of:\n    \")\" ...\n    \",\" ..."
        );

        let error = parse("DROP CATALOGUE c").unwrap_err();
        assert_eq!((error.line, error.column), (1, 6));
        assert!(error.to_string().contains("Encountered \"CATALOGUE\""));

        let error = parse("ALTER CATALOG c SET ('a' = 'unterminated)").unwrap_err();
        assert_eq!((error.line, error.column), (1, 28));
        assert!(error.to_string().contains("Unterminated string literal"));

        let error = parse("SHOW CATALOGS extra").unwrap_err();
        assert!(error.to_string().contains("Was expecting:\n    <EOF> ..."));

        let error = parse("CREATE CATALOG c WITH ('password' 'hunter2')").unwrap_err();
        assert_eq!((error.line, error.column), (1, 35));
        assert!(!error.to_string().contains("hunter2"), "{error}");

        let error = parse("CREATE CATALOG c WITH ('a' = '1', 'a' = '2')").unwrap_err();
        assert!(error.to_string().contains("Duplicate property key 'a'"));
    }

    #[test]
    fn quoting_round_trips() {
        let name = "we`ird";
        let value = "it's";
        let sql = format!(
            "CREATE CATALOG {} WITH ({} = {})",
            quote_identifier(name),
            quote_literal("k"),
            quote_literal(value)
        );
        assert_eq!(
            parse(&sql).unwrap(),
            CatalogStatement::Create {
                name: name.into(),
                if_not_exists: false,
                comment: None,
                options: options(&[("k", value)]),
            }
        );
    }
}
