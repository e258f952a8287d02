//! Date-range bounds for list searches (spec §4.5 `from` / `to`): the forms callers write, turned
//! into instants against a clock the caller passes in.
//!
//! Accepted, case-insensitive, with extra spaces tolerated:
//! - `YYYY-MM-DD HH:MM:SS` (UTC), `YYYY-MM-DDTHH:MM:SS` with `Z` or `±hh:mm` (or without, UTC);
//! - `YYYY-MM-DD`: the whole day, so a start bound is its first second and an end bound its last;
//! - a UNIX timestamp in seconds;
//! - `now`, and the day words `today`, `yesterday`, `tomorrow` (whole UTC days, as above);
//! - `last`, `this` or `next` followed by `week`, `month` or `year`: that calendar period (weeks
//!   start on Monday, as in ISO 8601), its first second for a start bound and its last for an end;
//! - offsets from now: `3 days ago`, `an hour ago`, `-3 days`, `+1 week` (or `1 week`), with
//!   units `second`, `minute`, `hour`, `day`, `week`, `month`, `year` (singular or plural).
//!   Offsets are instants: `3 days ago` is exactly 72 hours before now whichever bound it is.
//!
//! A `+` in a query string arrives as a space when the caller forgot to write `%2B`; both places
//! where a `+` belongs (`+1 week`, `…T10:00:00+02:00`) read the space as the `+` it was.
//!
//! End bounds fall on the last whole second (`23:59:59`), so a range is inclusive at second
//! precision.

use chrono::{
    DateTime, Datelike, Days, Months, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc,
};

/// Which end of a date range a value is for; it decides where a whole day or period is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Start,
    End,
}

/// The forms [`parse_bound`] accepts, for messages.
pub const ACCEPTED_FORMS: &str = "YYYY-MM-DD HH:MM:SS, YYYY-MM-DDTHH:MM:SSZ (or +hh:mm), \
    YYYY-MM-DD, a UNIX timestamp in seconds, or a relative form such as now, today, yesterday, \
    tomorrow, 3 days ago, -2 hours, +1 week, last week, this month, next year";

/// Why a date-range value was refused. Messages quote the input and list what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeSpecError {
    #[error("'{input}' is not a date or time this service understands; use {ACCEPTED_FORMS}")]
    Unrecognised { input: String },
    #[error("'{input}' is not a valid date or time ({reason}); use {ACCEPTED_FORMS}")]
    InvalidDate { input: String, reason: String },
    #[error(
        "'{input}' is outside the supported years 1 to 9999 (a UNIX timestamp counts seconds, \
         not milliseconds); use {ACCEPTED_FORMS}"
    )]
    OutOfRange { input: String },
}

/// Longest input considered; nothing valid comes close, and messages stay short.
const MAX_INPUT_CHARS: usize = 64;

/// Parses one `from` (`Bound::Start`) or `to` (`Bound::End`) value relative to `now`.
pub fn parse_bound(
    input: &str,
    now: DateTime<Utc>,
    which: Bound,
) -> Result<DateTime<Utc>, TimeSpecError> {
    if input.chars().count() > MAX_INPUT_CHARS {
        let shown: String = input.chars().take(MAX_INPUT_CHARS).collect();
        return Err(TimeSpecError::Unrecognised {
            input: format!("{shown}…"),
        });
    }
    let text = input
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    let unrecognised = || TimeSpecError::Unrecognised {
        input: input.to_owned(),
    };
    let out_of_range = || TimeSpecError::OutOfRange {
        input: input.to_owned(),
    };
    if text.is_empty() {
        return Err(unrecognised());
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        let secs: i64 = text.parse().map_err(|_| out_of_range())?;
        return DateTime::from_timestamp(secs, 0)
            .filter(in_range)
            .ok_or_else(out_of_range);
    }
    if looks_like_a_date(&text) {
        return absolute(&text, which)
            .map_err(|error| TimeSpecError::InvalidDate {
                input: input.to_owned(),
                reason: error.to_string(),
            })?
            .filter(in_range)
            .ok_or_else(out_of_range);
    }
    let today = now.date_naive();
    let day = |offset: i64| {
        let date = if offset < 0 {
            today.checked_sub_days(Days::new(offset.unsigned_abs()))
        } else {
            today.checked_add_days(Days::new(offset.unsigned_abs()))
        };
        date.and_then(|d| day_bound(d, which))
    };
    let result = match text.as_str() {
        "now" => Some(now),
        "today" => day(0),
        "yesterday" => day(-1),
        "tomorrow" => day(1),
        _ => {
            if let Some(found) = calendar_period(&text, today, which) {
                found
            } else if let Some((amount, unit)) = offset(&text) {
                shift(now, amount, unit)
            } else {
                return Err(unrecognised());
            }
        }
    };
    result.filter(in_range).ok_or_else(out_of_range)
}

fn in_range(t: &DateTime<Utc>) -> bool {
    (1..=9999).contains(&t.year())
}

/// Starts like `YYYY-`: a date that must then parse, so its error can say what is wrong with it.
fn looks_like_a_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 5 && b.iter().take(4).all(u8::is_ascii_digit) && b.get(4) == Some(&b'-')
}

/// The absolute forms, told apart by what follows the date so that a parse error describes the
/// form the caller meant; `Ok(None)` when a real date is out of chrono's range.
fn absolute(text: &str, which: Bound) -> Result<Option<DateTime<Utc>>, chrono::ParseError> {
    let rfc3339 = |text: &str| {
        DateTime::parse_from_rfc3339(&text.to_ascii_uppercase()).map(|t| Some(t.to_utc()))
    };
    match text.as_bytes().get(10) {
        None => NaiveDate::parse_from_str(text, "%Y-%m-%d").map(|d| day_bound(d, which)),
        Some(b' ') => match NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S") {
            Ok(t) => Ok(Some(t.and_utc())),
            Err(error) => rfc3339(text).map_err(|_| error),
        },
        Some(_) => match NaiveDateTime::parse_from_str(text, "%Y-%m-%dt%H:%M:%S") {
            Ok(t) => Ok(Some(t.and_utc())),
            Err(_) => rfc3339(text).or_else(|error| {
                // "…t10:00:00 02:00": a "+" decoded as a space.
                let (datetime, offset) = text.rsplit_once(' ').ok_or(error)?;
                rfc3339(&format!("{datetime}+{offset}")).map_err(|_| error)
            }),
        },
    }
}

/// The first or last second of `date`.
fn day_bound(date: NaiveDate, which: Bound) -> Option<DateTime<Utc>> {
    let time = match which {
        Bound::Start => NaiveTime::MIN,
        Bound::End => NaiveTime::from_hms_opt(23, 59, 59)?,
    };
    Some(date.and_time(time).and_utc())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    fn parse(word: &str) -> Option<Unit> {
        let singular = word.strip_suffix('s').unwrap_or(word);
        Some(match singular {
            "sec" | "second" => Unit::Second,
            "min" | "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        })
    }
}

/// `last|this|next week|month|year`: `None` if `text` is not such a phrase, `Some(None)` if the
/// period falls outside the calendar chrono supports.
fn calendar_period(text: &str, today: NaiveDate, which: Bound) -> Option<Option<DateTime<Utc>>> {
    let (which_one, unit) = text.split_once(' ')?;
    let step: i32 = match which_one {
        "last" => -1,
        "this" => 0,
        "next" => 1,
        _ => return None,
    };
    let unit = match unit {
        "week" => Unit::Week,
        "month" => Unit::Month,
        "year" => Unit::Year,
        _ => return None,
    };
    Some(period_bound(today, unit, step, which))
}

fn period_bound(today: NaiveDate, unit: Unit, step: i32, which: Bound) -> Option<DateTime<Utc>> {
    let length = |first: NaiveDate| match unit {
        Unit::Week => first.checked_add_days(Days::new(7)),
        Unit::Month => first.checked_add_months(Months::new(1)),
        _ => first.checked_add_months(Months::new(12)),
    };
    let current = match unit {
        Unit::Week => {
            today.checked_sub_days(Days::new(u64::from(today.weekday().num_days_from_monday())))?
        }
        Unit::Month => today.with_day(1)?,
        _ => NaiveDate::from_ymd_opt(today.year(), 1, 1)?,
    };
    let first = match step {
        0 => current,
        1 => length(current)?,
        _ => match unit {
            Unit::Week => current.checked_sub_days(Days::new(7))?,
            Unit::Month => current.checked_sub_months(Months::new(1))?,
            _ => current.checked_sub_months(Months::new(12))?,
        },
    };
    match which {
        Bound::Start => day_bound(first, Bound::Start),
        Bound::End => day_bound(length(first)?.pred_opt()?, Bound::End),
    }
}

/// `3 days ago`, `an hour ago`, `-3 days`, `+1 week` (spaces optional around the sign and between
/// number and unit): the signed amount and its unit. An unsigned `1 week` counts forward, as in
/// PHP's `strtotime`; it is also what `+1 week` becomes when a `+` in a query string is decoded as
/// a space.
fn offset(text: &str) -> Option<(i64, Unit)> {
    let (body, ago) = match text.strip_suffix("ago") {
        Some(rest) => (rest.trim_end(), true),
        None => (text, false),
    };
    let (sign, body) = match body.as_bytes().first()? {
        // "-3 days ago" could mean either direction.
        b'+' | b'-' if ago => return None,
        b'+' => (1, body.get(1..)?.trim_start()),
        b'-' => (-1, body.get(1..)?.trim_start()),
        _ if ago => (-1, body),
        _ => (1, body),
    };
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = body.split_at(digits);
    let unit = unit.trim_start();
    if number.is_empty() {
        // "a day ago", "an hour ago"
        let (article, unit) = unit.split_once(' ')?;
        return (ago && matches!(article, "a" | "an")).then_some((sign, Unit::parse(unit)?));
    }
    // Only overflow makes a digit string fail to parse; such an amount is out of range anyway.
    let amount = number.parse::<i64>().unwrap_or(i64::MAX);
    Some((sign * amount, Unit::parse(unit)?))
}

fn shift(now: DateTime<Utc>, amount: i64, unit: Unit) -> Option<DateTime<Utc>> {
    let delta = match unit {
        Unit::Second => TimeDelta::try_seconds(amount)?,
        Unit::Minute => TimeDelta::try_minutes(amount)?,
        Unit::Hour => TimeDelta::try_hours(amount)?,
        Unit::Day => TimeDelta::try_days(amount)?,
        Unit::Week => TimeDelta::try_weeks(amount)?,
        Unit::Month | Unit::Year => {
            let months = if unit == Unit::Year {
                amount.checked_mul(12)?
            } else {
                amount
            };
            let step = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
            return if months < 0 {
                now.checked_sub_months(step)
            } else {
                now.checked_add_months(step)
            };
        }
    };
    now.checked_add_signed(delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Friday 15 March 2024, 12:34:56 UTC: mid-week, mid-month, in a leap year.
    fn now() -> DateTime<Utc> {
        at("2024-03-15T12:34:56Z")
    }

    fn at(rfc3339: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(rfc3339)
            .expect("test instant")
            .to_utc()
    }

    fn check(input: &str, which: Bound, expected: &str) {
        check_at(now(), input, which, expected);
    }

    fn check_at(now: DateTime<Utc>, input: &str, which: Bound, expected: &str) {
        match parse_bound(input, now, which) {
            Ok(got) => assert_eq!(got, at(expected), "{input:?} as {which:?}"),
            Err(e) => panic!("{input:?} as {which:?} was refused: {e}"),
        }
    }

    fn refused(input: &str) -> TimeSpecError {
        match parse_bound(input, now(), Bound::Start) {
            Ok(got) => panic!("{input:?} was accepted as {got}"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_plain_datetime_is_utc() {
        check("2024-01-02 03:04:05", Bound::Start, "2024-01-02T03:04:05Z");
        check("2024-01-02 03:04:05", Bound::End, "2024-01-02T03:04:05Z");
    }

    #[test]
    fn rfc3339_datetimes_keep_their_offset() {
        check("2024-01-02T03:04:05Z", Bound::Start, "2024-01-02T03:04:05Z");
        check(
            "2024-01-02T03:04:05+02:00",
            Bound::Start,
            "2024-01-02T01:04:05Z",
        );
        check(
            "2024-01-02t03:04:05-05:30",
            Bound::End,
            "2024-01-02T08:34:05Z",
        );
        check("2024-01-02T03:04:05", Bound::Start, "2024-01-02T03:04:05Z");
    }

    #[test]
    fn a_plus_decoded_as_a_space_still_reads_as_a_plus() {
        check(
            "2024-01-02T03:04:05 02:00",
            Bound::Start,
            "2024-01-02T01:04:05Z",
        );
    }

    #[test]
    fn a_date_covers_the_whole_day() {
        check("2024-02-29", Bound::Start, "2024-02-29T00:00:00Z");
        check("2024-02-29", Bound::End, "2024-02-29T23:59:59Z");
    }

    #[test]
    fn a_unix_timestamp_is_seconds() {
        check("1700000000", Bound::Start, "2023-11-14T22:13:20Z");
        check("0", Bound::End, "1970-01-01T00:00:00Z");
    }

    #[test]
    fn a_millisecond_timestamp_is_refused_with_a_hint() {
        let e = refused("1700000000000000");
        assert!(matches!(e, TimeSpecError::OutOfRange { .. }), "{e}");
        assert!(e.to_string().contains("not milliseconds"), "{e}");
        assert!(matches!(
            refused("99999999999999999999999"),
            TimeSpecError::OutOfRange { .. }
        ));
    }

    #[test]
    fn now_is_the_clock_passed_in() {
        check("now", Bound::Start, "2024-03-15T12:34:56Z");
        check(" NOW ", Bound::End, "2024-03-15T12:34:56Z");
    }

    #[test]
    fn day_words_cover_whole_utc_days() {
        check("today", Bound::Start, "2024-03-15T00:00:00Z");
        check("Today", Bound::End, "2024-03-15T23:59:59Z");
        check("yesterday", Bound::Start, "2024-03-14T00:00:00Z");
        check("YESTERDAY", Bound::End, "2024-03-14T23:59:59Z");
        check("tomorrow", Bound::Start, "2024-03-16T00:00:00Z");
        check("tomorrow", Bound::End, "2024-03-16T23:59:59Z");
    }

    #[test]
    fn yesterday_crosses_a_year_boundary() {
        check_at(
            at("2024-01-01T00:30:00Z"),
            "yesterday",
            Bound::Start,
            "2023-12-31T00:00:00Z",
        );
    }

    #[test]
    fn ago_offsets_are_instants() {
        check("3 days ago", Bound::Start, "2024-03-12T12:34:56Z");
        check("3 days ago", Bound::End, "2024-03-12T12:34:56Z");
        check("1 second ago", Bound::Start, "2024-03-15T12:34:55Z");
        check("90 minutes ago", Bound::Start, "2024-03-15T11:04:56Z");
        check("2 hours ago", Bound::Start, "2024-03-15T10:34:56Z");
        check("1 week ago", Bound::Start, "2024-03-08T12:34:56Z");
        check("1 month ago", Bound::Start, "2024-02-15T12:34:56Z");
        check("2 years ago", Bound::Start, "2022-03-15T12:34:56Z");
        check("an hour ago", Bound::Start, "2024-03-15T11:34:56Z");
        check("a day ago", Bound::Start, "2024-03-14T12:34:56Z");
    }

    #[test]
    fn relative_words_ignore_case_and_extra_spaces() {
        check("  3   DAYS    Ago ", Bound::Start, "2024-03-12T12:34:56Z");
        check("3days ago", Bound::Start, "2024-03-12T12:34:56Z");
        check("Last   Week", Bound::Start, "2024-03-04T00:00:00Z");
    }

    #[test]
    fn month_offsets_clamp_to_the_end_of_shorter_months() {
        check_at(
            at("2024-03-31T10:00:00Z"),
            "1 month ago",
            Bound::Start,
            "2024-02-29T10:00:00Z",
        );
    }

    #[test]
    fn signed_offsets_move_from_now() {
        check("-3 days", Bound::Start, "2024-03-12T12:34:56Z");
        check("+1 week", Bound::End, "2024-03-22T12:34:56Z");
        check("- 2 hours", Bound::Start, "2024-03-15T10:34:56Z");
        check("+1 year", Bound::Start, "2025-03-15T12:34:56Z");
        check("-1 month", Bound::Start, "2024-02-15T12:34:56Z");
    }

    #[test]
    fn an_unsigned_offset_counts_forward_like_a_plus_lost_in_a_query_string() {
        check(" 1 week", Bound::End, "2024-03-22T12:34:56Z");
        check("2 days", Bound::Start, "2024-03-17T12:34:56Z");
    }

    #[test]
    fn last_week_is_the_previous_monday_to_sunday() {
        check("last week", Bound::Start, "2024-03-04T00:00:00Z");
        check("last week", Bound::End, "2024-03-10T23:59:59Z");
    }

    #[test]
    fn this_and_next_week_follow_the_calendar() {
        check("this week", Bound::Start, "2024-03-11T00:00:00Z");
        check("this week", Bound::End, "2024-03-17T23:59:59Z");
        check("next week", Bound::Start, "2024-03-18T00:00:00Z");
        check("next week", Bound::End, "2024-03-24T23:59:59Z");
    }

    #[test]
    fn on_a_monday_this_week_starts_today() {
        check_at(
            at("2024-03-11T08:00:00Z"),
            "this week",
            Bound::Start,
            "2024-03-11T00:00:00Z",
        );
    }

    #[test]
    fn last_month_is_the_whole_previous_calendar_month() {
        check("last month", Bound::Start, "2024-02-01T00:00:00Z");
        check("last month", Bound::End, "2024-02-29T23:59:59Z");
        check_at(
            at("2024-01-10T00:00:00Z"),
            "last month",
            Bound::End,
            "2023-12-31T23:59:59Z",
        );
    }

    #[test]
    fn this_month_and_years_follow_the_calendar() {
        check("this month", Bound::Start, "2024-03-01T00:00:00Z");
        check("this month", Bound::End, "2024-03-31T23:59:59Z");
        check("last year", Bound::Start, "2023-01-01T00:00:00Z");
        check("last year", Bound::End, "2023-12-31T23:59:59Z");
        check("this year", Bound::End, "2024-12-31T23:59:59Z");
        check("next year", Bound::Start, "2025-01-01T00:00:00Z");
    }

    #[test]
    fn unknown_words_are_refused_with_the_accepted_forms() {
        for input in [
            "",
            "   ",
            "last tuesday",
            "last day",
            "last weeks",
            "-3 days ago",
            "3 fortnights ago",
            "a day",
            "soon",
            "1.5 days ago",
        ] {
            let e = refused(input);
            assert!(
                matches!(e, TimeSpecError::Unrecognised { .. }),
                "{input:?}: {e}"
            );
            let message = e.to_string();
            assert!(message.contains(&format!("'{input}'")), "{message}");
            assert!(message.contains("YYYY-MM-DD HH:MM:SS") && message.contains("yesterday"));
        }
    }

    #[test]
    fn impossible_dates_say_what_is_wrong() {
        for input in [
            "2024-02-30",
            "2024-13-01",
            "2024-01-01 25:00:00",
            "2024-01-01T10:00:00+99:00",
        ] {
            let e = refused(input);
            assert!(
                matches!(e, TimeSpecError::InvalidDate { .. }),
                "{input:?}: {e}"
            );
            assert!(e
                .to_string()
                .starts_with(&format!("'{input}' is not a valid date")));
        }
        let e = refused("2023-02-29");
        assert!(e.to_string().contains("out of range"), "{e}");
    }

    #[test]
    fn huge_offsets_are_out_of_range_not_a_panic() {
        for input in [
            "999999999 years ago",
            "+9999999999999 days",
            "-999999999 weeks",
        ] {
            assert!(
                matches!(refused(input), TimeSpecError::OutOfRange { .. }),
                "{input}"
            );
        }
    }

    #[test]
    fn overlong_input_is_cut_in_the_message() {
        let long = "x".repeat(10_000);
        let message = refused(&long).to_string();
        assert!(message.len() < 600, "{message}");
    }
}
