//! Date-range bounds for list searches (spec §4.5 `from` / `to`). Being written.
