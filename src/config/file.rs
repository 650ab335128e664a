//! `ctasd serve --config FILE`: one TOML file with any setting `serve`
//! takes, named as its flag without the dashes (`max-connections = 1024`,
//! `engine-allowed-hosts = ["flink.internal"]`, `data-dir = "/var/lib/ctasd"`).
//!
//! Flags win over variables, variables over the file, the file over the
//! defaults: the file's settings reach the parser as flags placed before
//! the command line's (a later flag replaces an earlier one), except those
//! whose `CTASD_*` variable is set. So the file is checked exactly as flags
//! are, with the same messages. `--print-config` shows the outcome.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};

/// Settings of a file that are not settings.
const NOT_FROM_A_FILE: &[&str] = &["config", "print-config", "help"];

/// `args` with the settings of `serve`'s config file (if one is named, by
/// `--config` or `CTASD_CONFIG`) put in as flags, and the settings taken
/// from it.
pub fn with_config_file(
    args: Vec<OsString>,
    cli: &Command,
) -> anyhow::Result<(Vec<OsString>, Vec<String>)> {
    let Some(at) = args.iter().position(|a| a == "serve") else {
        return Ok((args, Vec::new()));
    };
    let Some(path) = config_path(&args[at + 1..]) else {
        return Ok((args, Vec::new()));
    };
    let serve = cli
        .find_subcommand("serve")
        .context("the command line has a serve command")?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text)
        .with_context(|| format!("config file {} is not TOML", path.display()))?;
    let mut flags = Vec::new();
    let mut taken = Vec::new();
    for (key, value) in table {
        let Some(arg) = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && !a.is_hide_set())
            .filter(|_| !NOT_FROM_A_FILE.contains(&key.as_str()))
        else {
            let known: Vec<&str> = settings(serve).collect();
            bail!(
                "config file {}: '{key}' is not a setting of serve; settings are its flags without \
                 the dashes: {}",
                path.display(),
                known.join(", ")
            );
        };
        let on_the_command_line = args[at + 1..].iter().any(|a| {
            let a = a.to_string_lossy();
            a == format!("--{key}") || a.starts_with(&format!("--{key}="))
        });
        let in_the_environment = arg
            .get_env()
            .is_some_and(|env| std::env::var_os(env).is_some());
        if on_the_command_line || in_the_environment {
            continue;
        }
        let flag = match (&value, arg.get_action()) {
            (toml::Value::Boolean(true), ArgAction::SetTrue) => format!("--{key}"),
            (toml::Value::Boolean(false), ArgAction::SetTrue) => continue,
            (toml::Value::String(text), _) => format!("--{key}={text}"),
            (toml::Value::Array(items), _) => {
                let items: Vec<String> = items.iter().map(plain).collect();
                format!("--{key}={}", items.join(","))
            }
            (other, _) => format!("--{key}={}", plain(other)),
        };
        flags.push(OsString::from(flag));
        taken.push(key);
    }
    let mut args = args;
    args.splice(at + 1..at + 1, flags);
    Ok((args, taken))
}

/// The file `--config` or `CTASD_CONFIG` names.
fn config_path(serve_args: &[OsString]) -> Option<PathBuf> {
    let mut args = serve_args.iter();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if text == "--config" {
            return args.next().map(PathBuf::from);
        }
        if let Some(path) = text.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("CTASD_CONFIG").map(PathBuf::from)
}

/// A value as a flag takes it: text as it is, numbers and booleans as
/// written, a date as TOML writes it.
fn plain(value: &toml::Value) -> String {
    match value {
        toml::Value::String(text) => text.clone(),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => x.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(at) => at.to_string(),
        toml::Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(","),
        toml::Value::Table(_) => String::new(),
    }
}

/// The names a config file may use.
fn settings(serve: &Command) -> impl Iterator<Item = &str> {
    serve
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .filter(|long| !NOT_FROM_A_FILE.contains(long))
}

/// The settings `serve` runs with, as a config file would give them, each
/// with where it came from; secrets masked.
pub fn effective(serve: &Command, matches: &ArgMatches, from_file: &[String]) -> String {
    let mut out = String::new();
    for arg in serve.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long().filter(|l| !NOT_FROM_A_FILE.contains(l)) else {
            continue;
        };
        let id = arg.get_id().as_str();
        let values: Vec<String> = matches
            .get_raw(id)
            .into_iter()
            .flatten()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let source = match matches.value_source(id) {
            Some(ValueSource::CommandLine) if from_file.iter().any(|k| k == long) => "config file",
            Some(ValueSource::CommandLine) => "flag",
            Some(ValueSource::EnvVariable) => "environment",
            Some(ValueSource::DefaultValue) => "default",
            _ => "default",
        };
        if values.is_empty() {
            out.push_str(&format!("# {long} is not set\n"));
            continue;
        }
        let shown = if arg.is_hide_env_values_set() {
            format!("{long} = \"******\"")
        } else if values.len() > 1 || arg.get_value_delimiter().is_some() {
            let items: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
            format!("{long} = [{}]", items.join(", "))
        } else if arg.get_action().takes_values() {
            format!("{long} = {:?}", values[0])
        } else {
            format!("{long} = {}", values[0])
        };
        out.push_str(&format!("{shown:<60} # {source}\n"));
    }
    out
}
