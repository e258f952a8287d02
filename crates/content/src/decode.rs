//! Turns a submitted `subject` or `html` string back into text: undoes the declared transfer
//! encoding, then converts the bytes from the declared charset to UTF-8.
//!
//! JSON can only carry Unicode text, so a caller who declares a non-UTF-8 charset with `7bit` or
//! `8bit` has two ways to send the source, and both are honoured:
//! - as bytes smuggled in characters U+0000..U+00FF ("Latin-1 transport", what you get from
//!   reading a file as ISO-8859-1): when every character is at most U+00FF, each one is taken as
//!   one byte and the bytes are decoded from the charset;
//! - as text that is already Unicode: when any character is above U+00FF the string cannot be
//!   bytes, so it is kept as it is.
//!
//! With `utf-8` (the default) the string is always taken as the text itself. Charset labels follow
//! the WHATWG Encoding Standard, as browsers do (so `iso-8859-1` decodes as `windows-1252`), and a
//! byte order mark at the start wins over the declared charset, again as in browsers.

use std::borrow::Cow;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use encoding_rs::{DecoderResult, Encoding};

/// Why a submitted field could not be decoded. Every message names what failed and how to fix it,
/// so the API can return it to the caller unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error(
        "transfer_encoding '{value}' is not supported; use one of {}",
        TransferEncoding::ALLOWED
    )]
    UnknownTransferEncoding { value: String },
    #[error(
        "charset '{label}' is not a known character set; use an encoding label from the WHATWG \
         Encoding Standard such as utf-8, iso-8859-1, windows-1252, shift_jis or gb18030"
    )]
    UnknownCharset { label: String },
    #[error(
        "charset '{label}' cannot be decoded safely (browsers refuse it too); convert the source \
         to utf-8 and send charset utf-8"
    )]
    UnsupportedCharset { label: String },
    #[error(
        "{field} is not valid base64 at byte {offset}: {problem}; send the base64 of the original \
         bytes (alphabet A-Z a-z 0-9 + /, line breaks allowed) or set transfer_encoding to 8bit"
    )]
    InvalidBase64 {
        field: String,
        offset: usize,
        problem: String,
    },
    #[error(
        "{field} is not valid quoted-printable at byte {offset}: {problem}; every '=' must start \
         a hex pair such as =3D or end a line, or set transfer_encoding to 8bit"
    )]
    InvalidQuotedPrintable {
        field: String,
        offset: usize,
        problem: String,
    },
    #[error(
        "{field} declares transfer_encoding 7bit but has the non-ASCII character {character:?} \
         (U+{:04X}) at byte {offset}; use transfer_encoding 8bit for raw text, or encode the source \
         as quoted-printable or base64", u32::from(*character)
    )]
    NotSevenBit {
        field: String,
        offset: usize,
        character: char,
    },
    #[error(
        "{field} is quoted-printable in charset {charset} but has the character {character:?} \
         (U+{:04X}) at byte {offset}, which cannot stand for one byte; keep quoted-printable text \
         ASCII, or send the original bytes as base64", u32::from(*character)
    )]
    NotAByte {
        field: String,
        charset: String,
        offset: usize,
        character: char,
    },
    #[error(
        "{field} is not valid {charset}: the bytes {bytes} at byte {offset} (counted after \
         transfer decoding) do not form a character; check that charset names the real encoding \
         of the source, or send it as UTF-8 text with charset utf-8"
    )]
    MalformedCharset {
        field: String,
        charset: String,
        offset: usize,
        bytes: String,
    },
}

/// How the submitted source is wrapped for transport (spec §2.1 `transfer_encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferEncoding {
    Base64,
    QuotedPrintable,
    SevenBit,
    EightBit,
}

impl TransferEncoding {
    /// The accepted spellings, for messages.
    pub const ALLOWED: &'static str = "base64, quoted-printable, 7bit, 8bit";

    /// Reads a `transfer_encoding` value; case and surrounding spaces do not matter, and an absent
    /// or empty value means the spec's default, `8bit`.
    pub fn parse(value: Option<&str>) -> Result<TransferEncoding, DecodeError> {
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(TransferEncoding::EightBit);
        };
        match value.to_ascii_lowercase().as_str() {
            "base64" => Ok(TransferEncoding::Base64),
            "quoted-printable" => Ok(TransferEncoding::QuotedPrintable),
            "7bit" => Ok(TransferEncoding::SevenBit),
            "8bit" => Ok(TransferEncoding::EightBit),
            _ => Err(DecodeError::UnknownTransferEncoding {
                value: value.to_owned(),
            }),
        }
    }

    /// The spec's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferEncoding::Base64 => "base64",
            TransferEncoding::QuotedPrintable => "quoted-printable",
            TransferEncoding::SevenBit => "7bit",
            TransferEncoding::EightBit => "8bit",
        }
    }
}

/// Decodes one submitted field (`raw`) to UTF-8 text.
///
/// `transfer_encoding` and `charset` are the request's values as given (absent or empty means
/// `8bit` and `utf-8`); `field` names the field in error messages ("subject", "html").
pub fn decode_source(
    raw: &str,
    transfer_encoding: Option<&str>,
    charset: Option<&str>,
    field: &str,
) -> Result<String, DecodeError> {
    let transfer = TransferEncoding::parse(transfer_encoding)?;
    let label = charset
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or("utf-8");
    let encoding = charset_encoding(label)?;
    let charset = Charset { label, encoding };
    match transfer {
        TransferEncoding::Base64 => {
            let bytes = base64_bytes(raw, field)?;
            charset.decode(&bytes, field)
        }
        TransferEncoding::QuotedPrintable => {
            let transported = quoted_printable_input(raw, &charset, field)?;
            let bytes = quoted_printable_bytes(&transported, field)?;
            charset.decode(&bytes, field)
        }
        TransferEncoding::SevenBit => {
            if let Some((offset, character)) = raw.char_indices().find(|(_, c)| !c.is_ascii()) {
                return Err(DecodeError::NotSevenBit {
                    field: field.to_owned(),
                    offset,
                    character,
                });
            }
            charset.decode(raw.as_bytes(), field)
        }
        TransferEncoding::EightBit => {
            if charset.is_utf8() {
                return charset.decode(raw.as_bytes(), field);
            }
            match latin1_bytes(raw) {
                Some(bytes) => charset.decode(&bytes, field),
                // Characters above U+00FF cannot be transported bytes: the text is Unicode already.
                None => Ok(raw.to_owned()),
            }
        }
    }
}

/// Looks a charset label up in the WHATWG registry.
fn charset_encoding(label: &str) -> Result<&'static Encoding, DecodeError> {
    match Encoding::for_label(label.as_bytes()) {
        // WHATWG maps ISO-2022-KR, HZ and friends to "replacement", which decodes everything to
        // U+FFFD because those encodings were used to smuggle script past filters.
        Some(encoding) if encoding == encoding_rs::REPLACEMENT => {
            Err(DecodeError::UnsupportedCharset {
                label: label.to_owned(),
            })
        }
        Some(encoding) => Ok(encoding),
        None => Err(DecodeError::UnknownCharset {
            label: label.to_owned(),
        }),
    }
}

/// The declared charset, with the caller's spelling kept for messages.
struct Charset<'a> {
    label: &'a str,
    encoding: &'static Encoding,
}

impl Charset<'_> {
    fn is_utf8(&self) -> bool {
        self.encoding == encoding_rs::UTF_8
    }

    /// Converts `bytes` to UTF-8, failing on the first byte sequence the charset does not allow
    /// (silently replacing it with U+FFFD would hide a wrong `charset` from the caller).
    fn decode(&self, bytes: &[u8], field: &str) -> Result<String, DecodeError> {
        to_utf8(bytes, self.encoding).map_err(|bad| DecodeError::MalformedCharset {
            field: field.to_owned(),
            charset: self.label.to_owned(),
            offset: bad.offset,
            bytes: bad.bytes,
        })
    }
}

/// A byte sequence a charset does not allow: where it starts, and its bytes written out.
#[derive(Debug)]
pub(crate) struct Malformed {
    pub(crate) offset: usize,
    pub(crate) bytes: String,
}

/// Converts `bytes` from `encoding` to UTF-8, strictly. A byte order mark at the start wins over
/// `encoding`, as when browsers load a document.
pub(crate) fn to_utf8(bytes: &[u8], encoding: &'static Encoding) -> Result<String, Malformed> {
    let mut decoder = encoding.new_decoder();
    let mut out = String::with_capacity(bytes.len().saturating_add(bytes.len() / 2) + 16);
    let mut read_total = 0;
    loop {
        let rest = bytes.get(read_total..).unwrap_or_default();
        let (result, read) = decoder.decode_to_string_without_replacement(rest, &mut out, true);
        read_total += read;
        match result {
            DecoderResult::InputEmpty => return Ok(out),
            DecoderResult::OutputFull => out.reserve(out.capacity().max(64)),
            DecoderResult::Malformed(bad, extra) => {
                let end = read_total.saturating_sub(usize::from(extra));
                let start = end.saturating_sub(usize::from(bad));
                return Err(Malformed {
                    offset: start,
                    bytes: hex_bytes(bytes.get(start..end).unwrap_or_default()),
                });
            }
        }
    }
}

/// `0xE9 0x20` style, for messages.
fn hex_bytes(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "(end of input)".to_owned();
    }
    bytes
        .iter()
        .map(|b| format!("0x{b:02X}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The string as bytes if every character is at most U+00FF (see the module documentation).
fn latin1_bytes(raw: &str) -> Option<Vec<u8>> {
    raw.chars().map(|c| u8::try_from(c).ok()).collect()
}

/// The bytes a quoted-printable string stands for before `=XX` escapes are undone. Literal
/// non-ASCII characters happen in the wild; they are the text itself under UTF-8 and transported
/// bytes under any other charset.
fn quoted_printable_input<'a>(
    raw: &'a str,
    charset: &Charset<'_>,
    field: &str,
) -> Result<Cow<'a, [u8]>, DecodeError> {
    if charset.is_utf8() || raw.is_ascii() {
        return Ok(Cow::Borrowed(raw.as_bytes()));
    }
    if let Some((offset, character)) = raw.char_indices().find(|&(_, c)| u32::from(c) > 0xFF) {
        return Err(DecodeError::NotAByte {
            field: field.to_owned(),
            charset: charset.label.to_owned(),
            offset,
            character,
        });
    }
    Ok(Cow::Owned(latin1_bytes(raw).unwrap_or_default()))
}

/// MIME base64 (RFC 2045): whitespace and line breaks carry no data; padding may be left out.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn base64_bytes(raw: &str, field: &str) -> Result<Vec<u8>, DecodeError> {
    let mut symbols = Vec::with_capacity(raw.len());
    // Where each symbol sits in `raw`, so errors point into what the caller sent.
    let mut origin = Vec::with_capacity(raw.len());
    for (offset, c) in raw.char_indices() {
        if c.is_ascii_whitespace() {
            continue;
        }
        let Some(symbol) = u8::try_from(c).ok().filter(u8::is_ascii) else {
            return Err(DecodeError::InvalidBase64 {
                field: field.to_owned(),
                offset,
                problem: format!("{c:?} is not a base64 character"),
            });
        };
        symbols.push(symbol);
        origin.push(offset);
    }
    let at = |index: usize| origin.get(index).copied().unwrap_or(raw.len());
    BASE64.decode(&symbols).map_err(|error| {
        let (offset, problem) = match error {
            base64::DecodeError::InvalidByte(index, b'=') => (
                at(index),
                "'=' padding may only appear at the very end".to_owned(),
            ),
            base64::DecodeError::InvalidByte(index, byte) => (
                at(index),
                format!("{:?} is not a base64 character", char::from(byte)),
            ),
            base64::DecodeError::InvalidLength(count) => (
                raw.len(),
                format!(
                    "it ends after {count} base64 symbols, which is not a whole number of bytes \
                     (the text looks truncated)"
                ),
            ),
            base64::DecodeError::InvalidLastSymbol(index, byte) => (
                at(index),
                format!(
                    "the last symbol {:?} carries bits that belong to no byte (the text looks \
                     truncated or corrupted)",
                    char::from(byte)
                ),
            ),
            base64::DecodeError::InvalidPadding => {
                (raw.len(), "the '=' padding at the end is wrong".to_owned())
            }
        };
        DecodeError::InvalidBase64 {
            field: field.to_owned(),
            offset,
            problem,
        }
    })
}

/// Undoes quoted-printable (RFC 2045 §6.7). Lower-case hex is accepted, as robust decoders do;
/// whitespace at the end of a line is dropped because transport may have added it.
fn quoted_printable_bytes(input: &[u8], field: &str) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while let Some(&byte) = input.get(i) {
        match byte {
            b'=' => {
                let hex = input.get(i + 1..i + 3).and_then(|pair| {
                    let text = std::str::from_utf8(pair).ok()?;
                    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return None;
                    }
                    u8::from_str_radix(text, 16).ok()
                });
                if let Some(decoded) = hex {
                    out.push(decoded);
                    i += 3;
                    continue;
                }
                // A soft line break: '=' then optional transport whitespace then the line end.
                let after_space = skip_blanks(input, i + 1);
                match line_end(input, after_space) {
                    Some(next) => i = next,
                    None => {
                        let found = match input.get(i + 1) {
                            Some(&b) if b.is_ascii_graphic() => format!("'{}'", char::from(b)),
                            Some(&b) => format!("byte 0x{b:02X}"),
                            None => "the end of the text".to_owned(),
                        };
                        return Err(DecodeError::InvalidQuotedPrintable {
                            field: field.to_owned(),
                            offset: i,
                            problem: format!(
                                "'=' is followed by {found} instead of two hex digits or a line \
                                 break"
                            ),
                        });
                    }
                }
            }
            b' ' | b'\t' => {
                let end = skip_blanks(input, i);
                // Blanks before a line end were added by transport (RFC 2045 §6.7 rule 3).
                if line_end(input, end).is_none() {
                    out.extend_from_slice(input.get(i..end).unwrap_or_default());
                }
                i = end;
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Ok(out)
}

fn skip_blanks(input: &[u8], mut i: usize) -> usize {
    while matches!(input.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

/// If a line ends at `i` (CRLF, LF, or the end of the text), the index after it.
fn line_end(input: &[u8], i: usize) -> Option<usize> {
    match (input.get(i), input.get(i + 1)) {
        (None, _) => Some(i),
        (Some(b'\n'), _) => Some(i + 1),
        (Some(b'\r'), Some(b'\n')) => Some(i + 2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(raw: &str, te: Option<&str>, charset: Option<&str>) -> Result<String, DecodeError> {
        decode_source(raw, te, charset, "html")
    }

    fn message(raw: &str, te: Option<&str>, charset: Option<&str>) -> String {
        match decode(raw, te, charset) {
            Ok(text) => panic!("expected an error, decoded {text:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn plain_utf8_text_is_returned_unchanged_by_default() {
        let html = "<p>Grüße, 世界 👋</p>";
        assert_eq!(decode(html, None, None).as_deref(), Ok(html));
        assert_eq!(decode(html, Some(""), Some("")).as_deref(), Ok(html));
    }

    #[test]
    fn transfer_encoding_names_ignore_case_and_spaces() {
        assert_eq!(decode("aGk=", Some(" BASE64 "), None).as_deref(), Ok("hi"));
        assert_eq!(
            decode("a=3Db", Some("Quoted-Printable"), None).as_deref(),
            Ok("a=b")
        );
        assert_eq!(decode("x", Some("7BIT"), None).as_deref(), Ok("x"));
        assert_eq!(decode("x", Some("8Bit"), None).as_deref(), Ok("x"));
    }

    #[test]
    fn an_unknown_transfer_encoding_lists_the_allowed_ones() {
        let m = message("x", Some("uuencode"), None);
        assert!(m.contains("'uuencode'"), "{m}");
        assert!(
            m.contains("base64, quoted-printable, 7bit, 8bit"),
            "message must list the allowed values: {m}"
        );
    }

    #[test]
    fn an_unknown_charset_is_named_in_the_error() {
        let m = message("x", None, Some("klingon-8"));
        assert!(m.contains("'klingon-8'") && m.contains("utf-8"), "{m}");
    }

    #[test]
    fn replacement_charsets_are_refused() {
        let m = message("x", None, Some("iso-2022-kr"));
        assert!(
            m.contains("'iso-2022-kr'") && m.contains("cannot be decoded"),
            "{m}"
        );
    }

    #[test]
    fn base64_with_mime_line_breaks_decodes() {
        let text = "<p>Hello, this is a longer body that MIME wraps at 76 columns.</p>";
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        let wrapped: String = encoded
            .as_bytes()
            .chunks(76)
            .map(|line| format!("{}\r\n", String::from_utf8_lossy(line)))
            .collect();
        assert_eq!(decode(&wrapped, Some("base64"), None).as_deref(), Ok(text));
    }

    #[test]
    fn base64_without_padding_is_accepted() {
        assert_eq!(decode("aGk", Some("base64"), None).as_deref(), Ok("hi"));
    }

    #[test]
    fn bad_base64_reports_the_position_in_what_was_sent() {
        let m = message("aGVs\nbG8*", Some("base64"), None);
        assert!(
            m.starts_with("html is not valid base64 at byte 8: '*' is not a base64 character"),
            "{m}"
        );
    }

    #[test]
    fn non_ascii_in_base64_is_reported_as_such() {
        let m = message("aGé=", Some("base64"), None);
        assert!(m.contains("at byte 2") && m.contains("'é'"), "{m}");
    }

    #[test]
    fn padding_in_the_middle_of_base64_is_explained() {
        let m = message("aGk=aGk=", Some("base64"), None);
        assert!(m.contains("padding may only appear at the very end"), "{m}");
    }

    #[test]
    fn truncated_base64_is_reported() {
        let m = message("aGVsbG8gd", Some("base64"), None);
        assert!(m.contains("truncated"), "{m}");
    }

    #[test]
    fn base64_bytes_are_decoded_from_the_declared_charset() {
        // "café" in windows-1252 is 63 61 66 E9.
        let encoded = base64::engine::general_purpose::STANDARD.encode([0x63, 0x61, 0x66, 0xE9]);
        assert_eq!(
            decode(&encoded, Some("base64"), Some("windows-1252")).as_deref(),
            Ok("café")
        );
        // Shift_JIS "日本" is 93 FA 96 7B.
        let encoded = base64::engine::general_purpose::STANDARD.encode([0x93, 0xFA, 0x96, 0x7B]);
        assert_eq!(
            decode(&encoded, Some("base64"), Some("Shift_JIS")).as_deref(),
            Ok("日本")
        );
    }

    #[test]
    fn bytes_invalid_in_the_charset_are_an_error_with_their_position() {
        let encoded = base64::engine::general_purpose::STANDARD.encode([b'o', b'k', 0xE9, b'!']);
        let m = message(&encoded, Some("base64"), None);
        assert!(
            m.starts_with("html is not valid utf-8: the bytes 0xE9 at byte 2"),
            "{m}"
        );
    }

    #[test]
    fn a_byte_order_mark_wins_over_the_declared_charset_as_in_browsers() {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode([0xFF, 0xFE, b'h', 0, b'i', 0]);
        assert_eq!(
            decode(&encoded, Some("base64"), Some("windows-1252")).as_deref(),
            Ok("hi")
        );
    }

    #[test]
    fn quoted_printable_soft_breaks_and_escapes_decode() {
        let qp = "<p style=3D\"color:red\">Gr=C3=BC=\r\n=C3=9Fe</p>=\nend";
        assert_eq!(
            decode(qp, Some("quoted-printable"), None).as_deref(),
            Ok("<p style=\"color:red\">Grüße</p>end")
        );
    }

    #[test]
    fn quoted_printable_accepts_lower_case_hex_and_soft_breaks_with_trailing_blanks() {
        assert_eq!(
            decode("a=3db=  \r\nc", Some("quoted-printable"), None).as_deref(),
            Ok("a=bc")
        );
    }

    #[test]
    fn quoted_printable_drops_transport_whitespace_at_line_ends_only() {
        assert_eq!(
            decode("a  b  \r\nc \t\nd \t", Some("quoted-printable"), None).as_deref(),
            Ok("a  b\r\nc\nd")
        );
    }

    #[test]
    fn quoted_printable_in_a_legacy_charset_decodes_its_bytes() {
        assert_eq!(
            decode("caf=E9", Some("quoted-printable"), Some("iso-8859-1")).as_deref(),
            Ok("café")
        );
        // A literal 8-bit character is a transported byte under a legacy charset.
        assert_eq!(
            decode(
                "caf\u{e9} =80",
                Some("quoted-printable"),
                Some("windows-1252")
            )
            .as_deref(),
            Ok("café €")
        );
    }

    #[test]
    fn literal_unicode_in_quoted_printable_is_text_under_utf8() {
        assert_eq!(
            decode("café =E2=82=AC", Some("quoted-printable"), None).as_deref(),
            Ok("café €")
        );
    }

    #[test]
    fn a_stray_equals_sign_in_quoted_printable_is_located() {
        let m = message("<td width=\"100%\">", Some("quoted-printable"), None);
        assert!(
            m.starts_with("html is not valid quoted-printable at byte 9: '=' is followed by '\"'"),
            "{m}"
        );
    }

    #[test]
    fn a_wide_character_in_legacy_quoted_printable_is_refused() {
        let m = message(
            "price =80 or €",
            Some("quoted-printable"),
            Some("windows-1252"),
        );
        assert!(
            m.contains("'€'") && m.contains("U+20AC") && m.contains("byte 13"),
            "{m}"
        );
    }

    #[test]
    fn seven_bit_refuses_eight_bit_characters() {
        let m = message("plain and naïve", Some("7bit"), None);
        assert!(
            m.starts_with("html declares transfer_encoding 7bit but has the non-ASCII character 'ï' (U+00EF) at byte 12"),
            "{m}"
        );
    }

    #[test]
    fn seven_bit_iso_2022_jp_is_decoded() {
        // ISO-2022-JP is a 7-bit encoding: ESC $ B switches to JIS X 0208.
        let raw = "\u{1b}$BF|K\\\u{1b}(B";
        assert_eq!(
            decode(raw, Some("7bit"), Some("iso-2022-jp")).as_deref(),
            Ok("日本")
        );
    }

    #[test]
    fn eight_bit_latin1_transport_is_decoded_from_the_charset() {
        // Bytes 63 61 66 E9 80 read as Latin-1 characters, declared windows-1252.
        let raw = "caf\u{e9}\u{80}";
        assert_eq!(
            decode(raw, None, Some("windows-1252")).as_deref(),
            Ok("café€")
        );
        // Shift_JIS bytes 93 FA 96 7B carried as characters.
        let raw = "\u{93}\u{fa}\u{96}\u{7b}";
        assert_eq!(
            decode(raw, Some("8bit"), Some("sjis")).as_deref(),
            Ok("日本")
        );
    }

    #[test]
    fn eight_bit_text_that_is_already_unicode_is_kept() {
        let raw = "Prix: 10 € — déjà";
        assert_eq!(decode(raw, None, Some("iso-8859-15")).as_deref(), Ok(raw));
        assert_eq!(
            decode("日本", None, Some("shift_jis")).as_deref(),
            Ok("日本")
        );
    }

    #[test]
    fn eight_bit_transport_bytes_invalid_in_the_charset_are_an_error() {
        // 0x81 followed by a space is not a Shift_JIS character.
        let m = message("ok\u{81} ", Some("8bit"), Some("shift_jis"));
        assert!(
            m.starts_with("html is not valid shift_jis: the bytes 0x81 at byte 2"),
            "{m}"
        );
    }

    #[test]
    fn under_utf8_latin1_looking_text_stays_text() {
        assert_eq!(decode("café", None, Some("UTF8")).as_deref(), Ok("café"));
    }

    #[test]
    fn the_field_name_leads_the_message() {
        let err =
            decode_source("***", Some("base64"), None, "subject").expect_err("*** is not base64");
        assert!(
            err.to_string().starts_with("subject is not valid base64"),
            "{err}"
        );
    }

    #[test]
    fn empty_sources_decode_to_empty_text() {
        for te in ["base64", "quoted-printable", "7bit", "8bit"] {
            assert_eq!(
                decode("", Some(te), Some("utf-16le")).as_deref(),
                Ok(""),
                "{te}"
            );
        }
    }
}
