//! Every parser that reads client input, fed deep and long inputs: each
//! answers (a value or a refusal) within a small, fixed stack, so no request
//! can overflow a worker's stack or make the server spin on one input.

use std::collections::BTreeMap;

use ctasd::catalog::jdbc::JdbcUrl;
use ctasd::domain::flink::statement;
use ctasd::domain::flink::table::TableDefinition;
use ctasd::domain::flink::types::DataType;
use ctasd::domain::job::JobId;
use ctasd::domain::{CatalogName, CatalogOptions, ObjectName};
use proptest::prelude::*;

/// Far below a Tokio worker's 2 MiB: a parser that recursed once per level
/// of a 50,000-deep input would need many megabytes.
const STACK: usize = 256 * 1024;

fn on_small_stack<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(work)
        .unwrap()
        .join()
        .expect("the parser returned instead of overflowing its stack")
}

/// A type opened `depth` times by the given constructor, then closed.
fn nested(opener: &str, depth: usize, closer: &str) -> String {
    format!("{}INT{}", opener.repeat(depth), closer.repeat(depth))
}

fn deep_type() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            ("ARRAY<", ">"),
            ("MAP<INT, ", ">"),
            ("ROW<f ", ">"),
            ("ROW(f ", ")"),
            ("ARRAY<ROW<`x` ", ">>"),
        ]),
        0usize..50_000,
        any::<bool>(),
    )
        .prop_map(|((open, close), depth, unclosed)| {
            let text = nested(open, depth, close);
            // Half of them never close: the parser must not recurse to find out.
            if unclosed {
                text[..text.len() / 2].to_owned()
            } else {
                text
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn deep_types_are_parsed_or_refused_on_a_small_stack(input in deep_type()) {
        let outcome = on_small_stack(move || DataType::parse(&input).map(|t| t.to_string()));
        if let Err(error) = outcome {
            prop_assert!(!error.reason.is_empty());
            prop_assert!(error.input.len() <= 1024, "the echo is bounded");
        }
    }

    #[test]
    fn long_types_are_refused_without_echoing_them_whole(
        unit in prop::sample::select(vec!["INT ", "<", "`a`", "'", "ROW<a INT, ", "é"]),
        repeat in 1usize..120_000,
    ) {
        let input = unit.repeat(repeat);
        let outcome = on_small_stack(move || DataType::parse(&input));
        if let Err(error) = outcome {
            prop_assert!(error.input.len() <= 1024);
        }
    }

    #[test]
    fn long_catalog_statements_are_parsed_or_refused_with_a_bounded_message(
        unit in prop::sample::select(vec!["(", "'k' = 'v', ", "`", "'", "CATALOG ", "-- c\n", "é"]),
        repeat in 1usize..100_000,
    ) {
        let input = format!("CREATE CATALOG c WITH ({}", unit.repeat(repeat));
        let outcome = on_small_stack(move || statement::parse(&input));
        if let Err(error) = outcome {
            prop_assert!(error.to_string().len() <= 1024, "the message is bounded");
            prop_assert!(error.line >= 1 && error.column >= 1);
        }
    }

    #[test]
    fn large_property_maps_are_read_or_refused_on_a_small_stack(
        columns in 0usize..6000,
        key_len in 1usize..3000,
        value_len in 0usize..100_000,
        deep in 0usize..20_000,
    ) {
        let outcome = on_small_stack(move || {
            let mut properties = BTreeMap::new();
            for i in 0..columns {
                properties.insert(format!("schema.{i}.name"), format!("c{i}"));
                properties.insert(format!("schema.{i}.data-type"), "INT".to_owned());
            }
            properties.insert("schema.0.data-type".into(), nested("ARRAY<", deep, ">"));
            properties.insert("k".repeat(key_len), "v".repeat(value_len));
            TableDefinition::from_properties(&properties).map(|t| t.columns.len())
        });
        if let Ok(count) = outcome {
            prop_assert!(count <= ctasd::domain::flink::table::MAX_COLUMNS);
        }
    }

    #[test]
    fn names_ids_urls_and_options_of_any_length_are_read_or_refused(
        unit in prop::sample::select(vec!["a", "é", "/", "\u{0}", "..", "jdbc:postgresql://", "?", "%"]),
        repeat in 0usize..200_000,
    ) {
        let input = unit.repeat(repeat);
        on_small_stack(move || {
            let _ = CatalogName::parse(&input);
            let _ = ObjectName::parse("table name", &input);
            let _ = JobId::parse(&input);
            let _ = JdbcUrl::parse(&input);
            let _ = CatalogOptions::new(BTreeMap::from([
                ("type".to_owned(), input.clone()),
                (input.clone(), "v".to_owned()),
            ]));
        });
    }
}
