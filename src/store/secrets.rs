//! Encryption of sensitive option values at rest.
//!
//! Values are sealed with XChaCha20-Poly1305 under the active key of a
//! [`Keyring`]; the sealed text carries the key id, so older keys kept in the
//! ring still open what they sealed and a key can be rotated without a
//! migration. The option key is authenticated with the value, so a sealed
//! password cannot be moved to another option unnoticed.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use secrecy::{ExposeSecret, SecretString};

const FORMAT: &str = "v1";
const NONCE_LEN: usize = 24;

#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    #[error("secret key '{0}' is not of the form <key-id>:<base64 of 32 bytes>")]
    BadKey(String),
    #[error("the secret key list is empty")]
    Empty,
    #[error("secret key file '{path}': {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SealError {
    #[error("sealed value is malformed")]
    Malformed,
    #[error("sealed with key '{0}', which is not in the keyring")]
    UnknownKey(String),
    #[error("sealed value failed authentication (wrong key or tampered data)")]
    Authentication,
}

/// The keys that seal and open secrets; the first is the active one.
pub struct Keyring {
    active: String,
    ciphers: HashMap<String, XChaCha20Poly1305>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("active", &self.active)
            .field("keys", &self.ciphers.len())
            .finish()
    }
}

impl Keyring {
    /// Parses `id:base64[,id:base64...]` (commas or new lines between keys).
    pub fn parse(spec: &SecretString) -> Result<Self, KeyringError> {
        let mut active = None;
        let mut ciphers = HashMap::new();
        for entry in spec
            .expose_secret()
            .split([',', '\n'])
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let (id, encoded) = entry
                .split_once(':')
                .ok_or_else(|| KeyringError::BadKey(redacted_id(entry)))?;
            let valid_id = !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            let bytes = STANDARD.decode(encoded).ok().filter(|b| b.len() == 32);
            let (true, Some(bytes)) = (valid_id, bytes) else {
                return Err(KeyringError::BadKey(redacted_id(entry)));
            };
            let cipher = XChaCha20Poly1305::new_from_slice(&bytes).expect("32-byte key");
            active.get_or_insert_with(|| id.to_owned());
            ciphers.insert(id.to_owned(), cipher);
        }
        Ok(Self {
            active: active.ok_or(KeyringError::Empty)?,
            ciphers,
        })
    }

    /// Reads the key file, or creates it (mode 0600) with a fresh key.
    /// Returns whether it was created, so start-up can say so.
    pub fn load_or_create(path: &Path) -> Result<(Self, bool), KeyringError> {
        let file_error = |source| KeyringError::File {
            path: path.display().to_string(),
            source,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Ok((Self::parse(&SecretString::from(text))?, false)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let spec = generate_key_spec();
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut file = options.open(path).map_err(file_error)?;
                file.write_all(spec.expose_secret().as_bytes())
                    .map_err(file_error)?;
                file.write_all(b"\n").map_err(file_error)?;
                file.sync_all().map_err(file_error)?;
                Ok((Self::parse(&spec)?, true))
            }
            Err(e) => Err(file_error(e)),
        }
    }

    pub fn active_key_id(&self) -> &str {
        &self.active
    }

    /// `v1.<key-id>.<base64url(nonce ‖ ciphertext)>`
    pub fn seal(&self, option_key: &str, plaintext: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the operating system's random source");
        let cipher = &self.ciphers[&self.active];
        let sealed = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: option_key.as_bytes(),
                },
            )
            .expect("encryption of a bounded value cannot fail");
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&sealed);
        format!("{FORMAT}.{}.{}", self.active, URL_SAFE_NO_PAD.encode(blob))
    }

    pub fn open(&self, option_key: &str, sealed: &str) -> Result<String, SealError> {
        let mut parts = sealed.splitn(3, '.');
        let (Some(FORMAT), Some(key_id), Some(encoded)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(SealError::Malformed);
        };
        let cipher = self
            .ciphers
            .get(key_id)
            .ok_or_else(|| SealError::UnknownKey(key_id.to_owned()))?;
        let blob = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| SealError::Malformed)?;
        if blob.len() < NONCE_LEN {
            return Err(SealError::Malformed);
        }
        let (nonce, ciphertext) = blob.split_at(NONCE_LEN);
        let plain = cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: option_key.as_bytes(),
                },
            )
            .map_err(|_| SealError::Authentication)?;
        String::from_utf8(plain).map_err(|_| SealError::Malformed)
    }
}

impl Keyring {
    /// `sealed` sealed again under the active key, or `None` when the
    /// active key sealed it already.
    pub fn reseal(&self, option_key: &str, sealed: &str) -> Result<Option<String>, SealError> {
        if sealed_with(sealed) == Some(self.active.as_str()) {
            return Ok(None);
        }
        let plain = self.open(option_key, sealed)?;
        Ok(Some(self.seal(option_key, &plain)))
    }
}

/// The id of the key that sealed `sealed`, as the sealed text names it.
pub fn sealed_with(sealed: &str) -> Option<&str> {
    let rest = sealed.strip_prefix(FORMAT)?.strip_prefix('.')?;
    rest.split_once('.').map(|(key_id, _)| key_id)
}

/// Whether `text` is a value [`Keyring::seal`] wrote.
pub fn is_sealed(text: &str) -> bool {
    text.strip_prefix(FORMAT)
        .is_some_and(|rest| rest.starts_with('.'))
}

/// A new key spec `k<date>-<random>:<base64>`.
pub fn generate_key_spec() -> SecretString {
    let mut key = [0u8; 32];
    let mut suffix = [0u8; 3];
    getrandom::fill(&mut key).expect("the operating system's random source");
    getrandom::fill(&mut suffix).expect("the operating system's random source");
    let id = format!(
        "k{}-{}",
        chrono::Utc::now().format("%Y%m%d"),
        suffix
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    SecretString::from(format!("{id}:{}", STANDARD.encode(key)))
}

/// Names a bad entry by its id only: the rest may be key material.
fn redacted_id(entry: &str) -> String {
    entry
        .split(':')
        .next()
        .unwrap_or_default()
        .chars()
        .take(32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(spec: &str) -> Keyring {
        Keyring::parse(&SecretString::from(spec.to_owned())).unwrap()
    }

    #[test]
    fn sealed_values_open_again_and_do_not_contain_the_plaintext() {
        let keys = Keyring::parse(&generate_key_spec()).unwrap();
        let sealed = keys.seal("password", "s3cret-Value");
        assert!(!sealed.contains("s3cret"));
        assert!(sealed.starts_with(&format!("v1.{}.", keys.active_key_id())));
        assert_eq!(keys.open("password", &sealed).unwrap(), "s3cret-Value");
        assert_ne!(
            sealed,
            keys.seal("password", "s3cret-Value"),
            "nonces must differ"
        );
    }

    #[test]
    fn resealing_moves_a_value_to_the_active_key_and_leaves_the_active_keys_alone() {
        let old = ring("old:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
        let sealed = old.seal("password", "s3cret");
        let both = ring(
            "new:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=,old:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        );
        let moved = both.reseal("password", &sealed).unwrap().unwrap();
        assert_eq!(sealed_with(&sealed), Some("old"));
        assert_eq!(sealed_with(&moved), Some("new"));
        assert_eq!(both.reseal("password", &moved).unwrap(), None);
        let only_new = ring("new:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=");
        assert_eq!(only_new.open("password", &moved).unwrap(), "s3cret");
        assert!(matches!(
            only_new.reseal("password", &sealed),
            Err(SealError::UnknownKey(id)) if id == "old"
        ));
    }

    #[test]
    fn a_sealed_value_moved_to_another_option_fails_authentication() {
        let keys = Keyring::parse(&generate_key_spec()).unwrap();
        let sealed = keys.seal("password", "x");
        assert!(matches!(
            keys.open("token", &sealed),
            Err(SealError::Authentication)
        ));
    }

    #[test]
    fn an_old_key_kept_in_the_ring_still_opens_what_it_sealed() {
        let old = ring(&format!("old:{}", STANDARD.encode([1u8; 32])));
        let sealed = old.seal("password", "p");
        let rotated = ring(&format!(
            "new:{},old:{}",
            STANDARD.encode([2u8; 32]),
            STANDARD.encode([1u8; 32])
        ));
        assert_eq!(rotated.active_key_id(), "new");
        assert_eq!(rotated.open("password", &sealed).unwrap(), "p");
        let without_old = ring(&format!("new:{}", STANDARD.encode([2u8; 32])));
        assert!(
            matches!(without_old.open("password", &sealed), Err(SealError::UnknownKey(id)) if id == "old")
        );
    }

    #[test]
    fn malformed_key_specs_are_refused_without_echoing_key_material() {
        let err = Keyring::parse(&SecretString::from("id:dG9vLXNob3J0".to_owned())).unwrap_err();
        assert!(!err.to_string().contains("dG9v"), "{err}");
        assert!(Keyring::parse(&SecretString::from(" ".to_owned())).is_err());
    }

    #[test]
    fn the_key_file_is_created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.key");
        let (first, created) = Keyring::load_or_create(&path).unwrap();
        assert!(created);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        let (second, created) = Keyring::load_or_create(&path).unwrap();
        assert!(!created);
        assert_eq!(second.open("k", &first.seal("k", "v")).unwrap(), "v");
    }
}
