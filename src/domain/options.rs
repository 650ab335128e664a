//! Catalog options: a flat string map, always including `type`.
//!
//! This module decides which options are secrets (Flink's list of sensitive
//! key fragments) and owns the only ways to show options to a person: masked
//! maps and redacted text. Plain values leave this type only towards a
//! factory (to connect) or the store (to encrypt).

use std::collections::BTreeMap;
use std::fmt;

/// What every response, error and log line shows instead of a secret.
pub const MASK: &str = "******";
/// The option that picks the factory.
pub const TYPE_KEY: &str = "type";
/// Accepted by every factory, as in Flink.
pub const PROPERTY_VERSION_KEY: &str = "property-version";

const MAX_KEY_LEN: usize = 256;
const MAX_VALUE_LEN: usize = 4096;
const MAX_OPTIONS: usize = 256;

/// Key fragments that make an option sensitive (case-insensitive), as in
/// Flink's `GlobalConfiguration#SENSITIVE_KEYS`.
const SENSITIVE_FRAGMENTS: &[&str] = &[
    "password",
    "secret",
    "token",
    "apikey",
    "api-key",
    "access-key",
    "access.key",
    "accesskey",
    "auth-params",
    "service-key",
    "basic-auth",
    "jaas.config",
    "fs.azure.account.key",
];

pub fn is_sensitive(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SENSITIVE_FRAGMENTS
        .iter()
        .any(|fragment| key.contains(fragment))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    #[error("option keys must not be empty")]
    EmptyKey,
    #[error(
        "option key '{0}' is longer than {MAX_KEY_LEN} characters or contains control characters"
    )]
    BadKey(String),
    #[error(
        "the value of option '{0}' is longer than {MAX_VALUE_LEN} characters or contains control characters"
    )]
    BadValue(String),
    #[error("at most {MAX_OPTIONS} options are accepted")]
    TooMany,
    #[error("'{MASK}' is not accepted as the value of option '{0}': send the real value")]
    MaskAsValue(String),
}

/// Validated catalog options. `Debug` masks secrets.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct CatalogOptions(BTreeMap<String, String>);

impl CatalogOptions {
    pub fn new(options: BTreeMap<String, String>) -> Result<Self, OptionsError> {
        if options.len() > MAX_OPTIONS {
            return Err(OptionsError::TooMany);
        }
        for (key, value) in &options {
            check_entry(key, value)?;
        }
        Ok(Self(options))
    }

    pub fn catalog_type(&self) -> Option<&str> {
        self.get(TYPE_KEY)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Every option, each value in plain text: for factories and the store only.
    pub fn iter_plain(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The options as a person may see them: secrets replaced by [`MASK`].
    pub fn masked(&self) -> BTreeMap<String, String> {
        masked_map(&self.0)
    }

    /// `text` with every secret value of these options replaced by [`MASK`]:
    /// the last line of defence for messages that come from drivers.
    ///
    /// A secret is masked where it stands as a whole value (not inside a
    /// longer word). Secrets of [`MIN_EMBEDDED_SECRET_LEN`] characters or
    /// more are also masked inside words; shorter ones are not, because
    /// masking every `p` of a one-letter password would rewrite unrelated
    /// text and, by what it rewrote, reveal the password.
    pub fn redact(&self, text: &str) -> String {
        redact_secrets(text, self.secrets())
    }

    /// The values of the sensitive options.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        secret_values(&self.0)
    }

    /// The options after `set` and `reset`, validated again.
    pub fn altered(
        &self,
        set: &BTreeMap<String, String>,
        reset: &[String],
    ) -> Result<Self, OptionsError> {
        let mut next = self.0.clone();
        for key in reset {
            next.remove(key);
        }
        next.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
        Self::new(next)
    }
}

impl fmt::Debug for CatalogOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.masked()).finish()
    }
}

/// A flat map of strings (catalog options, table properties, connector
/// options). Declared without `"type": "object"` on purpose: generated
/// clients then take and give a plain dictionary instead of a wrapper class.
pub struct StringMap;

impl utoipa::PartialSchema for StringMap {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        ObjectBuilder::new()
            .schema_type(SchemaType::AnyValue)
            .description(Some("A flat map of strings."))
            .additional_properties(Some(ObjectBuilder::new().schema_type(Type::String)))
            .examples([serde_json::json!({"format": "csv"})])
            .into()
    }
}

impl utoipa::ToSchema for StringMap {}

/// The values of `map`'s sensitive keys (catalog or table options).
pub fn secret_values(map: &BTreeMap<String, String>) -> impl Iterator<Item = &str> {
    map.iter()
        .filter(|(k, v)| is_sensitive(k) && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

/// `map` with the values of its sensitive keys replaced by [`MASK`].
pub fn masked_map(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    map.iter()
        .map(|(k, v)| {
            let shown = if is_sensitive(k) { MASK } else { v };
            (k.clone(), shown.to_owned())
        })
        .collect()
}

/// `text` with each of `secrets` replaced by [`MASK`] (see
/// [`CatalogOptions::redact`]).
pub fn redact_secrets<'a>(text: &str, secrets: impl Iterator<Item = &'a str>) -> String {
    let mut secrets: Vec<&str> = secrets.filter(|s| !s.is_empty()).collect();
    // Longest first, so a secret that contains another is masked whole.
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    secrets.dedup();
    secrets.iter().fold(text.to_owned(), |acc, secret| {
        mask_occurrences(&acc, secret)
    })
}

/// Secrets at least this long are masked wherever they appear in a
/// message, even inside a longer word; shorter ones only as whole values.
pub const MIN_EMBEDDED_SECRET_LEN: usize = 8;

/// `text` with `secret` replaced by [`MASK`] where it stands alone (not
/// touching a letter or digit on either side), or anywhere when it is long.
fn mask_occurrences(text: &str, secret: &str) -> String {
    let anywhere = secret.chars().count() >= MIN_EMBEDDED_SECRET_LEN;
    let word_char = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (at, _) in text.match_indices(secret) {
        let before = text[..at].chars().next_back();
        let after = text[at + secret.len()..].chars().next();
        if anywhere || !(word_char(before) || word_char(after)) {
            out.push_str(&text[copied..at]);
            out.push_str(MASK);
            copied = at + secret.len();
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn check_entry(key: &str, value: &str) -> Result<(), OptionsError> {
    if key.is_empty() {
        return Err(OptionsError::EmptyKey);
    }
    if key.chars().count() > MAX_KEY_LEN || key.chars().any(char::is_control) {
        return Err(OptionsError::BadKey(
            key.chars().filter(|c| !c.is_control()).take(64).collect(),
        ));
    }
    if value.chars().count() > MAX_VALUE_LEN || value.chars().any(char::is_control) {
        return Err(OptionsError::BadValue(key.to_owned()));
    }
    if value == MASK {
        return Err(OptionsError::MaskAsValue(key.to_owned()));
    }
    Ok(())
}

/// One option a factory understands.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    pub key: &'static str,
    pub required: bool,
    pub default: Option<&'static str>,
    pub description: &'static str,
    /// Says where the catalog connects (a server URL, a directory): changing
    /// it sends the catalog's secrets somewhere new.
    pub locates: bool,
}

impl OptionSpec {
    pub const fn required(key: &'static str, description: &'static str) -> Self {
        Self {
            key,
            required: true,
            default: None,
            description,
            locates: false,
        }
    }

    /// A required option that says where the catalog connects.
    pub const fn location(key: &'static str, description: &'static str) -> Self {
        Self {
            locates: true,
            ..Self::required(key, description)
        }
    }

    pub const fn optional(
        key: &'static str,
        default: Option<&'static str>,
        description: &'static str,
    ) -> Self {
        Self {
            key,
            required: false,
            default,
            description,
            locates: false,
        }
    }

    pub fn sensitive(&self) -> bool {
        is_sensitive(self.key)
    }
}

/// Options every catalog type accepts, as in Flink.
pub static COMMON_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required(TYPE_KEY, "Selects the catalog type."),
    OptionSpec::optional(
        PROPERTY_VERSION_KEY,
        None,
        "Accepted for compatibility with Flink; ignored.",
    ),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    #[error("Catalog options do not contain an option key 'type' for discovering a catalog.")]
    MissingType,
    #[error(
        "Could not find any factory for identifier '{identifier}' that implements 'CatalogFactory'.\n\nAvailable factory identifiers are:\n\n{}",
        available.join("\n")
    )]
    UnknownType {
        identifier: String,
        available: Vec<String>,
    },
    #[error("One or more required options are missing.\n\nMissing required options are:\n\n{}", missing.join("\n"))]
    MissingOptions { missing: Vec<String> },
    #[error(
        "Unsupported options found for '{identifier}'.\n\nUnsupported options:\n\n{}\n\nSupported options:\n\n{}",
        unsupported.join("\n"),
        supported.join("\n")
    )]
    UnsupportedOptions {
        identifier: String,
        unsupported: Vec<String>,
        supported: Vec<String>,
    },
    #[error("Invalid value for option '{key}': {reason}")]
    InvalidValue { key: String, reason: String },
    #[error(
        "Changing {} would send the stored secrets to a new place: give {} again in the same request.",
        moved.join(", "),
        missing.join(", ")
    )]
    SecretsRequired {
        moved: Vec<String>,
        missing: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> CatalogOptions {
        CatalogOptions::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn sensitivity_follows_flinks_key_fragments_case_insensitively() {
        for key in [
            "password",
            "PASSWORD",
            "sink.Secret",
            "api-key",
            "s3.access-key",
            "fs.azure.account.key.x",
        ] {
            assert!(is_sensitive(key), "{key}");
        }
        for key in ["type", "username", "base-url", "default-database", "path"] {
            assert!(!is_sensitive(key), "{key}");
        }
    }

    #[test]
    fn masked_and_debug_never_show_a_secret() {
        let opts = options(&[
            ("type", "jdbc"),
            ("password", "s3cret-Value"),
            ("username", "me"),
        ]);
        assert_eq!(opts.masked()["password"], MASK);
        assert_eq!(opts.masked()["username"], "me");
        assert!(!format!("{opts:?}").contains("s3cret-Value"));
    }

    #[test]
    fn redact_masks_secrets_inside_driver_messages() {
        let opts = options(&[("password", "s3cret"), ("token", "s3cret-longer")]);
        assert_eq!(
            opts.redact("auth s3cret-longer and s3cret"),
            "auth ****** and ******"
        );
    }

    #[test]
    fn a_short_secret_is_masked_only_where_it_stands_alone() {
        let opts = options(&[("password", "p")]);
        assert_eq!(
            opts.redact("Connection reset by peer"),
            "Connection reset by peer",
            "masking inside words would reveal the one-letter password"
        );
        assert_eq!(
            opts.redact("password 'p' refused; p"),
            "password '******' refused; ******"
        );
    }

    #[test]
    fn a_long_secret_is_masked_even_inside_a_word() {
        let opts = options(&[("password", "s3cret-Value")]);
        assert_eq!(opts.redact("dsn=u:xs3cret-Valuex@h"), "dsn=u:x******x@h");
    }

    #[test]
    fn the_mask_is_refused_as_a_value() {
        let err =
            CatalogOptions::new([("password".to_string(), MASK.to_string())].into()).unwrap_err();
        assert_eq!(err, OptionsError::MaskAsValue("password".into()));
    }

    #[test]
    fn alteration_resets_then_sets_and_revalidates() {
        let opts = options(&[("type", "jdbc"), ("a", "1"), ("b", "2")]);
        let next = opts
            .altered(&[("b".into(), "3".into())].into(), &["a".into()])
            .unwrap();
        assert_eq!(next, options(&[("type", "jdbc"), ("b", "3")]));
        assert!(
            opts.altered(&[("password".into(), MASK.into())].into(), &[])
                .is_err()
        );
    }
}
