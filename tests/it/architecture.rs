//! The layering, held as a test: which of the crate's modules each module
//! may use, and which I/O the pure ones may not touch. A new arrow between
//! layers fails here first, naming the file and the line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each top-level module and the crate modules it may use. Data flows
/// `api` / `background` → `service` → `hooks` → `store` / `catalog` /
/// `engine` → `domain`; `server` wires everything together.
const MAY_USE: &[(&str, &[&str])] = &[
    ("domain", &[]),
    ("client", &[]),
    ("fault", &[]),
    ("metrics", &[]),
    ("config", &["fault"]),
    ("telemetry", &["config"]),
    ("store", &["domain"]),
    ("catalog", &["domain", "fault"]),
    ("engine", &["domain"]),
    ("hooks", &["domain", "store", "catalog", "fault", "metrics"]),
    (
        "service",
        &[
            "domain", "store", "catalog", "engine", "hooks", "fault", "metrics",
        ],
    ),
    ("background", &["domain", "service", "hooks"]),
    ("api", &["domain", "service", "config"]),
];

/// Crates and paths that do I/O, which `domain` may not name.
const IO: &[&str] = &[
    "sqlx::",
    "tokio::",
    "reqwest::",
    "axum::",
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "std::io",
];

/// HTTP, which the layers below the API know nothing of.
const HTTP: &[&str] = &["axum::", "http::", "tower::", "tower_http::", "StatusCode"];

fn sources(module: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let file = root.join(format!("{module}.rs"));
    if file.exists() {
        return vec![file];
    }
    let mut found = Vec::new();
    let mut pending = vec![root.join(module)];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    assert!(!found.is_empty(), "module {module} has no sources");
    found.sort();
    found
}

/// The source without its `#[cfg(test)]` module (tests may reach further)
/// and without comments, line by line with the line numbers kept.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        lines.push((index + 1, code.to_owned()));
    }
    lines
}

/// The crate modules a file uses: `crate::x` paths, and the members of
/// `use crate::{x, y::z}` groups, which may span lines.
fn crate_modules_used(lines: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut used = Vec::new();
    let mut group: Option<(usize, String)> = None;
    for (number, line) in lines {
        if let Some((start, text)) = &mut group {
            text.push_str(line);
            if line.contains('}') {
                let (start, text) = (*start, std::mem::take(text));
                group = None;
                used.extend(group_members(&text).into_iter().map(|m| (start, m)));
            }
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if rest.starts_with('{') {
                if rest.contains('}') {
                    used.extend(group_members(rest).into_iter().map(|m| (*number, m)));
                } else {
                    group = Some((*number, rest.to_owned()));
                }
                break;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            used.push((*number, name));
        }
    }
    used
}

/// The first path segment of each member of a `{…}` group.
fn group_members(group: &str) -> Vec<String> {
    let inner = group.trim_start_matches('{');
    let mut depth = 0;
    let mut members = vec![String::new()];
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => members.push(String::new()),
            _ if depth == 0 => members.last_mut().unwrap().push(c),
            _ => {}
        }
    }
    members
        .iter()
        .map(|m| m.trim().split("::").next().unwrap_or("").trim().to_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn each_layer_uses_only_the_layers_beneath_it() {
    let mut broken = Vec::new();
    let mut seen = BTreeSet::new();
    for (module, allowed) in MAY_USE {
        for path in sources(module) {
            for (line, used) in crate_modules_used(&code_lines(&path)) {
                seen.insert(used.clone());
                if used != *module && !allowed.contains(&used.as_str()) {
                    broken.push(format!("{}:{line}: {module} uses {used}", path.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
    // The check reads what it should: the layers do use each other.
    for expected in ["domain", "store", "catalog", "service"] {
        assert!(
            seen.contains(expected),
            "no module was seen using {expected}"
        );
    }
}

#[test]
fn the_domain_does_no_io_and_the_layers_below_the_api_know_no_http() {
    let mut broken = Vec::new();
    let mut check = |module: &str, forbidden: &[&str]| {
        for path in sources(module) {
            for (line, code) in code_lines(&path) {
                for word in forbidden {
                    if code.contains(word) {
                        broken.push(format!("{}:{line}: {module} names {word}", path.display()));
                    }
                }
            }
        }
    };
    check("domain", IO);
    // `engine` speaks HTTP to the clusters: that is what it is for.
    for module in [
        "domain",
        "store",
        "catalog",
        "hooks",
        "service",
        "background",
    ] {
        check(module, HTTP);
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn handlers_stay_short() {
    const MOST_LINES: usize = 30;
    let mut long = Vec::new();
    let mut handlers = 0;
    for path in sources("api") {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut index = 0;
        while index < lines.len() {
            if lines[index].starts_with("#[utoipa::path") {
                let start = (index..lines.len())
                    .find(|&i| lines[i].contains("async fn "))
                    .expect("a documented handler follows its attribute");
                let end = (start..lines.len())
                    .find(|&i| lines[i] == "}")
                    .expect("the handler ends");
                handlers += 1;
                if end - start + 1 > MOST_LINES {
                    long.push(format!(
                        "{}:{}: {} lines",
                        path.display(),
                        start + 1,
                        end - start + 1
                    ));
                }
                index = end;
            }
            index += 1;
        }
    }
    assert!(handlers >= 15, "only {handlers} handlers were found");
    assert!(
        long.is_empty(),
        "handlers over {MOST_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// A file a newcomer must read whole stays short, or its doc says why it
/// is long (its tests, or one block that cannot be cut).
#[test]
fn source_files_stay_short_or_say_why() {
    const MOST_LINES: usize = 600;
    let mut long = Vec::new();
    let mut files = 0;
    for (module, _) in MAY_USE.iter().chain(&[("server", &[][..])]) {
        for path in sources(module) {
            files += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let says_why = text
                .lines()
                .take_while(|line| line.starts_with("//!"))
                .any(|line| line.contains("Longer than most files") || line.contains("Its tests"));
            let lines = text.lines().count();
            if lines > MOST_LINES && !says_why {
                long.push(format!("{}: {lines} lines", path.display()));
            }
        }
    }
    assert!(files >= 60, "only {files} source files were read");
    assert!(
        long.is_empty(),
        "files over {MOST_LINES} lines whose doc does not say why:\n{}",
        long.join("\n")
    );
}

/// What only PostgreSQL has lives under `store/postgres/`: the statements
/// the shared recipes run are the plain path on both backends.
#[test]
fn postgres_only_statements_stay_under_store_postgres() {
    const POSTGRES_ONLY: &[&str] = &["json_to_recordset", "xmin", "PgConnection"];
    let mut found = Vec::new();
    for path in sources("store") {
        if path.components().any(|c| c.as_os_str() == "postgres") {
            continue;
        }
        for (line, code) in code_lines(&path) {
            for word in POSTGRES_ONLY {
                if code.contains(word) {
                    found.push(format!("{}:{line}: {word}", path.display()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "PostgreSQL-only pieces outside store/postgres/:\n{}",
        found.join("\n")
    );
}

/// SQLite (3.51) reads a bare `LIMIT $n` as a value the plan depends on:
/// binding it again, as every run of a cached statement does, throws the
/// plan away and compiles the statement again. Through a `CAST` it is an
/// expression evaluated at run time, and the statement stays prepared.
#[test]
fn limits_are_bound_through_a_cast_so_statements_stay_prepared() {
    let mut found = Vec::new();
    for path in sources("store") {
        for (line, code) in code_lines(&path) {
            if code.contains("LIMIT $") {
                found.push(format!("{}:{line}", path.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a bare `LIMIT $n` (write `LIMIT CAST($n AS BIGINT)`):\n{}",
        found.join("\n")
    );
}
