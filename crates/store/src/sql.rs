//! A dynamic query for both backends: SQL text built piece by piece with `$n` placeholders.
//! sqlx's `QueryBuilder` writes `?` when used with the `Any` driver, which PostgreSQL rejects.

use sqlx::any::AnyArguments;
use sqlx::Any;

/// A value bound to a dynamic query.
#[derive(Clone, Debug)]
pub(crate) enum Arg {
    Int(i64),
    Text(String),
    /// A text column's NULL.
    NullText,
    /// An integer column's NULL.
    NullInt,
}

impl Arg {
    pub(crate) fn opt_text(v: Option<String>) -> Arg {
        v.map_or(Arg::NullText, Arg::Text)
    }

    pub(crate) fn opt_int(v: Option<i64>) -> Arg {
        v.map_or(Arg::NullInt, Arg::Int)
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Arg {
        Arg::Int(v)
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Arg {
        Arg::Text(v)
    }
}

impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Arg {
        Arg::opt_text(v)
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Arg {
        Arg::Text(v.to_string())
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Query {
    sql: String,
    args: Vec<Arg>,
}

impl Query {
    pub(crate) fn new(sql: &str) -> Query {
        Query {
            sql: sql.to_string(),
            args: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, sql: &str) -> &mut Query {
        self.sql.push_str(sql);
        self
    }

    /// Appends a placeholder for `value`.
    pub(crate) fn bind(&mut self, value: impl Into<Arg>) -> &mut Query {
        self.args.push(value.into());
        self.sql.push_str(&format!("${}", self.args.len()));
        self
    }

    /// Binds `value` and returns its placeholder, for SQL that names it more than once.
    pub(crate) fn placeholder(&mut self, value: impl Into<Arg>) -> String {
        self.args.push(value.into());
        format!("${}", self.args.len())
    }

    /// Appends `v1, v2, ...` as placeholders (for `IN (...)`).
    pub(crate) fn bind_list<T: Into<Arg> + Clone>(&mut self, values: &[T]) -> &mut Query {
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.sql.push_str(", ");
            }
            self.bind(v.clone());
        }
        self
    }

    pub(crate) fn build(&self) -> sqlx::query::Query<'_, Any, AnyArguments<'_>> {
        let mut q = sqlx::query(&self.sql);
        for a in &self.args {
            q = match a {
                Arg::Int(v) => q.bind(*v),
                Arg::Text(v) => q.bind(v.as_str()),
                Arg::NullText => q.bind(None::<String>),
                Arg::NullInt => q.bind(None::<i64>),
            };
        }
        q
    }
}

/// `s` as a `LIKE` pattern matching itself only (with `ESCAPE '\'`).
pub(crate) fn like_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_in_order() {
        let mut q = Query::new("SELECT 1 WHERE a = ");
        q.bind(1)
            .push(" AND b IN (")
            .bind_list(&["x", "y"])
            .push(")");
        assert_eq!(q.sql, "SELECT 1 WHERE a = $1 AND b IN ($2, $3)");
        assert_eq!(q.args.len(), 3);
    }

    #[test]
    fn like_wildcards_are_escaped() {
        assert_eq!(like_literal(r"50%_off\"), r"50\%\_off\\");
    }
}
