//! The catalog descriptor (name, options, comment) and the rules for ALTER.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::name::CatalogName;
use super::options::{CatalogOptions, OptionsError, TYPE_KEY};

const MAX_COMMENT_LEN: usize = 2048;

/// What a user registers: Flink's `CatalogDescriptor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogDescriptor {
    pub name: CatalogName,
    pub options: CatalogOptions,
    pub comment: Option<String>,
}

/// A descriptor as stored, with its optimistic-concurrency version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogRecord {
    pub descriptor: CatalogDescriptor,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlterError {
    #[error("option 'type' cannot be reset")]
    TypeReset,
    #[error(
        "option 'type' cannot be changed from '{from}' to '{to}': drop and register the catalog instead"
    )]
    TypeChanged { from: String, to: String },
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error("the comment is longer than {MAX_COMMENT_LEN} characters")]
    CommentTooLong,
}

/// `ALTER CATALOG`: options to set, keys to reset, and a new comment
/// (an empty comment clears it).
#[derive(Debug, Clone, Default)]
pub struct CatalogAlteration {
    pub set: BTreeMap<String, String>,
    pub reset: Vec<String>,
    pub comment: Option<String>,
}

impl CatalogAlteration {
    pub fn apply(&self, current: &CatalogDescriptor) -> Result<CatalogDescriptor, AlterError> {
        if self.reset.iter().any(|k| k == TYPE_KEY) {
            return Err(AlterError::TypeReset);
        }
        if let (Some(to), Some(from)) = (self.set.get(TYPE_KEY), current.options.catalog_type())
            && to != from
        {
            return Err(AlterError::TypeChanged {
                from: from.to_owned(),
                to: to.clone(),
            });
        }
        let options = current.options.altered(&self.set, &self.reset)?;
        let comment = match &self.comment {
            None => current.comment.clone(),
            Some(c) if c.is_empty() => None,
            Some(c) => Some(check_comment(c)?.to_owned()),
        };
        Ok(CatalogDescriptor {
            name: current.name.clone(),
            options,
            comment,
        })
    }
}

pub fn check_comment(comment: &str) -> Result<&str, AlterError> {
    if comment.chars().count() > MAX_COMMENT_LEN {
        return Err(AlterError::CommentTooLong);
    }
    Ok(comment)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor() -> CatalogDescriptor {
        CatalogDescriptor {
            name: CatalogName::parse("pg").unwrap(),
            options: CatalogOptions::new(
                [("type".into(), "jdbc".into()), ("x".into(), "1".into())].into(),
            )
            .unwrap(),
            comment: Some("old".into()),
        }
    }

    #[test]
    fn type_can_be_neither_reset_nor_changed() {
        let reset = CatalogAlteration {
            reset: vec!["type".into()],
            ..Default::default()
        };
        assert_eq!(reset.apply(&descriptor()), Err(AlterError::TypeReset));
        let change = CatalogAlteration {
            set: [("type".into(), "filesystem".into())].into(),
            ..Default::default()
        };
        assert!(matches!(
            change.apply(&descriptor()),
            Err(AlterError::TypeChanged { .. })
        ));
        let same = CatalogAlteration {
            set: [("type".into(), "jdbc".into())].into(),
            ..Default::default()
        };
        assert!(same.apply(&descriptor()).is_ok());
    }

    #[test]
    fn an_empty_comment_clears_it_and_none_keeps_it() {
        let keep = CatalogAlteration::default().apply(&descriptor()).unwrap();
        assert_eq!(keep.comment.as_deref(), Some("old"));
        let clear = CatalogAlteration {
            comment: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(clear.apply(&descriptor()).unwrap().comment, None);
    }
}
