//! Bearer-token authentication and roles.
//!
//! The server keeps only SHA-256 digests of tokens; a presented token is
//! hashed and compared with every digest in constant time. The middleware
//! [`authenticate`] finds who is calling; each handler declares the
//! permission it needs as an extractor, [`Authorized<P>`], so a route and
//! its permission are written side by side (a handler without one, like
//! the health checks, needs nothing). Each role grants some permissions:
//! `reader` reads, `engine` reports job statuses, attaches its job ids and
//! reads jobs, `operator` manages catalogs, engines and jobs (and settles
//! their stuck actions), `admin` does everything. A refused attempt is logged
//! with the token's name when it is known, never with the token.

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::{ApiError, ProblemCode};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum Role {
    Reader,
    Engine,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    fn grants(self, permission: Permission) -> bool {
        use Permission::*;
        match self {
            Role::Admin => true,
            Role::Reader => matches!(
                permission,
                Authenticated | ReadCatalogs | ReadEngines | ReadJobs
            ),
            Role::Engine => matches!(
                permission,
                Authenticated | ReadJobs | ReportStatus | UpdateJobs
            ),
            Role::Operator => matches!(
                permission,
                Authenticated
                    | ReadCatalogs
                    | ReadEngines
                    | ReadJobs
                    | ManageCatalogs
                    | ManageEngines
                    | SubmitJobs
                    | UpdateJobs
                    | OperateJobs
                    | ManageSubscriptions
            ),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Any valid token (routes that do not exist, so 404s reveal nothing).
    Authenticated,
    ReadCatalogs,
    ReadEngines,
    ReadJobs,
    ManageCatalogs,
    ManageEngines,
    SubmitJobs,
    ReportStatus,
    /// Attach an engine's id to a job.
    UpdateJobs,
    /// Retry or give up a job's action.
    OperateJobs,
    /// Register, read, alter and drop event subscriptions; see and
    /// redeliver their deliveries.
    ManageSubscriptions,
}

impl Permission {
    pub const ALL: [Permission; 11] = [
        Permission::Authenticated,
        Permission::ReadCatalogs,
        Permission::ReadEngines,
        Permission::ReadJobs,
        Permission::ManageCatalogs,
        Permission::ManageEngines,
        Permission::SubmitJobs,
        Permission::ReportStatus,
        Permission::UpdateJobs,
        Permission::OperateJobs,
        Permission::ManageSubscriptions,
    ];
}

/// A permission as a type, for [`Authorized`].
pub trait Needs: Send + Sync + 'static {
    const PERMISSION: Permission;
}

macro_rules! permissions {
    ($($name:ident),* $(,)?) => {$(
        #[doc = concat!("Needs [`Permission::", stringify!($name), "`].")]
        pub struct $name;
        impl Needs for $name {
            const PERMISSION: Permission = Permission::$name;
        }
    )*};
}

/// The permissions as types: `Authorized<need::ReadCatalogs>`.
pub mod need {
    use super::{Needs, Permission};

    permissions!(
        Authenticated,
        ReadCatalogs,
        ReadEngines,
        ReadJobs,
        ManageCatalogs,
        ManageEngines,
        SubmitJobs,
        ReportStatus,
        UpdateJobs,
        OperateJobs,
        ManageSubscriptions,
    );
}

/// Who is calling, as [`authenticate`] found it.
#[derive(Debug, Clone)]
enum Caller {
    /// No tokens are configured: every request is allowed.
    Anyone,
    /// No token, or one that matches none.
    Unknown {
        token_sent: bool,
    },
    Token {
        name: String,
        role: Role,
    },
}

/// Whose request this is, for what is kept per caller (idempotency keys):
/// the token's role and name, or empty when there are no tokens (or no
/// valid one). The role is part of it, so an answer kept for a role is
/// never replayed to the same name once its role changed: the request runs
/// again, through the role check.
pub fn caller_name(extensions: &axum::http::Extensions) -> String {
    match extensions.get::<Caller>() {
        Some(Caller::Token { name, role }) => format!("{}/{name}", role.as_str()),
        _ => String::new(),
    }
}

/// The handler runs only for a caller whose role grants `P`: 401 without a
/// valid token, 403 when the role lacks the permission. A handler whose
/// need depends on the request asks [`Authorized::require`] for more.
pub struct Authorized<P> {
    /// The token's name and role; `None` when no tokens are configured.
    token: Option<(String, Role)>,
    need: std::marker::PhantomData<P>,
}

impl<P> Authorized<P> {
    /// The token's name and role; `None` when no tokens are configured
    /// (then every request is allowed).
    /// Whether the request came with an engine's token.
    pub fn is_engine(&self) -> bool {
        matches!(self.token, Some((_, Role::Engine)))
    }

    pub fn token(&self) -> Option<(&str, Role)> {
        self.token
            .as_ref()
            .map(|(name, role)| (name.as_str(), *role))
    }

    /// Everything the caller may do.
    pub fn permissions(&self) -> Vec<Permission> {
        Permission::ALL
            .into_iter()
            .filter(|p| self.token.as_ref().is_none_or(|(_, role)| role.grants(*p)))
            .collect()
    }

    /// 403 unless the caller's role also grants `permission`, for `what`.
    pub fn require(&self, permission: Permission, what: &str) -> Result<(), ApiError> {
        match &self.token {
            Some((name, role)) if !role.grants(permission) => {
                tracing::warn!(token = %name, %role, what, "request refused: role lacks permission");
                Err(ApiError::new(
                    ProblemCode::Forbidden,
                    format!("role '{role}' may not {what}"),
                ))
            }
            _ => Ok(()),
        }
    }
}

impl<S: Send + Sync, P: Needs> axum::extract::FromRequestParts<S> for Authorized<P> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let caller = parts.extensions.get::<Caller>().cloned();
        let (method, path) = (&parts.method, parts.uri.path());
        let allowed = |token| Self {
            token,
            need: std::marker::PhantomData,
        };
        match caller {
            Some(Caller::Anyone) => Ok(allowed(None)),
            Some(Caller::Token { name, role }) if role.grants(P::PERMISSION) => {
                Ok(allowed(Some((name, role))))
            }
            Some(Caller::Token { name, role }) => {
                tracing::warn!(token = %name, %role, %method, path, "request refused: role lacks permission");
                Err(ApiError::new(
                    ProblemCode::Forbidden,
                    format!("role '{role}' may not {method} {path}"),
                ))
            }
            Some(Caller::Unknown { .. }) | None => {
                let token_sent = matches!(caller, Some(Caller::Unknown { token_sent: true }));
                tracing::warn!(%method, path, token_sent, "request refused: no valid bearer token");
                Err(ApiError::new(
                    ProblemCode::Unauthenticated,
                    "send a valid token as 'Authorization: Bearer <token>'",
                ))
            }
        }
    }
}

struct TokenEntry {
    name: String,
    role: Role,
    digest: [u8; 32],
}

/// Configured tokens, as digests.
#[derive(Default)]
pub struct Tokens {
    entries: Vec<TokenEntry>,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "token entry {line}: expected <name>:<role>:<sha256 hex>, with role reader, engine, operator or admin"
)]
pub struct TokenConfigError {
    pub line: usize,
}

impl Tokens {
    /// Entries `<name>:<role>:<sha256 hex of the token>`, separated by commas
    /// or new lines; `#` starts a comment line.
    pub fn parse(spec: &SecretString) -> Result<Self, TokenConfigError> {
        let mut entries = Vec::new();
        let lines = spec.expose_secret().split([',', '\n']).map(str::trim);
        for (index, entry) in lines
            .enumerate()
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        {
            let error = || TokenConfigError { line: index + 1 };
            let mut parts = entry.splitn(3, ':');
            let (Some(name), Some(role), Some(hex)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(error());
            };
            let role = Role::parse(role).ok_or_else(error)?;
            let digest = decode_hex(hex).ok_or_else(error)?;
            if name.is_empty() {
                return Err(error());
            }
            entries.push(TokenEntry {
                name: name.to_owned(),
                role,
                digest,
            });
        }
        Ok(Self { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry whose digest matches, comparing with every entry in constant time.
    fn find(&self, token: &str) -> Option<&TokenEntry> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.digest.ct_eq(&digest)) {
                found = Some(entry);
            }
        }
        found
    }
}

fn decode_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(digest)
}

/// A new random token, and the configuration entry that admits it.
pub fn generate(name: &str, role: Role) -> (SecretString, String) {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    let token = format!("ctasd_{}", URL_SAFE_NO_PAD.encode(bytes));
    let digest: String = Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    (SecretString::from(token), format!("{name}:{role}:{digest}"))
}

/// Finds who is calling (by the bearer token, if tokens are configured)
/// for [`Authorized`] to judge, and adds the `WWW-Authenticate` challenge
/// to a 401.
pub async fn authenticate(
    State(tokens): State<Arc<Tokens>>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = if tokens.is_empty() {
        Caller::Anyone
    } else {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        match presented.and_then(|token| tokens.find(token)) {
            Some(entry) => Caller::Token {
                name: entry.name.clone(),
                role: entry.role,
            },
            None => Caller::Unknown {
                token_sent: presented.is_some(),
            },
        }
    };
    request.extensions_mut().insert(caller);
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// Without tokens ctasd listens on loopback only; a web page the user
/// visits could still reach it through DNS rebinding (its own name resolved
/// to 127.0.0.1) or send it requests from its own origin. So in that mode a
/// request must name a loopback host, and come from a loopback page if it
/// comes from a page at all.
pub async fn loopback_hosts_only(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok());
    let foreign_host = host.filter(|h| !is_loopback_authority(h));
    // `null` (a sandboxed frame, a file) is a page like any other.
    let foreign_origin = origin.filter(|o| {
        !o.split_once("://")
            .is_some_and(|(_, a)| is_loopback_authority(a))
    });
    if let Some(named) = foreign_host.or(foreign_origin) {
        tracing::warn!(named = %named.chars().take(100).collect::<String>(), "request refused: not addressed to loopback");
        return ApiError::new(
            ProblemCode::HostNotAllowed,
            "without tokens ctasd answers only requests addressed to localhost or a loopback \
             address, from no page or a loopback page; configure tokens to serve other names",
        )
        .into_response();
    }
    next.run(request).await
}

/// `localhost`, a name under `.localhost`, `127.x.y.z` or `[::1]`, with any port.
fn is_loopback_authority(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map(|(h, _)| h).unwrap_or(rest),
        None => authority
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(authority),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_authorities_are_told_from_foreign_ones() {
        for loopback in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:8080",
            "127.1.2.3",
            "[::1]:80",
            "api.localhost",
            "LOCALHOST.",
        ] {
            assert!(is_loopback_authority(loopback), "{loopback}");
        }
        for foreign in [
            "attacker.example.com",
            "attacker.example.com:8080",
            "10.0.0.1",
            "[::2]",
            "localhost.evil.com",
            "127.0.0.1.evil.com",
        ] {
            assert!(!is_loopback_authority(foreign), "{foreign}");
        }
    }

    #[test]
    fn generated_tokens_are_admitted_with_their_role_and_nothing_else_is() {
        let (token, line) = generate("flink", Role::Engine);
        let tokens = Tokens::parse(&SecretString::from(format!("# engines\n{line}\n"))).unwrap();
        let entry = tokens.find(token.expose_secret()).unwrap();
        assert_eq!((entry.name.as_str(), entry.role), ("flink", Role::Engine));
        assert!(tokens.find("ctasd_wrong").is_none());
        assert!(
            !line.contains(token.expose_secret()),
            "the configuration holds only the digest"
        );
    }

    #[test]
    fn malformed_entries_are_refused_by_line() {
        for bad in ["x:reader", "x:root:00", ":reader:", "x:reader:zz"] {
            assert!(
                Tokens::parse(&SecretString::from(bad.to_owned())).is_err(),
                "{bad}"
            );
        }
    }
}
