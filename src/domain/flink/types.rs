//! Flink SQL data types: parsing the strings users and Flink write
//! (`BIGINT NOT NULL`, `DECIMAL(10, 2)`, `ROW<`a` INT>`), and printing them
//! back in Flink's serializable form (`LogicalType#asSerializableString`).
//!
//! Keywords are case-insensitive, defaults and aliases follow Flink's
//! `LogicalTypeParser` (`INTEGER`, `DEC`/`NUMERIC`, `STRING`, `BYTES`,
//! `TIMESTAMP_LTZ`), and out-of-range lengths and precisions are refused with
//! the type named, so a table definition fails at submission, not at DDL time.
//!
//! Its tests, at the end, are almost a third of the file: every type's
//! spelling and bound is pinned against Flink's.

use std::fmt;

/// Length of `STRING` (`VARCHAR`) and `BYTES` (`VARBINARY`): Java's `Integer.MAX_VALUE`.
pub const MAX_LENGTH: u32 = i32::MAX as u32;
pub const MAX_DECIMAL_PRECISION: u32 = 38;
pub const MAX_TIME_PRECISION: u32 = 9;
/// Deepest nesting of `ARRAY`, `MAP` and `ROW` accepted. The parser and
/// everything that walks a type recurse once per level, so the bound keeps a
/// hostile type from exhausting the stack; real schemas nest a few levels.
pub const MAX_NESTING: usize = 32;
/// Longest type string accepted, in bytes (a `ROW` of a thousand fields fits).
pub const MAX_TYPE_LEN: usize = 256 * 1024;
/// Most fields a `ROW` may have.
pub const MAX_ROW_FIELDS: usize = 4096;

/// A data type with its nullability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataType {
    pub kind: TypeKind,
    pub nullable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeKind {
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    Decimal { precision: u32, scale: u32 },
    Char(u32),
    VarChar(u32),
    Binary(u32),
    VarBinary(u32),
    Date,
    Time(u32),
    Timestamp(u32),
    TimestampLtz(u32),
    Array(Box<DataType>),
    Map(Box<DataType>, Box<DataType>),
    Row(Vec<RowField>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowField {
    pub name: String,
    pub data_type: DataType,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid data type '{input}': {reason}")]
pub struct TypeError {
    pub input: String,
    pub reason: String,
}

impl DataType {
    pub fn parse(input: &str) -> Result<Self, TypeError> {
        let error = |reason: String| TypeError {
            input: shortened(input),
            reason,
        };
        if input.len() > MAX_TYPE_LEN {
            return Err(error(format!(
                "the type is {} bytes long; at most {MAX_TYPE_LEN} are accepted",
                input.len()
            )));
        }
        let tokens = tokenize(input).map_err(error)?;
        let mut parser = Parser {
            tokens,
            position: 0,
            depth: 0,
        };
        let data_type = parser.data_type().map_err(error)?;
        match parser.peek() {
            None => Ok(data_type),
            Some(token) => Err(error(format!("unexpected {token} after the type"))),
        }
    }
}

impl std::str::FromStr for DataType {
    type Err = TypeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.kind, f)?;
        if !self.nullable {
            f.write_str(" NOT NULL")?;
        }
        Ok(())
    }
}

impl fmt::Display for TypeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Boolean => f.write_str("BOOLEAN"),
            Self::TinyInt => f.write_str("TINYINT"),
            Self::SmallInt => f.write_str("SMALLINT"),
            Self::Int => f.write_str("INT"),
            Self::BigInt => f.write_str("BIGINT"),
            Self::Float => f.write_str("FLOAT"),
            Self::Double => f.write_str("DOUBLE"),
            Self::Decimal { precision, scale } => write!(f, "DECIMAL({precision}, {scale})"),
            Self::Char(n) => write!(f, "CHAR({n})"),
            Self::VarChar(n) => write!(f, "VARCHAR({n})"),
            Self::Binary(n) => write!(f, "BINARY({n})"),
            Self::VarBinary(n) => write!(f, "VARBINARY({n})"),
            Self::Date => f.write_str("DATE"),
            Self::Time(p) => write!(f, "TIME({p})"),
            Self::Timestamp(p) => write!(f, "TIMESTAMP({p})"),
            Self::TimestampLtz(p) => write!(f, "TIMESTAMP({p}) WITH LOCAL TIME ZONE"),
            Self::Array(element) => write!(f, "ARRAY<{element}>"),
            Self::Map(key, value) => write!(f, "MAP<{key}, {value}>"),
            Self::Row(fields) => {
                f.write_str("ROW<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{}` {}", field.name.replace('`', "``"), field.data_type)?;
                    if let Some(description) = &field.description {
                        write!(f, " '{}'", description.replace('\'', "''"))?;
                    }
                }
                f.write_str(">")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Text(String),
    Number(u64),
    Symbol(char),
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Word(w) => write!(f, "'{w}'"),
            Self::Quoted(q) => write!(f, "`{q}`"),
            Self::Text(t) => write!(f, "string '{t}'"),
            Self::Number(n) => write!(f, "number {n}"),
            Self::Symbol(c) => write!(f, "'{c}'"),
        }
    }
}

fn tokenize(input: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '<' | '>' | '(' | ')' | ',' => {
                tokens.push(Token::Symbol(c));
                chars.next();
            }
            '`' | '\'' => {
                chars.next();
                let mut text = String::new();
                loop {
                    match chars.next() {
                        Some(q) if q == c && chars.peek() == Some(&c) => {
                            chars.next();
                            text.push(c);
                        }
                        Some(q) if q == c => break,
                        Some(other) => text.push(other),
                        None => return Err(format!("unclosed {c}")),
                    }
                }
                tokens.push(if c == '`' {
                    Token::Quoted(text)
                } else {
                    Token::Text(text)
                });
            }
            c if c.is_ascii_digit() => {
                let mut digits = String::new();
                while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(d);
                    chars.next();
                }
                tokens.push(Token::Number(
                    digits
                        .parse()
                        .map_err(|_| format!("number {digits} is too large"))?,
                ));
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut word = String::new();
                while let Some(&w) = chars
                    .peek()
                    .filter(|w| w.is_alphanumeric() || **w == '_' || **w == '$')
                {
                    word.push(w);
                    chars.next();
                }
                tokens.push(Token::Word(word));
            }
            other => return Err(format!("unexpected character '{}'", other.escape_debug())),
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    position: usize,
    /// How many `ARRAY`, `MAP` and `ROW` types enclose the current one.
    depth: usize,
}

/// A refused input as an error message shows it: long ones are cut, so a
/// 50 KB hostile type does not come back in full.
fn shortened(input: &str) -> String {
    const SHOWN: usize = 200;
    match input.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}...", &input[..end]),
        None => input.to_owned(),
    }
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.position).cloned();
        self.position += 1;
        token
    }

    fn keyword(&mut self, word: &str) -> bool {
        match self.peek() {
            Some(Token::Word(w)) if w.eq_ignore_ascii_case(word) => {
                self.position += 1;
                true
            }
            _ => false,
        }
    }

    fn symbol(&mut self, symbol: char) -> bool {
        if self.peek() == Some(&Token::Symbol(symbol)) {
            self.position += 1;
            true
        } else {
            false
        }
    }

    fn expect_symbol(&mut self, symbol: char) -> Result<(), String> {
        match self.next() {
            Some(Token::Symbol(s)) if s == symbol => Ok(()),
            Some(other) => Err(format!("expected '{symbol}' but found {other}")),
            None => Err(format!("expected '{symbol}' but the type ended")),
        }
    }

    fn expect_keyword(&mut self, word: &str) -> Result<(), String> {
        if self.keyword(word) {
            Ok(())
        } else {
            Err(format!("expected {word}"))
        }
    }

    fn number(&mut self) -> Result<u32, String> {
        match self.next() {
            Some(Token::Number(n)) => u32::try_from(n).map_err(|_| format!("{n} is too large")),
            Some(other) => Err(format!("expected a number but found {other}")),
            None => Err("expected a number but the type ended".into()),
        }
    }

    /// `(n)` if present.
    fn optional_length(&mut self) -> Result<Option<u32>, String> {
        if !self.symbol('(') {
            return Ok(None);
        }
        let n = self.number()?;
        self.expect_symbol(')')?;
        Ok(Some(n))
    }

    fn data_type(&mut self) -> Result<DataType, String> {
        let kind = self.type_kind()?;
        let nullable = if self.keyword("NOT") {
            self.expect_keyword("NULL")?;
            false
        } else {
            // Flink accepts an explicit `NULL` for nullable.
            self.keyword("NULL");
            true
        };
        Ok(DataType { kind, nullable })
    }

    /// Parses a type nested inside the current one, one level deeper.
    fn nested_type(&mut self) -> Result<DataType, String> {
        if self.depth >= MAX_NESTING {
            return Err(format!(
                "the type nests ARRAY, MAP and ROW more than {MAX_NESTING} levels deep"
            ));
        }
        self.depth += 1;
        let nested = self.data_type();
        self.depth -= 1;
        nested
    }

    fn type_kind(&mut self) -> Result<TypeKind, String> {
        let word = match self.next() {
            Some(Token::Word(w)) => w.to_ascii_uppercase(),
            Some(other) => return Err(format!("expected a type name but found {other}")),
            None => return Err("the type is empty".into()),
        };
        Ok(match word.as_str() {
            "BOOLEAN" => TypeKind::Boolean,
            "TINYINT" => TypeKind::TinyInt,
            "SMALLINT" => TypeKind::SmallInt,
            "INT" | "INTEGER" => TypeKind::Int,
            "BIGINT" => TypeKind::BigInt,
            "FLOAT" => TypeKind::Float,
            "DOUBLE" => {
                self.keyword("PRECISION");
                TypeKind::Double
            }
            "DECIMAL" | "DEC" | "NUMERIC" => self.decimal()?,
            "CHAR" => TypeKind::Char(length("CHAR", self.optional_length()?.unwrap_or(1))?),
            "VARCHAR" => {
                TypeKind::VarChar(length("VARCHAR", self.optional_length()?.unwrap_or(1))?)
            }
            "STRING" => TypeKind::VarChar(MAX_LENGTH),
            "BINARY" => TypeKind::Binary(length("BINARY", self.optional_length()?.unwrap_or(1))?),
            "VARBINARY" => {
                TypeKind::VarBinary(length("VARBINARY", self.optional_length()?.unwrap_or(1))?)
            }
            "BYTES" => TypeKind::VarBinary(MAX_LENGTH),
            "DATE" => TypeKind::Date,
            "TIME" => {
                let p = time_precision("TIME", self.optional_length()?.unwrap_or(0))?;
                if self.keyword("WITHOUT") {
                    self.expect_keyword("TIME")?;
                    self.expect_keyword("ZONE")?;
                }
                TypeKind::Time(p)
            }
            "TIMESTAMP" => {
                let p = time_precision("TIMESTAMP", self.optional_length()?.unwrap_or(6))?;
                if self.keyword("WITHOUT") {
                    self.expect_keyword("TIME")?;
                    self.expect_keyword("ZONE")?;
                    TypeKind::Timestamp(p)
                } else if self.keyword("WITH") {
                    if !self.keyword("LOCAL") {
                        return Err(
                            "TIMESTAMP WITH TIME ZONE is not supported; use WITH LOCAL TIME ZONE"
                                .into(),
                        );
                    }
                    self.expect_keyword("TIME")?;
                    self.expect_keyword("ZONE")?;
                    TypeKind::TimestampLtz(p)
                } else {
                    TypeKind::Timestamp(p)
                }
            }
            "TIMESTAMP_LTZ" => TypeKind::TimestampLtz(time_precision(
                "TIMESTAMP_LTZ",
                self.optional_length()?.unwrap_or(6),
            )?),
            "ARRAY" => {
                self.expect_symbol('<')?;
                let element = self.nested_type()?;
                self.expect_symbol('>')?;
                TypeKind::Array(Box::new(element))
            }
            "MAP" => {
                self.expect_symbol('<')?;
                let key = self.nested_type()?;
                self.expect_symbol(',')?;
                let value = self.nested_type()?;
                self.expect_symbol('>')?;
                TypeKind::Map(Box::new(key), Box::new(value))
            }
            "ROW" => self.row()?,
            other => return Err(format!("unknown type {other}")),
        })
    }

    fn decimal(&mut self) -> Result<TypeKind, String> {
        let (precision, scale) = if self.symbol('(') {
            let precision = self.number()?;
            let scale = if self.symbol(',') { self.number()? } else { 0 };
            self.expect_symbol(')')?;
            (precision, scale)
        } else {
            (10, 0)
        };
        if !(1..=MAX_DECIMAL_PRECISION).contains(&precision) {
            return Err(format!(
                "DECIMAL precision must be between 1 and {MAX_DECIMAL_PRECISION}, not {precision}"
            ));
        }
        if scale > precision {
            return Err(format!(
                "DECIMAL scale must be between 0 and the precision {precision}, not {scale}"
            ));
        }
        Ok(TypeKind::Decimal { precision, scale })
    }

    /// `ROW<name type ['description'], ...>` or `ROW(name type, ...)`.
    fn row(&mut self) -> Result<TypeKind, String> {
        let close = if self.symbol('<') {
            '>'
        } else if self.symbol('(') {
            ')'
        } else {
            return Err("expected '<' or '(' after ROW".into());
        };
        let mut fields = Vec::new();
        if self.symbol(close) {
            return Ok(TypeKind::Row(fields));
        }
        loop {
            let name = match self.next() {
                Some(Token::Word(w)) => w,
                Some(Token::Quoted(q)) => q,
                Some(other) => return Err(format!("expected a field name but found {other}")),
                None => return Err("expected a field name but the type ended".into()),
            };
            if fields.iter().any(|f: &RowField| f.name == name) {
                return Err(format!("ROW field `{name}` appears twice"));
            }
            if fields.len() == MAX_ROW_FIELDS {
                return Err(format!("a ROW has at most {MAX_ROW_FIELDS} fields"));
            }
            let data_type = self.nested_type()?;
            let description = match self.peek() {
                Some(Token::Text(_)) => match self.next() {
                    Some(Token::Text(text)) => Some(text),
                    _ => unreachable!("peeked a text token"),
                },
                _ => None,
            };
            fields.push(RowField {
                name,
                data_type,
                description,
            });
            if self.symbol(close) {
                return Ok(TypeKind::Row(fields));
            }
            self.expect_symbol(',')?;
        }
    }
}

fn length(type_name: &str, n: u32) -> Result<u32, String> {
    if (1..=MAX_LENGTH).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "{type_name} length must be between 1 and {MAX_LENGTH}, not {n}"
        ))
    }
}

fn time_precision(type_name: &str, p: u32) -> Result<u32, String> {
    if p <= MAX_TIME_PRECISION {
        Ok(p)
    } else {
        Err(format!(
            "{type_name} precision must be between 0 and {MAX_TIME_PRECISION}, not {p}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(input: &str) -> String {
        DataType::parse(input)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string()
    }

    #[test]
    fn every_documented_type_parses_to_flinks_serializable_form() {
        let cases = [
            ("BOOLEAN", "BOOLEAN"),
            ("tinyint", "TINYINT"),
            ("SMALLINT", "SMALLINT"),
            ("INTEGER", "INT"),
            ("BIGINT NOT NULL", "BIGINT NOT NULL"),
            ("FLOAT", "FLOAT"),
            ("DOUBLE PRECISION", "DOUBLE"),
            ("DECIMAL(10, 2)", "DECIMAL(10, 2)"),
            ("DECIMAL(10,2)", "DECIMAL(10, 2)"),
            ("NUMERIC", "DECIMAL(10, 0)"),
            ("DEC(5)", "DECIMAL(5, 0)"),
            ("CHAR", "CHAR(1)"),
            ("CHAR(3)", "CHAR(3)"),
            ("VARCHAR(20)", "VARCHAR(20)"),
            ("STRING", "VARCHAR(2147483647)"),
            ("BINARY(16)", "BINARY(16)"),
            ("VARBINARY(8)", "VARBINARY(8)"),
            ("BYTES", "VARBINARY(2147483647)"),
            ("DATE NULL", "DATE"),
            ("TIME", "TIME(0)"),
            ("TIME(3)", "TIME(3)"),
            ("TIMESTAMP", "TIMESTAMP(6)"),
            ("TIMESTAMP(3)", "TIMESTAMP(3)"),
            ("TIMESTAMP(3) WITHOUT TIME ZONE", "TIMESTAMP(3)"),
            (
                "TIMESTAMP(3) WITH LOCAL TIME ZONE",
                "TIMESTAMP(3) WITH LOCAL TIME ZONE",
            ),
            ("TIMESTAMP_LTZ(3)", "TIMESTAMP(3) WITH LOCAL TIME ZONE"),
            ("ARRAY<INT NOT NULL>", "ARRAY<INT NOT NULL>"),
            (
                "MAP<STRING, BIGINT> NOT NULL",
                "MAP<VARCHAR(2147483647), BIGINT> NOT NULL",
            ),
            (
                "ROW<a INT, `b c` STRING 'the b''s'>",
                "ROW<`a` INT, `b c` VARCHAR(2147483647) 'the b''s'>",
            ),
            ("ROW(a INT NOT NULL)", "ROW<`a` INT NOT NULL>"),
            (
                "ARRAY<ROW<`x` MAP<INT, ARRAY<DATE>>>>",
                "ARRAY<ROW<`x` MAP<INT, ARRAY<DATE>>>>",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(canonical(input), expected, "{input}");
            assert_eq!(
                canonical(expected),
                expected,
                "the canonical form of {input} parses to itself"
            );
        }
    }

    #[test]
    fn invalid_types_are_refused_with_the_reason() {
        let cases = [
            ("", "the type is empty"),
            ("BIGGINT", "unknown type BIGGINT"),
            (
                "DECIMAL(39, 2)",
                "DECIMAL precision must be between 1 and 38, not 39",
            ),
            (
                "DECIMAL(5, 6)",
                "DECIMAL scale must be between 0 and the precision 5, not 6",
            ),
            (
                "VARCHAR(0)",
                "VARCHAR length must be between 1 and 2147483647, not 0",
            ),
            (
                "TIMESTAMP(10)",
                "TIMESTAMP precision must be between 0 and 9, not 10",
            ),
            (
                "TIMESTAMP WITH TIME ZONE",
                "TIMESTAMP WITH TIME ZONE is not supported",
            ),
            ("ARRAY<INT", "expected '>' but the type ended"),
            ("INT NOT", "expected NULL"),
            ("INT INT", "unexpected 'INT' after the type"),
            ("ROW<a INT, a INT>", "ROW field `a` appears twice"),
            ("VARCHAR(99999999999)", "99999999999 is too large"),
            ("INT; DROP TABLE x", "unexpected character ';'"),
            ("ROW<`a INT>", "unclosed `"),
        ];
        for (input, reason) in cases {
            let error = DataType::parse(input).expect_err(input);
            assert!(
                error.reason.contains(reason),
                "{input}: {} should contain {reason}",
                error.reason
            );
            assert_eq!(error.input, input);
        }
    }
}

#[cfg(test)]
mod bounds {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}INT{}", "ARRAY<".repeat(depth), ">".repeat(depth))
    }

    #[test]
    fn nesting_is_accepted_up_to_the_bound_and_refused_beyond_it() {
        assert!(DataType::parse(&nested(MAX_NESTING)).is_ok());
        let error = DataType::parse(&nested(MAX_NESTING + 1)).unwrap_err();
        assert!(error.reason.contains("more than 32 levels"), "{error}");
    }

    #[test]
    fn a_type_nested_twenty_thousand_deep_is_refused_and_echoed_shortened() {
        let error = DataType::parse(&nested(20_000)).unwrap_err();
        assert!(error.reason.contains("levels deep"), "{}", error.reason);
        assert!(error.input.len() < 1024, "the echo is cut");
    }

    #[test]
    fn over_long_types_and_rows_with_too_many_fields_are_refused() {
        let long = format!("ROW<a INT>{}", " ".repeat(MAX_TYPE_LEN));
        assert!(
            DataType::parse(&long)
                .unwrap_err()
                .reason
                .contains("bytes long")
        );
        let fields: Vec<String> = (0..=MAX_ROW_FIELDS).map(|i| format!("f{i} INT")).collect();
        let wide = format!("ROW<{}>", fields.join(", "));
        assert!(
            DataType::parse(&wide)
                .unwrap_err()
                .reason
                .contains("at most 4096 fields")
        );
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn leaf() -> impl Strategy<Value = TypeKind> {
        prop_oneof![
            Just(TypeKind::Boolean),
            Just(TypeKind::TinyInt),
            Just(TypeKind::SmallInt),
            Just(TypeKind::Int),
            Just(TypeKind::BigInt),
            Just(TypeKind::Float),
            Just(TypeKind::Double),
            Just(TypeKind::Date),
            (1..=MAX_DECIMAL_PRECISION)
                .prop_flat_map(|p| (Just(p), 0..=p))
                .prop_map(|(precision, scale)| TypeKind::Decimal { precision, scale }),
            (1..=MAX_LENGTH).prop_map(TypeKind::Char),
            (1..=MAX_LENGTH).prop_map(TypeKind::VarChar),
            (1..=MAX_LENGTH).prop_map(TypeKind::Binary),
            (1..=MAX_LENGTH).prop_map(TypeKind::VarBinary),
            (0..=MAX_TIME_PRECISION).prop_map(TypeKind::Time),
            (0..=MAX_TIME_PRECISION).prop_map(TypeKind::Timestamp),
            (0..=MAX_TIME_PRECISION).prop_map(TypeKind::TimestampLtz),
        ]
    }

    fn data_type() -> impl Strategy<Value = DataType> {
        let leaf = (leaf(), any::<bool>()).prop_map(|(kind, nullable)| DataType { kind, nullable });
        leaf.prop_recursive(4, 24, 4, |inner| {
            let kind = prop_oneof![
                inner.clone().prop_map(|t| TypeKind::Array(Box::new(t))),
                (inner.clone(), inner.clone())
                    .prop_map(|(k, v)| TypeKind::Map(Box::new(k), Box::new(v))),
                prop::collection::btree_map(
                    "[a-zA-Z_`' ]{1,8}",
                    (inner, proptest::option::of("[a-z' ]{0,8}")),
                    0..4
                )
                .prop_map(|fields| {
                    TypeKind::Row(
                        fields
                            .into_iter()
                            .map(|(name, (data_type, description))| RowField {
                                name,
                                data_type,
                                description,
                            })
                            .collect(),
                    )
                }),
            ];
            (kind, any::<bool>()).prop_map(|(kind, nullable)| DataType { kind, nullable })
        })
    }

    proptest! {
        #[test]
        fn printing_then_parsing_gives_the_same_type(original in data_type()) {
            let printed = original.to_string();
            let parsed = DataType::parse(&printed).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(parsed, original);
        }
    }
}
