//! Which hosts an engine URL may name (`--engine-allowed-hosts`), as GitLab
//! bounds its webhooks: an engine URL is the one place ctasd sends requests
//! a user chose, so an operator can keep them to the Flink clusters of the
//! platform instead of every port on ctasd's network. An entry is a host
//! name (`flink.example.com`), a domain's names (`*.example.com`), an IP
//! address, or an IP range (`10.1.0.0/16`); none allows every host.

use std::net::IpAddr;

use crate::domain::engine::EngineUrl;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Name(String),
    Under(String),
    Range { network: IpAddr, prefix: u8 },
}

/// The hosts engine URLs may name; empty: any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts(Vec<Entry>);

impl AllowedHosts {
    /// Entries as an operator writes them; the first one that is none of
    /// the forms is the error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        entries
            .iter()
            .map(|e| e.as_ref().trim())
            .filter(|e| !e.is_empty())
            .map(entry)
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether `url`'s host is on the list (any host when the list is empty).
    pub fn allows(&self, url: &EngineUrl) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let host = url.host().to_ascii_lowercase();
        let address: Option<IpAddr> = host.parse().ok();
        self.0.iter().any(|entry| match entry {
            Entry::Name(name) => *name == host,
            Entry::Under(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
            Entry::Range { network, prefix } => {
                address.is_some_and(|a| within(a, *network, *prefix))
            }
        })
    }
}

fn entry(text: &str) -> Result<Entry, String> {
    let refused = || {
        format!("'{text}' is not a host name, *.domain, IP address or IP range (address/prefix)")
    };
    if let Some((network, prefix)) = text.split_once('/') {
        let network: IpAddr = network.parse().map_err(|_| refused())?;
        let most = if network.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix.parse().map_err(|_| refused())?;
        if prefix > most {
            return Err(refused());
        }
        return Ok(Entry::Range { network, prefix });
    }
    if let Ok(address) = text.trim_matches(['[', ']']).parse::<IpAddr>() {
        let prefix = if address.is_ipv4() { 32 } else { 128 };
        return Ok(Entry::Range {
            network: address,
            prefix,
        });
    }
    let name = |n: &str| {
        !n.is_empty()
            && n.split('.').all(|label| {
                !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
    };
    match text.strip_prefix("*.") {
        Some(domain) if name(domain) => Ok(Entry::Under(domain.to_ascii_lowercase())),
        None if name(text) => Ok(Entry::Name(text.to_ascii_lowercase())),
        _ => Err(refused()),
    }
}

/// Whether `address` is in `network/prefix` (never across families).
fn within(address: IpAddr, network: IpAddr, prefix: u8) -> bool {
    match (address, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> EngineUrl {
        EngineUrl::parse("url", text).unwrap()
    }

    #[test]
    fn names_domains_addresses_and_ranges_are_allowed_and_nothing_else() {
        let allowed = AllowedHosts::parse(&[
            "flink.example.com",
            "*.flink.internal",
            "10.1.0.0/16",
            "127.0.0.1",
            "[::1]",
        ])
        .unwrap();
        for yes in [
            "http://FLINK.example.com:8081",
            "http://jm.flink.internal",
            "http://a.b.flink.internal/path",
            "http://10.1.200.3:8081",
            "http://127.0.0.1:8081",
            "http://[::1]:8081",
        ] {
            assert!(allowed.allows(&url(yes)), "{yes}");
        }
        for no in [
            "http://example.com",
            "http://flink.internal",
            "http://evilflink.internal",
            "http://flink.example.com.evil.net",
            "http://10.2.0.1",
            "http://127.0.0.2:5432",
            "http://[::2]",
        ] {
            assert!(!allowed.allows(&url(no)), "{no}");
        }
        assert!(AllowedHosts::default().allows(&url("http://anything:1")));
    }

    #[test]
    fn an_entry_of_no_known_form_is_refused_by_name() {
        for bad in ["10.0.0.0/33", "http://x", "*.", "a..b", "x/y"] {
            let refused = AllowedHosts::parse(&[bad]).unwrap_err();
            assert!(refused.contains(bad), "{refused}");
        }
    }
}
